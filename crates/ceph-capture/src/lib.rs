// SPDX-License-Identifier: LGPL-3.0-or-later
//! Test-only access to the packet captures of real Ceph 16.2.15 daemons in `../shared/captures`
//! (`crc/crc.pcap.xz`, `secure/secure.pcap.xz`, with the cluster's keyrings next to them).
//!
//! One implementation of what several test suites used to carry each on its own: find the captures, decompress
//! them, read pcap, reassemble every TCP connection by sequence number and hand out each direction as one byte
//! stream whose bytes still know the timestamp of the packet that carried them.
//!
//! ```no_run
//! let Some(cap) = ceph_capture::load("crc") else { return }; // prints why it skips
//! for c in cap.connections().iter().filter(|c| c.server.port() == 3700) {
//!     let to_mon = &c.to_server;
//!     let Some(frames_at) = ceph_capture::msgr2_frames_start(to_mon.bytes()) else { continue };
//!     // feed to_mon.bytes()[frames_at..] (or to_mon.chunks_from(frames_at), with timestamps) to msgr2's
//!     // FrameDecoder
//! }
//! ```
//!
//! Frames are left to `msgr2::frame::FrameDecoder` (crc and secure mode); this crate deliberately does not depend
//! on msgr2, so that msgr2's own tests can use it without a second copy of msgr2 in their build.
//!
//! Users: cephx and monclient tests. **To migrate** (their owners were busy when this crate was written): the
//! private pcap/TCP readers in `crates/msgr2/tests/common`, `crates/pg/tests/common` and
//! `crates/ferro-osd/tests/common` should move to this crate (`load`, `Connection`, `Stream::chunks`,
//! `msgr2_frames_start`).
//!
//! Where the captures are: `$FERRO_CAPTURES` if set, else `<workspace>/../shared/captures`. When they are absent or
//! `xz` is not installed, [`load`] prints `skipping: …` and returns `None`, so tests return early instead of
//! failing. A capture that is present but unreadable panics: that is a broken fixture, not a missing one.

mod pcap;
mod synth;
mod tcp;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

pub use pcap::{Packet, PcapError, packets};
pub use synth::{SynthConnection, write_pcap};
pub use tcp::{Connection, Stream, reassemble};

/// Environment variable naming the captures directory (the one holding `crc/` and `secure/`).
pub const CAPTURES_ENV: &str = "FERRO_CAPTURES";

/// The captures directory: `$FERRO_CAPTURES`, else `<workspace>/../shared/captures`; `None` when it does not exist.
pub fn captures_dir() -> Option<PathBuf> {
    let dir = match std::env::var_os(CAPTURES_ENV) {
        Some(d) => PathBuf::from(d),
        // crates/ceph-capture → the workspace root is two levels up; the shared data sits beside it.
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/captures"),
    };
    dir.is_dir().then_some(dir)
}

/// The directory of one capture (`"crc"`, `"secure"`), with its keyrings and `ceph.conf`; prints why not.
pub fn capture_dir(name: &str) -> Option<PathBuf> {
    let Some(root) = captures_dir() else {
        eprintln!("skipping: ../shared/captures not found (set {CAPTURES_ENV} to point elsewhere)");
        return None;
    };
    let dir = root.join(name);
    if !dir.is_dir() {
        eprintln!("skipping: {} not found", dir.display());
        return None;
    }
    Some(dir)
}

/// The capture `<captures>/<name>/<name>.pcap.xz`, decompressed, parsed and reassembled. Loaded once per test
/// process and shared (the crc capture is 64 MiB of pcap). `None` (after printing why) when the capture or `xz` is
/// missing; panics when the file is there but is not a readable capture.
pub fn load(name: &str) -> Option<Arc<Capture>> {
    static CACHE: OnceLock<Mutex<BTreeMap<String, Option<Arc<Capture>>>>> = OnceLock::new();
    let cache = CACHE.get_or_init(Default::default);
    // Held while loading: tests of one binary asking for the same capture wait for one decompression.
    let mut cache = cache.lock().unwrap_or_else(PoisonError::into_inner);
    cache
        .entry(name.to_string())
        .or_insert_with(|| {
            let path = capture_dir(name)?.join(format!("{name}.pcap.xz"));
            let raw = read_xz(&path)?;
            match Capture::parse(&raw) {
                Ok(c) => Some(Arc::new(c)),
                Err(e) => panic!("{}: {e}", path.display()),
            }
        })
        .clone()
}

/// Decompress an `.xz` file with the `xz` tool; `None` (after printing why) when the file or the tool is missing.
pub fn read_xz(path: &Path) -> Option<Vec<u8>> {
    if !path.is_file() {
        eprintln!("skipping: {} not found", path.display());
        return None;
    }
    match Command::new("xz").arg("-dc").arg(path).output() {
        Ok(o) if o.status.success() => Some(o.stdout),
        Ok(o) => panic!(
            "xz -dc {} failed: {}",
            path.display(),
            String::from_utf8_lossy(&o.stderr)
        ),
        Err(e) => {
            eprintln!("skipping: cannot run xz ({e})");
            None
        }
    }
}

/// A parsed capture: its TCP connections in the order they were opened.
#[derive(Debug, Default)]
pub struct Capture {
    connections: Vec<Connection>,
    packets: usize,
}

impl Capture {
    /// Read a capture file: `.xz` is decompressed with the `xz` tool, anything else is read as pcap. `None`
    /// (after printing why) when the file or `xz` is missing; panics when the file is there but unreadable.
    pub fn read(path: &Path) -> Option<Capture> {
        let raw = if path.extension().is_some_and(|e| e == "xz") {
            read_xz(path)?
        } else {
            match std::fs::read(path) {
                Ok(b) => b,
                Err(e) => {
                    eprintln!("skipping: {}: {e}", path.display());
                    return None;
                }
            }
        };
        match Capture::parse(&raw) {
            Ok(c) => Some(c),
            Err(e) => panic!("{}: {e}", path.display()),
        }
    }

    /// Parse a pcap file (either byte order, µs or ns timestamps) and reassemble its TCP connections.
    pub fn parse(pcap: &[u8]) -> Result<Capture, PcapError> {
        let packets = pcap::packets(pcap)?;
        let n = packets.len();
        Ok(Capture {
            connections: tcp::reassemble(&packets),
            packets: n,
        })
    }

    /// Every TCP connection whose opening SYN is in the capture, in the order of the SYNs.
    pub fn connections(&self) -> &[Connection] {
        &self.connections
    }

    /// Connections to a server port (a monitor's 3300/3700/3800, an OSD's 68xx, …).
    pub fn to_port(&self, port: u16) -> impl Iterator<Item = &Connection> {
        self.connections.iter().filter(move |c| c.server.port() == port)
    }

    /// How many IPv4/IPv6 TCP packets the capture held.
    pub fn packet_count(&self) -> usize {
        self.packets
    }
}

/// msgr2's banner is `"ceph v2\n"`, a le16 length and that many bytes of features; frames follow. The offset of the
/// first frame, or `None` when `stream` is not (yet) a complete msgr2 banner.
pub fn msgr2_frames_start(stream: &[u8]) -> Option<usize> {
    const MAGIC: &[u8] = b"ceph v2\n";
    if !stream.starts_with(MAGIC) {
        return None;
    }
    let len = stream.get(MAGIC.len()..MAGIC.len() + 2)?;
    let end = MAGIC.len() + 2 + usize::from(u16::from_le_bytes([len[0], len[1]]));
    (end <= stream.len()).then_some(end)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn banner() {
        let mut s = b"ceph v2\n".to_vec();
        assert_eq!(msgr2_frames_start(&s), None);
        s.extend_from_slice(&[16, 0]);
        assert_eq!(msgr2_frames_start(&s), None, "features missing");
        s.extend_from_slice(&[0; 16]);
        assert_eq!(msgr2_frames_start(&s), Some(26));
        s.extend_from_slice(b"frames");
        assert_eq!(msgr2_frames_start(&s), Some(26));
        assert_eq!(msgr2_frames_start(b"ceph v027\n"), None, "msgr1");
    }

    /// The real captures, when present: every monitor connection is msgr2 and starts with both banners, and the
    /// reassembled streams have no gaps (tcpdump dropped nothing on loopback).
    #[test]
    fn shared_captures_reassemble() {
        for (name, mon_port) in [("crc", 3700), ("secure", 3800)] {
            let Some(cap) = load(name) else { return };
            let mons: Vec<_> = cap.to_port(mon_port).collect();
            assert!(mons.len() >= 5, "{name}: {} mon connections", mons.len());
            for c in &mons {
                assert!(!c.to_server.has_gap() && !c.to_client.has_gap(), "{name}: {c:?}");
                assert!(msgr2_frames_start(c.to_server.bytes()).is_some(), "{name}: {c:?}");
                assert!(msgr2_frames_start(c.to_client.bytes()).is_some(), "{name}: {c:?}");
                assert!(c.to_client.start_us() >= c.to_server.start_us());
            }
            // Loaded once: the second call hands out the same parse.
            assert!(Arc::ptr_eq(&cap, &load(name).unwrap_or_default()));
        }
    }
}
