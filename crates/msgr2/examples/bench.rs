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

fn shuttle(a: &mut Connection, b: &mut Connection, now: Instant) -> usize {
    let mut n = 0;
    loop {
        let mut moved = false;
        while let Some(x) = a.poll_output() {
            n += x.len();
            b.handle_input(now, &x).unwrap();
            moved = true;
        }
        while let Some(x) = b.poll_output() {
            a.handle_input(now, &x).unwrap();
            moved = true;
        }
        if !moved {
            return n;
        }
    }
}

/// CPU time of this thread: throughput per core even when the machine is shared.
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
            let (mut c, mut s) = pair(mode);
            let now = Instant::now();
            shuttle(&mut c, &mut s, now);
            assert!(c.is_ready() && s.is_ready());
            while s.poll_event().is_some() {}
            let data = Bytes::from(vec![0x5a; size]);
            let total_bytes = 256usize << 20;
            let count = (total_bytes / size).max(16);
            let start = Instant::now();
            let cpu0 = thread_cpu_secs();
            let mut wire = 0;
            let mut got = 0;
            for i in 0..count {
                let mut m = Message::new(42, 1, 1, Bytes::from_static(b"front"));
                m.tid = i as u64;
                m.data = data.clone();
                c.send(m).unwrap();
                if i % 64 == 63 {
                    wire += shuttle(&mut c, &mut s, now);
                    while let Some(e) = s.poll_event() {
                        if let Event::Message(_) = e {
                            got += 1;
                        }
                    }
                }
            }
            wire += shuttle(&mut c, &mut s, now);
            while let Some(e) = s.poll_event() {
                if let Event::Message(_) = e {
                    got += 1;
                }
            }
            let el = thread_cpu_secs() - cpu0;
            let wall = start.elapsed().as_secs_f64();
            assert_eq!(got, count);
            println!(
                "{name:6} {size:>8} B messages: {:>8.0} msg/s, {:>6.2} GB/s payload per CPU-second (encode + decode; \
                 wall {wall:.2} s, {} MB on the wire)",
                count as f64 / el,
                (count * size) as f64 / el / 1e9,
                wire >> 20
            );
        }
    }
}
