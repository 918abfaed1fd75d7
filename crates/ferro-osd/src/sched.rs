// SPDX-License-Identifier: LGPL-3.0-or-later
//! Scheduling of the reactor threads (operator options, see docs/ferro-osd.md "Reactor scheduling").
//!
//! A thread-per-core reactor assumes its core is its own. When it shares CPUs (a small VM, a converged host),
//! every wake-up of a reactor waits on the run queue behind whatever else is runnable, and that wait sets most
//! of the client's p99 (docs/benchmarks.md, "tail latency (session 6, tail)"). These options let the operator
//! tell the kernel what the reactor is:
//!
//! * `ferro_reactor_sched_slice_us`: an EEVDF latency hint. `sched_setattr(SCHED_OTHER)` with `sched_runtime`
//!   sets the thread's slice (Linux 6.12+; the kernel clamps it to 100 µs – 100 ms). A short slice gives the
//!   thread an earlier virtual deadline when it wakes, so it is picked (and may preempt the running task)
//!   sooner, without a larger share of the CPU. 0 (default): the kernel's slice.
//! * `ferro_reactor_nice`: the threads' nice value (-20..19; lower than the current one needs CAP_SYS_NICE or
//!   RLIMIT_NICE). Unset: unchanged.
//! * `ferro_reactor_sched_policy` = `other` (default) | `fifo` | `rr` with `ferro_reactor_sched_priority`
//!   (1..99, default 1): a real-time policy (CAP_SYS_NICE or RLIMIT_RTPRIO). Set with SCHED_FLAG_RESET_ON_FORK
//!   so the io_uring worker threads a reactor creates start as normal threads.
//!
//! Applied by each core on its own thread before its loop starts; a refusal (EPERM, EINVAL) is logged and the
//! core runs with what it has — it never stops the OSD from starting.

use std::fmt;
use std::io;
use std::sync::Mutex;

/// The policy asked for the reactor threads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Policy {
    Other,
    Fifo,
    Rr,
}

impl Policy {
    fn raw(self) -> u32 {
        match self {
            Policy::Other => libc::SCHED_OTHER as u32,
            Policy::Fifo => libc::SCHED_FIFO as u32,
            Policy::Rr => libc::SCHED_RR as u32,
        }
    }

    /// The option's spelling.
    pub fn name(self) -> &'static str {
        match self {
            Policy::Other => "other",
            Policy::Fifo => "fifo",
            Policy::Rr => "rr",
        }
    }
}

/// Option names.
pub const OPT_SLICE_US: &str = "ferro_reactor_sched_slice_us";
pub const OPT_NICE: &str = "ferro_reactor_nice";
pub const OPT_POLICY: &str = "ferro_reactor_sched_policy";
pub const OPT_PRIORITY: &str = "ferro_reactor_sched_priority";

/// The kernel's bounds on a custom slice (it clamps to them).
pub const MIN_SLICE_US: u64 = 100;
pub const MAX_SLICE_US: u64 = 100_000;

/// What the operator asked for the reactor threads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReactorSched {
    /// Custom EEVDF slice in µs (SCHED_OTHER only); 0 = the kernel's.
    pub slice_us: u64,
    /// Nice value; `None` = leave as inherited.
    pub nice: Option<i32>,
    pub policy: Policy,
    /// Real-time priority (fifo/rr only).
    pub priority: u32,
}

impl Default for ReactorSched {
    fn default() -> Self {
        ReactorSched {
            slice_us: 0,
            nice: None,
            policy: Policy::Other,
            priority: 1,
        }
    }
}

impl ReactorSched {
    /// From the configuration (`get` returns an option's value if set). A value that does not parse or is out of
    /// range is reported in the returned warnings and replaced by the default (or clamped, for the slice): a typo
    /// in a tuning option must not keep an OSD down.
    pub fn from_options(get: impl Fn(&str) -> Option<String>) -> (ReactorSched, Vec<String>) {
        let mut s = ReactorSched::default();
        let mut warn = Vec::new();
        if let Some(v) = get(OPT_SLICE_US) {
            match v.trim().parse::<u64>() {
                Ok(0) => {}
                Ok(n) => {
                    let c = n.clamp(MIN_SLICE_US, MAX_SLICE_US);
                    if c != n {
                        warn.push(format!(
                            "{OPT_SLICE_US} = {n} is outside {MIN_SLICE_US}..{MAX_SLICE_US}: using {c}"
                        ));
                    }
                    s.slice_us = c;
                }
                Err(_) => warn.push(format!("{OPT_SLICE_US} = {v:?} is not a number of µs: ignored")),
            }
        }
        if let Some(v) = get(OPT_NICE) {
            match v.trim().parse::<i32>() {
                Ok(n) if (-20..=19).contains(&n) => s.nice = Some(n),
                _ => warn.push(format!(
                    "{OPT_NICE} = {v:?} is not a nice value (-20..19): ignored"
                )),
            }
        }
        if let Some(v) = get(OPT_POLICY) {
            match v.trim().to_ascii_lowercase().as_str() {
                "other" | "normal" | "sched_other" | "" => s.policy = Policy::Other,
                "fifo" | "sched_fifo" => s.policy = Policy::Fifo,
                "rr" | "sched_rr" => s.policy = Policy::Rr,
                _ => warn.push(format!(
                    "{OPT_POLICY} = {v:?} is not other, fifo or rr: using other"
                )),
            }
        }
        if let Some(v) = get(OPT_PRIORITY) {
            match v.trim().parse::<u32>() {
                Ok(n) if (1..=99).contains(&n) => s.priority = n,
                _ => warn.push(format!("{OPT_PRIORITY} = {v:?} is not 1..99: using 1")),
            }
        }
        if s.policy != Policy::Other && s.slice_us != 0 {
            warn.push(format!(
                "{OPT_SLICE_US} applies to policy other only: ignored with {}",
                s.policy.name()
            ));
            s.slice_us = 0;
        }
        (s, warn)
    }

    /// Nothing asked: the threads keep what they inherit and no syscall is made.
    pub fn is_untouched(&self) -> bool {
        self.policy == Policy::Other && self.slice_us == 0 && self.nice.is_none()
    }

    /// The options as `config show` lists them.
    pub fn options(&self) -> [(&'static str, String); 4] {
        [
            (OPT_SLICE_US, self.slice_us.to_string()),
            (OPT_NICE, self.nice.map_or_else(String::new, |n| n.to_string())),
            (OPT_POLICY, self.policy.name().to_string()),
            (OPT_PRIORITY, self.priority.to_string()),
        ]
    }
}

impl fmt::Display for ReactorSched {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_untouched() {
            return f.write_str("inherited (no options)");
        }
        match self.policy {
            Policy::Other => {
                write!(f, "other")?;
                if let Some(n) = self.nice {
                    write!(f, " nice {n}")?;
                }
                if self.slice_us > 0 {
                    write!(f, " slice {} us", self.slice_us)?;
                }
                Ok(())
            }
            p => write!(f, "{} priority {}", p.name(), self.priority),
        }
    }
}

/// `struct sched_attr` (SCHED_ATTR_SIZE_VER1, 56 bytes).
#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
struct SchedAttr {
    size: u32,
    sched_policy: u32,
    sched_flags: u64,
    sched_nice: i32,
    sched_priority: u32,
    sched_runtime: u64,
    sched_deadline: u64,
    sched_period: u64,
    sched_util_min: u32,
    sched_util_max: u32,
}

const SCHED_ATTR_SIZE: u32 = std::mem::size_of::<SchedAttr>() as u32;

/// A thread's scheduling as the kernel reports it (`sched_getattr`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ThreadSched {
    /// `SCHED_*` number.
    pub policy: u32,
    pub nice: i32,
    /// Real-time priority (0 for the fair classes).
    pub priority: u32,
    /// The fair-class slice in ns (what `sched_getattr` returns in `sched_runtime`, kernel 6.12+; 0 before).
    pub slice_ns: u64,
    pub reset_on_fork: bool,
}

impl ThreadSched {
    pub fn policy_name(&self) -> &'static str {
        match self.policy as i32 {
            libc::SCHED_OTHER => "SCHED_OTHER",
            libc::SCHED_FIFO => "SCHED_FIFO",
            libc::SCHED_RR => "SCHED_RR",
            libc::SCHED_BATCH => "SCHED_BATCH",
            libc::SCHED_IDLE => "SCHED_IDLE",
            6 => "SCHED_DEADLINE",
            7 => "SCHED_EXT",
            _ => "SCHED_?",
        }
    }

    fn is_fair(&self) -> bool {
        matches!(
            self.policy as i32,
            libc::SCHED_OTHER | libc::SCHED_BATCH | libc::SCHED_IDLE
        )
    }

    /// JSON for the admin socket.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "policy": self.policy_name(),
            "nice": self.nice,
            "priority": self.priority,
            "slice_us": self.slice_ns as f64 / 1000.0,
        })
    }
}

impl fmt::Display for ThreadSched {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_fair() {
            write!(
                f,
                "{} nice {} slice {} us",
                self.policy_name(),
                self.nice,
                self.slice_ns / 1000
            )
        } else {
            write!(f, "{} priority {}", self.policy_name(), self.priority)
        }
    }
}

/// The calling thread's id.
pub fn gettid() -> i32 {
    // SAFETY: gettid has no arguments and cannot fail.
    unsafe { libc::gettid() }
}

/// `sched_getattr` of thread `tid` (0 = the calling thread).
pub fn get(tid: i32) -> io::Result<ThreadSched> {
    let mut a = SchedAttr::default();
    // SAFETY: `a` is a writable sched_attr of SCHED_ATTR_SIZE bytes, the size we pass; flags must be 0.
    let r = unsafe {
        libc::syscall(
            libc::SYS_sched_getattr,
            tid,
            &mut a as *mut SchedAttr,
            SCHED_ATTR_SIZE,
            0u32,
        )
    };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(ThreadSched {
        policy: a.sched_policy,
        nice: a.sched_nice,
        priority: a.sched_priority,
        slice_ns: a.sched_runtime,
        reset_on_fork: a.sched_flags & libc::SCHED_FLAG_RESET_ON_FORK as u64 != 0,
    })
}

/// `sched_setattr` of thread `tid` (0 = the calling thread) to `want`. For `other`, a nice left unset keeps
/// the thread's current one (sched_setattr sets nice and slice together).
pub fn set(tid: i32, want: &ReactorSched) -> io::Result<()> {
    let mut a = SchedAttr {
        size: SCHED_ATTR_SIZE,
        sched_policy: want.policy.raw(),
        ..SchedAttr::default()
    };
    match want.policy {
        Policy::Other => {
            a.sched_nice = match want.nice {
                Some(n) => n,
                None => get(tid)?.nice,
            };
            a.sched_runtime = want.slice_us.saturating_mul(1000);
        }
        Policy::Fifo | Policy::Rr => {
            a.sched_priority = want.priority;
            // io_uring worker threads (and anything else this thread starts) begin as normal threads.
            a.sched_flags = libc::SCHED_FLAG_RESET_ON_FORK as u64;
        }
    }
    // SAFETY: `a` is a valid sched_attr whose `size` field says how much the kernel may read; flags must be 0.
    let r = unsafe { libc::syscall(libc::SYS_sched_setattr, tid, &a as *const SchedAttr, 0u32) };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// What happened on one core.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CoreSched {
    pub core: usize,
    pub tid: i32,
    pub asked: ReactorSched,
    /// `None`: applied (or nothing asked). `Some`: why the kernel refused or ignored part of it.
    pub warning: Option<String>,
    /// The thread's scheduling right after (`None` if even sched_getattr failed).
    pub after: Option<ThreadSched>,
}

/// Apply `want` to the calling thread and say what came of it; never fails.
pub fn apply_current(core: usize, want: &ReactorSched) -> CoreSched {
    let tid = gettid();
    let mut warning = None;
    if !want.is_untouched()
        && let Err(e) = set(0, want)
    {
        let hint = match e.raw_os_error() {
            Some(libc::EPERM) => {
                " (a lower nice or a real-time policy needs CAP_SYS_NICE, RLIMIT_NICE or RLIMIT_RTPRIO)"
            }
            Some(libc::EINVAL) => " (not supported by this kernel, or a value out of range)",
            _ => "",
        };
        warning = Some(format!("sched_setattr({want}) failed: {e}{hint}"));
    }
    let after = get(0).ok();
    if warning.is_none()
        && let Some(a) = after
        && want.policy == Policy::Other
        && want.slice_us > 0
        && a.slice_ns != want.slice_us * 1000
    {
        warning = Some(format!(
            "the kernel kept a slice of {} us instead of {} us (custom slices need Linux 6.12+)",
            a.slice_ns / 1000,
            want.slice_us
        ));
    }
    CoreSched {
        core,
        tid,
        asked: *want,
        warning,
        after,
    }
}

static APPLIED: Mutex<Vec<CoreSched>> = Mutex::new(Vec::new());

/// [`apply_current`] on a reactor core's thread: logs the outcome and records it for the admin socket.
pub fn apply_reactor(core: usize, want: &ReactorSched) -> CoreSched {
    let c = apply_current(core, want);
    let now = c.after.map_or_else(|| "unknown".to_string(), |a| a.to_string());
    match &c.warning {
        None if want.is_untouched() => {
            eprintln!(
                "ferro-osd: core {core} (tid {}): reactor scheduling {now} (inherited)",
                c.tid
            )
        }
        None => eprintln!(
            "ferro-osd: core {core} (tid {}): reactor scheduling {now} (asked: {want})",
            c.tid
        ),
        Some(w) => eprintln!(
            "ferro-osd: WARNING: core {core} (tid {}): reactor scheduling: {w}; running with {now}",
            c.tid
        ),
    }
    let mut reg = APPLIED.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    reg.retain(|x| x.core != core);
    reg.push(c.clone());
    reg.sort_by_key(|x| x.core);
    c
}

/// Every core's scheduling as the kernel reports it now (re-read, so a later `chrt`/`renice` shows), for
/// `ferro sched`.
pub fn status_json(asked: &ReactorSched) -> serde_json::Value {
    let reg = APPLIED.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let cores: Vec<serde_json::Value> = reg
        .iter()
        .map(|c| {
            serde_json::json!({
                "core": c.core,
                "tid": c.tid,
                "warning": c.warning,
                "now": get(c.tid).ok().or(c.after).map(|a| a.to_json()),
            })
        })
        .collect();
    let opts: serde_json::Map<String, serde_json::Value> = asked
        .options()
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.into()))
        .collect();
    serde_json::json!({ "asked": asked.to_string(), "options": opts, "cores": cores })
}

/// One line for `config show` (`ferro_reactor_sched_effective`): each core's scheduling now.
pub fn effective_summary() -> String {
    let reg = APPLIED.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    reg.iter()
        .map(|c| {
            let now = get(c.tid).ok().or(c.after);
            let s = now.map_or_else(|| "unknown".to_string(), |a| a.to_string());
            match &c.warning {
                None => format!("core {}: {s}", c.core),
                Some(_) => format!("core {}: {s} (warning, see ferro sched)", c.core),
            }
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// Add the options (resolved) and the effective setting to `config show`.
pub fn config_show(asked: &ReactorSched, o: &mut serde_json::Map<String, serde_json::Value>) {
    for (k, v) in asked.options() {
        o.insert(k.to_string(), v.into());
    }
    o.insert("ferro_reactor_sched_effective".into(), effective_summary().into());
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn parse(kv: &[(&str, &str)]) -> (ReactorSched, Vec<String>) {
        let m: HashMap<String, String> = kv.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        ReactorSched::from_options(|k| m.get(k).cloned())
    }

    #[test]
    fn options_parse_validate_and_default() {
        let (s, w) = parse(&[]);
        assert_eq!(s, ReactorSched::default());
        assert!(s.is_untouched() && w.is_empty());
        let (s, w) = parse(&[(OPT_SLICE_US, "300"), (OPT_NICE, "-5")]);
        assert_eq!(
            s,
            ReactorSched {
                slice_us: 300,
                nice: Some(-5),
                ..ReactorSched::default()
            }
        );
        assert!(w.is_empty());
        assert_eq!(s.to_string(), "other nice -5 slice 300 us");
        // Out of the kernel's range: clamped, with a warning.
        let (s, w) = parse(&[(OPT_SLICE_US, "20")]);
        assert_eq!((s.slice_us, w.len()), (MIN_SLICE_US, 1));
        let (s, w) = parse(&[(OPT_SLICE_US, "5000000")]);
        assert_eq!((s.slice_us, w.len()), (MAX_SLICE_US, 1));
        // Garbage: ignored with a warning each, never an error.
        let (s, w) = parse(&[
            (OPT_SLICE_US, "fast"),
            (OPT_NICE, "-21"),
            (OPT_POLICY, "deadline"),
            (OPT_PRIORITY, "100"),
        ]);
        assert_eq!(s, ReactorSched::default());
        assert_eq!(w.len(), 4, "{w:?}");
        let (s, w) = parse(&[(OPT_POLICY, "FIFO"), (OPT_PRIORITY, "10"), (OPT_SLICE_US, "300")]);
        assert_eq!((s.policy, s.priority, s.slice_us), (Policy::Fifo, 10, 0));
        assert_eq!(w.len(), 1, "slice with fifo is reported");
        assert_eq!(s.to_string(), "fifo priority 10");
        assert_eq!(parse(&[(OPT_POLICY, "rr")]).0.policy, Policy::Rr);
        assert_eq!(parse(&[(OPT_SLICE_US, "0")]).0.slice_us, 0);
        let opts = parse(&[(OPT_NICE, "3")]).0.options();
        assert_eq!(opts[1], (OPT_NICE, "3".to_string()));
    }

    /// Runs `f` on a fresh thread (whose scheduling the test may change freely) and returns its result.
    fn on_thread<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
        std::thread::spawn(f).join().unwrap()
    }

    #[test]
    fn slice_and_nice_are_applied_and_read_back() {
        let (c, from_proc) = on_thread(|| {
            let want = ReactorSched {
                slice_us: 300,
                nice: Some(5),
                ..ReactorSched::default()
            };
            let c = apply_current(7, &want);
            let proc =
                std::fs::read_to_string(format!("/proc/self/task/{}/sched", gettid())).unwrap_or_default();
            (c, proc)
        });
        assert_eq!(c.core, 7);
        let a = c.after.unwrap();
        assert_eq!(a.policy, libc::SCHED_OTHER as u32);
        assert_eq!(a.nice, 5, "raising nice needs no privilege");
        let k = kernel_version();
        if k >= (6, 12) {
            assert_eq!(c.warning, None);
            assert_eq!(a.slice_ns, 300_000);
            // The kernel's own view agrees (`se.slice` in ns).
            if let Some(l) = from_proc.lines().find(|l| l.starts_with("se.slice")) {
                assert!(l.trim_end().ends_with("300000"), "{l}");
            }
        } else {
            eprintln!(
                "kernel {k:?} < 6.12: no custom slices; the warning is {:?}",
                c.warning
            );
            assert!(c.warning.is_some());
        }
        // Unset nice keeps the current one: only the slice changes.
        let a = on_thread(|| {
            set(
                0,
                &ReactorSched {
                    nice: Some(3),
                    ..ReactorSched::default()
                },
            )
            .unwrap();
            set(
                0,
                &ReactorSched {
                    slice_us: 1000,
                    ..ReactorSched::default()
                },
            )
            .unwrap();
            get(0).unwrap()
        });
        assert_eq!(a.nice, 3);
    }

    #[test]
    fn untouched_makes_no_change() {
        let (before, c) = on_thread(|| {
            let before = get(0).unwrap();
            (before, apply_current(0, &ReactorSched::default()))
        });
        assert_eq!(c.warning, None);
        assert_eq!(c.after, Some(before));
    }

    #[test]
    fn fifo_when_privileged_with_reset_on_fork() {
        let r = on_thread(|| {
            let c = apply_current(
                1,
                &ReactorSched {
                    policy: Policy::Fifo,
                    priority: 2,
                    ..ReactorSched::default()
                },
            );
            // A child of a FIFO reactor thread starts as a normal thread.
            let child = std::thread::spawn(|| get(0).unwrap()).join().unwrap();
            (c, child)
        });
        match r.0.warning {
            None => {
                let a = r.0.after.unwrap();
                assert_eq!((a.policy, a.priority), (libc::SCHED_FIFO as u32, 2));
                assert!(a.reset_on_fork);
                assert_eq!(r.1.policy, libc::SCHED_OTHER as u32);
                assert_eq!(r.1.priority, 0);
            }
            Some(w) => {
                // Unprivileged (CI): refused, the thread keeps its normal policy.
                assert!(w.contains("sched_setattr"), "{w}");
                assert_eq!(r.0.after.unwrap().policy, libc::SCHED_OTHER as u32);
            }
        }
    }

    #[test]
    fn einval_is_a_warning_and_changes_nothing() {
        // Priority 0 with FIFO is invalid (the option parser never produces it; the kernel must refuse it).
        let c = on_thread(|| {
            apply_current(
                2,
                &ReactorSched {
                    policy: Policy::Rr,
                    priority: 0,
                    ..ReactorSched::default()
                },
            )
        });
        let w = c.warning.expect("refused");
        assert!(w.contains("sched_setattr(rr priority 0) failed"), "{w}");
        assert_eq!(c.after.unwrap().policy, libc::SCHED_OTHER as u32);
    }

    /// Drop CAP_SYS_NICE from the calling thread's effective set (capabilities are per thread).
    fn drop_cap_sys_nice() -> bool {
        #[repr(C)]
        struct Header {
            version: u32,
            pid: i32,
        }
        #[repr(C)]
        #[derive(Clone, Copy, Default)]
        struct Data {
            effective: u32,
            permitted: u32,
            inheritable: u32,
        }
        const V3: u32 = 0x2008_0522;
        const CAP_SYS_NICE: u32 = 23;
        let mut h = Header { version: V3, pid: 0 };
        let mut d = [Data::default(); 2];
        // SAFETY: header and two data structs, as capget's version 3 expects.
        if unsafe { libc::syscall(libc::SYS_capget, &mut h as *mut Header, d.as_mut_ptr()) } != 0 {
            return false;
        }
        d[0].effective &= !(1 << CAP_SYS_NICE);
        // SAFETY: as above; capset only lowers this thread's effective set.
        unsafe { libc::syscall(libc::SYS_capset, &mut h as *mut Header, d.as_ptr()) == 0 }
    }

    #[test]
    fn eperm_is_a_warning_and_changes_nothing() {
        let r = on_thread(|| {
            if !drop_cap_sys_nice() {
                return None;
            }
            let before = get(0).unwrap();
            let fifo = apply_current(
                3,
                &ReactorSched {
                    policy: Policy::Fifo,
                    priority: 5,
                    ..ReactorSched::default()
                },
            );
            let nice = apply_current(
                3,
                &ReactorSched {
                    nice: Some(-10),
                    slice_us: 200,
                    ..ReactorSched::default()
                },
            );
            Some((before, fifo, nice))
        });
        let Some((before, fifo, nice)) = r else {
            eprintln!("skipping: capset not permitted here");
            return;
        };
        // With RLIMIT_RTPRIO / RLIMIT_NICE raised the kernel would allow these without the capability.
        let lim = |res| {
            let mut l = libc::rlimit {
                rlim_cur: 0,
                rlim_max: 0,
            };
            // SAFETY: getrlimit writes one rlimit.
            unsafe { libc::getrlimit(res, &mut l) };
            l.rlim_cur
        };
        if lim(libc::RLIMIT_RTPRIO) == 0 {
            let w = fifo.warning.expect("EPERM");
            assert!(w.contains("CAP_SYS_NICE"), "{w}");
            assert_eq!(fifo.after, Some(before));
        }
        if lim(libc::RLIMIT_NICE) <= 20 {
            assert!(nice.warning.expect("EPERM").contains("CAP_SYS_NICE"));
            assert_eq!(nice.after, Some(before));
        }
    }

    #[test]
    fn registry_feeds_the_admin_views() {
        let want = ReactorSched {
            nice: Some(1),
            ..ReactorSched::default()
        };
        on_thread(move || {
            apply_reactor(41, &want);
        });
        let j = status_json(&want);
        let cores = j["cores"].as_array().unwrap();
        let c = cores.iter().find(|c| c["core"] == 41).unwrap();
        assert!(c["tid"].as_i64().unwrap() > 0);
        assert_eq!(j["options"][OPT_NICE], "1");
        let mut o = serde_json::Map::new();
        config_show(&want, &mut o);
        assert!(
            o["ferro_reactor_sched_effective"]
                .as_str()
                .unwrap()
                .contains("core 41: SCHED_OTHER nice 1")
        );
        assert_eq!(o[OPT_POLICY], "other");
    }

    fn kernel_version() -> (u32, u32) {
        let r = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
        let mut it = r.trim().split(['.', '-']).map(|p| p.parse::<u32>().unwrap_or(0));
        (it.next().unwrap_or(0), it.next().unwrap_or(0))
    }
}
