// SPDX-License-Identifier: LGPL-3.0-or-later
//! The cross-core mesh under load: 3 cores, small rings (64 slots, bursts of 1000) so the overflow path runs constantly, every core
//! sending a stream to every other core (and to itself); each receiver checks per-sender order and counts. Also
//! raw-socket backpressure: a peer that does not read makes `send_bytes` refuse, and `on_writable` follows once it
//! drains, with every byte delivered in order.
#![allow(clippy::unwrap_used)]

use bytes::Bytes;
use reactor::{ConnId, ConnectProto, CoreCtx, CoreId, Runtime, RuntimeConfig, SendError, Service};
use std::io::Read;
use std::sync::mpsc;
use std::time::{Duration, Instant};

const PER_PAIR: u64 = 100_000;
const CORES: usize = 3;

struct Load {
    next_from: Vec<u64>,
    sent_to: Vec<u64>,
    done: mpsc::Sender<(CoreId, Vec<u64>)>,
    reported: bool,
}

impl Load {
    fn pump(&mut self, ctx: &mut CoreCtx<(CoreId, u64)>) {
        // Bounded bursts, so every core also gets to receive between sends.
        for to in 0..CORES {
            let mut burst = 0;
            while self.sent_to[to] < PER_PAIR && burst < 1000 && ctx.post_backlog(to) < 10_000 {
                ctx.post(to, (ctx.core_id(), self.sent_to[to])).unwrap();
                self.sent_to[to] += 1;
                burst += 1;
            }
        }
        if self.sent_to.iter().any(|n| *n < PER_PAIR) {
            ctx.keep_polling();
        }
    }
}

impl Service for Load {
    type Msg = (CoreId, u64);
    fn on_start(&mut self, ctx: &mut CoreCtx<Self::Msg>) {
        self.pump(ctx);
    }
    fn on_poll(&mut self, ctx: &mut CoreCtx<Self::Msg>) {
        self.pump(ctx);
    }
    fn on_cross_core(&mut self, ctx: &mut CoreCtx<Self::Msg>, from: CoreId, (sender, seq): Self::Msg) {
        assert_eq!(from, sender);
        assert_eq!(seq, self.next_from[from], "core {} from {from}", ctx.core_id());
        self.next_from[from] += 1;
        if !self.reported && self.next_from.iter().all(|n| *n == PER_PAIR) {
            self.reported = true;
            self.done.send((ctx.core_id(), self.next_from.clone())).unwrap();
        }
    }
}

#[test]
fn mesh_under_load_keeps_order_and_loses_nothing() {
    let (tx, rx) = mpsc::channel();
    let mut cfg = RuntimeConfig {
        cores: CORES,
        pin: false,
        mesh_capacity: 64,
        ..Default::default()
    };
    cfg.core.mesh_batch = 64;
    let start = Instant::now();
    let rt = Runtime::start(cfg, move |_| Load {
        next_from: vec![0; CORES],
        sent_to: vec![0; CORES],
        done: tx.clone(),
        reported: false,
    })
    .unwrap();
    let mut cores = Vec::new();
    for _ in 0..CORES {
        let (c, counts) = rx.recv_timeout(Duration::from_secs(50)).expect("bounded");
        assert_eq!(counts, vec![PER_PAIR; CORES]);
        cores.push(c);
    }
    cores.sort();
    assert_eq!(cores, vec![0, 1, 2]);
    rt.stop();
    let stats = rt.join();
    let msgs = (CORES * CORES) as u64 * PER_PAIR;
    eprintln!(
        "{msgs} cross-core messages in {:?}; doorbells {:?}",
        start.elapsed(),
        stats.iter().map(|s| s.doorbells_rung).collect::<Vec<_>>()
    );
    // Every off-core message went over a ring.
    assert_eq!(
        stats.iter().map(|s| s.mesh_in).sum::<u64>(),
        (CORES * (CORES - 1)) as u64 * PER_PAIR
    );
}

// ---------------------------------------------------------------------------------------------------------------

struct Pusher {
    target: std::net::SocketAddr,
    conn: Option<ConnId>,
    next: u64,
    refused: u64,
    writable: u64,
    total: u64,
    done: mpsc::Sender<(u64, u64)>,
}

impl Pusher {
    fn pump(&mut self, ctx: &mut CoreCtx<()>) {
        let Some(c) = self.conn else { return };
        while self.next < self.total {
            let chunk: Vec<u8> = (0..4096u64)
                .map(|i| ((self.next * 4096 + i) % 251) as u8)
                .collect();
            match ctx.send_bytes(c, vec![Bytes::from(chunk)]) {
                Ok(()) => self.next += 1,
                Err(SendError::Backpressure(_)) => {
                    self.refused += 1;
                    return;
                }
                Err(e) => panic!("{e:?}"),
            }
        }
        assert!(ctx.queued_bytes(c) <= 64 * 1024 + 4096, "bounded outgoing bytes");
        ctx.close_after_flush(c);
        self.done.send((self.refused, self.writable)).unwrap();
    }
}

impl Service for Pusher {
    type Msg = ();
    fn on_start(&mut self, ctx: &mut CoreCtx<()>) {
        self.conn = Some(
            ctx.connect(self.target, ConnectProto::Raw, Duration::from_secs(5))
                .unwrap(),
        );
    }
    fn on_connected(&mut self, ctx: &mut CoreCtx<()>, _c: ConnId, _p: Option<&reactor::msgr2::PeerInfo>) {
        self.pump(ctx);
    }
    fn on_writable(&mut self, ctx: &mut CoreCtx<()>, _c: ConnId) {
        self.writable += 1;
        self.pump(ctx);
    }
}

#[test]
fn raw_send_backpressure_then_writable() {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let target = l.local_addr().unwrap();
    let total = 4096u64; // 16 MiB in 4 KiB chunks, against a 64 KiB bound
    let (tx, rx) = mpsc::channel();
    let mut cfg = RuntimeConfig {
        pin: false,
        ..Default::default()
    };
    cfg.core.max_out_bytes = 64 * 1024;
    let rt = Runtime::start(cfg, move |_| Pusher {
        target,
        conn: None,
        next: 0,
        refused: 0,
        writable: 0,
        total,
        done: tx.clone(),
    })
    .unwrap();
    let (mut s, _) = l.accept().unwrap();
    // Do not read for a while: the socket buffers fill and the reactor must refuse.
    std::thread::sleep(Duration::from_millis(300));
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let mut got = Vec::with_capacity((total * 4096) as usize);
    s.read_to_end(&mut got).unwrap();
    assert_eq!(got.len() as u64, total * 4096);
    assert!(got.iter().enumerate().all(|(i, b)| *b == (i as u64 % 251) as u8));
    let (refused, writable) = rx.recv_timeout(Duration::from_secs(20)).unwrap();
    assert!(
        refused > 0 && writable > 0,
        "refused {refused} writable {writable}"
    );
    rt.stop();
    rt.join();
}
