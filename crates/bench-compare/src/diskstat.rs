// SPDX-License-Identifier: LGPL-3.0-or-later
//! The block device under the OSDs' files, from its kernel counters (`/sys/dev/block/MAJ:MIN/stat`): how many
//! reads, writes and cache flushes it completed during a test and how long each took on average. When a row of
//! one kind collapses while the other kind's does not, this tells a slow device (long service times: the host's
//! disk) from an OSD that stopped asking (few IOs, short service times).

use std::path::{Path, PathBuf};
use std::time::Duration;

/// Cumulative counters of one block device (Documentation/block/stat.rst; times in ms, summed over requests).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DiskStat {
    pub reads: u64,
    pub read_ms: u64,
    pub writes: u64,
    pub write_ms: u64,
    /// 512-byte sectors read and written (fields 3 and 7): the bytes each kind moves per op.
    pub read_sectors: u64,
    pub write_sectors: u64,
    /// Cache flushes (fields 16–17; 0 on kernels before 5.5, which lack them).
    pub flushes: u64,
    pub flush_ms: u64,
    /// Requests in flight when sampled (field 9; a gauge, not a counter).
    pub in_flight: u64,
}

/// Parses the text of a `stat` file of `/sys/block`: fields 1, 3 and 4 (reads, sectors read, read ticks), 5, 7
/// and 8 (writes, sectors written, write ticks), 9 (in flight), 16 and 17 (flushes, flush ticks) when present. None if the first eight are not all
/// numbers.
pub fn parse_disk_stat(text: &str) -> Option<DiskStat> {
    let v: Vec<u64> = text
        .split_whitespace()
        .map(|f| f.parse().ok())
        .collect::<Option<_>>()?;
    if v.len() < 8 {
        return None;
    }
    Some(DiskStat {
        reads: v[0],
        read_ms: v[3],
        writes: v[4],
        write_ms: v[7],
        read_sectors: v[2],
        write_sectors: v[6],
        flushes: v.get(15).copied().unwrap_or(0),
        flush_ms: v.get(16).copied().unwrap_or(0),
        in_flight: v.get(8).copied().unwrap_or(0),
    })
}

impl DiskStat {
    /// What happened between `before` and `self` (counters that went backwards count as none).
    pub fn since(&self, before: &DiskStat) -> DiskStat {
        DiskStat {
            reads: self.reads.saturating_sub(before.reads),
            read_ms: self.read_ms.saturating_sub(before.read_ms),
            writes: self.writes.saturating_sub(before.writes),
            write_ms: self.write_ms.saturating_sub(before.write_ms),
            read_sectors: self.read_sectors.saturating_sub(before.read_sectors),
            write_sectors: self.write_sectors.saturating_sub(before.write_sectors),
            flushes: self.flushes.saturating_sub(before.flushes),
            flush_ms: self.flush_ms.saturating_sub(before.flush_ms),
            in_flight: self.in_flight,
        }
    }
    /// Average service time in ms of the reads, writes and flushes (None where there were none).
    pub fn avg_ms(&self) -> [Option<f64>; 3] {
        let avg = |ms: u64, n: u64| (n > 0).then(|| ms as f64 / n as f64);
        [
            avg(self.read_ms, self.reads),
            avg(self.write_ms, self.writes),
            avg(self.flush_ms, self.flushes),
        ]
    }
}

/// `/sys/dev/block/<major>:<minor>` of the device that holds `path` (it may name no block device: tmpfs,
/// overlay file systems).
fn sys_block_dir(path: &Path) -> Option<PathBuf> {
    use std::os::unix::fs::MetadataExt;
    let dev = std::fs::metadata(path).ok()?.dev();
    Some(PathBuf::from(format!(
        "/sys/dev/block/{}:{}",
        libc::major(dev),
        libc::minor(dev)
    )))
}

/// The `stat` file of the block device that holds `path`, if it has one (not on tmpfs or overlay file systems,
/// whose device numbers name no block device).
pub fn stat_file_for(path: &Path) -> Option<PathBuf> {
    let f = sys_block_dir(path)?.join("stat");
    f.exists().then_some(f)
}

/// Whether the block device holding `path` says it is rotational (`queue/rotational` of the device, or of
/// its disk for a partition). BlueStore and ceph-osd pick their HDD or SSD settings by this flag.
pub fn rotational_for(path: &Path) -> Option<bool> {
    let base = sys_block_dir(path)?;
    [base.join("queue/rotational"), base.join("../queue/rotational")]
        .iter()
        .find_map(|f| std::fs::read_to_string(f).ok())
        .and_then(|t| match t.trim() {
            "0" => Some(false),
            "1" => Some(true),
            _ => None,
        })
}

/// The device's counters now.
pub fn sample(stat_file: &Path) -> Option<DiskStat> {
    std::fs::read_to_string(stat_file)
        .ok()
        .and_then(|s| parse_disk_stat(&s))
}

/// How often the disk is sampled while waiting for it to settle, how many quiet samples in a row make it settled,
/// what a quiet sample allows, and how long a wait lasts at most.
pub const SETTLE_SAMPLE: Duration = Duration::from_millis(100);
pub const SETTLE_QUIET_SAMPLES: u32 = 5;
/// Reads + writes completed in one sample interval that still count as quiet (the mon's and the idle OSDs' own
/// writes: a few per second).
pub const SETTLE_QUIET_IOS: u64 = 3;
pub const SETTLE_MAX: Duration = Duration::from_secs(20);

/// The outcome of waiting for the disk before a test.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Settle {
    /// Time waited, s.
    pub waited_s: f64,
    /// Whether the disk went quiet; false: the wait gave up after [`SETTLE_MAX`].
    pub quiet: bool,
}

/// Counts consecutive quiet intervals between samples (nothing in flight and at most [`SETTLE_QUIET_IOS`]
/// completed since the previous sample).
#[derive(Debug, Default)]
pub struct QuietRun {
    last: Option<DiskStat>,
    run: u32,
}

impl QuietRun {
    /// Take a sample; true once [`SETTLE_QUIET_SAMPLES`] intervals in a row were quiet.
    pub fn push(&mut self, s: DiskStat) -> bool {
        if let Some(last) = self.last {
            let d = s.since(&last);
            let quiet = s.in_flight == 0 && d.reads + d.writes <= SETTLE_QUIET_IOS;
            self.run = if quiet { self.run + 1 } else { 0 };
        }
        self.last = Some(s);
        self.run >= SETTLE_QUIET_SAMPLES
    }
}

/// Wait until the disk behind `stat_file` has been quiet for [`SETTLE_QUIET_SAMPLES`] × [`SETTLE_SAMPLE`], or
/// [`SETTLE_MAX`] has passed. Before a test, so that it does not run against the previous test's background
/// writes (BlueStore's deferred writes and compaction, ferro-osd's checkpoints, the raw reference's O_DSYNC
/// backlog in the host): runs 44–47 of docs/benchmarks.md showed the disk's writes 4–17× slower than usual
/// in the test that followed such work. None when the counters cannot be read (no wait, nothing to report).
pub fn settle(stat_file: &Path) -> Option<Settle> {
    let start = std::time::Instant::now();
    let mut run = QuietRun::default();
    loop {
        let s = sample(stat_file)?;
        if run.push(s) || start.elapsed() >= SETTLE_MAX {
            return Some(Settle {
                waited_s: start.elapsed().as_secs_f64(),
                quiet: run.run >= SETTLE_QUIET_SAMPLES,
            });
        }
        std::thread::sleep(SETTLE_SAMPLE);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_from_a_stat_line_and_their_difference() {
        // A line of this VM's /sys/block/vda/stat (17 fields).
        let a = parse_disk_stat(
            "19595350  1005387 1225583093 12858041 38730158  8633575 2492656071  8724841        0  2946708 \
             22326895   237059      173 815751096   102612  9855746   641400\n",
        )
        .expect("parses");
        assert_eq!(
            a,
            DiskStat {
                reads: 19595350,
                read_ms: 12858041,
                writes: 38730158,
                write_ms: 8724841,
                read_sectors: 1225583093,
                write_sectors: 2492656071,
                flushes: 9855746,
                flush_ms: 641400,
                in_flight: 0,
            }
        );
        // An old kernel's 11 fields: no flush counters.
        let old = parse_disk_stat("1 0 8 4 10 0 80 30 0 5 34").expect("parses");
        assert_eq!((old.writes, old.write_ms, old.flushes), (10, 30, 0));
        assert_eq!(parse_disk_stat("1 2 3"), None);
        assert_eq!(parse_disk_stat("1 2 3 4 5 6 x 8"), None);
        let b = DiskStat {
            reads: a.reads + 10,
            read_ms: a.read_ms + 5,
            writes: a.writes + 400,
            write_ms: a.write_ms + 200,
            read_sectors: a.read_sectors + 80,
            write_sectors: a.write_sectors + 6400,
            flushes: a.flushes,
            flush_ms: a.flush_ms,
            in_flight: 3,
        };
        let d = b.since(&a);
        assert_eq!((d.reads, d.writes, d.flushes), (10, 400, 0));
        assert_eq!((d.read_sectors, d.write_sectors), (80, 6400));
        assert_eq!(d.avg_ms(), [Some(0.5), Some(0.5), None]);
        assert_eq!(a.since(&b).writes, 0, "a counter that went back counts as none");
        assert_eq!(
            (d.in_flight, a.since(&b).in_flight),
            (3, 0),
            "in flight is the later sample's"
        );
    }

    #[test]
    fn quiet_after_enough_quiet_intervals_in_a_row() {
        let at = |writes: u64, in_flight: u64| DiskStat {
            writes,
            in_flight,
            ..DiskStat::default()
        };
        let mut q = QuietRun::default();
        // The first sample has nothing to compare with.
        assert!(!q.push(at(0, 0)));
        let mut w = 0;
        for _ in 1..SETTLE_QUIET_SAMPLES {
            w += SETTLE_QUIET_IOS;
            assert!(!q.push(at(w, 0)));
        }
        // A busy interval (one IO too many) starts the count again.
        w += SETTLE_QUIET_IOS + 1;
        assert!(!q.push(at(w, 0)));
        for _ in 1..SETTLE_QUIET_SAMPLES {
            assert!(!q.push(at(w, 0)));
        }
        // An IO in flight is not quiet either, even with nothing completed.
        assert!(!q.push(at(w, 1)));
        for _ in 1..SETTLE_QUIET_SAMPLES {
            assert!(!q.push(at(w, 0)));
        }
        assert!(q.push(at(w, 0)));
    }

    #[test]
    fn the_root_file_system_has_a_device_or_none() {
        // On a block device the file exists and parses; elsewhere (tmpfs, overlay in a container) there is none.
        if let Some(f) = stat_file_for(Path::new("/")) {
            assert!(sample(&f).is_some(), "{} does not parse", f.display());
        }
        assert_eq!(stat_file_for(Path::new("/no/such/path")), None);
        assert_eq!(rotational_for(Path::new("/no/such/path")), None);
        // Where the root has a block device, it has a rotational flag (its own or its disk's).
        if stat_file_for(Path::new("/")).is_some() {
            assert!(rotational_for(Path::new("/")).is_some());
        }
    }
}
