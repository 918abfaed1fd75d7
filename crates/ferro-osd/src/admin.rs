// SPDX-License-Identifier: LGPL-3.0-or-later
//! The admin socket: a unix stream socket where `ceph daemon osd.N <cmd>` writes one JSON command terminated by
//! a NUL byte and reads a big-endian u32 length followed by the answer (Ceph's AdminSocket protocol).

use std::io::{Read, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::mpsc::{self, Sender};
use std::time::Duration;

/// Hands a command and the channel for its answer to the daemon (core 0); false if it is gone.
pub type Poster = Arc<dyn Fn(String, Sender<(i32, String)>) -> bool + Send + Sync>;

/// Longest command accepted (Ceph's limit is similar; commands are small JSON objects).
const MAX_REQUEST: usize = 64 * 1024;

/// The commands we answer, as `get_command_descriptions` lists them: (signature, help).
pub const COMMANDS: &[(&str, &str)] = &[
    ("status", "high-level status of OSD"),
    ("version", "get ceph version"),
    ("git_version", "get git sha1"),
    ("help", "list available commands"),
    ("perf dump", "dump perfcounters value"),
    ("perf schema", "dump perfcounters schema"),
    ("config show", "dump current config settings"),
    ("config get", "config get <field>: get the config value"),
    ("dump_ops_in_flight", "show the ops currently in flight"),
    ("ops", "show the ops currently in flight"),
    ("dump_historic_ops", "show recent ops"),
    (
        "dump_historic_ops_by_duration",
        "show slowest recent ops, sorted by duration",
    ),
    (
        "dump_mempools",
        "get mempool stats: ferrostore's cache and buffers, PG log entries, tracked ops, replicated writes in flight",
    ),
    ("get_command_descriptions", "list available commands"),
    (
        "ferro long-turns",
        "ferro long-turns: loop turns per core and the newest turns longer than ferro_osd_long_turn_us, with what \
         each did",
    ),
    (
        "ferro sched",
        "ferro sched: the reactor threads' scheduling (policy, nice, slice) as asked by the ferro_reactor_* options \
         and as the kernel reports it now, per core",
    ),
    (
        "ferro object-digest",
        "ferro object-digest <pgid>: this OSD's copy of the PG: every object's name, size and crc32c of data, xattrs \
         and omap (replicas of a clean PG answer the same)",
    ),
];

/// The JSON `ceph` expects from `get_command_descriptions`.
pub fn command_descriptions() -> String {
    let mut m = serde_json::Map::new();
    for (i, (sig, help)) in COMMANDS.iter().enumerate() {
        let mut words: Vec<serde_json::Value> = sig.split(' ').map(|w| w.into()).collect();
        if *sig == "config get" {
            words.push(serde_json::json!({"name": "var", "type": "CephString", "req": "true"}));
        }
        if *sig == "ferro object-digest" {
            words.push(serde_json::json!({"name": "pgid", "type": "CephPgid", "req": "true"}));
        }
        m.insert(
            format!("cmd{i:03}"),
            serde_json::json!({"sig": words, "help": help, "module": "osd", "perm": "r", "flags": 0}),
        );
    }
    serde_json::Value::Object(m).to_string()
}

fn handle(mut s: UnixStream, post: &Poster) -> std::io::Result<()> {
    s.set_read_timeout(Some(Duration::from_secs(10)))?;
    let mut req = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let n = s.read(&mut buf)?;
        if n == 0 {
            break;
        }
        req.extend_from_slice(&buf[..n]);
        if req.contains(&0) || req.len() > MAX_REQUEST {
            break;
        }
    }
    if let Some(p) = req.iter().position(|&b| b == 0) {
        req.truncate(p);
    }
    let text = String::from_utf8_lossy(&req).to_string();
    let (tx, rx) = mpsc::channel();
    let wait = answer_timeout(&text);
    let answer = if post(text, tx) {
        rx.recv_timeout(wait)
            .map(|(_, s)| s)
            .unwrap_or_else(|_| "{\"error\": \"timed out\"}".into())
    } else {
        "{\"error\": \"shutting down\"}".into()
    };
    let len = u32::try_from(answer.len()).unwrap_or(u32::MAX);
    s.write_all(&len.to_be_bytes())?;
    s.write_all(answer.as_bytes())?;
    Ok(())
}

/// How long the socket waits for a command's answer: `ferro object-digest` runs a slice of the PG per loop turn,
/// so its answer takes time in proportion to the PG (and to the machine's load); everything else answers at once.
fn answer_timeout(cmd: &str) -> Duration {
    let digest = serde_json::from_str::<serde_json::Value>(cmd)
        .is_ok_and(|v| v["prefix"].as_str() == Some("ferro object-digest"));
    Duration::from_secs(if digest { 120 } else { 10 })
}

/// Listen on `path` (replacing a stale socket) and serve commands on a thread of its own.
pub fn start(path: &Path, post: Poster) -> std::io::Result<PathBuf> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let _ = std::fs::remove_file(path);
    let l = UnixListener::bind(path)?;
    std::thread::Builder::new()
        .name("admin-socket".into())
        .spawn(move || {
            for s in l.incoming().flatten() {
                let ev = post.clone();
                let _ = std::thread::Builder::new()
                    .name("admin-conn".into())
                    .spawn(move || {
                        let _ = handle(s, &ev);
                    });
            }
        })?;
    Ok(path.to_path_buf())
}
