// SPDX-License-Identifier: LGPL-3.0-or-later
//! Small process and environment helpers for the driver.

use std::io::Read as _;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::error::{BenchError, Result};

/// Output of a finished command.
#[derive(Debug)]
pub(crate) struct Output {
    pub stdout: String,
    pub stderr: String,
}

fn describe(cmd: &Command) -> String {
    let mut s = cmd.get_program().to_string_lossy().into_owned();
    for a in cmd.get_args() {
        s.push(' ');
        s.push_str(&a.to_string_lossy());
    }
    s
}

fn tail(s: &str, lines: usize) -> String {
    let v: Vec<&str> = s.lines().collect();
    v[v.len().saturating_sub(lines)..].join("\n")
}

/// Runs `cmd` to completion within `timeout` (killing it, and only it, when the bound is exceeded).
/// A non-zero exit is an error carrying the output's tail.
pub(crate) fn run(cmd: &mut Command, timeout: Duration) -> Result<Output> {
    let what = describe(cmd);
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| BenchError::Tool {
            command: what.clone(),
            detail: format!("spawn: {e}"),
        })?;
    // Drain both pipes on threads so a chatty child never blocks on a full pipe.
    let mut so = child.stdout.take();
    let mut se = child.stderr.take();
    let t_out = std::thread::spawn(move || {
        let mut s = String::new();
        if let Some(p) = so.as_mut() {
            let _ = p.read_to_string(&mut s);
        }
        s
    });
    let t_err = std::thread::spawn(move || {
        let mut s = String::new();
        if let Some(p) = se.as_mut() {
            let _ = p.read_to_string(&mut s);
        }
        s
    });
    let deadline = Instant::now() + timeout;
    let status = loop {
        match child.try_wait() {
            Ok(Some(st)) => break Some(st),
            Ok(None) if Instant::now() >= deadline => {
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(20)),
            Err(e) => {
                return Err(BenchError::Tool {
                    command: what,
                    detail: format!("wait: {e}"),
                });
            }
        }
    };
    let stdout = t_out.join().unwrap_or_default();
    let stderr = t_err.join().unwrap_or_default();
    match status {
        None => Err(BenchError::Tool {
            command: what,
            detail: format!(
                "no result within {timeout:?}; killed\n{}\n{}",
                tail(&stdout, 10),
                tail(&stderr, 10)
            ),
        }),
        Some(st) if !st.success() => Err(BenchError::Tool {
            command: what,
            detail: format!("{st}\n{}\n{}", tail(&stdout, 10), tail(&stderr, 15)),
        }),
        Some(_) => Ok(Output { stdout, stderr }),
    }
}

/// First line of a command's stdout, or "unknown".
pub(crate) fn first_line(program: &str, args: &[&str]) -> String {
    run(Command::new(program).args(args), Duration::from_secs(20))
        .ok()
        .and_then(|o| o.stdout.lines().next().map(|l| l.trim().to_owned()))
        .unwrap_or_else(|| "unknown".into())
}

/// `YYYY-MM-DD HH:MM UTC` for a Unix time.
pub(crate) fn utc_string(unix_s: u64) -> String {
    let days = (unix_s / 86_400) as i64;
    let secs = unix_s % 86_400;
    // Civil date from days since 1970-01-01 (proleptic Gregorian; Howard Hinnant's well-known method).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02} UTC",
        secs / 3600,
        (secs % 3600) / 60
    )
}

/// CPU model × count and memory, from /proc.
pub(crate) fn machine() -> String {
    let cpu = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model = cpu
        .lines()
        .find_map(|l| l.strip_prefix("model name"))
        .and_then(|l| l.split_once(':'))
        .map_or("unknown CPU".to_owned(), |(_, m)| m.trim().to_owned());
    let n = cpu.lines().filter(|l| l.starts_with("processor")).count();
    let mem_gib = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| {
            m.lines()
                .find_map(|l| l.strip_prefix("MemTotal:"))
                .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
        })
        .map_or(0, |kib| (kib + (1 << 19)) >> 20);
    format!("{n} vCPU {model}, {mem_gib} GiB RAM")
}

/// Kernel release.
/// The 1, 5 and 15 minute load averages from `/proc/loadavg` (empty if unreadable).
pub(crate) fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

pub(crate) fn kernel() -> String {
    std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map_or_else(|_| "unknown".into(), |s| s.trim().to_owned())
}

/// The workspace commit (short), with `-dirty` when tracked files differ from it. The workspace is where the
/// tool was built; if that checkout is gone (a removed worktree), the current directory's checkout is asked.
pub(crate) fn commit(workspace: &std::path::Path) -> String {
    let here = std::path::PathBuf::from(".");
    let dir = if workspace.join(".git").exists() {
        workspace
    } else {
        here.as_path()
    };
    let git = |args: &[&str]| {
        run(
            Command::new("git").arg("-C").arg(dir).args(args),
            Duration::from_secs(20),
        )
        .ok()
    };
    let Some(head) = git(&["rev-parse", "--short", "HEAD"]) else {
        return "unknown".into();
    };
    let dirty =
        git(&["status", "--porcelain", "--untracked-files=no"]).is_some_and(|o| !o.stdout.trim().is_empty());
    format!("{}{}", head.stdout.trim(), if dirty { "-dirty" } else { "" })
}

/// Writes zeros over all of `path` (created or extended to `bytes`), bypassing the page cache (`O_DIRECT`), then
/// `fdatasync`: every block of the file is allocated and written once, as on a device.
pub(crate) fn zero_fill(path: &std::path::Path, bytes: u64) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    const CHUNK: usize = 4 << 20;
    const ALIGN: usize = 4096;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .custom_flags(libc::O_DIRECT)
        .open(path)?;
    // O_DIRECT wants an aligned buffer: over-allocate and write from the first aligned byte.
    let buf = vec![0u8; CHUNK + ALIGN];
    let off = buf.as_ptr().align_offset(ALIGN).min(ALIGN);
    let chunk = &buf[off..off + CHUNK];
    let mut done = 0u64;
    while done < bytes {
        let n = (bytes - done).min(CHUNK as u64) as usize;
        // The tail of an unaligned size cannot be written with O_DIRECT; the length is set below.
        let n_aligned = n / ALIGN * ALIGN;
        if n_aligned == 0 {
            break;
        }
        f.write_all(&chunk[..n_aligned])?;
        done += n_aligned as u64;
    }
    f.set_len(bytes)?;
    f.sync_data()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Built in a worktree that was removed since: the report still names the commit (of the checkout it runs
    /// in; tests run in the package's directory, inside this repository).
    #[test]
    fn commit_of_a_removed_workspace_falls_back_to_the_current_checkout() {
        let gone = std::path::Path::new("/nonexistent/ferroceph-worktree");
        let c = commit(gone);
        assert_ne!(c, "unknown");
        assert!(
            c.trim_end_matches("-dirty")
                .chars()
                .all(|ch| ch.is_ascii_hexdigit()),
            "{c}"
        );
    }

    #[test]
    fn utc_dates() {
        assert_eq!(utc_string(0), "1970-01-01 00:00 UTC");
        assert_eq!(utc_string(951_782_400), "2000-02-29 00:00 UTC");
        assert_eq!(utc_string(1_795_950_000), "2026-11-29 11:00 UTC");
    }

    #[test]
    fn run_bounds_and_reports() {
        let o = run(
            Command::new("sh").args(["-c", "echo hi; echo err >&2"]),
            Duration::from_secs(5),
        )
        .unwrap();
        assert_eq!(o.stdout, "hi\n");
        assert_eq!(o.stderr, "err\n");
        let e = run(
            Command::new("sh").args(["-c", "echo boom; exit 3"]),
            Duration::from_secs(5),
        )
        .unwrap_err();
        assert!(e.to_string().contains("boom"), "{e}");
        let t0 = Instant::now();
        let e = run(Command::new("sleep").arg("10"), Duration::from_millis(200)).unwrap_err();
        assert!(e.to_string().contains("killed"));
        assert!(t0.elapsed() < Duration::from_secs(5));
    }

    #[test]
    fn zero_fill_writes_every_block() {
        use std::os::unix::fs::MetadataExt;
        let p = std::env::temp_dir().join(format!("bench-compare-zero-{}", std::process::id()));
        let _ = std::fs::remove_file(&p);
        match zero_fill(&p, (9 << 20) + 4096) {
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {
                eprintln!("skipping: no O_DIRECT here ({e})");
            }
            r => {
                r.unwrap();
                let md = std::fs::metadata(&p).unwrap();
                assert_eq!(md.len(), (9 << 20) + 4096);
                assert!(md.blocks() * 512 >= md.len(), "sparse: {} blocks", md.blocks());
            }
        }
        let _ = std::fs::remove_file(&p);
    }
}
