// SPDX-License-Identifier: LGPL-3.0-or-later
//! How the machine's idle CPUs wait, recorded with every run, and `--guest-halt-poll-ns`: guest halt polling
//! for the run only.
//!
//! In a VM an idle vCPU that halts leaves the guest; waking it is a trip through the hypervisor, paid on every
//! hand-off of an op (client → OSD → replica → completion → client) that finds the receiving thread's vCPU
//! idle. The `haltpoll` cpuidle driver polls for a while before it halts; its budget is the module parameter
//! `guest_halt_poll_ns` (default 200 µs, 0 = halt at once; a boot option can set it). The QD1 rows depend on it
//! for both OSD kinds, so the report says what the machine had, and a run can set it and put it back after.

use std::path::{Path, PathBuf};

use crate::error::{BenchError, Result, io_err};

/// The haltpoll driver's polling budget (ns), writable by root at run time.
pub const HALT_POLL_NS: &str = "/sys/module/haltpoll/parameters/guest_halt_poll_ns";
/// The cpuidle driver and governor in use.
const CPUIDLE: &str = "/sys/devices/system/cpu/cpuidle";

/// One line for the report: the cpuidle driver and governor, and the haltpoll budget when that driver exists,
/// e.g. `cpuidle driver haltpoll, governor haltpoll, guest_halt_poll_ns 0`.
pub fn describe() -> String {
    describe_at(Path::new(CPUIDLE), Path::new(HALT_POLL_NS))
}

fn describe_at(cpuidle: &Path, halt_poll: &Path) -> String {
    let read = |p: PathBuf| std::fs::read_to_string(p).ok().map(|s| s.trim().to_owned());
    let mut parts = Vec::new();
    if let Some(d) = read(cpuidle.join("current_driver")) {
        parts.push(format!("cpuidle driver {d}"));
    }
    if let Some(g) =
        read(cpuidle.join("current_governor_ro")).or_else(|| read(cpuidle.join("current_governor")))
    {
        parts.push(format!("governor {g}"));
    }
    if let Some(ns) = read(halt_poll.to_path_buf()) {
        parts.push(format!("guest_halt_poll_ns {ns}"));
    }
    if parts.is_empty() {
        "unknown".into()
    } else {
        parts.join(", ")
    }
}

/// Holds a changed `guest_halt_poll_ns` and writes the old value back when dropped (the end of the run, or an
/// error; not if the process is killed, so the old value is also printed when it is set).
#[derive(Debug)]
pub struct HaltPollGuard {
    path: PathBuf,
    old: String,
}

impl HaltPollGuard {
    /// The value the machine had before the run.
    pub fn old(&self) -> &str {
        &self.old
    }
}

/// Sets the haltpoll budget to `ns` for as long as the guard lives.
pub fn set_halt_poll(ns: u64) -> Result<HaltPollGuard> {
    set_halt_poll_at(Path::new(HALT_POLL_NS), ns)
}

fn set_halt_poll_at(path: &Path, ns: u64) -> Result<HaltPollGuard> {
    let old = std::fs::read_to_string(path)
        .map_err(|e| {
            BenchError::Usage(format!(
                "--guest-halt-poll-ns: {} is not readable ({e}): this machine has no haltpoll cpuidle driver \
                 (it is a VM guest's driver)",
                path.display()
            ))
        })?
        .trim()
        .to_owned();
    std::fs::write(path, format!("{ns}\n")).map_err(io_err(format!(
        "--guest-halt-poll-ns: writing {} (needs root)",
        path.display()
    )))?;
    Ok(HaltPollGuard {
        path: path.to_path_buf(),
        old,
    })
}

impl Drop for HaltPollGuard {
    fn drop(&mut self) {
        if let Err(e) = std::fs::write(&self.path, format!("{}\n", self.old)) {
            eprintln!(
                "bench compare: could not restore {} to {}: {e}",
                self.path.display(),
                self.old
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tmp(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("bench-idle-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn the_guard_sets_the_budget_and_puts_the_old_one_back() {
        let d = tmp("guard");
        let p = d.join("guest_halt_poll_ns");
        std::fs::write(&p, "0\n").unwrap();
        {
            let g = set_halt_poll_at(&p, 200_000).unwrap();
            assert_eq!(g.old(), "0");
            assert_eq!(std::fs::read_to_string(&p).unwrap().trim(), "200000");
        }
        assert_eq!(std::fs::read_to_string(&p).unwrap().trim(), "0");
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn no_driver_is_a_usage_error() {
        let d = tmp("none");
        let e = set_halt_poll_at(&d.join("guest_halt_poll_ns"), 1).unwrap_err();
        assert!(
            matches!(e, BenchError::Usage(ref m) if m.contains("no haltpoll")),
            "{e}"
        );
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn describe_names_driver_governor_and_budget() {
        let d = tmp("describe");
        let c = d.join("cpuidle");
        std::fs::create_dir_all(&c).unwrap();
        std::fs::write(c.join("current_driver"), "haltpoll\n").unwrap();
        std::fs::write(c.join("current_governor_ro"), "haltpoll\n").unwrap();
        let p = d.join("guest_halt_poll_ns");
        std::fs::write(&p, "0\n").unwrap();
        assert_eq!(
            describe_at(&c, &p),
            "cpuidle driver haltpoll, governor haltpoll, guest_halt_poll_ns 0"
        );
        std::fs::remove_file(&p).unwrap();
        std::fs::remove_file(c.join("current_governor_ro")).unwrap();
        assert_eq!(describe_at(&c, &p), "cpuidle driver haltpoll");
        assert_eq!(describe_at(&d.join("x"), &p), "unknown");
        std::fs::remove_dir_all(&d).unwrap();
    }
}
