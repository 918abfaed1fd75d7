// SPDX-License-Identifier: LGPL-3.0-or-later
//! Trim a packet capture of real Ceph daemons (msgr2, crc mode) to a small test fixture.
//!
//! `trim-capture [--ports 3300,7400-7499] [--per-type N] [--max-bytes B] IN.pcap[.xz] OUT.pcap`
//!
//! Keeps only connections whose server port is listed, and in each direction the msgr2 banner, every handshake
//! frame, and message frames until N messages of that (type, version) have been kept across the whole capture
//! (keepalives and acks count as types too). A message frame larger than B bytes is kept only if it is the first
//! of its (type, version). Frames are copied verbatim (their crcs stay valid); connections that keep no message in
//! either direction are dropped. The result is written as a pcap (see `ceph_capture::write_pcap`).
#![allow(clippy::print_stderr, clippy::print_stdout)]

use std::collections::BTreeMap;
use std::net::{SocketAddr, SocketAddrV4};
use std::path::PathBuf;

use ceph_capture::{Capture, SynthConnection};
use msgr2::frame::{FrameDecoder, FrameLimits, Tag};

const USAGE: &str = "usage: trim-capture [--ports LIST] [--per-type N] [--max-bytes B] IN.pcap[.xz] OUT.pcap";
/// A message this big is never kept (even as the first of its type): fixtures must stay small.
const HARD_MAX_BYTES: usize = 1 << 20;

struct Args {
    ports: Vec<(u16, u16)>,
    per_type: usize,
    max_bytes: usize,
    input: PathBuf,
    output: PathBuf,
}

fn parse_args() -> Result<Args, String> {
    let mut a = Args {
        ports: Vec::new(),
        per_type: 12,
        max_bytes: 16 * 1024,
        input: PathBuf::new(),
        output: PathBuf::new(),
    };
    let mut files = Vec::new();
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "--ports" => {
                let v = it.next().ok_or("--ports needs a value")?;
                for p in v.split(',').filter(|p| !p.is_empty()) {
                    let (lo, hi) = p.split_once('-').unwrap_or((p, p));
                    let lo = lo.parse().map_err(|_| format!("bad port {lo}"))?;
                    let hi = hi.parse().map_err(|_| format!("bad port {hi}"))?;
                    a.ports.push((lo, hi));
                }
            }
            "--per-type" => {
                a.per_type = it.next().and_then(|v| v.parse().ok()).ok_or("--per-type N")?;
            }
            "--max-bytes" => {
                a.max_bytes = it.next().and_then(|v| v.parse().ok()).ok_or("--max-bytes B")?;
            }
            "-h" | "--help" => return Err(USAGE.into()),
            _ => files.push(PathBuf::from(arg)),
        }
    }
    let [input, output] = <[PathBuf; 2]>::try_from(files).map_err(|_| USAGE.to_string())?;
    a.input = input;
    a.output = output;
    Ok(a)
}

/// What a frame is, for the per-type budget: a message's (type, version), or a control frame's tag.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Kind {
    Message(u16, u16),
    Control(u8),
}

/// The kept bytes of one direction (banner + kept frames), and how many messages that is.
fn trim_stream(raw: &[u8], budget: &mut BTreeMap<Kind, usize>, args: &Args) -> (Vec<u8>, usize) {
    let Some(at) = ceph_capture::msgr2_frames_start(raw) else {
        return (Vec::new(), 0);
    };
    let mut out = raw[..at].to_vec();
    let mut kept_msgs = 0;
    let mut dec = FrameDecoder::new(FrameLimits::default());
    dec.push(&raw[at..]);
    while let Ok(Some(f)) = dec.next_frame() {
        let Some(frame_bytes) = &f.raw else { break };
        let kind = match f.tag() {
            Some(Tag::Message) => match msgr2::Message::from_segments(&f.segments) {
                Ok(m) => Kind::Message(m.msg_type, m.version),
                Err(_) => continue,
            },
            // Handshake frames are few and small; keep them all so every stream reads like the original.
            Some(Tag::Keepalive2 | Tag::Keepalive2Ack | Tag::Ack) | None => Kind::Control(f.tag),
            Some(_) => {
                out.extend_from_slice(frame_bytes);
                continue;
            }
        };
        let n = budget.entry(kind).or_default();
        let size = frame_bytes.len();
        let fits = size <= args.max_bytes || (*n == 0 && size <= HARD_MAX_BYTES);
        if *n < args.per_type && fits {
            *n += 1;
            out.extend_from_slice(frame_bytes);
            if matches!(kind, Kind::Message(..)) {
                kept_msgs += 1;
            }
        }
    }
    (out, kept_msgs)
}

fn v4(a: SocketAddr) -> Option<SocketAddrV4> {
    match a {
        SocketAddr::V4(a) => Some(a),
        SocketAddr::V6(_) => None,
    }
}

fn main() {
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(2);
        }
    };
    let Some(cap) = Capture::read(&args.input) else {
        std::process::exit(1);
    };
    let wanted =
        |port: u16| args.ports.is_empty() || args.ports.iter().any(|&(lo, hi)| (lo..=hi).contains(&port));
    let mut budget = BTreeMap::new();
    let mut out = Vec::new();
    let (mut conns_in, mut msgs_kept) = (0usize, 0usize);
    for c in cap.connections() {
        if !wanted(c.server.port()) {
            continue;
        }
        conns_in += 1;
        let (Some(client), Some(server)) = (v4(c.client), v4(c.server)) else {
            continue;
        };
        let (up, n_up) = trim_stream(c.to_server.bytes(), &mut budget, &args);
        let (down, n_down) = trim_stream(c.to_client.bytes(), &mut budget, &args);
        if n_up + n_down == 0 {
            continue;
        }
        msgs_kept += n_up + n_down;
        out.push(SynthConnection {
            client,
            server,
            start_us: c.to_server.start_us(),
            to_server: up,
            to_client: down,
        });
    }
    let pcap = ceph_capture::write_pcap(&out);
    if let Err(e) = std::fs::write(&args.output, &pcap) {
        eprintln!("{}: {e}", args.output.display());
        std::process::exit(1);
    }
    let types = budget.keys().filter(|k| matches!(k, Kind::Message(..))).count();
    println!(
        "{} of {conns_in} connections kept, {msgs_kept} messages of {types} (type, version) pairs, {} bytes",
        out.len(),
        pcap.len()
    );
}
