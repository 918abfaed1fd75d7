// SPDX-License-Identifier: LGPL-3.0-or-later
//! OSD process accounting from `/proc`: CPU time (`stat` utime + stime, all threads), RSS (`status` VmRSS)
//! and context switches (`task/*/status`, voluntary and involuntary, summed over the threads), run-queue
//! waits (`task/*/schedstat`) and the threads' scheduling class (`task/*/stat`, `task/*/sched`).

use crate::error::{Result, io_err};

/// CPU ticks (utime + stime) from the text of `/proc/<pid>/stat`. The command name (field 2) may contain
/// spaces and parentheses, so fields are counted after the last `)`.
pub fn parse_stat_cpu_ticks(stat: &str) -> Option<u64> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut f = rest.split_whitespace();
    // After ")": field 3 (state) is index 0, so utime (field 14) is index 11 and stime index 12.
    let utime: u64 = f.nth(11)?.parse().ok()?;
    let stime: u64 = f.next()?.parse().ok()?;
    Some(utime + stime)
}

/// Resident set size in KiB from the text of `/proc/<pid>/status`.
pub fn parse_status_rss_kib(status: &str) -> Option<u64> {
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|n| n.parse().ok())
}

/// Voluntary and involuntary context switches from the text of a `/proc/<pid>/task/<tid>/status`.
pub fn parse_status_ctxt(status: &str) -> (u64, u64) {
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0)
    };
    (
        field("voluntary_ctxt_switches:"),
        field("nonvoluntary_ctxt_switches:"),
    )
}

/// CPU ticks of one thread (`(tid, name)` → utime + stime), to find the busiest thread of a test.
pub type ThreadTicks = std::collections::HashMap<(u32, String), u64>;

/// One thread's `/proc/<pid>/task/<tid>/schedstat`: time on a CPU, time runnable but waiting for one (the
/// run queue), and how many times it was put on a CPU (timeslices).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SchedStat {
    pub run_ns: u64,
    pub wait_ns: u64,
    pub slices: u64,
}

impl SchedStat {
    /// Parse the three numbers of a `schedstat` file.
    pub fn parse(text: &str) -> Option<SchedStat> {
        let mut f = text.split_whitespace().map(|x| x.parse::<u64>().ok());
        Some(SchedStat {
            run_ns: f.next()??,
            wait_ns: f.next()??,
            slices: f.next()??,
        })
    }

    fn add(&mut self, o: SchedStat) {
        self.run_ns += o.run_ns;
        self.wait_ns += o.wait_ns;
        self.slices += o.slices;
    }

    fn minus(self, o: SchedStat) -> SchedStat {
        SchedStat {
            run_ns: self.run_ns.saturating_sub(o.run_ns),
            wait_ns: self.wait_ns.saturating_sub(o.wait_ns),
            slices: self.slices.saturating_sub(o.slices),
        }
    }

    /// Mean run-queue wait per timeslice in µs (`NaN` without slices).
    pub fn wait_us_per_slice(&self) -> f64 {
        if self.slices == 0 {
            f64::NAN
        } else {
            self.wait_ns as f64 / 1e3 / self.slices as f64
        }
    }
}

/// Schedstat of every thread: tid → (name, numbers).
pub type ThreadSched = std::collections::HashMap<u32, (String, SchedStat)>;

/// The summed schedstat change between two samples of the threads alive in both whose name starts with
/// `prefix` (`""`: all).
pub fn sched_delta(before: &ProcSample, after: &ProcSample, prefix: &str) -> SchedStat {
    let mut d = SchedStat::default();
    for (tid, (name, a)) in &after.sched {
        if let Some((_, b)) = before.sched.get(tid)
            && name.starts_with(prefix)
        {
            d.add(a.minus(*b));
        }
    }
    d
}

/// A thread's scheduling from its `stat` (nice: field 19, rt_priority: 40, policy: 41) and `sched` (`se.slice`,
/// ns: the EEVDF slice) texts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ThreadClass {
    pub policy: u32,
    pub nice: i32,
    pub rt_priority: u32,
    /// `se.slice` in µs (fair policies), if the kernel shows it.
    pub slice_us: Option<u64>,
}

impl ThreadClass {
    pub fn parse(stat: &str, sched: &str) -> Option<ThreadClass> {
        let rest = &stat[stat.rfind(')')? + 1..];
        let f: Vec<&str> = rest.split_whitespace().collect();
        // After ")": field 3 is index 0, so field n is index n - 3.
        let at = |n: usize| f.get(n - 3).copied();
        let policy: u32 = at(41)?.parse().ok()?;
        let slice_us = sched
            .lines()
            .find(|l| l.starts_with("se.slice"))
            .and_then(|l| l.split(':').nth(1))
            .and_then(|v| v.trim().parse::<u64>().ok())
            .map(|ns| ns / 1000);
        Some(ThreadClass {
            policy,
            nice: at(19)?.parse().ok()?,
            rt_priority: at(40)?.parse().ok()?,
            slice_us: if matches!(policy, 0 | 3 | 5) {
                slice_us
            } else {
                None
            },
        })
    }
}

impl std::fmt::Display for ThreadClass {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let name = match self.policy {
            0 => "SCHED_OTHER",
            1 => "SCHED_FIFO",
            2 => "SCHED_RR",
            3 => "SCHED_BATCH",
            5 => "SCHED_IDLE",
            6 => "SCHED_DEADLINE",
            _ => "SCHED_?",
        };
        match (self.policy, self.slice_us) {
            (1 | 2, _) => write!(f, "{name} priority {}", self.rt_priority),
            (_, Some(s)) => write!(f, "{name} nice {} slice {s} µs", self.nice),
            (_, None) => write!(f, "{name} nice {}", self.nice),
        }
    }
}

/// The distinct scheduling classes of the threads of `pids` whose name starts with `prefix` (`""`: all), with
/// how many threads have each, e.g. `SCHED_OTHER nice 0 slice 1400 µs (×3)`. Empty if none could be read.
pub fn thread_classes(pids: &[u32], prefix: &str) -> String {
    let mut seen: std::collections::BTreeMap<ThreadClass, usize> = Default::default();
    for pid in pids {
        let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
            continue;
        };
        for e in dir.flatten() {
            let (Ok(stat), sched) = (
                std::fs::read_to_string(e.path().join("stat")),
                std::fs::read_to_string(e.path().join("sched")).unwrap_or_default(),
            ) else {
                continue;
            };
            let name = stat
                .find('(')
                .zip(stat.rfind(')'))
                .map_or("", |(a, b)| &stat[a + 1..b.max(a + 1)]);
            if !name.starts_with(prefix) {
                continue;
            }
            if let Some(c) = ThreadClass::parse(&stat, &sched) {
                *seen.entry(c).or_default() += 1;
            }
        }
    }
    seen.iter()
        .map(|(c, n)| format!("{c} (×{n})"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Context switches of every thread of `pid` that is alive now (threads that exited earlier are not counted;
/// an OSD's threads live as long as it does), and each thread's CPU ticks into `ticks`.
fn threads_of(pid: u32, ticks: &mut ThreadTicks, sched: &mut ThreadSched) -> (u64, u64) {
    let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return (0, 0);
    };
    let mut sum = (0, 0);
    for e in dir.flatten() {
        if let Ok(st) = std::fs::read_to_string(e.path().join("status")) {
            let (v, n) = parse_status_ctxt(&st);
            sum.0 += v;
            sum.1 += n;
        }
        let tid = e.file_name().to_str().and_then(|t| t.parse().ok());
        if let (Some(tid), Ok(stat)) = (tid, std::fs::read_to_string(e.path().join("stat"))) {
            let name = stat
                .find('(')
                .zip(stat.rfind(')'))
                .map_or("?", |(a, b)| &stat[a + 1..b.max(a + 1)]);
            if let Some(t) = parse_stat_cpu_ticks(&stat) {
                ticks.insert((tid, name.to_string()), t);
            }
            if let Some(ss) = std::fs::read_to_string(e.path().join("schedstat"))
                .ok()
                .and_then(|t| SchedStat::parse(&t))
            {
                sched.insert(tid, (name.to_string(), ss));
            }
        }
    }
    sum
}

/// The thread that used the most CPU between two samples: its name and its share of one CPU over `wall_s`
/// seconds (1.0 = it ran all the time: the process is bound by that thread).
pub fn busiest_thread(before: &ProcSample, after: &ProcSample, wall_s: f64) -> Option<(String, f64)> {
    let hz = clock_hz();
    after
        .threads
        .iter()
        .map(|(k, t)| (k, t.saturating_sub(before.threads.get(k).copied().unwrap_or(0))))
        .max_by_key(|(_, d)| *d)
        .filter(|_| wall_s > 0.0)
        .map(|((_, name), d)| (name.clone(), d as f64 / hz / wall_s))
}

fn clock_hz() -> f64 {
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if hz > 0 { hz as f64 } else { 100.0 }
}

/// CPU time (user + system) of this process's waited-for children so far, in microseconds: the delta around
/// one client run is that client's CPU (children started and reaped in between count too).
pub fn children_cpu_us() -> f64 {
    // SAFETY: getrusage writes one rusage into the zeroed struct we pass.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: as above; RUSAGE_CHILDREN is a valid `who`.
    if unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut ru) } != 0 {
        return 0.0;
    }
    let us = |t: libc::timeval| t.tv_sec as f64 * 1e6 + t.tv_usec as f64;
    us(ru.ru_utime) + us(ru.ru_stime)
}

/// Busy CPU time of the whole machine from a `/proc/stat` text, in clock ticks: user, nice, system, irq and
/// softirq of the aggregate `cpu` line (idle, iowait and steal are not ours to count).
pub fn parse_proc_stat_busy_ticks(stat: &str) -> Option<u64> {
    let line = stat.lines().find(|l| l.starts_with("cpu "))?;
    let v: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .map(|f| f.parse().ok())
        .collect::<Option<_>>()?;
    let at = |i: usize| v.get(i).copied();
    Some(at(0)? + at(1)? + at(2)? + at(5)? + at(6)?)
}

/// (steal, all) ticks of the aggregate `cpu` line: on a VM, steal is time a vCPU was runnable but the host ran
/// something else — another guest's load slows every row, of both kinds, and says why two runs differ.
pub fn parse_proc_stat_steal_ticks(stat: &str) -> Option<(u64, u64)> {
    let line = stat.lines().find(|l| l.starts_with("cpu "))?;
    let v: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .take(8)
        .map(|f| f.parse().ok())
        .collect::<Option<_>>()?;
    Some((*v.get(7)?, v.iter().sum()))
}

/// The machine's (steal, all) ticks so far; None where /proc/stat has no steal field.
pub fn steal_ticks() -> Option<(u64, u64)> {
    std::fs::read_to_string("/proc/stat")
        .ok()
        .and_then(|s| parse_proc_stat_steal_ticks(&s))
}

/// Busy CPU time of the whole machine so far, in microseconds: it also counts what no OSD process owns (kernel
/// worker threads that complete O_DSYNC writes, the mon and mgr, the other kind's idle OSDs), so a cost moved
/// out of an OSD's threads into the kernel still shows per op.
pub fn machine_busy_us() -> f64 {
    std::fs::read_to_string("/proc/stat")
        .ok()
        .and_then(|s| parse_proc_stat_busy_ticks(&s))
        .map_or(0.0, |t| t as f64 * 1e6 / clock_hz())
}

/// Summed CPU time, RSS and context switches of a set of processes at one moment, and each thread's CPU.
#[derive(Debug, Clone, PartialEq)]
pub struct ProcSample {
    /// utime + stime of all processes, in microseconds.
    pub cpu_us: f64,
    /// Summed RSS in bytes.
    pub rss_bytes: u64,
    /// Voluntary context switches (a thread slept: a wait, a futex, a blocking syscall), all threads.
    pub ctxt_voluntary: u64,
    /// Involuntary context switches (preempted), all threads.
    pub ctxt_involuntary: u64,
    /// CPU ticks of every thread.
    pub threads: ThreadTicks,
    /// Schedstat of every thread.
    pub sched: ThreadSched,
}

impl ProcSample {
    /// Samples `pids` now. A process that has exited is an error: the numbers would be wrong.
    pub fn take(pids: &[u32]) -> Result<ProcSample> {
        let hz = clock_hz();
        let mut threads = ThreadTicks::new();
        let mut sched = ThreadSched::new();
        let mut ticks = 0u64;
        let mut rss_kib = 0u64;
        let (mut vol, mut invol) = (0u64, 0u64);
        for pid in pids {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .map_err(io_err(format!("reading /proc/{pid}/stat (did the OSD die?)")))?;
            let status = std::fs::read_to_string(format!("/proc/{pid}/status"))
                .map_err(io_err(format!("reading /proc/{pid}/status")))?;
            ticks += parse_stat_cpu_ticks(&stat).unwrap_or(0);
            rss_kib += parse_status_rss_kib(&status).unwrap_or(0);
            let (v, n) = threads_of(*pid, &mut threads, &mut sched);
            vol += v;
            invol += n;
        }
        Ok(ProcSample {
            cpu_us: ticks as f64 * 1e6 / hz,
            rss_bytes: rss_kib * 1024,
            ctxt_voluntary: vol,
            ctxt_involuntary: invol,
            threads,
            sched,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_fields_after_a_tricky_comm() {
        // pid (comm) state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime stime ...
        let s = "1234 (ceph osd) x)) S 1 2 3 4 5 6 7 8 9 10 250 75 0 0 20 0 30 0 100 200 300";
        assert_eq!(parse_stat_cpu_ticks(s), Some(325));
        assert_eq!(parse_stat_cpu_ticks("1 (x) S 1 2"), None);
        assert_eq!(parse_stat_cpu_ticks("garbage"), None);
    }

    #[test]
    fn machine_busy_from_proc_stat() {
        let stat = "cpu  10 2 30 1000 7 4 5 9 0 0\ncpu0 1 1 1 1 1 1 1 1 0 0\n";
        assert_eq!(parse_proc_stat_busy_ticks(stat), Some(10 + 2 + 30 + 4 + 5));
        assert_eq!(parse_proc_stat_busy_ticks("cpu0 1 2 3\n"), None);
        assert_eq!(parse_proc_stat_busy_ticks("cpu  1 x 3 4 5 6 7\n"), None);
        assert!(machine_busy_us() > 0.0);
        let st = "cpu  520059 0 120100 470599 129870 0 26067 61633 0 0\ncpu0 1 2 3 4 5 6 7 8 9 10\n";
        assert_eq!(
            parse_proc_stat_steal_ticks(st),
            Some((61633, 520059 + 120100 + 470599 + 129870 + 26067 + 61633))
        );
        assert_eq!(parse_proc_stat_steal_ticks("cpu  1 2 3 4 5 6 7\n"), None);
        assert!(steal_ticks().is_some_and(|(s, a)| s <= a && a > 0));
    }

    #[test]
    fn rss_from_status() {
        let s = "Name:\tceph-osd\nVmPeak:\t  999 kB\nVmRSS:\t  123456 kB\nThreads:\t60\n";
        assert_eq!(parse_status_rss_kib(s), Some(123456));
        assert_eq!(parse_status_rss_kib("Name: x\n"), None);
    }

    #[test]
    fn schedstat_and_thread_class() {
        assert_eq!(
            SchedStat::parse("1250000 3500000 70\n"),
            Some(SchedStat {
                run_ns: 1_250_000,
                wait_ns: 3_500_000,
                slices: 70
            })
        );
        assert_eq!(SchedStat::parse("1 2"), None);
        assert!((SchedStat::parse("0 3000 3").unwrap().wait_us_per_slice() - 1.0).abs() < 1e-12);
        assert!(SchedStat::default().wait_us_per_slice().is_nan());
        // Fields 3..=41 after the comm: field n holds n, except nice (19), rt_priority (40), policy (41).
        let mut f: Vec<String> = (3..=52).map(|n| n.to_string()).collect();
        f[19 - 3] = "-5".into();
        f[40 - 3] = "0".into();
        f[41 - 3] = "0".into();
        let stat = format!("77 (ferro-core-0) {}", f.join(" "));
        let sched = "ferro-core-0 (77, #threads: 4)\n---\npolicy : 0\nse.slice   :   300000\n";
        let c = ThreadClass::parse(&stat, sched).unwrap();
        assert_eq!(c.to_string(), "SCHED_OTHER nice -5 slice 300 µs");
        f[40 - 3] = "10".into();
        f[41 - 3] = "1".into();
        let c = ThreadClass::parse(&format!("77 (x) {}", f.join(" ")), sched).unwrap();
        assert_eq!(c.to_string(), "SCHED_FIFO priority 10");
        assert_eq!(ThreadClass::parse("1 (x) S 1", ""), None);
        // This process: its threads are readable and normal.
        let me = thread_classes(&[std::process::id()], "");
        assert!(me.contains("SCHED_OTHER"), "{me}");
        assert_eq!(thread_classes(&[std::process::id()], "no-such-thread"), "");
    }

    #[test]
    fn sched_delta_counts_waits_of_the_named_threads() {
        let a = ProcSample::take(&[std::process::id()]).unwrap();
        let h = std::thread::Builder::new()
            .name("bc-sleeper".into())
            .spawn(|| {
                let first = ProcSample::take(&[std::process::id()]).unwrap();
                for _ in 0..20 {
                    std::thread::sleep(std::time::Duration::from_millis(1));
                }
                (first, ProcSample::take(&[std::process::id()]).unwrap())
            })
            .unwrap();
        let (first, b) = h.join().unwrap();
        // Woken 20 times: at least 20 new timeslices for that thread alone.
        let d = sched_delta(&first, &b, "bc-sleeper");
        assert!(d.slices >= 20, "{d:?}");
        assert!(d.run_ns > 0);
        // Threads absent from the earlier sample are not counted.
        assert_eq!(sched_delta(&a, &b, "bc-sleeper"), SchedStat::default());
    }

    #[test]
    fn ctxt_from_task_status() {
        let s = "Name:\tferro-core-0\nvoluntary_ctxt_switches:\t1234\nnonvoluntary_ctxt_switches:\t56\n";
        assert_eq!(parse_status_ctxt(s), (1234, 56));
        assert_eq!(parse_status_ctxt("Name: x\n"), (0, 0));
    }

    #[test]
    fn sampling_this_process_works() {
        let a = ProcSample::take(&[std::process::id()]).unwrap();
        // A thread that sleeps and exits still leaves this thread's own switches counted: the sum cannot drop
        // below what the main thread had, and sleeping makes at least one voluntary switch.
        std::thread::sleep(std::time::Duration::from_millis(2));
        let s = ProcSample::take(&[std::process::id()]).unwrap();
        assert!(s.ctxt_voluntary > 0);
        assert!(s.ctxt_voluntary + s.ctxt_involuntary >= a.ctxt_voluntary.min(1));
        assert!(s.rss_bytes > 0);
        assert!(ProcSample::take(&[u32::MAX]).is_err());
    }

    #[test]
    fn busiest_thread_is_the_one_that_spun() {
        let a = ProcSample::take(&[std::process::id()]).unwrap();
        let t0 = std::time::Instant::now();
        let spin = std::thread::Builder::new()
            .name("bc-spinner".into())
            .spawn(|| {
                // Spin until this thread has used 300 ms of CPU (wall time alone proves nothing on a loaded
                // machine), bounded by 60 s of wall time.
                let thread_cpu_ms = || {
                    let mut ts = libc::timespec {
                        tv_sec: 0,
                        tv_nsec: 0,
                    };
                    // SAFETY: clock_gettime writes one timespec into `ts`.
                    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
                    ts.tv_sec as f64 * 1e3 + ts.tv_nsec as f64 / 1e6
                };
                let start = std::time::Instant::now();
                let mut x = 0u64;
                while thread_cpu_ms() < 300.0 && start.elapsed() < std::time::Duration::from_secs(60) {
                    for _ in 0..1000 {
                        x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(7));
                    }
                }
                // Sample while still alive: an exited thread is gone from /proc.
                ProcSample::take(&[std::process::id()]).unwrap()
            })
            .unwrap();
        let b = spin.join().unwrap();
        let (name, share) = busiest_thread(&a, &b, t0.elapsed().as_secs_f64()).unwrap();
        assert_eq!(name, "bc-spinner");
        // It used 300 ms of CPU within the wall time measured (a share of one CPU, at most ~1 plus tick error).
        let wall = t0.elapsed().as_secs_f64();
        assert!(share * wall > 0.2 && share < 1.5, "{share} of {wall} s");
    }

    #[test]
    fn children_cpu_grows_with_a_busy_child() {
        let a = children_cpu_us();
        let st = std::process::Command::new("sh")
            .args(["-c", "i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done"])
            .status()
            .unwrap();
        assert!(st.success());
        assert!(children_cpu_us() > a);
    }
}
