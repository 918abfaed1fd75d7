// SPDX-License-Identifier: LGPL-3.0-or-later
//! Reading real Ceph 16.2.15 traffic from ../shared/captures/crc (pcap, crc mode): TCP streams → msgr2 frames →
//! messages, with the direction (ports) of each stream.
#![allow(dead_code, clippy::unwrap_used)]

use std::collections::HashMap;
use std::path::PathBuf;

use msgr2::frame::{FrameDecoder, FrameLimits};

const MESSAGE_TAG: u8 = 17;

/// The decompressed crc capture, or None (with a message) when it or `xz` is missing.
pub fn read_capture() -> Option<Vec<u8>> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/captures/crc/crc.pcap.xz");
    if !path.exists() {
        eprintln!("skipping: {} not found", path.display());
        return None;
    }
    match std::process::Command::new("xz").arg("-dc").arg(&path).output() {
        Ok(o) if o.status.success() => Some(o.stdout),
        _ => {
            eprintln!("skipping: cannot run xz");
            None
        }
    }
}

type Endpoint = ([u8; 4], u16);

#[derive(Default)]
pub struct Stream {
    pub src_port: u16,
    pub dst_port: u16,
    isn: u32,
    segments: Vec<(u32, Vec<u8>)>,
}

impl Stream {
    pub fn bytes(&self) -> Vec<u8> {
        let mut segs: Vec<(u64, &[u8])> = self
            .segments
            .iter()
            .map(|(s, d)| (u64::from(s.wrapping_sub(self.isn)), d.as_slice()))
            .collect();
        segs.sort_by_key(|s| s.0);
        let mut out = Vec::new();
        let mut next = 0u64;
        for (rel, d) in segs {
            let end = rel + d.len() as u64;
            if end <= next {
                continue;
            }
            if rel > next {
                break;
            }
            out.extend_from_slice(&d[(next - rel) as usize..]);
            next = end;
        }
        out
    }
}

/// Every TCP stream (one direction each) of a little-endian pcap.
pub fn tcp_streams(pcap: &[u8]) -> Vec<Stream> {
    let linktype = u32::from_le_bytes(pcap[20..24].try_into().unwrap());
    let l2 = match linktype {
        1 => 14,
        113 => 16,
        101 => 0,
        0 => 4,
        t => panic!("unsupported link type {t}"),
    };
    let mut streams = Vec::new();
    let mut current: HashMap<(Endpoint, Endpoint), usize> = HashMap::new();
    let mut at = 24;
    while at + 16 <= pcap.len() {
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
        let sp = u16::from_be_bytes([tcp[0], tcp[1]]);
        let dp = u16::from_be_bytes([tcp[2], tcp[3]]);
        let key = (
            (ip[12..16].try_into().unwrap(), sp),
            (ip[16..20].try_into().unwrap(), dp),
        );
        let seq = u32::from_be_bytes(tcp[4..8].try_into().unwrap());
        let doff = usize::from(tcp[12] >> 4) * 4;
        if tcp[13] & 0x02 != 0 {
            streams.push(Stream {
                src_port: sp,
                dst_port: dp,
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
            streams[i].segments.push((seq, payload.to_vec()));
        }
    }
    streams
}

/// The MESSAGE frames of one stream direction (crc mode).
pub fn messages(raw: &[u8]) -> Vec<ceph_msgs::Message> {
    if raw.len() < 10 || &raw[..8] != b"ceph v2\n" {
        return Vec::new();
    }
    let banner_len = u16::from_le_bytes([raw[8], raw[9]]) as usize;
    let mut dec = FrameDecoder::new(FrameLimits::default());
    dec.push(&raw[10 + banner_len..]);
    let mut out = Vec::new();
    while let Ok(Some(f)) = dec.next_frame() {
        if f.tag == MESSAGE_TAG
            && let Ok(m) = msgr2::Message::from_segments(&f.segments)
        {
            out.push(ceph_msgs::Message {
                msg_type: m.msg_type,
                version: m.version,
                compat_version: m.compat_version,
                priority: m.priority,
                tid: m.tid,
                front: m.front,
                middle: m.middle,
                data: m.data,
                ..Default::default()
            });
        }
    }
    out
}

/// All messages of the capture, with (src port, dst port).
pub fn all_messages() -> Option<Vec<(u16, u16, ceph_msgs::Message)>> {
    let pcap = read_capture()?;
    let mut out = Vec::new();
    for s in tcp_streams(&pcap) {
        for m in messages(&s.bytes()) {
            out.push((s.src_port, s.dst_port, m));
        }
    }
    Some(out)
}
