// SPDX-License-Identifier: LGPL-3.0-or-later
//! Process memory settings: the large receive-buffer pool (`pagepool`), glibc's malloc knobs, and a trimmer
//! thread that gives idle memory back to the kernel.
//!
//! Large receive buffers (4 MiB writes, replicas' rep ops) come from [`pagepool::global`]: mappings recycled
//! while large writes keep coming and unmapped once a whole trim interval went by without needing them. The
//! trimmer wakes once per interval (`ferro_osd_mem_trim_interval`, seconds) off the reactor cores; it only takes
//! the pool's per-class locks for a moment, never a core's time.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// What [`configure`] applies (from ceph.conf, see [`crate::args::OsdOptions`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemoryOptions {
    /// `ferro_rx_buffer_pool_bytes`: idle large receive buffers kept for reuse (0: none).
    pub rx_buffer_pool_bytes: u64,
    /// `ferro_osd_malloc_mmap_threshold` (bytes): a fixed glibc mmap threshold (`mallopt(M_MMAP_THRESHOLD)`),
    /// which also stops glibc from raising it as large blocks are freed. `None`: glibc's dynamic default.
    pub malloc_mmap_threshold: Option<u64>,
    /// `ferro_osd_malloc_arena_max`: cap on glibc's malloc arenas (`mallopt(M_ARENA_MAX)`). `None`: default.
    pub malloc_arena_max: Option<u64>,
    /// `ferro_io_buffer_slab_bytes`: bound on the huge-page slab of IO buffers from 16 KiB to 2 MiB
    /// (`pagepool::contig`: device reads, receive sinks; physically contiguous). Never given back once mapped;
    /// 0: no slab (heap buffers).
    pub io_buffer_slab_bytes: u64,
    /// `ferro_osd_mem_trim_interval` (seconds, 0 = never): how often idle pool buffers are released.
    pub trim_interval_s: u64,
    /// `ferro_osd_malloc_trim`: also `malloc_trim(0)` on a trimmer tick after a quiet interval (no large buffer
    /// taken from the pool), returning free pages inside malloc's arenas to the kernel.
    pub malloc_trim: bool,
}

impl Default for MemoryOptions {
    fn default() -> Self {
        MemoryOptions {
            rx_buffer_pool_bytes: pagepool::DEFAULT_MAX_IDLE_BYTES as u64,
            io_buffer_slab_bytes: pagepool::contig::DEFAULT_MAX_SLAB_BYTES as u64,
            malloc_mmap_threshold: None,
            malloc_arena_max: None,
            trim_interval_s: 1,
            malloc_trim: true,
        }
    }
}

/// Apply the settings to this process and start the trimmer (if an interval is set). Call once, early (before
/// the reactor cores start allocating).
pub fn configure(o: &MemoryOptions) {
    let pool = pagepool::global();
    pool.set_max_idle_bytes(usize::try_from(o.rx_buffer_pool_bytes).unwrap_or(usize::MAX));
    pagepool::contig::set_max_slab_bytes(usize::try_from(o.io_buffer_slab_bytes).unwrap_or(usize::MAX));
    if let Some(t) = o.malloc_mmap_threshold {
        let t = libc::c_int::try_from(t).unwrap_or(libc::c_int::MAX);
        // SAFETY: mallopt only changes allocator parameters; called before the cores start.
        unsafe { libc::mallopt(libc::M_MMAP_THRESHOLD, t) };
    }
    if let Some(n) = o.malloc_arena_max {
        let n = libc::c_int::try_from(n.max(1)).unwrap_or(libc::c_int::MAX);
        // SAFETY: as above.
        unsafe { libc::mallopt(libc::M_ARENA_MAX, n) };
    }
    if o.trim_interval_s > 0 {
        let every = Duration::from_secs(o.trim_interval_s);
        let malloc_trim = o.malloc_trim;
        let _ = std::thread::Builder::new()
            .name("ferro-memtrim".into())
            .spawn(move || trimmer(every, malloc_trim));
    }
}

/// Milliseconds since [`base`] at which a core last served a client op or a peer message (0: never). Cores
/// store it at the end of a turn that did such work (one relaxed store); the trimmer reads it.
static LAST_OP_MS: AtomicU64 = AtomicU64::new(0);

/// How long the OSD must have served no op before `malloc_trim` may run. malloc_trim holds each malloc arena's
/// lock while it walks the arena and gives its free pages back (madvise per free run: milliseconds for a large
/// heap), and a reactor core that allocates meanwhile waits for the lock with every op it holds; page faults
/// on the trimmed pages follow. So it runs only when no op can be waiting.
pub const MALLOC_TRIM_IDLE: Duration = Duration::from_millis(500);

fn base() -> Instant {
    static BASE: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
    *BASE.get_or_init(Instant::now)
}

/// A core served ops in the turn that started at `turn_start` (called at the end of such turns).
pub fn note_ops(turn_start: Instant) {
    let ms = turn_start.saturating_duration_since(base()).as_millis() as u64 + 1;
    LAST_OP_MS.store(ms, Ordering::Relaxed);
}

/// No core served an op for at least `idle`.
fn ops_idle_for(idle: Duration) -> bool {
    let last = LAST_OP_MS.load(Ordering::Relaxed);
    let now = base().elapsed().as_millis() as u64 + 1;
    last == 0 || now.saturating_sub(last) >= idle.as_millis() as u64
}

fn trimmer(every: Duration, malloc_trim: bool) {
    let pool = pagepool::global();
    let mut gate = QuietGate::default();
    let _ = base();
    loop {
        std::thread::sleep(every);
        pool.trim_idle();
        let st = pool.stats();
        // The gate's quiet spell starts over while ops run: the trim comes at the first tick of an idle spell.
        let taken = if ops_idle_for(MALLOC_TRIM_IDLE) {
            st.hits + st.misses
        } else {
            gate.last_taken.map_or(0, |t| t.wrapping_add(1))
        };
        if gate.tick(taken) && malloc_trim {
            MALLOC_TRIMS.fetch_add(1, Ordering::Relaxed);
            // SAFETY: malloc_trim only returns free memory to the kernel.
            unsafe { libc::malloc_trim(0) };
        }
    }
}

/// `malloc_trim` calls so far (`dump_mempools`).
static MALLOC_TRIMS: AtomicU64 = AtomicU64::new(0);

/// Says when to `malloc_trim`: on the first tick of a quiet spell (no large buffer taken from the pool since the
/// previous tick), once per spell. A busy OSD's arenas are in use, and trimming them over and over would only
/// cost page faults; after a burst of large writes the arenas hold what the burst freed.
#[derive(Debug, Default)]
struct QuietGate {
    last_taken: Option<u64>,
    trimmed: bool,
}

impl QuietGate {
    fn tick(&mut self, taken: u64) -> bool {
        let quiet = self.last_taken == Some(taken);
        self.last_taken = Some(taken);
        if !quiet {
            self.trimmed = false;
            return false;
        }
        !std::mem::replace(&mut self.trimmed, true)
    }
}

/// The pool's counters as `dump_mempools` pools (ceph-osd layout: items and bytes): idle buffers kept for reuse
/// and buffers in use (messages in flight), plus the pool's own counters.
pub fn rx_pool_json() -> (Vec<(&'static str, u64, u64)>, serde_json::Value) {
    let st = pagepool::global().stats();
    let pools = vec![
        (
            "ferro_rx_buffers_idle",
            st.idle_buffers as u64,
            st.idle_bytes as u64,
        ),
        (
            "ferro_rx_buffers_in_use",
            st.in_use_buffers as u64,
            st.in_use_bytes as u64,
        ),
        (
            "ferro_io_buffer_slab",
            (pagepool::contig::slab_bytes() / pagepool::contig::CHUNK) as u64,
            pagepool::contig::slab_bytes() as u64,
        ),
    ];
    let detail = serde_json::json!({
        "max_idle_bytes": st.max_idle_bytes,
        "hits": st.hits,
        "misses": st.misses,
        "released": st.released,
        "unpooled": st.unpooled,
        "malloc_trims": MALLOC_TRIMS.load(Ordering::Relaxed),
        "huge_page_buffers": pagepool::contig::enabled(),
    });
    (pools, detail)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ops_hold_off_the_trim() {
        // Not idle right after an op; idle once MALLOC_TRIM_IDLE went by without one.
        note_ops(Instant::now());
        assert!(!ops_idle_for(MALLOC_TRIM_IDLE));
        assert!(ops_idle_for(Duration::ZERO));
    }

    #[test]
    fn malloc_trim_once_per_quiet_spell() {
        let mut g = QuietGate::default();
        let ticks = [0, 0, 0, 5, 9, 9, 9, 9, 10, 10];
        let got: Vec<bool> = ticks.iter().map(|&t| g.tick(t)).collect();
        assert_eq!(
            got,
            [false, true, false, false, false, true, false, false, false, true]
        );
    }
}
