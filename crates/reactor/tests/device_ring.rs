// SPDX-License-Identifier: LGPL-3.0-or-later
//! Storage hook 3: a ferrostore store whose device submits on the core's own ring (`CoreCtx::device_ring`),
//! next to socket IO: group commits complete through the core's loop, a blocking checkpoint and blocking reads
//! wait on the core's ring inside a callback (the core's other completions that arrive meanwhile are set aside
//! and dispatched later, none lost), and unmount drains through the ring at stop.
#![allow(clippy::unwrap_used)]

use bytes::Bytes;
use ferrostore::uring::{SharedRing, UringDevice, UringOptions};
use ferrostore::{CollectionId, Event, MkfsOptions, ObjectKey, Op, Store, StoreConfig, Transaction, mkfs};
use io_uring::{opcode, squeue};
use reactor::{
    ConnId, CoreCtx, CoreStats, DeviceRing, ListenProto, ListenerId, Runtime, RuntimeConfig, Service,
};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::mpsc;
use std::time::Duration;

struct CoreRing(DeviceRing);

impl SharedRing for CoreRing {
    unsafe fn push(&mut self, entry: squeue::Entry, token: u64) {
        // SAFETY: forwarded to the caller.
        unsafe { self.0.push(entry, token) }
    }
    fn take(&mut self, out: &mut Vec<(u64, i32)>) {
        self.0.take(out)
    }
    fn wait(&mut self) {
        self.0.wait()
    }
    fn register_buffer_slots(&mut self, n: u32) -> bool {
        self.0.register_buffer_slots(n).is_ok()
    }
    unsafe fn set_buffer(&mut self, index: u32, ptr: *mut u8, len: usize) -> bool {
        // SAFETY: forwarded to the caller (the device keeps registered buffers allocated).
        unsafe { self.0.set_buffer(index, ptr, len) }.is_ok()
    }
}

const OBJECTS: u64 = 48;

fn cid() -> CollectionId {
    CollectionId::new(&b"c"[..])
}

fn oid(i: u64) -> ObjectKey {
    ObjectKey::new(i as u32, format!("obj{i:04}"))
}

/// Page-aligned 4 KiB of `i`'s pattern (the zero-copy write path).
fn block(i: u64) -> Bytes {
    let mut v = vec![0u8; 8192];
    let off = v.as_ptr().align_offset(4096);
    for (k, x) in v[off..off + 4096].iter_mut().enumerate() {
        *x = (i as u8) ^ (k as u8);
    }
    Bytes::from(v).slice(off..off + 4096)
}

struct Node {
    store: Option<Store<UringDevice>>,
    addr: mpsc::Sender<SocketAddr>,
    done: mpsc::Sender<CoreStats>,
    conn: Option<ConnId>,
    queued: u64,
    durable: u64,
    phase: u8,
    raw_seen: bool,
    evs: Vec<Event>,
}

impl Node {
    fn queue(&mut self, from: u64, to: u64) {
        let s = self.store.as_mut().unwrap();
        for i in from..to {
            let mut t = Transaction::new();
            t.push(Op::Write {
                cid: cid(),
                oid: oid(i),
                offset: 0,
                data: block(i),
            });
            s.queue_transaction(&t).unwrap();
            self.queued += 1;
        }
    }
}

impl Service for Node {
    type Msg = ();
    fn on_start(&mut self, ctx: &mut CoreCtx<()>) {
        let ring = Box::new(CoreRing(ctx.device_ring()));
        let s = self.store.as_mut().unwrap();
        s.device_mut().attach(ring);
        assert!(s.device().is_attached());
        let (_, a) = ctx
            .listen("127.0.0.1:0".parse().unwrap(), ListenProto::Raw)
            .unwrap();
        self.addr.send(a).unwrap();
    }
    fn on_accept(&mut self, _ctx: &mut CoreCtx<()>, _l: ListenerId, conn: ConnId, _peer: SocketAddr) {
        self.conn = Some(conn);
    }
    fn on_data(&mut self, ctx: &mut CoreCtx<()>, conn: ConnId, data: Bytes) {
        if &data[..] == b"go" && self.phase == 0 {
            self.phase = 1;
            self.queue(0, OBJECTS / 2);
        }
        // Echoed: socket IO keeps flowing next to the device's.
        ctx.send_bytes(conn, vec![data]).unwrap();
    }
    fn on_raw_completion(&mut self, _ctx: &mut CoreCtx<()>, token: u64, result: i32, _flags: u32) {
        // Submitted right before the blocking checkpoint: it completed during the device's wait on the core's
        // ring and must still come here, afterwards.
        assert_eq!((token, result), (77, 0));
        assert!(self.phase >= 2);
        self.raw_seen = true;
    }
    fn on_poll(&mut self, ctx: &mut CoreCtx<()>) {
        let Some(s) = self.store.as_mut() else { return };
        s.poll(&mut self.evs).unwrap();
        for e in self.evs.drain(..) {
            if let Event::Durable(_) = e {
                self.durable += 1;
            }
        }
        if self.phase == 1 && self.durable == OBJECTS / 2 {
            self.phase = 2;
            // The second half is in flight on the core's ring while the checkpoint blocks on it.
            self.queue(OBJECTS / 2, OBJECTS);
            // SAFETY: a NOP points to nothing.
            unsafe { ctx.submit_raw(opcode::Nop::new().build(), 77) };
            let s = self.store.as_mut().unwrap();
            s.checkpoint().unwrap();
            // Everything queued before the checkpoint is durable now; the events come with the next poll.
            s.poll(&mut self.evs).unwrap();
        }
        if self.phase == 2 && self.durable == OBJECTS && self.raw_seen {
            self.phase = 3;
            let s = self.store.as_mut().unwrap();
            for i in 0..OBJECTS {
                // A blocking read through the core's ring.
                let got = s.read(&cid(), &oid(i), 0, 4096).unwrap();
                assert_eq!(got, block(i), "object {i}");
            }
            // The reads went to registered buffers on the core's ring (its fixed-buffer table is the device's).
            assert!(s.device_stats().reads_fixed > 0, "{:?}", s.device_stats());
            if let Some(c) = self.conn {
                ctx.send_bytes(c, vec![Bytes::from_static(b"ok")]).unwrap();
            }
        }
    }
    fn on_stop(&mut self, ctx: &mut CoreCtx<()>) {
        if let Some(s) = self.store.take() {
            // Unmount: a blocking drain, checkpoint and flush on the core's ring.
            let dev = s.umount().unwrap();
            drop(dev);
        }
        self.done.send(ctx.stats()).unwrap();
    }
}

fn run(dsync: bool) {
    let dir = std::env::temp_dir().join(format!("reactor-devring-{}-{dsync}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("dev");
    let opts = UringOptions {
        dsync_writes: dsync,
        ..UringOptions::default()
    };
    let dev = match UringDevice::open(&path, Some(64 << 20), opts) {
        Ok(d) => d,
        Err(e) => {
            eprintln!(
                "skipping: cannot open {} with O_DIRECT + io_uring: {e}",
                path.display()
            );
            return;
        }
    };
    let dev = mkfs(dev, &MkfsOptions::default()).unwrap();
    drop(dev);
    let (addr_tx, addr_rx) = mpsc::channel();
    let (done_tx, done_rx) = mpsc::channel();
    let p2 = path.clone();
    let rt = Runtime::start(
        RuntimeConfig {
            cores: 1,
            pin: false,
            ..Default::default()
        },
        move |_| {
            // Mounted on the core's thread (its own ring until on_start attaches it to the core's).
            let dev = UringDevice::open(&p2, None, opts).unwrap();
            let mut store = Store::mount(dev, 0, StoreConfig::default()).unwrap();
            let mut t = Transaction::new();
            t.push(Op::CreateCollection { cid: cid(), bits: 0 });
            store.commit(&t).unwrap();
            Node {
                store: Some(store),
                addr: addr_tx.clone(),
                done: done_tx.clone(),
                conn: None,
                queued: 0,
                durable: 0,
                phase: 0,
                raw_seen: false,
                evs: Vec::new(),
            }
        },
    )
    .unwrap();
    let a = addr_rx.recv_timeout(Duration::from_secs(20)).unwrap();
    let mut c = TcpStream::connect(a).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    c.write_all(b"go").unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 64];
    while !got.ends_with(b"ok") {
        let n = match c.read(&mut buf) {
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            r => r.unwrap(),
        };
        assert!(n > 0, "connection closed; got {got:?}");
        got.extend_from_slice(&buf[..n]);
    }
    assert_eq!(&got[..], b"gook");
    rt.stop();
    rt.join();
    let st = done_rx.recv_timeout(Duration::from_secs(10)).unwrap();
    assert!(st.device_sqes >= OBJECTS, "{st:?}");
    assert_eq!(
        st.device_sqes, st.device_cqes,
        "every device entry completed: {st:?}"
    );
    assert!(
        st.device_waits > 0,
        "the checkpoint and the reads blocked on the core's ring: {st:?}"
    );
    // Remount on a fresh device: everything is there and fsck is clean.
    let dev = UringDevice::open(&path, None, opts).unwrap();
    let mut s = Store::mount(dev, 0, StoreConfig::default()).unwrap();
    for i in 0..OBJECTS {
        assert_eq!(s.read(&cid(), &oid(i), 0, 4096).unwrap(), block(i));
    }
    let r = s.fsck().unwrap();
    assert!(r.errors.is_empty(), "{:?}", r.errors);
    drop(s);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn store_on_the_core_ring_fdatasync() {
    run(false);
}

#[test]
fn store_on_the_core_ring_dsync() {
    run(true);
}
