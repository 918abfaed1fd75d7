// SPDX-License-Identifier: LGPL-3.0-or-later
//! Zero-copy receive: `Connection::handle_input_bytes` hands MESSAGE segments out as slices of the received
//! buffers in crc mode, and decodes exactly what the copying `handle_input` path decodes under any chunking.
#![allow(clippy::unwrap_used)] // test code: a panic is the failure report

mod common;

use common::{ready_pair, received, wire_of};
use std::time::Instant;

use bytes::{Bytes, BytesMut};
use msgr2::auth::{CON_MODE_CRC, CON_MODE_SECURE};
use msgr2::{Connection, Message};
use proptest::prelude::*;

fn range_of(b: &[u8]) -> std::ops::Range<usize> {
    let p = b.as_ptr() as usize;
    p..p + b.len()
}

fn inside(part: &[u8], whole: &[u8]) -> bool {
    let (p, w) = (range_of(part), range_of(whole));
    p.start >= w.start && p.end <= w.end
}

#[test]
fn crc_data_inside_one_buffer_is_not_copied() {
    let now = Instant::now();
    let (mut c, mut s) = ready_pair(CON_MODE_CRC, now);
    let data: Bytes = (0..65536u32)
        .map(|i| (i * 7 + 3) as u8)
        .collect::<Vec<u8>>()
        .into();
    let m = Message::new(42, 1, 1, Bytes::from_static(b"front bytes")).with_data(data.clone());
    c.send(m).unwrap();
    let wire = wire_of(&mut c);
    s.handle_input_bytes(now, wire.clone()).unwrap();
    let got = received(&mut s);
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].data, data);
    assert_eq!(&got[0].front[..], b"front bytes");
    // The same memory the "kernel" filled: no copy by msgr2.
    assert!(inside(&got[0].data, &wire), "data segment was copied");
    assert!(inside(&got[0].front, &wire), "front segment was copied");
    // And the exact spot: the data bytes are where they sit on the wire.
    let at = range_of(&got[0].data).start - range_of(&wire).start;
    assert_eq!(&wire[at..at + data.len()], &data[..]);

    // Split the next frame inside its data segment: that segment is assembled once (a new buffer), the front
    // (wholly inside the first buffer) is still a slice.
    let m = Message::new(43, 1, 1, Bytes::from_static(b"second front")).with_data(data.clone());
    c.send(m).unwrap();
    let wire = wire_of(&mut c);
    let cut = wire.len() - 1000;
    let (a, b) = (wire.slice(..cut), wire.slice(cut..));
    s.handle_input_bytes(now, a.clone()).unwrap();
    s.handle_input_bytes(now, b.clone()).unwrap();
    let got = received(&mut s);
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].data, data);
    assert_eq!(got[0].msg_type, 43);
    assert!(
        inside(&got[0].front, &a),
        "front inside the first buffer was copied"
    );
    assert!(!inside(&got[0].data, &a) && !inside(&got[0].data, &b));
}

#[test]
fn secure_mode_decodes_through_the_new_path() {
    let now = Instant::now();
    let (mut c, mut s) = ready_pair(CON_MODE_SECURE, now);
    for (i, (front_len, data_len)) in [(5usize, 0usize), (40, 7), (48, 100), (49, 4096), (300, 65536)]
        .into_iter()
        .enumerate()
    {
        let front: Bytes = vec![i as u8 + 1; front_len].into();
        let data: Bytes = (0..data_len).map(|j| (j % 251) as u8).collect::<Vec<u8>>().into();
        let mut m = Message::new(50 + i as u16, 1, 1, front.clone()).with_data(data.clone());
        m.middle = Bytes::from(vec![9u8; i * 3]);
        c.send(m).unwrap();
        let wire = wire_of(&mut c);
        // Byte by byte for the small ones, whole for the large one.
        if wire.len() < 4096 {
            for k in 0..wire.len() {
                s.handle_input_bytes(now, wire.slice(k..k + 1)).unwrap();
            }
        } else {
            s.handle_input_bytes(now, wire).unwrap();
        }
        let got = received(&mut s);
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].front, front);
        assert_eq!(got[0].middle.len(), i * 3);
        assert_eq!(got[0].data, data);
    }
}

/// Cut `wire` at the given (sorted, deduplicated) points.
fn chunks(wire: &Bytes, cuts: &[usize]) -> Vec<Bytes> {
    let mut pts: Vec<usize> = cuts.iter().map(|c| c % (wire.len() + 1)).collect();
    pts.push(0);
    pts.push(wire.len());
    pts.sort_unstable();
    pts.dedup();
    pts.windows(2).map(|w| wire.slice(w[0]..w[1])).collect()
}

/// A fresh session in `mode`: the server side, and the wire bytes of `msgs` (front, middle and data lengths;
/// patterned contents, tid = index) sent by the client.
fn patterned_pair(mode: u32, msgs: &[(usize, usize, usize)], now: Instant) -> (Connection, Bytes) {
    let (mut c, s) = ready_pair(mode, now);
    for (i, &(f, mid, d)) in msgs.iter().enumerate() {
        let mut m = Message::new(
            60,
            1,
            1,
            (0..f).map(|j| (j + i) as u8).collect::<Vec<u8>>().into(),
        );
        m.middle = (0..mid).map(|j| (j * 3 + i) as u8).collect::<Vec<u8>>().into();
        m.data = (0..d).map(|j| (j * 5 + i) as u8).collect::<Vec<u8>>().into();
        m.tid = i as u64;
        c.send(m).unwrap();
    }
    let wire = wire_of(&mut c);
    (s, wire)
}

/// Send `msgs` over a fresh session; feed the receiver the stream cut at `cuts`, through either API.
fn run(mode: u32, msgs: &[(usize, usize, usize)], cuts: &[usize], zero_copy: bool) -> Vec<Message> {
    let now = Instant::now();
    let (mut s, wire) = patterned_pair(mode, msgs, now);
    for ch in chunks(&wire, cuts) {
        if zero_copy {
            s.handle_input_bytes(now, ch).unwrap();
        } else {
            s.handle_input(now, &ch).unwrap();
        }
    }
    received(&mut s)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]
    #[test]
    fn same_messages_as_the_copying_path_under_any_chunking(
        secure in any::<bool>(),
        msgs in prop::collection::vec((0usize..200, 0usize..64, 0usize..9000), 1..6),
        cuts_a in prop::collection::vec(any::<usize>(), 0..40),
        cuts_b in prop::collection::vec(any::<usize>(), 0..40),
    ) {
        let mode = if secure { CON_MODE_SECURE } else { CON_MODE_CRC };
        let old = run(mode, &msgs, &cuts_a, false);
        let new = run(mode, &msgs, &cuts_b, true);
        prop_assert_eq!(old.len(), msgs.len());
        prop_assert_eq!(old, new);
    }
}

// ---------------------------------------------------------------------------------------------------------------
// Receive sinks: large segments straight into their own page-aligned buffer (what the reactor does with
// `CoreConfig::direct_rx_min`). The test plays the IO layer; its `extend_from_slice` into a sink or a stream
// buffer stands for the kernel's copy out of the socket — the one copy a payload byte may take.

/// A crc-mode pair whose server receives into sinks from `min` bytes, and the wire bytes of `msgs` sent by the
/// client.
fn patterned_to_sinks(msgs: &[(usize, usize, usize)], min: usize, now: Instant) -> (Connection, Bytes) {
    let (mut s, wire) = patterned_pair(CON_MODE_CRC, msgs, now);
    s.set_direct_rx(Some(min));
    (s, wire)
}

/// Feed `wire` the way the reactor does: into a sink when the connection offers one, else as a stream receive
/// of at most `stream` bytes (and at most the connection's stream limit). Returns the sinks' buffer addresses.
fn feed_like_reactor(s: &mut Connection, now: Instant, wire: &Bytes, stream: usize) -> Vec<usize> {
    let mut at = 0;
    let mut sink_bufs = Vec::new();
    while at < wire.len() {
        if let Some(mut sink) = s.take_rx_sink() {
            let k = sink.remaining().min(wire.len() - at);
            assert!(k > 0);
            let b = sink.buf_mut();
            if !sink_bufs.contains(&(b.as_ptr() as usize)) {
                sink_bufs.push(b.as_ptr() as usize);
            }
            b.extend_from_slice(&wire[at..at + k]); // the kernel's copy
            at += k;
            s.handle_rx_sink(now, sink, k).unwrap();
            continue;
        }
        let k = stream
            .min(s.rx_stream_limit().unwrap_or(usize::MAX))
            .min(wire.len() - at);
        assert!(k > 0);
        let mut b = BytesMut::with_capacity(stream);
        b.extend_from_slice(&wire[at..at + k]); // the kernel's copy
        at += k;
        s.handle_input_bytes(now, b.freeze()).unwrap();
    }
    sink_bufs
}

#[test]
fn large_data_segments_are_received_into_their_own_aligned_buffer() {
    let now = Instant::now();
    let (mut c, mut s) = ready_pair(CON_MODE_CRC, now);
    s.set_direct_rx(Some(16 << 10));
    let sizes = [1usize << 20, 65536, 4 << 20, 4096, 65536, 100_000];
    let mut sent = Vec::new();
    for (i, &len) in sizes.iter().enumerate() {
        let data: Bytes = (0..len).map(|j| (j * 13 + i) as u8).collect::<Vec<u8>>().into();
        let front = Bytes::from(vec![i as u8; 200 + i * 10]);
        let mut m = Message::new(70 + i as u16, 1, 1, front).with_data(data.clone());
        m.tid = i as u64;
        c.send(m).unwrap();
        sent.push(data);
    }
    let wire = wire_of(&mut c);
    let sinks = feed_like_reactor(&mut s, now, &wire, 65536);
    let got = received(&mut s);
    assert_eq!(got.len(), sizes.len());
    let mut direct = 0;
    for (i, m) in got.iter().enumerate() {
        assert_eq!(m.tid, i as u64);
        assert_eq!(m.data, sent[i], "message {i}");
        if sizes[i] >= 16 << 10 {
            let p = m.data.as_ptr() as usize;
            assert_eq!(p % 4096, 0, "message {i}: data not page-aligned");
            assert!(
                sinks.contains(&p),
                "message {i}: data is not the sink the bytes were received into"
            );
            direct += sizes[i];
        }
    }
    assert_eq!(sinks.len(), 5);
    let st = s.stats();
    // Every byte of a large segment was received straight into its buffer, except what arrived with the
    // frame's head: the first frame's stream receive (≤ 64 KiB, before the decoder knew a large frame was
    // coming), then at most `PREFETCH_AFTER_DIRECT` per frame.
    let pre = msgr2::frame::PREFETCH_AFTER_DIRECT as u64;
    let copied_large = direct as u64 - st.rx_direct_bytes;
    assert!(
        copied_large <= 65536 + 4 * pre,
        "copied {copied_large} bytes of large segments after the socket read"
    );
    // The rest of what was copied: the 4 KiB segment, whose head came with the previous (capped) receive.
    assert!(st.rx_copied_bytes <= copied_large + 4096, "{st:?}");
}

#[test]
fn data_lands_at_the_page_offset_the_header_asks_for() {
    // Ceph's data_off convention (msgr1, kept in the v2 header): clients put the write's object offset there,
    // so the data's first byte sits at that offset within a page and the write's whole blocks are page-aligned.
    let now = Instant::now();
    let (mut c, mut s) = ready_pair(CON_MODE_CRC, now);
    s.set_direct_rx(Some(16 << 10));
    let offs = [1000u16, 8192 + 512, 0, 65535];
    let data: Bytes = (0..70_000u32)
        .map(|j| (j % 241) as u8)
        .collect::<Vec<u8>>()
        .into();
    for (i, &off) in offs.iter().enumerate() {
        let mut m = Message::new(90, 1, 1, Bytes::from_static(b"front")).with_data(data.clone());
        m.data_off = off;
        m.tid = i as u64;
        c.send(m).unwrap();
    }
    let wire = wire_of(&mut c);
    feed_like_reactor(&mut s, now, &wire, 65536);
    let got = received(&mut s);
    assert_eq!(got.len(), offs.len());
    for (m, &off) in got.iter().zip(&offs) {
        assert_eq!(m.data, data);
        assert_eq!(m.data_off, off);
        assert_eq!(
            m.data.as_ptr() as usize % 4096,
            usize::from(off) % 4096,
            "data_off {off}"
        );
    }
}

#[test]
fn without_direct_rx_a_spanning_data_segment_is_assembled_page_aligned() {
    let now = Instant::now();
    let (mut c, mut s) = ready_pair(CON_MODE_CRC, now);
    let data: Bytes = (0..200_000u32)
        .map(|j| (j % 253) as u8)
        .collect::<Vec<u8>>()
        .into();
    c.send(Message::new(80, 1, 1, Bytes::from_static(b"f")).with_data(data.clone()))
        .unwrap();
    let wire = wire_of(&mut c);
    assert!(feed_like_reactor(&mut s, now, &wire, 65536).is_empty());
    let got = received(&mut s);
    assert_eq!(got[0].data, data);
    assert_eq!(got[0].data.as_ptr() as usize % 4096, 0);
    assert_eq!(s.stats().rx_copied_bytes, data.len() as u64);
}

#[test]
fn sink_protocol_violations_fault_the_connection() {
    let now = Instant::now();
    let (mut c, mut s) = ready_pair(CON_MODE_CRC, now);
    s.set_direct_rx(Some(1024));
    let data = Bytes::from(vec![7u8; 10_000]);
    c.send(Message::new(81, 1, 1, Bytes::from_static(b"f")).with_data(data))
        .unwrap();
    let wire = wire_of(&mut c);
    // The frame head, then a sink for the data; stream bytes while the sink is out break the order.
    s.handle_input_bytes(now, wire.slice(..200)).unwrap();
    let sink = s.take_rx_sink().expect("a sink for the data segment");
    assert!(s.take_rx_sink().is_none(), "one sink at a time");
    assert!(s.handle_input_bytes(now, wire.slice(200..300)).is_err());
    drop(sink);

    // Overrun: more bytes in the sink than the segment has.
    let (mut c, mut s) = ready_pair(CON_MODE_CRC, now);
    s.set_direct_rx(Some(1024));
    c.send(Message::new(82, 1, 1, Bytes::from_static(b"f")).with_data(Bytes::from(vec![1u8; 5000])))
        .unwrap();
    let wire = wire_of(&mut c);
    s.handle_input_bytes(now, wire.slice(..100)).unwrap();
    let mut sink = s.take_rx_sink().expect("sink");
    let n = sink.remaining() + 1;
    sink.buf_mut().extend_from_slice(&vec![0u8; n]);
    assert!(s.handle_rx_sink(now, sink, n).is_err());
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 32, ..ProptestConfig::default() })]
    /// Sinks change where bytes land, never what is decoded: same messages as the copying path for any stream
    /// receive size and direct threshold.
    #[test]
    fn sinks_decode_the_same_messages(
        msgs in prop::collection::vec((0usize..300, 0usize..64, 0usize..70_000), 1..6),
        stream in 1usize..100_000,
        min in 1usize..40_000,
    ) {
        let now = Instant::now();
        let reference = run(CON_MODE_CRC, &msgs, &[], false);
        let (mut s, wire) = patterned_to_sinks(&msgs, min, now);
        feed_like_reactor(&mut s, now, &wire, stream);
        let got = received(&mut s);
        prop_assert_eq!(got, reference);
    }
}

// ---------------------------------------------------------------------------------------------------------------
// Inline receives (the reactor's `CoreConfig::inline_recvs`): one `recvmsg` into two iovecs — the rest of a large
// segment into its sink, then `RxSink::stream_after` bytes into the stream buffer — so a run of same-shaped
// frames takes one receive per frame and every data byte after the first frame lands in its sink.

/// Feed `wire` the way an inline receive does; each call gets at most `avail(call)` bytes (what the socket
/// holds). Returns the number of receive calls and the sinks' buffer addresses.
fn feed_like_inline(
    s: &mut Connection,
    now: Instant,
    wire: &Bytes,
    stream: usize,
    mut avail: impl FnMut(usize) -> usize,
) -> (usize, Vec<usize>) {
    let mut at = 0;
    let mut calls = 0;
    let mut sink_bufs = Vec::new();
    while at < wire.len() {
        let mut left = avail(calls).max(1).min(wire.len() - at);
        calls += 1;
        let mut stream_room = stream.min(s.rx_stream_limit().unwrap_or(usize::MAX));
        if let Some(mut sink) = s.take_rx_sink() {
            stream_room = stream.min(sink.stream_after());
            let k = sink.remaining().min(left);
            let b = sink.buf_mut();
            if !sink_bufs.contains(&(b.as_ptr() as usize)) {
                sink_bufs.push(b.as_ptr() as usize);
            }
            b.extend_from_slice(&wire[at..at + k]); // the kernel's copy, first iovec
            at += k;
            left -= k;
            s.handle_rx_sink(now, sink, k).unwrap();
        }
        let k = left.min(stream_room);
        if k > 0 {
            let mut b = BytesMut::with_capacity(stream);
            b.extend_from_slice(&wire[at..at + k]); // second iovec
            at += k;
            s.handle_input_bytes(now, b.freeze()).unwrap();
        }
    }
    (calls, sink_bufs)
}

fn write_like(i: usize, data_len: usize, front_len: usize) -> Message {
    let data: Bytes = (0..data_len)
        .map(|j| (j * 11 + i) as u8)
        .collect::<Vec<u8>>()
        .into();
    let mut m = Message::new(42, 1, 1, Bytes::from(vec![i as u8; front_len])).with_data(data);
    m.tid = i as u64;
    m
}

#[test]
fn queued_same_shaped_writes_take_one_receive_each_into_their_sinks() {
    let now = Instant::now();
    let (mut c, mut s) = ready_pair(CON_MODE_CRC, now);
    s.set_direct_rx(Some(16 << 10));
    let n = 16;
    for i in 0..n {
        c.send(write_like(i, 65536, 250)).unwrap();
    }
    let wire = wire_of(&mut c);
    // Everything is already on the socket: each receive gets all it asks for.
    let (calls, sinks) = feed_like_inline(&mut s, now, &wire, 65536, |_| usize::MAX);
    let got = received(&mut s);
    assert_eq!(got.len(), n);
    for (i, m) in got.iter().enumerate() {
        let want = write_like(i, 65536, 250);
        assert_eq!((m.tid, &m.front, &m.data), (want.tid, &want.front, &want.data));
        assert!(
            sinks.contains(&(m.data.as_ptr() as usize)),
            "message {i}: not its sink"
        );
    }
    // The first stream receive (64 KiB, before the decoder knew the frame's shape), then one receive per frame:
    // sink, then the frame's epilogue and exactly the next frame's head.
    assert_eq!(calls, n + 1, "receives");
    let st = s.stats();
    // Copied: only the part of the first data segment that came with the first stream receive.
    assert!(st.rx_copied_bytes < 65536, "{st:?}");
    assert_eq!(
        st.rx_direct_bytes + st.rx_copied_bytes,
        (n * 65536) as u64,
        "{st:?}"
    );
}

#[test]
fn a_sink_returned_unused_is_handed_out_again() {
    let now = Instant::now();
    let (mut c, mut s) = ready_pair(CON_MODE_CRC, now);
    s.set_direct_rx(Some(1024));
    c.send(write_like(1, 10_000, 30)).unwrap();
    let wire = wire_of(&mut c);
    s.handle_input_bytes(now, wire.slice(..200)).unwrap();
    let before = s.stats().bytes_in;
    let mut sink = s.take_rx_sink().expect("a sink for the data segment");
    let (rem, p) = (sink.remaining(), sink.buf_mut().as_ptr() as usize);
    s.return_rx_sink(sink);
    assert_eq!(s.stats().bytes_in, before, "nothing received, nothing counted");
    let mut sink = s.take_rx_sink().expect("the same sink again");
    assert_eq!((sink.remaining(), sink.buf_mut().as_ptr() as usize), (rem, p));
    // Everything before byte 200 went to the stream (and the sink's head); the sink takes what follows.
    let k = sink.remaining();
    sink.buf_mut().extend_from_slice(&wire[200..200 + k]);
    s.handle_rx_sink(now, sink, k).unwrap();
    s.handle_input_bytes(now, wire.slice(200 + k..)).unwrap();
    let got = received(&mut s);
    let want = write_like(1, 10_000, 30);
    assert_eq!(got.len(), 1);
    assert_eq!(
        (got[0].tid, &got[0].front, &got[0].data),
        (want.tid, &want.front, &want.data)
    );
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]
    /// Inline receives that the socket cuts short anywhere (partial sinks, a segment split across receives,
    /// heads of different lengths than guessed) decode exactly what the copying path decodes.
    #[test]
    fn inline_receives_decode_the_same_messages(
        msgs in prop::collection::vec((0usize..600, 0usize..64, 0usize..70_000), 1..7),
        avail in prop::collection::vec(1usize..90_000, 1..64),
        stream in 1usize..100_000,
        min in 1usize..40_000,
    ) {
        let now = Instant::now();
        let reference = run(CON_MODE_CRC, &msgs, &[], false);
        let (mut s, wire) = patterned_to_sinks(&msgs, min, now);
        feed_like_inline(&mut s, now, &wire, stream, |k| avail[k % avail.len()]);
        let got = received(&mut s);
        prop_assert_eq!(got, reference);
    }
}
