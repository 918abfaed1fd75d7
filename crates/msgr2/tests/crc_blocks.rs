// SPDX-License-Identifier: LGPL-3.0-or-later
//! One crc pass per received byte: a data segment is checked page by page, the segment crc derived from the
//! page crcs, and the page crcs stay attached to the received data (`ceph_crc::blocks`) for the store and for
//! resends. A corrupted byte anywhere in the segment must still fail the frame.
#![allow(clippy::unwrap_used)] // test code: a panic is the failure report

mod common;

use common::{ready_pair, received, wire_of};
use std::time::Instant;

use bytes::Bytes;
use msgr2::auth::CON_MODE_CRC;
use msgr2::{Connection, Message};

const PAGE: usize = 4096;

/// A ready crc-mode pair whose OSD side receives segments of 16 KiB and more into sinks.
fn sink_pair(now: Instant) -> (Connection, Connection) {
    let (c, mut s) = ready_pair(CON_MODE_CRC, now);
    s.set_direct_rx(Some(16 << 10));
    (c, s)
}

/// Feed `wire` as the reactor does (sinks when offered, 64 KiB stream receives otherwise); the first error.
fn feed(s: &mut Connection, now: Instant, wire: &[u8]) -> Result<(), String> {
    let mut at = 0;
    while at < wire.len() {
        if let Some(mut sink) = s.take_rx_sink() {
            let k = sink.remaining().min(wire.len() - at);
            sink.buf_mut().extend_from_slice(&wire[at..at + k]);
            at += k;
            s.handle_rx_sink(now, sink, k).map_err(|e| format!("{e:?}"))?;
            continue;
        }
        let k = 65536
            .min(s.rx_stream_limit().unwrap_or(usize::MAX))
            .min(wire.len() - at);
        s.handle_input_bytes(now, Bytes::copy_from_slice(&wire[at..at + k]))
            .map_err(|e| format!("{e:?}"))?;
        at += k;
    }
    Ok(())
}

/// The standard CRC-32C (what ferrostore stores per block).
fn std_crc(b: &[u8]) -> u32 {
    !ceph_crc::ceph_crc32c(u32::MAX, b)
}

fn data_of(len: usize, seed: u32) -> Bytes {
    (0..len as u32)
        .map(|j| (j.wrapping_mul(2_654_435_761).wrapping_add(seed) >> 13) as u8)
        .collect::<Vec<u8>>()
        .into()
}

/// (wire of one MESSAGE with `data` at `data_off`, where the data segment starts in the wire).
fn one_message(c: &mut Connection, data: &Bytes, data_off: u16) -> (Bytes, usize) {
    let mut m = Message::new(90, 1, 1, Bytes::from_static(b"front")).with_data(data.clone());
    m.data_off = data_off;
    c.send(m).unwrap();
    let wire = wire_of(c);
    // crc mode: the data segment is the last one, right before the 13-byte epilogue
    let start = wire.len() - 13 - data.len();
    assert_eq!(&wire[start..start + data.len()], &data[..]);
    (wire, start)
}

#[test]
fn received_data_carries_the_crc_of_every_whole_block() {
    let now = Instant::now();
    let (mut c, mut s) = sink_pair(now);
    for (len, off) in [(65536usize, 0u16), (70_000, 1000), (4 << 20, 512), (20_000, 4095)] {
        let data = data_of(len, len as u32);
        let (wire, _) = one_message(&mut c, &data, off);
        feed(&mut s, now, &wire).unwrap();
        let got = received(&mut s);
        assert_eq!(got.len(), 1);
        let m = &got[0];
        assert_eq!(m.data, data);
        assert_eq!(m.data.as_ptr() as usize % PAGE, usize::from(off) % PAGE);
        // every whole block of the object (data_off is the object offset) has its crc attached
        let pc = ceph_crc::blocks::page_crcs(&m.data).expect("page crcs attached");
        let head = (PAGE - usize::from(off) % PAGE) % PAGE;
        let mut blocks = 0;
        for blk in m.data[head.min(len)..].chunks_exact(PAGE) {
            assert_eq!(pc.get(blk), Some(std_crc(blk)));
            blocks += 1;
        }
        assert_eq!(blocks, (len - head) / PAGE);
        // a slice (as a decoded op's payload is) still finds them
        let op_data = m.data.slice(head..head + PAGE);
        let pc2 = ceph_crc::blocks::page_crcs(&op_data).unwrap();
        assert_eq!(pc2.get(&op_data), Some(std_crc(&op_data)));
        // the segment crc from attached pages is Ceph's segment crc
        assert_eq!(
            ceph_crc::blocks::ceph_segment_crc(&m.data),
            ceph_crc::ceph_crc32c(u32::MAX, &data)
        );
    }
}

#[test]
fn a_flipped_byte_in_a_sink_received_segment_fails_the_frame() {
    let now = Instant::now();
    let len = 3 * PAGE + 1234;
    let data = data_of(len, 7);
    // in the partial head page, in a whole page, in the partial tail, first and last byte
    for (k, pos) in [100usize, PAGE + 17, len - 5, 0, len - 1].into_iter().enumerate() {
        let (mut c, mut s) = sink_pair(now);
        let (wire, start) = one_message(&mut c, &data, 1000);
        let mut bad = wire.to_vec();
        bad[start + pos] ^= 0x20;
        let before = ceph_crc::blocks::live_attachments();
        let r = feed(&mut s, now, &bad);
        let err = r.expect_err(&format!("case {k}: a corrupted data byte at {pos} was accepted"));
        assert!(
            err.contains("SegmentCrc") || err.contains("crc"),
            "case {k}: {err}"
        );
        assert!(received(&mut s).is_empty(), "case {k}: a message came out");
        // the rejected segment's page crcs are gone with it (other tests may attach meanwhile: not more)
        assert!(ceph_crc::blocks::live_attachments() <= before + 1);
        // the intact wire goes through
        let (mut c, mut s) = sink_pair(now);
        let (wire, _) = one_message(&mut c, &data, 1000);
        feed(&mut s, now, &wire).unwrap();
        assert_eq!(received(&mut s).len(), 1);
    }
}

/// Forwarding received data (a primary's rep ops carry the client's buffer, as a rope piece) sends the same
/// bytes as sending a copy: the segment crc combined from attached pages is the one a full pass gives.
#[test]
fn resending_received_data_puts_the_same_crc_on_the_wire() {
    let now = Instant::now();
    let (mut c, mut s) = sink_pair(now);
    let data = data_of(5 * PAGE + 300, 3);
    let (wire, _) = one_message(&mut c, &data, 700);
    feed(&mut s, now, &wire).unwrap();
    let got = received(&mut s).pop().unwrap();
    assert!(ceph_crc::blocks::page_crcs(&got.data).is_some());
    // two identical fresh connections: one sends the received (attached) data, the other a plain copy
    let (mut a1, mut b1) = sink_pair(now);
    let (mut a2, mut b2) = sink_pair(now);
    let head = Bytes::from(vec![9u8; 100]);
    let mut m1 = Message::new(91, 1, 1, Bytes::from_static(b"f"));
    m1.data = head.clone();
    m1.data_tail = vec![got.data.slice(..PAGE + 5), got.data.slice(PAGE + 5..)];
    let mut m2 = Message::new(91, 1, 1, Bytes::from_static(b"f"));
    let mut flat = head.to_vec();
    flat.extend_from_slice(&data);
    m2.data = Bytes::from(flat);
    a1.send(m1).unwrap();
    a2.send(m2).unwrap();
    let (w1, w2) = (wire_of(&mut a1), wire_of(&mut a2));
    assert_eq!(w1, w2);
    feed(&mut b1, now, &w1).unwrap();
    feed(&mut b2, now, &w2).unwrap();
    assert_eq!(received(&mut b1).len(), 1);
    assert_eq!(received(&mut b2).len(), 1);
}
