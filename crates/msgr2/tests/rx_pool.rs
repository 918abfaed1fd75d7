// SPDX-License-Identifier: LGPL-3.0-or-later
//! Large receive sinks come from the process's page pool (`pagepool::global()`): page-aligned at the header's
//! `data_off`, reused once the message is dropped (on any thread), and a segment that spans stream buffers is
//! assembled into a pooled buffer too. One test in its own binary: it reads the global pool's counters.
#![allow(clippy::unwrap_used)] // test code: a panic is the failure report

mod common;

use common::{ready_pair, received, wire_of};
use std::time::Instant;

use bytes::Bytes;
use msgr2::auth::CON_MODE_CRC;
use msgr2::{Connection, Message};

/// Feed like the reactor: sinks when offered (recording whether each came from the pool and where its first
/// byte sits), else stream receives of at most 64 KiB.
fn feed(s: &mut Connection, now: Instant, wire: &Bytes) -> Vec<(bool, usize)> {
    let mut at = 0;
    let mut sinks = Vec::new();
    while at < wire.len() {
        if let Some(mut sink) = s.take_rx_sink() {
            let k = sink.remaining().min(wire.len() - at);
            let b = sink.buf_mut();
            let rec = (b.is_pooled(), b.as_ptr() as usize);
            if !sinks.contains(&rec) {
                sinks.push(rec);
            }
            b.extend_from_slice(&wire[at..at + k]);
            at += k;
            s.handle_rx_sink(now, sink, k).unwrap();
            continue;
        }
        let k = 65536
            .min(s.rx_stream_limit().unwrap_or(usize::MAX))
            .min(wire.len() - at);
        s.handle_input_bytes(now, wire.slice(at..at + k)).unwrap();
        at += k;
    }
    sinks
}

#[test]
fn large_sinks_are_pooled_aligned_and_reused() {
    let pool = pagepool::global();
    let now = Instant::now();
    let (mut c, mut s) = ready_pair(CON_MODE_CRC, now);
    s.set_direct_rx(Some(16 << 10));
    let data: Bytes = (0..4u32 << 20)
        .map(|j| (j % 251) as u8)
        .collect::<Vec<u8>>()
        .into();
    // A page-aligned 4 MiB write, one at object offset 1000 (data_off), a 200 KB one, and a 64 KiB one (heap).
    let cases = [
        (data.clone(), 0u16),
        (data.clone(), 1000),
        (data.slice(..200_000), 8192 + 100),
        (data.slice(..65536), 0),
    ];
    let mut first = Vec::new();
    for round in 0..2 {
        for (i, (d, off)) in cases.iter().enumerate() {
            let mut m = Message::new(90, 1, 1, Bytes::from_static(b"front")).with_data(d.clone());
            m.data_off = *off;
            m.tid = i as u64;
            c.send(m).unwrap();
        }
        let wire = wire_of(&mut c);
        let sinks = feed(&mut s, now, &wire);
        assert_eq!(
            sinks.iter().map(|x| x.0).collect::<Vec<_>>(),
            [true, true, true, false],
            "sinks of 128 KiB and more come from the pool"
        );
        let got = received(&mut s);
        assert_eq!(got.len(), cases.len());
        for ((m, (d, off)), sink) in got.iter().zip(&cases).zip(&sinks) {
            assert_eq!(&m.data, d);
            assert_eq!(
                m.data.as_ptr() as usize % 4096,
                usize::from(*off) % 4096,
                "data_off {off}"
            );
            assert_eq!(
                m.data.as_ptr() as usize,
                sink.1,
                "the segment is the sink it was received into"
            );
        }
        let st = pool.stats();
        assert_eq!(st.in_use_buffers, 3, "{st:?}");
        // The messages go to another thread and are dropped there (as a store completion would).
        std::thread::spawn(move || drop(got)).join().unwrap();
        let st = pool.stats();
        assert_eq!((st.in_use_buffers, st.in_use_bytes), (0, 0), "{st:?}");
        if round == 0 {
            assert_eq!((st.misses, st.hits), (3, 0), "{st:?}");
            first = sinks;
        } else {
            assert_eq!((st.misses, st.hits), (3, 3), "{st:?}");
            let mut a: Vec<usize> = first.iter().filter(|x| x.0).map(|x| x.1 & !4095).collect();
            let mut b: Vec<usize> = sinks.iter().filter(|x| x.0).map(|x| x.1 & !4095).collect();
            a.sort_unstable();
            b.sort_unstable();
            assert_eq!(a, b, "the second round reuses the first round's mappings");
        }
    }

    // Without sinks, a data segment that spans stream buffers is assembled once into a pooled buffer.
    let (mut c, mut s) = ready_pair(CON_MODE_CRC, now);
    c.send(Message::new(80, 1, 1, Bytes::from_static(b"f")).with_data(data.clone()))
        .unwrap();
    let wire = wire_of(&mut c);
    assert!(feed(&mut s, now, &wire).is_empty());
    let got = received(&mut s);
    assert_eq!(got[0].data, data);
    assert_eq!(got[0].data.as_ptr() as usize % 4096, 0);
    assert_eq!(pool.stats().in_use_buffers, 1);
    drop(got);
    assert_eq!(pool.stats().in_use_buffers, 0);
    assert_eq!(pool.stats().hits, 4, "the 4 MiB class had idle mappings");
}
