// SPDX-License-Identifier: LGPL-3.0-or-later
//! Classic pcap files down to TCP segments: link layer (Ethernet, Linux cooked v1/v2, BSD loopback, raw IP), IPv4
//! or IPv6, TCP. Everything else is skipped; nothing here panics on malformed input.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum PcapError {
    #[error("not a pcap file (magic {0:02x?}); pcapng is not supported: convert with `editcap -F pcap`")]
    BadMagic([u8; 4]),
    #[error("pcap header truncated")]
    Truncated,
    #[error("unsupported pcap link type {0}")]
    LinkType(u32),
}

/// One TCP segment as captured.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Packet {
    /// Capture time, microseconds since the Unix epoch.
    pub ts_us: u64,
    pub src: SocketAddr,
    pub dst: SocketAddr,
    pub seq: u32,
    /// TCP flags byte (FIN 0x01, SYN 0x02, RST 0x04, ACK 0x10).
    pub flags: u8,
    pub payload: Vec<u8>,
}

pub const TCP_SYN: u8 = 0x02;
pub const TCP_ACK: u8 = 0x10;

fn u16_be(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_be_bytes(b.get(at..at + 2)?.try_into().ok()?))
}

/// Every TCP packet of a pcap file, in capture order.
pub fn packets(file: &[u8]) -> Result<Vec<Packet>, PcapError> {
    let header = file.get(..24).ok_or(PcapError::Truncated)?;
    let magic: [u8; 4] = [header[0], header[1], header[2], header[3]];
    // a1b2c3d4: µs timestamps, a1b23c4d: ns; written in the byte order of the capturing machine.
    let (big_endian, nanos) = match magic {
        [0xd4, 0xc3, 0xb2, 0xa1] => (false, false),
        [0x4d, 0x3c, 0xb2, 0xa1] => (false, true),
        [0xa1, 0xb2, 0xc3, 0xd4] => (true, false),
        [0xa1, 0xb2, 0x3c, 0x4d] => (true, true),
        m => return Err(PcapError::BadMagic(m)),
    };
    let u32_at = |b: &[u8], at: usize| -> Option<u32> {
        let w: [u8; 4] = b.get(at..at + 4)?.try_into().ok()?;
        Some(if big_endian {
            u32::from_be_bytes(w)
        } else {
            u32::from_le_bytes(w)
        })
    };
    let linktype = u32_at(header, 20).ok_or(PcapError::Truncated)?;
    let mut out = Vec::new();
    let mut at = 24;
    while let (Some(sec), Some(frac), Some(incl)) =
        (u32_at(file, at), u32_at(file, at + 4), u32_at(file, at + 8))
    {
        let start = at + 16;
        let end = start.saturating_add(incl as usize).min(file.len());
        let Some(frame) = file.get(start..end) else {
            break;
        };
        at = end;
        let sub_us = if nanos { frac / 1000 } else { frac };
        let ts_us = u64::from(sec) * 1_000_000 + u64::from(sub_us);
        if let Some(ip) = network_layer(linktype, frame)?
            && let Some(p) = tcp_packet(ts_us, ip)
        {
            out.push(p);
        }
    }
    Ok(out)
}

/// The IP packet inside a link-layer frame; `Ok(None)` for non-IP frames.
fn network_layer(linktype: u32, frame: &[u8]) -> Result<Option<&[u8]>, PcapError> {
    let ip = match linktype {
        // Ethernet: ethertype at 12 (0x0800 IPv4, 0x86dd IPv6).
        1 => match u16_be(frame, 12) {
            Some(0x0800 | 0x86dd) => frame.get(14..),
            _ => None,
        },
        // BSD loopback: a 4-byte address family in host order; the IP version nibble tells us enough.
        0 | 108 => frame.get(4..),
        // Raw IP.
        12 | 14 | 101 => Some(frame),
        // Linux cooked v1 (protocol at 14) and v2 (protocol at 0).
        113 => match u16_be(frame, 14) {
            Some(0x0800 | 0x86dd) => frame.get(16..),
            _ => None,
        },
        276 => match u16_be(frame, 0) {
            Some(0x0800 | 0x86dd) => frame.get(20..),
            _ => None,
        },
        t => return Err(PcapError::LinkType(t)),
    };
    Ok(ip)
}

fn tcp_packet(ts_us: u64, ip: &[u8]) -> Option<Packet> {
    let (src, dst, tcp) = match ip.first()? >> 4 {
        4 => {
            let ihl = usize::from(ip[0] & 0x0f) * 4;
            if *ip.get(9)? != 6 || ihl < 20 {
                return None;
            }
            // The total length drops Ethernet padding; a truncated capture keeps what it has.
            let total = usize::from(u16_be(ip, 2)?).min(ip.len());
            let s: [u8; 4] = ip.get(12..16)?.try_into().ok()?;
            let d: [u8; 4] = ip.get(16..20)?.try_into().ok()?;
            (
                IpAddr::V4(Ipv4Addr::from(s)),
                IpAddr::V4(Ipv4Addr::from(d)),
                ip.get(ihl..total)?,
            )
        }
        6 => {
            // No extension headers on the loopback traffic we capture: next header must be TCP directly.
            if *ip.get(6)? != 6 {
                return None;
            }
            let total = (40 + usize::from(u16_be(ip, 4)?)).min(ip.len());
            let s: [u8; 16] = ip.get(8..24)?.try_into().ok()?;
            let d: [u8; 16] = ip.get(24..40)?.try_into().ok()?;
            (
                IpAddr::V6(Ipv6Addr::from(s)),
                IpAddr::V6(Ipv6Addr::from(d)),
                ip.get(40..total)?,
            )
        }
        _ => return None,
    };
    let sport = u16_be(tcp, 0)?;
    let dport = u16_be(tcp, 2)?;
    let seq = u32::from_be_bytes(tcp.get(4..8)?.try_into().ok()?);
    let doff = usize::from(tcp.get(12)? >> 4) * 4;
    let flags = *tcp.get(13)?;
    Some(Packet {
        ts_us,
        src: SocketAddr::new(src, sport),
        dst: SocketAddr::new(dst, dport),
        seq,
        flags,
        payload: tcp.get(doff.max(20)..)?.to_vec(),
    })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) type Endpoint = ([u8; 4], u16);
    /// `(ts_us, src, dst, seq, flags, data)`
    pub(crate) type Spec<'a> = (u64, Endpoint, Endpoint, u32, u8, &'a [u8]);

    /// A little-endian µs pcap with Ethernet framing around IPv4/TCP packets.
    pub(crate) fn build(packets: &[Spec<'_>]) -> Vec<u8> {
        let mut f = vec![0xd4, 0xc3, 0xb2, 0xa1, 2, 0, 4, 0];
        f.extend_from_slice(&[0; 8]);
        f.extend_from_slice(&65535u32.to_le_bytes());
        f.extend_from_slice(&1u32.to_le_bytes());
        for (ts, (sip, sport), (dip, dport), seq, flags, data) in packets {
            let mut ip = vec![0x45, 0, 0, 0, 0, 0, 0, 0, 64, 6, 0, 0];
            ip.extend_from_slice(sip);
            ip.extend_from_slice(dip);
            ip.extend_from_slice(&sport.to_be_bytes());
            ip.extend_from_slice(&dport.to_be_bytes());
            ip.extend_from_slice(&seq.to_be_bytes());
            ip.extend_from_slice(&[0, 0, 0, 0, 0x50, *flags, 0xff, 0xff, 0, 0, 0, 0]);
            ip.extend_from_slice(data);
            let total = ip.len() as u16;
            ip[2..4].copy_from_slice(&total.to_be_bytes());
            let mut frame = vec![0; 12];
            frame.extend_from_slice(&[0x08, 0x00]);
            frame.extend_from_slice(&ip);
            f.extend_from_slice(&((ts / 1_000_000) as u32).to_le_bytes());
            f.extend_from_slice(&((ts % 1_000_000) as u32).to_le_bytes());
            f.extend_from_slice(&(frame.len() as u32).to_le_bytes());
            f.extend_from_slice(&(frame.len() as u32).to_le_bytes());
            f.extend_from_slice(&frame);
        }
        f
    }

    #[test]
    fn reads_ethernet_ipv4_tcp() {
        let f = build(&[(
            1_500_000,
            ([127, 0, 0, 1], 4000),
            ([127, 0, 0, 2], 3300),
            7,
            0x18,
            b"abc",
        )]);
        let p = packets(&f).unwrap_or_default();
        assert_eq!(p.len(), 1);
        assert_eq!(p[0].ts_us, 1_500_000);
        assert_eq!(p[0].src, "127.0.0.1:4000".parse().unwrap_or(p[0].dst));
        assert_eq!(p[0].dst.port(), 3300);
        assert_eq!((p[0].seq, p[0].flags), (7, 0x18));
        assert_eq!(p[0].payload, b"abc");
    }

    #[test]
    fn rejects_pcapng_and_truncation() {
        assert!(matches!(
            packets(&[
                0x0a, 0x0d, 0x0d, 0x0a, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0
            ]),
            Err(PcapError::BadMagic(_))
        ));
        assert_eq!(packets(&[0xd4, 0xc3]), Err(PcapError::Truncated));
    }

    proptest::proptest! {
        /// Arbitrary bytes after a valid header never panic, and every cut of a valid file parses.
        #[test]
        fn hostile_input_does_not_panic(tail in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..400),
                                        cut in 0usize..200) {
            let mut f = build(&[(1, ([1, 2, 3, 4], 1), ([5, 6, 7, 8], 2), 1, 0x02, b"")]);
            let _ = packets(&f[..cut.min(f.len())]);
            f.truncate(24);
            f.extend_from_slice(&tail);
            let _ = packets(&f);
        }
    }
}
