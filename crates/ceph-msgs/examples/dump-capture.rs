// SPDX-License-Identifier: LGPL-3.0-or-later
//! List the msgr2 (crc mode) messages of a capture: a count per (type, version), or the header and front/data
//! bytes (hex) of the first N messages of one type.
//!
//! `dump-capture IN.pcap[.xz] [TYPE [N]]`, or `dump-capture IN.pcap[.xz] --seeds DIR`: write every message as a
//! seed for the `osd_messages` fuzz target (le16 type, u8 version, le32 front length, front, data).
#![allow(clippy::print_stderr, clippy::print_stdout)]

use std::collections::BTreeMap;
use std::path::PathBuf;

use msgr2::frame::{FrameDecoder, FrameLimits, Tag};

fn hex(b: &[u8]) -> String {
    b.iter().map(|b| format!("{b:02x}")).collect()
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(path) = args.first() else {
        eprintln!("usage: dump-capture IN.pcap[.xz] [TYPE [N]]");
        std::process::exit(2);
    };
    let seeds: Option<PathBuf> = (args.get(1).map(String::as_str) == Some("--seeds"))
        .then(|| args.get(2).map(PathBuf::from))
        .flatten();
    if let Some(dir) = &seeds
        && let Err(e) = std::fs::create_dir_all(dir)
    {
        eprintln!("{}: {e}", dir.display());
        std::process::exit(1);
    }
    let want: Option<u16> = args.get(1).and_then(|t| t.parse().ok());
    let n: usize = args.get(2).and_then(|t| t.parse().ok()).unwrap_or(3);
    // Data segments are cut at 512 bytes unless DUMP_FULL is set.
    let data_limit = if std::env::var_os("DUMP_FULL").is_some() {
        usize::MAX
    } else {
        512
    };
    let Some(cap) = ceph_capture::Capture::read(&PathBuf::from(path)) else {
        std::process::exit(1);
    };
    let mut counts: BTreeMap<(u16, u16, u16), usize> = BTreeMap::new();
    let mut shown = 0;
    for c in cap.connections() {
        for (dir, s) in [("->", &c.to_server), ("<-", &c.to_client)] {
            let raw = s.bytes();
            let Some(at) = ceph_capture::msgr2_frames_start(raw) else {
                continue;
            };
            let mut dec = FrameDecoder::new(FrameLimits::default());
            dec.push(&raw[at..]);
            while let Ok(Some(f)) = dec.next_frame() {
                if f.tag() != Some(Tag::Message) {
                    continue;
                }
                let Ok(m) = msgr2::Message::from_segments(&f.segments) else {
                    continue;
                };
                *counts
                    .entry((m.msg_type, m.version, m.compat_version))
                    .or_default() += 1;
                if let Some(dir) = &seeds {
                    let mut seed = m.msg_type.to_le_bytes().to_vec();
                    seed.push(m.version.min(255) as u8);
                    seed.extend_from_slice(&(m.front.len() as u32).to_le_bytes());
                    seed.extend_from_slice(&m.front);
                    seed.extend_from_slice(&m.data);
                    let n_seen: usize = counts.values().sum();
                    let name = dir.join(format!("{}-{}-{n_seen}", m.msg_type, m.version));
                    if let Err(e) = std::fs::write(&name, &seed) {
                        eprintln!("{}: {e}", name.display());
                    }
                }
                if want == Some(m.msg_type) && shown < n {
                    shown += 1;
                    println!(
                        "{} {dir} {}: type {} v{}/{} prio {} tid {} front {} middle {} data {}\n  front {}\n  data {}",
                        c.client,
                        c.server,
                        m.msg_type,
                        m.version,
                        m.compat_version,
                        m.priority,
                        m.tid,
                        m.front.len(),
                        m.middle.len(),
                        m.data.len(),
                        hex(&m.front),
                        hex(&m.data[..m.data.len().min(data_limit)])
                    );
                }
            }
        }
    }
    if want.is_none() && seeds.is_none() {
        for ((t, v, cv), k) in counts {
            println!("type {t:5} v{v}/{cv}: {k}");
        }
    }
}
