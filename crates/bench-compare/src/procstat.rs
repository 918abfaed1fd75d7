// SPDX-License-Identifier: LGPL-3.0-or-later
//! OSD process accounting from `/proc`: CPU time (`stat` utime + stime, all threads), RSS (`status` VmRSS)
//! and context switches (`task/*/status`, voluntary and involuntary, summed over the threads).

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

/// Context switches of every thread of `pid` that is alive now (threads that exited earlier are not counted;
/// an OSD's threads live as long as it does).
fn ctxt_of(pid: u32) -> (u64, u64) {
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
    }
    sum
}

/// Summed CPU time, RSS and context switches of a set of processes at one moment.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ProcSample {
    /// utime + stime of all processes, in microseconds.
    pub cpu_us: f64,
    /// Summed RSS in bytes.
    pub rss_bytes: u64,
    /// Voluntary context switches (a thread slept: a wait, a futex, a blocking syscall), all threads.
    pub ctxt_voluntary: u64,
    /// Involuntary context switches (preempted), all threads.
    pub ctxt_involuntary: u64,
}

impl ProcSample {
    /// Samples `pids` now. A process that has exited is an error: the numbers would be wrong.
    pub fn take(pids: &[u32]) -> Result<ProcSample> {
        // SAFETY: sysconf has no preconditions.
        let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
        let hz = if hz > 0 { hz as f64 } else { 100.0 };
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
            let (v, n) = ctxt_of(*pid);
            vol += v;
            invol += n;
        }
        Ok(ProcSample {
            cpu_us: ticks as f64 * 1e6 / hz,
            rss_bytes: rss_kib * 1024,
            ctxt_voluntary: vol,
            ctxt_involuntary: invol,
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
    fn rss_from_status() {
        let s = "Name:\tceph-osd\nVmPeak:\t  999 kB\nVmRSS:\t  123456 kB\nThreads:\t60\n";
        assert_eq!(parse_status_rss_kib(s), Some(123456));
        assert_eq!(parse_status_rss_kib("Name: x\n"), None);
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
}
