// SPDX-License-Identifier: LGPL-3.0-or-later
#![allow(clippy::unwrap_used, dead_code)] // test harness
//! Reading the crc-mode capture: pcap → TCP streams → msgr2 frames → messages, with packet timestamps.

use std::collections::HashMap;
use std::path::PathBuf;

use msgr2::frame::{FrameDecoder, FrameLimits};

pub const MESSAGE_TAG: u8 = 17;

pub fn read_capture() -> Option<Vec<u8>> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/captures/crc/crc.pcap.xz");
    if !path.exists() {
        eprintln!("skipping: {} not found", path.display());
        return None;
    }
    match std::process::Command::new("xz").arg("-dc").arg(&path).output() {
        Ok(o) if o.status.success() => Some(o.stdout),
        Ok(o) => panic!("xz failed: {}", String::from_utf8_lossy(&o.stderr)),
        Err(e) => {
            eprintln!("skipping: cannot run xz ({e})");
            None
        }
    }
}

pub type Endpoint = ([u8; 4], u16);

/// One direction of one TCP connection: (seq, timestamp µs, payload) segments.
#[derive(Default)]
pub struct Stream {
    pub src: Endpoint,
    pub dst: Endpoint,
    pub connector: bool,
    pub start_us: u64,
    isn: u32,
    segments: Vec<(u32, u64, Vec<u8>)>,
}

impl Stream {
    /// The stream's bytes in order, each with the timestamp of the packet that carried it (up to a gap).
    pub fn chunks(&self) -> Vec<(u64, Vec<u8>)> {
        let mut segs: Vec<(u64, u64, &[u8])> = self
            .segments
            .iter()
            .map(|(s, t, d)| (u64::from(s.wrapping_sub(self.isn)), *t, d.as_slice()))
            .collect();
        segs.sort_by_key(|s| s.0);
        let mut out = Vec::new();
        let mut next = 0u64;
        for (rel, t, d) in segs {
            let end = rel + d.len() as u64;
            if end <= next {
                continue;
            }
            if rel > next {
                break;
            }
            out.push((t, d[(next - rel) as usize..].to_vec()));
            next = end;
        }
        out
    }
    pub fn bytes(&self) -> Vec<u8> {
        self.chunks().into_iter().flat_map(|(_, d)| d).collect()
    }
}

/// Little-endian pcap, Ethernet / cooked / raw IPv4, TCP only.
pub fn tcp_streams(pcap: &[u8]) -> Vec<Stream> {
    let linktype = u32::from_le_bytes(pcap[20..24].try_into().unwrap());
    let l2 = match linktype {
        1 => 14,
        113 => 16,
        101 => 0,
        0 => 4,
        t => panic!("unsupported link type {t}"),
    };
    let mut streams: Vec<Stream> = Vec::new();
    let mut current: HashMap<(Endpoint, Endpoint), usize> = HashMap::new();
    let mut at = 24;
    while at + 16 <= pcap.len() {
        let ts = u64::from(u32::from_le_bytes(pcap[at..at + 4].try_into().unwrap())) * 1_000_000
            + u64::from(u32::from_le_bytes(pcap[at + 4..at + 8].try_into().unwrap()));
        let incl = u32::from_le_bytes(pcap[at + 8..at + 12].try_into().unwrap()) as usize;
        let pkt = &pcap[at + 16..(at + 16 + incl).min(pcap.len())];
        at += 16 + incl;
        let Some(ip) = pkt.get(l2..) else { continue };
        if ip.len() < 20 || ip[0] >> 4 != 4 || ip[9] != 6 {
            continue;
        }
        let ihl = usize::from(ip[0] & 0xf) * 4;
        let total = usize::from(u16::from_be_bytes([ip[2], ip[3]])).min(ip.len());
        let Some(tcp) = ip.get(ihl..total) else { continue };
        if tcp.len() < 20 {
            continue;
        }
        let key: (Endpoint, Endpoint) = (
            (
                ip[12..16].try_into().unwrap(),
                u16::from_be_bytes([tcp[0], tcp[1]]),
            ),
            (
                ip[16..20].try_into().unwrap(),
                u16::from_be_bytes([tcp[2], tcp[3]]),
            ),
        );
        let seq = u32::from_be_bytes(tcp[4..8].try_into().unwrap());
        let doff = usize::from(tcp[12] >> 4) * 4;
        if tcp[13] & 0x02 != 0 {
            streams.push(Stream {
                src: key.0,
                dst: key.1,
                connector: tcp[13] & 0x10 == 0,
                start_us: ts,
                isn: seq.wrapping_add(1),
                segments: Vec::new(),
            });
            current.insert(key, streams.len() - 1);
            continue;
        }
        let Some(payload) = tcp.get(doff..) else { continue };
        if let Some(&i) = current.get(&key)
            && !payload.is_empty()
        {
            streams[i].segments.push((seq, ts, payload.to_vec()));
        }
    }
    streams
}

/// Every frame of a stream with the timestamp of the packet that completed it.
pub fn frames(s: &Stream) -> Vec<(u64, msgr2::frame::Frame)> {
    let chunks = s.chunks();
    let mut buf: Vec<u8> = Vec::new();
    let mut out = Vec::new();
    let mut dec = FrameDecoder::new(FrameLimits::default());
    let mut banner_done = false;
    for (t, d) in chunks {
        if !banner_done {
            buf.extend_from_slice(&d);
            if buf.len() < 10 {
                continue;
            }
            if &buf[..8] != b"ceph v2\n" {
                return out;
            }
            let blen = u16::from_le_bytes([buf[8], buf[9]]) as usize;
            if buf.len() < 10 + blen {
                continue;
            }
            banner_done = true;
            dec.push(&buf[10 + blen..]);
        } else {
            dec.push(&d);
        }
        loop {
            match dec.next_frame() {
                Ok(Some(f)) => out.push((t, f)),
                Ok(None) => break,
                Err(_) => return out,
            }
        }
    }
    out
}

pub fn to_message(f: &msgr2::frame::Frame) -> ceph_msgs::Message {
    let m = msgr2::Message::from_segments(&f.segments).unwrap();
    ceph_msgs::Message {
        msg_type: m.msg_type,
        version: m.version,
        compat_version: m.compat_version,
        priority: m.priority,
        tid: m.tid,
        front: m.front,
        middle: m.middle,
        data: m.data,
    }
}

pub fn messages(s: &Stream) -> Vec<ceph_msgs::Message> {
    frames(s)
        .iter()
        .filter(|(_, f)| f.tag == MESSAGE_TAG)
        .map(|(_, f)| to_message(f))
        .collect()
}
