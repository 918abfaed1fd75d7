// SPDX-License-Identifier: LGPL-3.0-or-later
//! Test support: read the shared packet captures (pcap, xz-compressed) and reassemble TCP streams.
#![allow(dead_code)]

use std::collections::HashMap;
use std::path::PathBuf;

pub fn capture_path(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/captures")
        .join(name)
}

pub fn read_xz(path: &PathBuf) -> Option<Vec<u8>> {
    if !path.exists() {
        eprintln!("skipping: {} not found", path.display());
        return None;
    }
    match std::process::Command::new("xz").arg("-dc").arg(path).output() {
        Ok(o) if o.status.success() => Some(o.stdout),
        Ok(o) => panic!("xz failed: {}", String::from_utf8_lossy(&o.stderr)),
        Err(e) => {
            eprintln!("skipping: cannot run xz ({e})");
            None
        }
    }
}

pub type Endpoint = ([u8; 4], u16);

/// One direction of one TCP connection, reassembled.
#[derive(Debug, Default)]
pub struct Stream {
    pub src: Endpoint,
    pub dst: Endpoint,
    /// The side that sent the SYN.
    pub connector: bool,
    pub isn: Option<u32>,
    pub segments: Vec<(u32, Vec<u8>)>,
}

impl Stream {
    pub fn assemble(&self) -> (Vec<u8>, bool) {
        let Some(isn) = self.isn else {
            return (Vec::new(), false);
        };
        let mut segs: Vec<(u64, &[u8])> = self
            .segments
            .iter()
            .map(|(seq, d)| (u64::from(seq.wrapping_sub(isn)), d.as_slice()))
            .collect();
        segs.sort_by_key(|s| s.0);
        let mut out = Vec::new();
        let mut next = 0u64;
        for (rel, d) in segs {
            let end = rel + d.len() as u64;
            if end <= next {
                continue; // retransmission
            }
            if rel > next {
                return (out, true); // gap: lost packet in the capture
            }
            out.extend_from_slice(&d[(next - rel) as usize..]);
            next = end;
        }
        (out, false)
    }
}

/// A minimal pcap (not pcapng) reader: Ethernet or Linux "cooked" or raw IPv4, TCP only.
pub fn tcp_streams(pcap: &[u8]) -> Vec<Stream> {
    assert!(pcap.len() >= 24, "short pcap");
    let magic = u32::from_le_bytes(pcap[0..4].try_into().unwrap());
    assert!(
        magic == 0xa1b2c3d4 || magic == 0xa1b23c4d,
        "not a little-endian pcap: {magic:#x}"
    );
    let linktype = u32::from_le_bytes(pcap[20..24].try_into().unwrap());
    let l2 = match linktype {
        1 => 14,   // Ethernet
        113 => 16, // Linux cooked
        101 => 0,  // raw IP
        0 => 4,    // BSD loopback
        t => panic!("unsupported link type {t}"),
    };
    let mut streams: Vec<Stream> = Vec::new();
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
        let src_ip: [u8; 4] = ip[12..16].try_into().unwrap();
        let dst_ip: [u8; 4] = ip[16..20].try_into().unwrap();
        let Some(tcp) = ip.get(ihl..total) else { continue };
        if tcp.len() < 20 {
            continue;
        }
        let sport = u16::from_be_bytes([tcp[0], tcp[1]]);
        let dport = u16::from_be_bytes([tcp[2], tcp[3]]);
        let seq = u32::from_be_bytes(tcp[4..8].try_into().unwrap());
        let doff = usize::from(tcp[12] >> 4) * 4;
        let flags = tcp[13];
        let (syn, ack) = (flags & 0x02 != 0, flags & 0x10 != 0);
        let key = ((src_ip, sport), (dst_ip, dport));
        if syn {
            // A new connection on this 4-tuple (ports are reused over a long capture).
            streams.push(Stream {
                src: key.0,
                dst: key.1,
                connector: !ack,
                isn: Some(seq.wrapping_add(1)),
                segments: Vec::new(),
            });
            current.insert(key, streams.len() - 1);
            continue;
        }
        let Some(payload) = tcp.get(doff..) else { continue };
        if payload.is_empty() {
            continue;
        }
        if let Some(&i) = current.get(&key) {
            streams[i].segments.push((seq, payload.to_vec()));
        }
    }
    streams
}

/// The two directions of each TCP connection: (connector → acceptor, acceptor → connector).
pub fn connections(streams: &[Stream]) -> Vec<(&Stream, &Stream)> {
    let mut out = Vec::new();
    for (i, s) in streams.iter().enumerate() {
        if !s.connector {
            continue;
        }
        if let Some(back) = streams[i + 1..]
            .iter()
            .find(|b| !b.connector && b.src == s.dst && b.dst == s.src)
        {
            out.push((s, back));
        }
    }
    out
}
