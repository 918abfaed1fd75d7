// SPDX-License-Identifier: LGPL-3.0-or-later
//! Process plumbing: commands with a wall-clock bound, and identifying our own daemons by pid.
//!
//! A daemon is "ours" only if its environment carries `FERRO_TESTCLUSTER_DIR=<cluster dir>`: pids are reused
//! (pid_max is often 32768), so a recorded pid alone must never be enough to send a signal.

use std::io::Read;
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use crate::error::{ClusterError, Result};

/// Environment variable set on every daemon we start; its value is the cluster directory.
pub const MARKER_ENV: &str = "FERRO_TESTCLUSTER_DIR";

/// Output of a finished command.
pub(crate) struct Output {
    pub stdout: Vec<u8>,
}

/// A printable form of a command for error messages.
pub(crate) fn describe(cmd: &Command) -> String {
    let mut s = cmd.get_program().to_string_lossy().into_owned();
    for a in cmd.get_args() {
        s.push(' ');
        s.push_str(&a.to_string_lossy());
    }
    s
}

/// Runs `cmd` to completion, killing it if it takes longer than `timeout`. Fails on a non-zero exit.
pub(crate) fn run(cmd: &mut Command, timeout: Duration) -> Result<Output> {
    let what = describe(cmd);
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| {
            if e.kind() == std::io::ErrorKind::NotFound {
                ClusterError::MissingBinary(cmd.get_program().to_string_lossy().into_owned())
            } else {
                ClusterError::Io {
                    context: format!("spawning `{what}`"),
                    source: e,
                }
            }
        })?;
    // Drain both pipes on threads so a chatty child cannot block on a full pipe while we poll it.
    let out = drain(child.stdout.take());
    let err = drain(child.stderr.take());
    let status = wait_bounded(&mut child, timeout);
    let stdout = out.join().unwrap_or_default();
    let stderr = err.join().unwrap_or_default();
    let Some(status) = status? else {
        return Err(ClusterError::Timeout {
            what: format!("`{what}`"),
            after: timeout,
            logs: format!(
                "stdout: {}\nstderr: {}",
                tail_str(&String::from_utf8_lossy(&stdout), 20),
                tail_str(&String::from_utf8_lossy(&stderr), 20)
            ),
        });
    };
    if !status.success() {
        let mut text = String::from_utf8_lossy(&stderr).into_owned();
        if text.trim().is_empty() {
            text = String::from_utf8_lossy(&stdout).into_owned();
        }
        return Err(ClusterError::CommandFailed {
            command: what,
            status: status.to_string(),
            stderr: tail_str(&text, 30),
        });
    }
    Ok(Output { stdout })
}

fn drain<R: Read + Send + 'static>(pipe: Option<R>) -> thread::JoinHandle<Vec<u8>> {
    thread::spawn(move || {
        let mut buf = Vec::new();
        if let Some(mut p) = pipe {
            // A read error only truncates the diagnostic output; the exit status still decides.
            let _ = p.read_to_end(&mut buf);
        }
        buf
    })
}

/// Waits for `child` at most `timeout`; on expiry kills and reaps it and returns `Ok(None)`.
fn wait_bounded(child: &mut Child, timeout: Duration) -> Result<Option<ExitStatus>> {
    let deadline = Instant::now() + timeout;
    let mut nap = Duration::from_millis(5);
    loop {
        if let Some(st) = child
            .try_wait()
            .map_err(crate::error::io_err("waiting for a command"))?
        {
            return Ok(Some(st));
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            return Ok(None);
        }
        thread::sleep(nap);
        nap = (nap * 2).min(Duration::from_millis(100));
    }
}

/// Is `pid` a live (non-zombie) process?
pub(crate) fn alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // The state letter follows the parenthesised command name, which may itself contain ") ".
        Ok(stat) => stat
            .rsplit_once(") ")
            .is_some_and(|(_, rest)| !rest.starts_with('Z')),
        Err(_) => false,
    }
}

/// Is `pid` a live process that we started for the cluster in `dir`?
pub(crate) fn is_ours(pid: u32, dir: &Path) -> bool {
    let Ok(env) = std::fs::read(format!("/proc/{pid}/environ")) else {
        return false;
    };
    let want = format!("{MARKER_ENV}={}", dir.display());
    env.split(|b| *b == 0).any(|kv| kv == want.as_bytes()) && alive(pid)
}

/// Start time of `pid` in clock ticks since boot (field 22 of /proc/pid/stat); distinguishes reused pids.
pub(crate) fn start_time(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (_, rest) = stat.rsplit_once(") ")?;
    // `rest` starts at field 3 (state), so field 22 is index 19.
    rest.split_whitespace().nth(19)?.parse().ok()
}

/// This process and its ancestors up to init.
pub(crate) fn self_and_ancestors() -> Vec<u32> {
    let mut chain = vec![std::process::id()];
    while chain.len() < 256 {
        let Some(&pid) = chain.last() else { break };
        let ppid = std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .ok()
            .and_then(|st| {
                st.rsplit_once(") ")
                    .and_then(|(_, rest)| rest.split_whitespace().nth(1)?.parse().ok())
            });
        match ppid {
            Some(p) if p > 1 => chain.push(p),
            _ => break,
        }
    }
    chain
}

/// Sends `sig` to `pid`; errors (e.g. already gone) are ignored because the caller re-checks liveness.
pub(crate) fn signal(pid: u32, sig: libc::c_int) {
    let Ok(p) = libc::pid_t::try_from(pid) else {
        return;
    };
    if p <= 0 {
        return;
    }
    // SAFETY: kill(2) has no memory-safety preconditions; p > 0 targets exactly one process.
    unsafe {
        libc::kill(p, sig);
    }
}

/// The last `n` lines of `s`.
pub(crate) fn tail_str(s: &str, n: usize) -> String {
    let lines: Vec<&str> = s.lines().collect();
    let start = lines.len().saturating_sub(n);
    lines[start..].join("\n")
}

/// The last `n` lines of the file at `path` (at most the last 256 KiB are read), or a note why not.
pub(crate) fn tail_file(path: &Path, n: usize) -> String {
    use std::io::{Seek, SeekFrom};
    let Ok(mut f) = std::fs::File::open(path) else {
        return format!("({} missing)", path.display());
    };
    let len = f.metadata().map(|m| m.len()).unwrap_or(0);
    let _ = f.seek(SeekFrom::Start(len.saturating_sub(256 * 1024)));
    let mut buf = Vec::new();
    let _ = f.read_to_end(&mut buf);
    tail_str(&String::from_utf8_lossy(&buf), n)
}

/// Finds `name` on PATH.
pub fn which(name: &str) -> Option<std::path::PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ancestors_start_with_self_then_parent() {
        let chain = self_and_ancestors();
        assert_eq!(chain[0], std::process::id());
        let parent = std::os::unix::process::parent_id();
        if parent > 1 {
            assert_eq!(chain[1], parent);
        }
    }

    #[test]
    fn tails_and_liveness() {
        assert_eq!(tail_str("a\nb\nc\n", 2), "b\nc");
        assert_eq!(tail_str("", 3), "");
        assert!(alive(std::process::id()));
        assert!(!alive(u32::MAX));
        assert!(!is_ours(std::process::id(), Path::new("/nonexistent-cluster")));
    }
}
