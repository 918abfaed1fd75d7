// SPDX-License-Identifier: LGPL-3.0-or-later
//! Handing accepted sockets to another core (raw and msgr2), and the storage hooks: ferrostore's io_uring device
//! polled from a core's loop, a sibling ring watched by fd, and raw entries on the core's own ring.
#![allow(clippy::unwrap_used)]

mod common;

use bytes::Bytes;
use ferrostore::Device;
use ferrostore::uring::{UringDevice, UringOptions};
use io_uring::{IoUring, opcode, types};
use msgr2::auth::AuthNone;
use msgr2::blocking::BlockingConnection;
use msgr2::types::{ENTITY_TYPE_CLIENT, ENTITY_TYPE_OSD, EntityName};
use msgr2::{Config, Message};
use reactor::{ConnId, CoreCtx, CoreId, ListenProto, ListenerId, Runtime, RuntimeConfig, Service, WatchId};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::mpsc;
use std::time::Duration;

struct Mover {
    addr_tx: mpsc::Sender<(SocketAddr, SocketAddr)>,
    served: mpsc::Sender<CoreId>,
}

impl Service for Mover {
    type Msg = ();
    fn on_start(&mut self, ctx: &mut CoreCtx<()>) {
        if ctx.core_id() == 0 {
            let (_, raw) = ctx
                .listen("127.0.0.1:0".parse().unwrap(), ListenProto::Raw)
                .unwrap();
            let m = common::listen_msgr2(ctx, common::auth_none());
            self.addr_tx.send((raw, m)).unwrap();
        }
    }
    fn on_accept(&mut self, ctx: &mut CoreCtx<()>, _l: ListenerId, conn: ConnId, _peer: SocketAddr) {
        // Everything is served by core 1.
        ctx.hand_off(conn, 1).unwrap();
        assert!(ctx.hand_off(conn, 1).is_err(), "the id is dead here now");
    }
    fn on_handoff(&mut self, ctx: &mut CoreCtx<()>, _conn: ConnId, _peer: SocketAddr, from: CoreId) {
        assert_eq!((ctx.core_id(), from), (1, 0));
    }
    fn on_data(&mut self, ctx: &mut CoreCtx<()>, conn: ConnId, data: Bytes) {
        self.served.send(ctx.core_id()).unwrap();
        ctx.send_bytes(conn, vec![data]).unwrap();
    }
    fn on_message(&mut self, ctx: &mut CoreCtx<()>, conn: ConnId, m: Message) {
        self.served.send(ctx.core_id()).unwrap();
        let mut r = Message::new(m.msg_type + 1, 1, 1, m.front.clone());
        r.tid = m.tid;
        r.data = m.data;
        ctx.send_message(conn, r).unwrap();
    }
}

#[test]
fn accepted_sockets_move_to_another_core() {
    let (addr_tx, addr_rx) = mpsc::channel();
    let (served_tx, served_rx) = mpsc::channel();
    let rt = Runtime::start(
        RuntimeConfig {
            cores: 2,
            pin: false,
            ..Default::default()
        },
        move |_| Mover {
            addr_tx: addr_tx.clone(),
            served: served_tx.clone(),
        },
    )
    .unwrap();
    let (raw, m) = addr_rx.recv_timeout(Duration::from_secs(10)).unwrap();
    let mut s = TcpStream::connect(raw).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(b"hello core one").unwrap();
    let mut back = [0u8; 14];
    s.read_exact(&mut back).unwrap();
    assert_eq!(&back, b"hello core one");
    let t = Duration::from_secs(10);
    let auth = Box::new(AuthNone::new(EntityName::new(ENTITY_TYPE_CLIENT, "t"), 0));
    let mut c =
        BlockingConnection::connect(m, Config::new(ENTITY_TYPE_CLIENT, 1), auth, ENTITY_TYPE_OSD, t).unwrap();
    let mut msg = Message::new(0x70, 1, 1, Bytes::from_static(b"front"));
    msg.data = Bytes::from(vec![3u8; 100_000]);
    c.send(msg).unwrap();
    let r = c.recv_message(t).unwrap().unwrap();
    assert_eq!((r.msg_type, r.data.len()), (0x71, 100_000));
    drop(s);
    c.close();
    rt.stop();
    let stats = rt.join();
    assert_eq!(stats[0].accepted, 2);
    assert_eq!(stats[1].accepted, 0);
    assert!(served_rx.try_iter().all(|core| core == 1));
}

// ---------------------------------------------------------------------------------------------------------------

enum Step {
    Start,
}

struct Storage {
    dev: UringDevice,
    sibling: IoUring,
    nop_ts: Box<types::Timespec>,
    watch: Option<WatchId>,
    events: mpsc::Sender<String>,
    wrote: bool,
    raw_done: bool,
    sibling_done: bool,
    read_back: bool,
}

impl Storage {
    fn maybe_finish(&mut self, ctx: &mut CoreCtx<Step>) {
        if self.read_back && self.raw_done && self.sibling_done {
            self.events.send("done".into()).unwrap();
            ctx.stop_all();
        }
    }
}

impl Service for Storage {
    type Msg = Step;
    fn on_start(&mut self, ctx: &mut CoreCtx<Step>) {
        ctx.post(0, Step::Start).map_err(|_| ()).unwrap();
    }
    fn on_cross_core(&mut self, ctx: &mut CoreCtx<Step>, _from: CoreId, _m: Step) {
        // 1. ferrostore's device: a write, then (on completion) a read, all polled from on_poll.
        let block = Bytes::from(vec![0x5au8; 4096]);
        self.dev.submit_write(1, 8192, vec![block]);
        ctx.keep_polling();
        // 2. A sibling ring watched by fd: a 20 ms timeout completes on it and wakes this core.
        self.watch = Some(ctx.watch_fd(self.sibling.as_raw_fd()));
        let e = opcode::Timeout::new(&*self.nop_ts as *const types::Timespec)
            .build()
            .user_data(7);
        // SAFETY: the timespec is owned by self and outlives the op.
        unsafe { self.sibling.submission().push(&e).unwrap() };
        self.sibling.submit().unwrap();
        // 3. A raw entry on the core's own ring.
        // SAFETY: a NOP points to nothing.
        unsafe { ctx.submit_raw(opcode::Nop::new().build(), 42) };
    }
    fn on_poll(&mut self, ctx: &mut CoreCtx<Step>) {
        let mut out = Vec::new();
        self.dev.poll(&mut out);
        if std::env::var_os("HOOKS_DEBUG").is_some() {
            eprintln!(
                "poll: {} in flight, {} completions, stats {:?}",
                self.dev.in_flight(),
                out.len(),
                ctx.stats()
            );
        }
        for c in out {
            match (c.tag, c.result) {
                (1, Ok(None)) => {
                    self.wrote = true;
                    self.dev.submit_read(2, 8192, 4096);
                }
                (2, Ok(Some(b))) => {
                    assert!(self.wrote);
                    assert_eq!(b.len(), 4096);
                    assert!(b.iter().all(|x| *x == 0x5a));
                    self.read_back = true;
                    self.events.send("device read back".into()).unwrap();
                }
                (tag, r) => panic!("device completion {tag}: {r:?}"),
            }
        }
        if self.dev.in_flight() > 0 {
            ctx.keep_polling();
        }
        self.maybe_finish(ctx);
    }
    fn on_fd_ready(&mut self, ctx: &mut CoreCtx<Step>, w: WatchId) {
        assert_eq!(Some(w), self.watch);
        let got: Vec<u64> = self.sibling.completion().map(|c| c.user_data()).collect();
        if got.contains(&7) {
            self.sibling_done = true;
            ctx.unwatch_fd(w);
            self.events.send("sibling ring".into()).unwrap();
        }
        self.maybe_finish(ctx);
    }
    fn on_raw_completion(&mut self, ctx: &mut CoreCtx<Step>, token: u64, result: i32, _flags: u32) {
        assert_eq!((token, result), (42, 0));
        self.raw_done = true;
        self.events.send("raw nop".into()).unwrap();
        self.maybe_finish(ctx);
    }
}

#[test]
fn storage_hooks_ferrostore_device_sibling_ring_raw_entries() {
    let dir = std::env::temp_dir().join(format!("reactor-hooks-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("dev");
    let (tx, rx) = mpsc::channel();
    let p2 = path.clone();
    let rt = match Runtime::start(RuntimeConfig::default(), move |_| Storage {
        // Opened on the core's thread: the device ring is SINGLE_ISSUER too.
        dev: UringDevice::open(&p2, Some(1 << 20), UringOptions::default()).unwrap(),
        sibling: IoUring::new(8).unwrap(),
        nop_ts: Box::new(types::Timespec::new().nsec(20_000_000)),
        watch: None,
        events: tx.clone(),
        wrote: false,
        raw_done: false,
        sibling_done: false,
        read_back: false,
    }) {
        Ok(rt) => rt,
        Err(e) => panic!("start: {e}"),
    };
    let mut seen = Vec::new();
    while !seen.contains(&"done".to_string()) {
        match rx.recv_timeout(Duration::from_secs(20)) {
            Ok(e) => seen.push(e),
            Err(e) => panic!("{e:?}; seen so far: {seen:?}"),
        }
    }
    seen.sort();
    assert_eq!(seen, vec!["device read back", "done", "raw nop", "sibling ring"]);
    rt.join();
    let _ = std::fs::remove_dir_all(&dir);
}
