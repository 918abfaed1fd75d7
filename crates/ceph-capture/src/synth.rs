// SPDX-License-Identifier: LGPL-3.0-or-later
//! Writing pcap files from byte streams: each connection becomes a SYN, a SYN-ACK and data segments carrying the
//! two directions' bytes, as IPv4/TCP in a raw-IP pcap (link type 101) with valid IP and TCP checksums, so that
//! tcpdump/tshark read it as well as [`crate::Capture::parse`].
//!
//! Used to keep small fixtures: a trimmer reassembles a big capture, keeps some frames of each stream and writes
//! the kept bytes back out as a (much smaller) capture whose streams are still complete msgr2 streams.

use std::net::SocketAddrV4;

/// One connection to write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SynthConnection {
    pub client: SocketAddrV4,
    pub server: SocketAddrV4,
    /// Timestamp of the SYN (µs since the epoch); later packets of the connection follow 1 µs apart.
    pub start_us: u64,
    pub to_server: Vec<u8>,
    pub to_client: Vec<u8>,
}

/// Largest TCP payload per packet (an IPv4 packet's total length is 16 bits).
const MAX_SEGMENT: usize = 32 * 1024;
const LINKTYPE_RAW: u32 = 101;
const FLAG_SYN: u8 = 0x02;
const FLAG_PSH_ACK: u8 = 0x18;
const FLAG_ACK: u8 = 0x10;
/// Initial sequence numbers; fixed so that the output is deterministic.
const ISN_CLIENT: u32 = 0x1000_0000;
const ISN_SERVER: u32 = 0x2000_0000;

/// A little-endian µs pcap holding `conns`, one after the other.
pub fn write_pcap(conns: &[SynthConnection]) -> Vec<u8> {
    let mut f = Vec::new();
    f.extend_from_slice(&0xa1b2_c3d4u32.to_le_bytes());
    f.extend_from_slice(&2u16.to_le_bytes());
    f.extend_from_slice(&4u16.to_le_bytes());
    f.extend_from_slice(&[0; 8]); // thiszone, sigfigs
    f.extend_from_slice(&262_144u32.to_le_bytes()); // snaplen
    f.extend_from_slice(&LINKTYPE_RAW.to_le_bytes());
    for c in conns {
        let mut ts = c.start_us;
        let mut put = |f: &mut Vec<u8>,
                       src: SocketAddrV4,
                       dst: SocketAddrV4,
                       seq: u32,
                       ack: u32,
                       flags: u8,
                       d: &[u8]| {
            let pkt = ipv4_tcp(src, dst, seq, ack, flags, d);
            // u32 seconds in the pcap format: fine until 2106.
            f.extend_from_slice(&((ts / 1_000_000) as u32).to_le_bytes());
            f.extend_from_slice(&((ts % 1_000_000) as u32).to_le_bytes());
            let len = u32::try_from(pkt.len()).unwrap_or(u32::MAX);
            f.extend_from_slice(&len.to_le_bytes());
            f.extend_from_slice(&len.to_le_bytes());
            f.extend_from_slice(&pkt);
            ts += 1;
        };
        put(&mut f, c.client, c.server, ISN_CLIENT, 0, FLAG_SYN, &[]);
        put(
            &mut f,
            c.server,
            c.client,
            ISN_SERVER,
            ISN_CLIENT.wrapping_add(1),
            FLAG_SYN | FLAG_ACK,
            &[],
        );
        let (mut seq_c, mut seq_s) = (ISN_CLIENT.wrapping_add(1), ISN_SERVER.wrapping_add(1));
        // Client bytes first, then server bytes: each direction is reassembled on its own, so the interleaving
        // of the original connection does not matter to readers of streams.
        for chunk in c.to_server.chunks(MAX_SEGMENT) {
            put(&mut f, c.client, c.server, seq_c, seq_s, FLAG_PSH_ACK, chunk);
            seq_c = seq_c.wrapping_add(chunk.len() as u32);
        }
        for chunk in c.to_client.chunks(MAX_SEGMENT) {
            put(&mut f, c.server, c.client, seq_s, seq_c, FLAG_PSH_ACK, chunk);
            seq_s = seq_s.wrapping_add(chunk.len() as u32);
        }
    }
    f
}

fn ipv4_tcp(src: SocketAddrV4, dst: SocketAddrV4, seq: u32, ack: u32, flags: u8, data: &[u8]) -> Vec<u8> {
    let total = 40 + data.len();
    debug_assert!(total <= usize::from(u16::MAX));
    let mut p = Vec::with_capacity(total);
    p.extend_from_slice(&[0x45, 0]);
    p.extend_from_slice(&(total as u16).to_be_bytes());
    p.extend_from_slice(&[0, 0, 0x40, 0, 64, 6, 0, 0]); // id 0, DF, ttl 64, TCP, checksum below
    p.extend_from_slice(&src.ip().octets());
    p.extend_from_slice(&dst.ip().octets());
    let ip_sum = checksum(&[&p[..20]]);
    p[10..12].copy_from_slice(&ip_sum.to_be_bytes());
    let mut tcp = Vec::with_capacity(20);
    tcp.extend_from_slice(&src.port().to_be_bytes());
    tcp.extend_from_slice(&dst.port().to_be_bytes());
    tcp.extend_from_slice(&seq.to_be_bytes());
    tcp.extend_from_slice(&ack.to_be_bytes());
    tcp.extend_from_slice(&[0x50, flags, 0xff, 0xff, 0, 0, 0, 0]); // 20-byte header, window, checksum, urg
    let mut pseudo = Vec::with_capacity(12);
    pseudo.extend_from_slice(&src.ip().octets());
    pseudo.extend_from_slice(&dst.ip().octets());
    pseudo.extend_from_slice(&[0, 6]);
    pseudo.extend_from_slice(&((20 + data.len()) as u16).to_be_bytes());
    let tcp_sum = checksum(&[&pseudo, &tcp, data]);
    tcp[16..18].copy_from_slice(&tcp_sum.to_be_bytes());
    p.extend_from_slice(&tcp);
    p.extend_from_slice(data);
    p
}

/// The Internet checksum (RFC 1071) over the concatenation of `parts` (each part but the last has even length).
fn checksum(parts: &[&[u8]]) -> u16 {
    let mut sum: u32 = 0;
    for part in parts {
        for w in part.chunks(2) {
            let hi = u32::from(w[0]) << 8;
            let lo = w.get(1).map_or(0, |&b| u32::from(b));
            sum += hi | lo;
            sum = (sum & 0xffff) + (sum >> 16);
        }
    }
    !(sum as u16)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Capture;

    #[test]
    fn written_streams_reassemble_to_the_same_bytes() {
        let big: Vec<u8> = (0..100_000u32).map(|i| (i * 7) as u8).collect();
        let conns = vec![
            SynthConnection {
                client: "127.0.0.1:50000"
                    .parse()
                    .unwrap_or(SocketAddrV4::new([0; 4].into(), 0)),
                server: "127.0.0.1:6800"
                    .parse()
                    .unwrap_or(SocketAddrV4::new([0; 4].into(), 0)),
                start_us: 1_700_000_000_000_000,
                to_server: big.clone(),
                to_client: b"reply".to_vec(),
            },
            SynthConnection {
                client: "127.0.0.1:50001"
                    .parse()
                    .unwrap_or(SocketAddrV4::new([0; 4].into(), 0)),
                server: "127.0.0.1:3300"
                    .parse()
                    .unwrap_or(SocketAddrV4::new([0; 4].into(), 0)),
                start_us: 1_700_000_000_000_100,
                to_server: Vec::new(),
                to_client: b"x".to_vec(),
            },
        ];
        let cap = Capture::parse(&write_pcap(&conns)).unwrap_or_default();
        let got: Vec<_> = cap
            .connections()
            .iter()
            .map(|c| {
                (
                    c.server.port(),
                    c.to_server.bytes().to_vec(),
                    c.to_client.bytes().to_vec(),
                )
            })
            .collect();
        assert_eq!(
            got,
            [(6800, big, b"reply".to_vec()), (3300, Vec::new(), b"x".to_vec())]
        );
        assert!(
            cap.connections()
                .iter()
                .all(|c| !c.to_server.has_gap() && !c.to_client.has_gap())
        );
    }

    #[test]
    fn checksums_verify() {
        // A header with its checksum filled in sums to 0xffff (checksum of it is zero).
        let p = ipv4_tcp(
            "127.0.0.1:1"
                .parse()
                .unwrap_or(SocketAddrV4::new([0; 4].into(), 0)),
            "127.0.0.1:2"
                .parse()
                .unwrap_or(SocketAddrV4::new([0; 4].into(), 0)),
            5,
            6,
            FLAG_ACK,
            b"odd",
        );
        assert_eq!(checksum(&[&p[..20]]), 0);
        let mut pseudo = vec![127, 0, 0, 1, 127, 0, 0, 1, 0, 6];
        pseudo.extend_from_slice(&23u16.to_be_bytes());
        assert_eq!(checksum(&[&pseudo, &p[20..]]), 0);
    }
}
