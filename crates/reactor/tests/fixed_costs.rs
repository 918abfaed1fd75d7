// SPDX-License-Identifier: LGPL-3.0-or-later
//! Per-request fixed costs of the loop: a reply goes out with a direct `sendmsg` (no ring send, no completion,
//! no extra turn), a reply larger than the socket takes finishes through a ring send with every byte in order,
//! and sleeping costs no timer of its own (one standing timeout per timer deadline, not one per wait), while
//! timers still fire on time — with the old behaviour of each switched back on for comparison.
#![allow(clippy::unwrap_used)]

use bytes::Bytes;
use reactor::{ConnId, CoreCtx, CoreStats, ListenProto, Runtime, RuntimeConfig, Service, TimerId};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// Requests are 16 bytes; the reply to one is 100 bytes, or `BIG` bytes if the request starts with `B`.
const REQ: usize = 16;
const REPLY: usize = 100;
const BIG: usize = 8 << 20;

fn pattern(i: usize) -> u8 {
    (i.wrapping_mul(31) ^ (i >> 9)) as u8
}

struct Server {
    addr_tx: mpsc::Sender<SocketAddr>,
    /// Request bytes received and not answered yet.
    pending: Vec<u8>,
    /// Timer chain: (token, asked delay, set at) of the armed ones; fired ones go to `fired_tx`.
    timers: Vec<(u64, Duration, Instant)>,
    fired_tx: mpsc::Sender<(u64, Duration, Duration)>,
}

impl Service for Server {
    type Msg = ();
    fn on_start(&mut self, ctx: &mut CoreCtx<()>) {
        let (_, a) = ctx
            .listen("127.0.0.1:0".parse().unwrap(), ListenProto::Raw)
            .unwrap();
        // A far timer first, then an earlier one: the standing timeout must move forward for it.
        for (token, ms) in [(1u64, 60_000u64), (2, 40)] {
            let d = Duration::from_millis(ms);
            // Timers count from the turn's start (`ctx.now()`), as the reactor does.
            self.timers.push((token, d, ctx.now()));
            ctx.set_timer(d, token);
        }
        self.addr_tx.send(a).unwrap();
    }
    fn on_timer(&mut self, ctx: &mut CoreCtx<()>, _t: TimerId, token: u64) {
        let Some(k) = self.timers.iter().position(|t| t.0 == token) else {
            return;
        };
        let (_, asked, at) = self.timers.remove(k);
        self.fired_tx.send((token, asked, at.elapsed())).unwrap();
        // A chain of short timers while requests keep the core waking up.
        if (2..12).contains(&token) {
            let d = Duration::from_millis(15);
            self.timers.push((token + 1, d, ctx.now()));
            ctx.set_timer(d, token + 1);
        }
    }
    fn on_data(&mut self, ctx: &mut CoreCtx<()>, conn: ConnId, data: Bytes) {
        self.pending.extend_from_slice(&data);
        while self.pending.len() >= REQ {
            let req: Vec<u8> = self.pending.drain(..REQ).collect();
            let len = if req[0] == b'B' { BIG } else { REPLY };
            let reply: Vec<u8> = (0..len).map(pattern).collect();
            // Several buffers: the direct send gathers them like a ring send.
            let bufs: Vec<Bytes> = reply.chunks(64 * 1024).map(Bytes::copy_from_slice).collect();
            ctx.send_bytes(conn, bufs).map_err(|_| ()).unwrap();
        }
    }
}

/// Run `requests` one-at-a-time exchanges (and one big reply read late) against a server with `direct_sends`
/// and `standing_timer` as given; the server core's stats and the timers it saw fire.
fn run(
    direct_sends: bool,
    standing_timer: bool,
    requests: usize,
) -> (CoreStats, Vec<(u64, Duration, Duration)>) {
    run_with(direct_sends, false, standing_timer, requests)
}

/// As [`run`], with `fold_sends` as given too.
fn run_with(
    direct_sends: bool,
    fold_sends: bool,
    standing_timer: bool,
    requests: usize,
) -> (CoreStats, Vec<(u64, Duration, Duration)>) {
    let (addr_tx, addr_rx) = mpsc::channel();
    let (fired_tx, fired_rx) = mpsc::channel();
    let mut cfg = RuntimeConfig {
        cores: 1,
        pin: false,
        ..Default::default()
    };
    cfg.core.direct_sends = direct_sends;
    cfg.core.fold_sends = fold_sends;
    cfg.core.standing_timer = standing_timer;
    let rt = Runtime::start(cfg, move |_| Server {
        addr_tx: addr_tx.clone(),
        pending: Vec::new(),
        timers: Vec::new(),
        fired_tx: fired_tx.clone(),
    })
    .unwrap();
    let addr = addr_rx.recv_timeout(Duration::from_secs(10)).unwrap();
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_nodelay(true).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let t0 = Instant::now();
    for _ in 0..requests {
        s.write_all(&[b'r'; REQ]).unwrap();
        let mut back = [0u8; REPLY];
        s.read_exact(&mut back).unwrap();
        assert!(back.iter().enumerate().all(|(i, b)| *b == pattern(i)));
    }
    // Keep the core sleeping and waking until the timer chain (40 ms + 10 × 15 ms) is done.
    while t0.elapsed() < Duration::from_millis(400) {
        s.write_all(&[b'r'; REQ]).unwrap();
        let mut back = [0u8; REPLY];
        s.read_exact(&mut back).unwrap();
        std::thread::sleep(Duration::from_micros(200));
    }
    // A reply far larger than the socket buffers, read only after a pause: the direct send takes what fits and a
    // ring send finishes the rest, in order.
    s.write_all(&[b'B'; REQ]).unwrap();
    std::thread::sleep(Duration::from_millis(200));
    let mut big = vec![0u8; BIG];
    s.read_exact(&mut big).unwrap();
    assert!(
        big.iter().enumerate().all(|(i, b)| *b == pattern(i)),
        "big reply corrupted"
    );
    rt.stop();
    let stats = rt.join();
    let fired: Vec<_> = fired_rx.try_iter().collect();
    (stats[0], fired)
}

#[test]
fn replies_go_out_directly_and_sleeps_arm_no_timer() {
    const N: usize = 300;
    let (st, fired) = run(true, true, N);
    eprintln!("direct + standing: {st:?}");
    // Every reply went out directly; the big one needed the ring for the rest.
    assert!(st.direct_sends as usize > N, "{st:?}");
    assert!(st.direct_sends_partial >= 1, "{st:?}");
    one_turn_per_request(&st, N);
    // The core slept hundreds of times, yet armed a timeout only per timer deadline (two starts, ten chained
    // timers, the far one, a few spurious re-arms), not per sleep.
    assert!(
        st.wait_timers_armed < 40,
        "{} standing timeouts for {} sleeps",
        st.wait_timers_armed,
        st.waits
    );
    check_timers(&fired);
}

#[test]
fn the_old_paths_still_work_and_cost_more() {
    const N: usize = 300;
    let (old, fired) = run(false, false, N);
    eprintln!("ring sends + per-wait timeouts: {old:?}");
    assert_eq!(old.direct_sends, 0);
    assert_eq!(old.wait_timers_armed, 0);
    check_timers(&fired);
    let (new, _) = run(true, true, N);
    // The send's completion made a turn of its own for (nearly) every request.
    let (old_req, new_req) = (old.recv_bytes / REQ as u64, new.recv_bytes / REQ as u64);
    assert!(
        old.turns > old_req + old_req / 2 && new.turns < new_req + new_req / 5 + 20,
        "ring sends: {} turns for {old_req} requests, direct: {} turns for {new_req}",
        old.turns,
        new.turns
    );
}

/// Every timer of the chain fired, none before its time, and none absurdly late (the far one never).
fn check_timers(fired: &[(u64, Duration, Duration)]) {
    let tokens: Vec<u64> = fired.iter().map(|f| f.0).collect();
    assert_eq!(tokens, (2..=12).collect::<Vec<_>>(), "{fired:?}");
    for &(token, asked, took) in fired {
        assert!(took >= asked, "timer {token} fired early: {took:?} < {asked:?}");
        assert!(
            took < asked + Duration::from_secs(2),
            "timer {token} late: {took:?}"
        );
    }
}

#[test]
fn folded_sends_take_no_syscall_and_no_turn() {
    const N: usize = 300;
    let (st, fired) = run_with(true, true, true, N);
    eprintln!("folded: {st:?}");
    // Every reply rode the turn's io_uring_enter; none needed a sendmsg of its own.
    assert_eq!(st.direct_sends, 0, "{st:?}");
    assert!(st.folded_sends as usize > N, "{st:?}");
    // The big reply did not fit: its folded send came back with what it wrote and a ring send did the rest
    // (the bytes were checked in order by `run`).
    assert!(st.folded_sends_partial >= 1, "{st:?}");
    // A folded send that wrote everything posts no completion: it neither ended the sleep it was submitted with
    // nor made a turn of its own.
    one_turn_per_request(&st, N);
    check_timers(&fired);
}

/// One turn per request (the receive), not two (receive, then the send's completion), and a sleep after most.
fn one_turn_per_request(st: &CoreStats, n: usize) {
    let requests = st.recv_bytes / REQ as u64;
    assert!(
        st.turns < requests + requests / 5 + 20,
        "{} turns for {requests} requests",
        st.turns
    );
    assert!(st.waits as usize > n, "{st:?}");
}
