// SPDX-License-Identifier: LGPL-3.0-or-later
//! Throughput of the sans-IO engine alone (no sockets): a connector streams MESSAGE frames to an acceptor through
//! memory, in crc and secure mode, for several data sizes. Run with
//! `cargo run --release -p msgr2 --example bench`.
#![allow(clippy::unwrap_used)] // a benchmark: a panic is the failure report

use std::time::Instant;

use bytes::Bytes;
use msgr2::auth::{CON_MODE_CRC, CON_MODE_SECURE};
use msgr2::testing::{TestClientAuth, TestServerAuth};
use msgr2::types::{ENTITY_TYPE_CLIENT, ENTITY_TYPE_OSD, EntityName};
use msgr2::{Config, Connection, EntityAddr, Event, Message};

fn pair(mode: u32) -> (Connection, Connection) {
    let now = Instant::now();
    let addr = EntityAddr::msgr2("127.0.0.1:6800".parse().unwrap(), 0);
    let mut ccfg = Config::new(ENTITY_TYPE_CLIENT, 1);
    ccfg.my_addrs = msgr2::AddrVec::one(EntityAddr::msgr2("127.0.0.1:40000".parse().unwrap(), 1));
    ccfg.max_queued_messages = 1 << 20;
    ccfg.max_queued_bytes = 1 << 34;
    let c = Connection::connector(
        ccfg,
        Box::new(TestClientAuth::new(
            EntityName::new(ENTITY_TYPE_CLIENT, "b"),
            vec![mode],
        )),
        addr,
        ENTITY_TYPE_OSD,
        now,
    );
    let s = Connection::acceptor(
        Config::new(ENTITY_TYPE_OSD, 0),
        Box::new(TestServerAuth::new(
            vec![CON_MODE_SECURE, CON_MODE_CRC],
            b"0123456789abcdef",
            &[5u8; 64],
        )),
        now,
    );
    (c, s)
}

/// How received bytes reach the connection. Both first gather the sender's output into receive buffers of at
/// most `RECV_BUF` bytes, standing in for the kernel's copy into the reactor's buffer.
#[derive(Clone, Copy, PartialEq)]
enum Feed {
    /// `handle_input(&[u8])`: msgr2 copies again.
    Copy,
    /// `handle_input_bytes(Bytes)`: msgr2 keeps the receive buffer (crc mode: no second copy).
    Zero,
}

const RECV_BUF: usize = 256 << 10;

fn deliver(to: &mut Connection, out: &mut Vec<Bytes>, feed: Feed, now: Instant) -> usize {
    let total: usize = out.iter().map(|b| b.len()).sum();
    let mut recv = bytes::BytesMut::with_capacity(total);
    for b in out.drain(..) {
        recv.extend_from_slice(&b);
    }
    let mut recv = recv.freeze();
    while !recv.is_empty() {
        let chunk = recv.split_to(recv.len().min(RECV_BUF));
        match feed {
            Feed::Copy => to.handle_input(now, &chunk).unwrap(),
            Feed::Zero => to.handle_input_bytes(now, chunk).unwrap(),
        }
    }
    total
}

fn shuttle(a: &mut Connection, b: &mut Connection, now: Instant, feed: Feed) -> usize {
    let mut n = 0;
    let mut out = Vec::new();
    loop {
        let mut moved = false;
        a.drain_output(&mut out);
        if !out.is_empty() {
            n += deliver(b, &mut out, feed, now);
            moved = true;
        }
        b.drain_output(&mut out);
        if !out.is_empty() {
            deliver(a, &mut out, feed, now);
            moved = true;
        }
        if !moved {
            return n;
        }
    }
}

fn thread_cpu_secs() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec into the valid, exclusively borrowed `ts`.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as f64 + ts.tv_nsec as f64 / 1e9
}

fn main() {
    for (mode, name) in [(CON_MODE_CRC, "crc"), (CON_MODE_SECURE, "secure")] {
        for size in [4096usize, 65536, 4 << 20] {
            for feed in [Feed::Copy, Feed::Zero] {
                let fname = if feed == Feed::Copy {
                    "handle_input"
                } else {
                    "handle_input_bytes"
                };
                let (mut c, mut s) = pair(mode);
                let now = Instant::now();
                shuttle(&mut c, &mut s, now, feed);
                assert!(c.is_ready() && s.is_ready());
                while s.poll_event().is_some() {}
                let data = Bytes::from(vec![0x5a; size]);
                let total_bytes = 256usize << 20;
                let count = (total_bytes / size).max(16);
                // Deliver about every 4 MiB (at most 64 messages): big enough to batch, small enough that the
                // stand-in receive buffers stay warm in memory.
                let batch = ((4usize << 20) / size).clamp(1, 64);
                let start = Instant::now();
                let cpu0 = thread_cpu_secs();
                let mut wire = 0;
                let mut got = 0;
                for i in 0..count {
                    let mut m = Message::new(42, 1, 1, Bytes::from_static(b"front"));
                    m.tid = i as u64;
                    m.data = data.clone();
                    c.send(m).unwrap();
                    if i % batch == batch - 1 {
                        wire += shuttle(&mut c, &mut s, now, feed);
                        while let Some(e) = s.poll_event() {
                            if let Event::Message(_) = e {
                                got += 1;
                            }
                        }
                    }
                }
                wire += shuttle(&mut c, &mut s, now, feed);
                while let Some(e) = s.poll_event() {
                    if let Event::Message(_) = e {
                        got += 1;
                    }
                }
                let el = thread_cpu_secs() - cpu0;
                let wall = start.elapsed().as_secs_f64();
                assert_eq!(got, count);
                println!(
                    "{name:6} {fname:18} {size:>8} B messages: {:>8.0} msg/s, {:>6.2} GB/s payload per CPU-second (encode + decode; \
                 wall {wall:.2} s, {} MB on the wire)",
                    count as f64 / el,
                    (count * size) as f64 / el / 1e9,
                    wire >> 20
                );
            }
        }
    }
}
