// SPDX-License-Identifier: LGPL-3.0-or-later
//! Regression test for the 4 MiB read reply stall of direct sends (bench compare runs 15–16, fixed in 05c22c5):
//! msgr2 output enters a connection's send queue only up to `max_out_bytes`; a ring send's completion drives the
//! connection again for the rest, but a direct send that the socket took whole did not, so the rest of the
//! replies waited for the connection's next event — its keepalive timer, seconds later.
//!
//! The peer here is the shape that exposes it: it writes its requests, then only reads (no ACK, no keepalive,
//! nothing that would give the server's connection an event of its own), like a client waiting for a 4 MiB read.
//! The blocking msgr2 client is not that peer: it writes ACKs while it waits, and each one re-drove the server.
#![allow(clippy::unwrap_used)]

mod common;

use bytes::Bytes;
use msgr2::auth::AuthNone;
use msgr2::types::{ENTITY_TYPE_CLIENT, ENTITY_TYPE_OSD, EntityName};
use msgr2::{Config, Connection, EntityAddr, Event, Message};
use reactor::{ConnId, CoreCtx, Runtime, RuntimeConfig, Service};
use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// The server's bound on a connection's queued output: far below what the replies add up to.
const MAX_OUT: usize = 128 << 10;

/// All replies must be in within this (the stall lasted until the server's 10 s keepalive).
const BOUND: Duration = Duration::from_secs(2);

/// Reply data: a slice of this pattern at an offset per tid (made once: the time bound is for the sending).
fn pattern() -> Bytes {
    (0..(4 << 20) + (64 << 10))
        .map(|i: usize| (i.wrapping_mul(31) ^ (i >> 11)) as u8)
        .collect::<Vec<u8>>()
        .into()
}

fn reply_data(pattern: &Bytes, tid: u64, len: usize) -> Bytes {
    let off = (tid as usize * 61) % (64 << 10);
    pattern.slice(off..off + len)
}

/// Request front: `len piece` (decimal). Reply: same tid, data of `len` bytes handed to msgr2 in `piece`-sized
/// pieces (as a read reply's extents are), so a single reply can cross `max_out_bytes` part-way.
struct Server {
    addr_tx: mpsc::Sender<SocketAddr>,
    pattern: Bytes,
}

impl Service for Server {
    type Msg = ();
    fn on_start(&mut self, ctx: &mut CoreCtx<()>) {
        let a = common::listen_msgr2(ctx, common::auth_none());
        self.addr_tx.send(a).unwrap();
    }
    fn on_message(&mut self, ctx: &mut CoreCtx<()>, conn: ConnId, m: Message) {
        let front = String::from_utf8_lossy(&m.front).into_owned();
        let mut it = front.split(' ').map(|s| s.parse::<usize>().unwrap());
        let (len, piece) = (it.next().unwrap(), it.next().unwrap());
        let data = reply_data(&self.pattern, m.tid, len);
        let mut r = Message::new(m.msg_type + 1, 1, 1, Bytes::new());
        r.tid = m.tid;
        r.data = data.slice(..piece.min(len));
        r.data_tail = (piece..len)
            .step_by(piece)
            .map(|o| data.slice(o..(o + piece).min(len)))
            .collect();
        ctx.send_message(conn, r).unwrap();
    }
}

/// A msgr2 client over a plain socket that the test drives by hand.
struct Peer {
    conn: Connection,
    s: TcpStream,
    buf: Vec<u8>,
}

impl Peer {
    fn connect(addr: SocketAddr) -> Peer {
        let s = TcpStream::connect(addr).unwrap();
        s.set_nodelay(true).unwrap();
        s.set_read_timeout(Some(Duration::from_millis(20))).unwrap();
        let conn = Connection::connector(
            Config::new(ENTITY_TYPE_CLIENT, 1),
            Box::new(AuthNone::new(EntityName::new(ENTITY_TYPE_CLIENT, "t"), 0)),
            EntityAddr::msgr2(addr, 0),
            ENTITY_TYPE_OSD,
            Instant::now(),
        );
        let mut p = Peer {
            conn,
            s,
            buf: vec![0; 256 << 10],
        };
        let deadline = Instant::now() + Duration::from_secs(10);
        while !p.conn.is_ready() {
            assert!(Instant::now() < deadline, "handshake timed out");
            p.write_output();
            p.read_some();
        }
        while p.conn.poll_event().is_some() {}
        p
    }

    /// Everything the connection has to send, written out (only before the requests are all sent).
    fn write_output(&mut self) {
        while let Some(b) = self.conn.poll_output() {
            self.s.write_all(&b).unwrap();
        }
    }

    /// One read (20 ms at most), handed to the connection.
    fn read_some(&mut self) {
        match self.s.read(&mut self.buf) {
            Ok(0) => panic!("server closed the connection"),
            Ok(n) => self.conn.handle_input(Instant::now(), &self.buf[..n]).unwrap(),
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
            Err(e) => panic!("read: {e}"),
        }
    }
}

/// `requests` requests for `len`-byte replies in `piece`-byte pieces, written at once; then the peer only reads.
/// Returns how long the replies took; panics if they are not all in within `BOUND` or any byte is wrong.
fn replies_arrive(requests: u64, len: usize, piece: usize, fold: bool) -> Duration {
    assert!(
        requests as usize * len > 4 * MAX_OUT,
        "replies must exceed max_out_bytes"
    );
    let (addr_tx, addr_rx) = mpsc::channel();
    let mut cfg = RuntimeConfig {
        cores: 1,
        pin: false,
        ..Default::default()
    };
    cfg.core.direct_sends = true;
    cfg.core.fold_sends = fold;
    cfg.core.max_out_bytes = MAX_OUT;
    let pat = pattern();
    let server_pat = pat.clone();
    let rt = Runtime::start(cfg, move |_| Server {
        addr_tx: addr_tx.clone(),
        pattern: server_pat.clone(),
    })
    .unwrap();
    let addr = addr_rx.recv_timeout(Duration::from_secs(10)).unwrap();
    let mut p = Peer::connect(addr);
    for tid in 1..=requests {
        let mut m = Message::new(0x70, 1, 1, Bytes::from(format!("{len} {piece}")));
        m.tid = tid;
        p.conn.send(m).unwrap();
    }
    p.write_output();
    // From here on the peer writes nothing: its ACKs stay queued in its connection.
    let t0 = Instant::now();
    let mut next = 1;
    while next <= requests {
        let waited = t0.elapsed();
        assert!(
            waited < BOUND,
            "{requests} x {len} B replies: only {} in after {waited:?} (max_out_bytes {MAX_OUT})",
            next - 1
        );
        p.read_some();
        while let Some(e) = p.conn.poll_event() {
            match e {
                Event::Message(r) => {
                    assert_eq!((r.msg_type, r.tid), (0x71, next));
                    assert!(r.data == reply_data(&pat, next, len), "reply {next} corrupted");
                    next += 1;
                }
                Event::Closed { error } | Event::Faulted { error, .. } | Event::Reset { error } => {
                    panic!("connection ended: {error}")
                }
                _ => {}
            }
        }
    }
    let took = t0.elapsed();
    drop(p);
    rt.stop();
    let stats = rt.join();
    // The replies went out through direct (or folded) sends, the path under test, not only through ring sends.
    let sends = if fold {
        stats[0].folded_sends
    } else {
        stats[0].direct_sends
    };
    assert!(sends > 0, "{:?}", stats[0]);
    eprintln!(
        "{requests} x {len} B in {piece} B pieces: {took:?}; {:?}",
        stats[0]
    );
    took
}

#[test]
fn a_4mib_reply_over_max_out_bytes_is_not_held_back() {
    // One read reply of 4 MiB in 64 KiB extents: the connection's output is capped part-way through it.
    replies_arrive(1, 4 << 20, 64 << 10, false);
}

#[test]
fn many_replies_over_max_out_bytes_are_not_held_back() {
    // 64 replies of 48 KiB: each drive takes three of them, the rest waits in msgr2's queue.
    replies_arrive(64, 48 << 10, 48 << 10, false);
}

#[test]
fn folded_sends_do_not_hold_back_replies_over_max_out_bytes() {
    // The same with the end-of-turn send folded into the enter (CoreConfig::fold_sends): a folded send that wrote
    // everything has no completion either.
    replies_arrive(1, 4 << 20, 64 << 10, true);
    replies_arrive(64, 48 << 10, 48 << 10, true);
}
