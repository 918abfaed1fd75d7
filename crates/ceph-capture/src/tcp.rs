// SPDX-License-Identifier: LGPL-3.0-or-later
//! TCP reassembly: segments are grouped per connection (a SYN opens a new one, so a reused 4-tuple starts over),
//! ordered by sequence number relative to the ISN, deduplicated (retransmissions, overlaps) and cut at the first
//! gap. Each direction keeps, for every piece, the timestamp of the packet it was taken from (taken in sequence order:
//! a retransmission contributes only bytes not already taken).

use std::collections::HashMap;
use std::net::SocketAddr;

use crate::pcap::{Packet, TCP_ACK, TCP_SYN};

/// One direction of one TCP connection, reassembled.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Stream {
    data: Vec<u8>,
    /// `(offset in data, ts_us)` where each packet's new bytes begin, ascending offsets.
    marks: Vec<(usize, u64)>,
    start_us: u64,
    gap: bool,
}

impl std::fmt::Debug for Stream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Stream")
            .field("len", &self.data.len())
            .field("packets", &self.marks.len())
            .field("start_us", &self.start_us)
            .field("gap", &self.gap)
            .finish()
    }
}

impl Stream {
    /// The bytes in order, up to the first gap.
    pub fn bytes(&self) -> &[u8] {
        &self.data
    }

    /// Whether bytes are missing (the capture lost a packet); [`Stream::bytes`] stops before them.
    pub fn has_gap(&self) -> bool {
        self.gap
    }

    /// When this direction's SYN (or SYN-ACK) was captured, µs since the epoch.
    pub fn start_us(&self) -> u64 {
        self.start_us
    }

    /// The stream as `(ts_us, bytes)` pieces, one per packet that carried new bytes, in order.
    pub fn chunks(&self) -> impl Iterator<Item = (u64, &[u8])> {
        self.chunks_from(0)
    }

    /// Like [`Stream::chunks`], starting at byte `offset` (e.g. after the msgr2 banner).
    pub fn chunks_from(&self, offset: usize) -> impl Iterator<Item = (u64, &[u8])> {
        let first = self
            .marks
            .partition_point(|&(o, _)| o <= offset)
            .saturating_sub(1);
        self.marks[first.min(self.marks.len())..]
            .iter()
            .enumerate()
            .filter_map(move |(i, &(o, ts))| {
                let end = self.marks.get(first + i + 1).map_or(self.data.len(), |&(e, _)| e);
                let start = o.max(offset);
                (start < end).then(|| (ts, &self.data[start..end]))
            })
    }

    /// The timestamp of the packet that carried byte `offset`.
    pub fn time_at(&self, offset: usize) -> Option<u64> {
        if offset >= self.data.len() {
            return None;
        }
        let i = self.marks.partition_point(|&(o, _)| o <= offset).checked_sub(1)?;
        Some(self.marks[i].1)
    }
}

/// One TCP connection: who opened it and both directions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Connection {
    /// The side that sent the SYN.
    pub client: SocketAddr,
    /// The side that accepted.
    pub server: SocketAddr,
    pub to_server: Stream,
    pub to_client: Stream,
}

/// Collects one direction's segments until the capture ends.
#[derive(Default)]
struct Builder {
    /// Sequence number of the first data byte (ISN + 1); `None` until the SYN (SYN-ACK) is seen.
    base: Option<u32>,
    start_us: u64,
    segments: Vec<(u32, u64, Vec<u8>)>,
}

impl Builder {
    fn open(seq: u32, ts_us: u64) -> Self {
        Builder {
            base: Some(seq.wrapping_add(1)),
            start_us: ts_us,
            segments: Vec::new(),
        }
    }

    fn finish(self) -> Stream {
        let Some(base) = self.base else {
            return Stream::default();
        };
        // Offsets relative to the first byte; a stream is far below 4 GiB, so wrapping subtraction orders them.
        let mut segs: Vec<(u64, u64, Vec<u8>)> = self
            .segments
            .into_iter()
            .map(|(seq, ts, d)| (u64::from(seq.wrapping_sub(base)), ts, d))
            .collect();
        // Stable: among equal offsets, the earlier packet wins (the original, not the retransmission).
        segs.sort_by_key(|s| s.0);
        let mut s = Stream {
            start_us: self.start_us,
            ..Default::default()
        };
        for (rel, ts, d) in segs {
            let have = s.data.len() as u64;
            let end = rel + d.len() as u64;
            if end <= have {
                continue; // nothing new
            }
            if rel > have {
                s.gap = true;
                break;
            }
            s.marks.push((s.data.len(), ts));
            s.data.extend_from_slice(&d[(have - rel) as usize..]);
        }
        s
    }
}

/// Group TCP packets into connections (in the order of their SYNs) and reassemble both directions. Data of
/// connections whose SYN is not in the capture is dropped.
pub fn reassemble(packets: &[Packet]) -> Vec<Connection> {
    struct Open {
        client: SocketAddr,
        server: SocketAddr,
        up: Builder,
        down: Builder,
    }
    let mut conns: Vec<Open> = Vec::new();
    // (client, server) → the newest connection on that 4-tuple.
    let mut current: HashMap<(SocketAddr, SocketAddr), usize> = HashMap::new();
    for p in packets {
        let syn = p.flags & TCP_SYN != 0;
        let ack = p.flags & TCP_ACK != 0;
        if syn && !ack {
            let key = (p.src, p.dst);
            // A retransmitted SYN (same ISN) belongs to the connection it already opened.
            if let Some(&i) = current.get(&key)
                && conns[i].up.base == Some(p.seq.wrapping_add(1))
            {
                continue;
            }
            conns.push(Open {
                client: p.src,
                server: p.dst,
                up: Builder::open(p.seq, p.ts_us),
                down: Builder::default(),
            });
            current.insert(key, conns.len() - 1);
            continue;
        }
        if syn {
            // SYN-ACK: the server's ISN.
            if let Some(&i) = current.get(&(p.dst, p.src))
                && conns[i].down.base.is_none()
            {
                conns[i].down = Builder::open(p.seq, p.ts_us);
            }
            continue;
        }
        if p.payload.is_empty() {
            continue;
        }
        let seg = (p.seq, p.ts_us, p.payload.clone());
        if let Some(&i) = current.get(&(p.src, p.dst)) {
            conns[i].up.segments.push(seg);
        } else if let Some(&i) = current.get(&(p.dst, p.src)) {
            conns[i].down.segments.push(seg);
        }
    }
    conns
        .into_iter()
        .map(|c| Connection {
            client: c.client,
            server: c.server,
            to_server: c.up.finish(),
            to_client: c.down.finish(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pcap::{packets, tests::build};

    const C: ([u8; 4], u16) = ([127, 0, 0, 1], 50000);
    const S: ([u8; 4], u16) = ([127, 0, 0, 1], 3300);

    #[test]
    fn reorders_dedups_and_stamps() {
        let isn_c = u32::MAX - 2; // the sequence space wraps inside the stream
        let f = build(&[
            (10, C, S, isn_c, TCP_SYN, b""),
            (11, S, C, 1000, TCP_SYN | TCP_ACK, b""),
            (13, C, S, isn_c.wrapping_add(4), TCP_ACK, b"defg"), // out of order
            (12, C, S, isn_c.wrapping_add(1), TCP_ACK, b"abc"),
            (14, C, S, isn_c.wrapping_add(1), TCP_ACK, b"abcde"), // retransmission overlapping new bytes
            (15, C, S, isn_c.wrapping_add(8), TCP_ACK, b"h"),
            (16, S, C, 1001, TCP_ACK, b"hello"),
            (17, S, C, 1010, TCP_ACK, b"lost"), // after a gap
        ]);
        let conns = reassemble(&packets(&f).unwrap_or_default());
        assert_eq!(conns.len(), 1);
        let c = &conns[0];
        assert_eq!(c.server.port(), 3300);
        assert_eq!(c.to_server.bytes(), b"abcdefgh");
        assert!(!c.to_server.has_gap());
        // Each piece carries the timestamp of the packet it was taken from, in sequence order: the
        // retransmission (t 14) adds "de", the out-of-order packet (t 13) only what is new after that.
        let chunks: Vec<(u64, &[u8])> = c.to_server.chunks().collect();
        assert_eq!(chunks, [(12, &b"abc"[..]), (14, b"de"), (13, b"fg"), (15, b"h")]);
        assert_eq!(c.to_server.time_at(0), Some(12));
        assert_eq!(c.to_server.time_at(4), Some(14));
        assert_eq!(c.to_server.time_at(7), Some(15));
        assert_eq!(c.to_server.time_at(8), None);
        let from: Vec<u8> = c.to_server.chunks_from(5).flat_map(|(_, d)| d.to_vec()).collect();
        assert_eq!(from, b"fgh");
        assert_eq!(
            (c.to_client.bytes(), c.to_client.has_gap()),
            (&b"hello"[..], true)
        );
        assert_eq!((c.to_server.start_us(), c.to_client.start_us()), (10, 11));
    }

    #[test]
    fn a_new_syn_on_the_same_tuple_is_a_new_connection() {
        let f = build(&[
            (1, C, S, 100, TCP_SYN, b""),
            (2, S, C, 500, TCP_SYN | TCP_ACK, b""),
            (3, C, S, 101, TCP_ACK, b"one"),
            (4, C, S, 100, TCP_SYN, b""), // retransmitted SYN: same connection
            (5, C, S, 9000, TCP_SYN, b""),
            (6, S, C, 700, TCP_SYN | TCP_ACK, b""),
            (7, C, S, 9001, TCP_ACK, b"two"),
            (8, S, C, 701, TCP_ACK, b"back"),
        ]);
        let conns = reassemble(&packets(&f).unwrap_or_default());
        let got: Vec<(&[u8], &[u8])> = conns
            .iter()
            .map(|c| (c.to_server.bytes(), c.to_client.bytes()))
            .collect();
        assert_eq!(got, [(&b"one"[..], &b""[..]), (&b"two"[..], &b"back"[..])]);
    }
}
