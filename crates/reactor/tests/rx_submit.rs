// SPDX-License-Identifier: LGPL-3.0-or-later
//! `CoreConfig::rx_submit_bytes`: when a turn receives several large messages back to back (a client's 4 MiB
//! writes at a queue depth), the device entries the first one queued reach the kernel before the next one is
//! received, not only at the turn's end.
//!
//! The "device" writes one byte into a pipe per delivered message (an io_uring WRITE, done inline when
//! submitted). On each message the service first looks how many bytes the pipe holds: a message delivered in
//! the same turn as the one before it finds that one's byte already there exactly when its entry was submitted
//! before the receive.
#![allow(clippy::unwrap_used)] // test code: a panic is the failure report

mod common;

use bytes::Bytes;
use msgr2::{Message, PeerInfo};
use reactor::{ConnId, CoreConfig, CoreCtx, CoreStats, DeviceRing, Runtime, RuntimeConfig, Service, TimerId};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, mpsc};
use std::time::Duration;

/// Messages the client pipelines, and their data length (each above the threshold the tests set).
const N: u64 = 6;
const DATA_LEN: usize = 512 * 1024;
const THRESHOLD: usize = 256 * 1024;

static BYTE: [u8; 1] = [b'w'];

/// Per message in delivery order: (tid, turn, bytes the pipe held before this message's own write).
type Seen = Vec<(u64, u64, usize)>;

struct Server {
    addr_tx: mpsc::Sender<SocketAddr>,
    seen: Arc<Mutex<Seen>>,
    conn: Option<ConnId>,
    ring: Option<DeviceRing>,
    pipe: [i32; 2],
    in_pipe: usize,
    taken: Vec<(u64, i32)>,
}

impl Service for Server {
    type Msg = ();
    fn on_start(&mut self, ctx: &mut CoreCtx<()>) {
        self.ring = Some(ctx.device_ring());
        let a = common::listen_msgr2(ctx, common::auth_none());
        self.addr_tx.send(a).unwrap();
    }
    fn on_connected(&mut self, ctx: &mut CoreCtx<()>, conn: ConnId, _peer: Option<&PeerInfo>) {
        common::hold_receives(ctx, conn);
        self.conn = Some(conn);
    }
    fn on_timer(&mut self, ctx: &mut CoreCtx<()>, _t: TimerId, _token: u64) {
        if let Some(c) = self.conn {
            ctx.resume_recv(c);
        }
    }
    fn on_message(&mut self, ctx: &mut CoreCtx<()>, conn: ConnId, m: Message) {
        assert_eq!(m.data.len(), DATA_LEN);
        let mut buf = [0u8; 64];
        // SAFETY: reading into a local buffer from our own non-blocking pipe.
        let n = unsafe { libc::read(self.pipe[0], buf.as_mut_ptr().cast(), buf.len()) };
        self.in_pipe += n.max(0) as usize;
        let turn = ctx.stats().turns;
        self.seen.lock().unwrap().push((m.tid, turn, self.in_pipe));
        let e = io_uring::opcode::Write::new(io_uring::types::Fd(self.pipe[1]), BYTE.as_ptr(), 1).build();
        let ring = self.ring.as_ref().unwrap();
        // SAFETY: BYTE is static; the pipe stays open until the runtime has stopped.
        unsafe { ring.push(e, m.tid) };
        ring.take(&mut self.taken);
        let mut r = Message::new(m.msg_type + 1, 1, 1, Bytes::from_static(b"ok"));
        r.tid = m.tid;
        ctx.send_message(conn, r).map_err(|e| format!("{e:?}")).unwrap();
    }
}

fn run(rx_submit_bytes: usize) -> (Seen, CoreStats) {
    let mut pipe = [0i32; 2];
    // SAFETY: pipe2 fills the two descriptors.
    assert_eq!(
        unsafe { libc::pipe2(pipe.as_mut_ptr(), libc::O_NONBLOCK | libc::O_CLOEXEC) },
        0
    );
    let (addr_tx, addr_rx) = mpsc::channel();
    let seen = Arc::new(Mutex::new(Seen::new()));
    let s2 = seen.clone();
    let rt = Runtime::start(
        RuntimeConfig {
            cores: 1,
            pin: false,
            core: CoreConfig {
                rx_submit_bytes,
                // Isolate this mechanism from the one that submits when device completions wait.
                early_device_submit: false,
                ..CoreConfig::default()
            },
            ..Default::default()
        },
        move |_| Server {
            addr_tx: addr_tx.clone(),
            seen: s2.clone(),
            conn: None,
            ring: None,
            pipe,
            in_pipe: 0,
            taken: Vec::new(),
        },
    )
    .unwrap();
    let addr = addr_rx.recv_timeout(Duration::from_secs(10)).unwrap();
    let t = Duration::from_secs(20);
    let mut c = common::connect_client(addr, t);
    // Sent from a thread: the paused server's socket may not take all of it at once.
    let sender = std::thread::spawn(move || {
        for i in 1..=N {
            let data: Vec<u8> = (0..DATA_LEN).map(|k| (k as u64 * 7 + i) as u8).collect();
            let mut m =
                Message::new(0x70, 1, 1, Bytes::from(vec![i as u8; 240])).with_data(Bytes::from(data));
            m.tid = i;
            c.send(m).unwrap();
        }
        c
    });
    let mut c = sender.join().unwrap();
    for i in 1..=N {
        let r = c.recv_message(t).unwrap().unwrap();
        assert_eq!((r.msg_type, r.tid), (0x71, i));
    }
    c.close();
    rt.stop();
    let st = rt.join().remove(0);
    for fd in pipe {
        // SAFETY: our own descriptors, no longer used by the stopped runtime.
        unsafe { libc::close(fd) };
    }
    let seen = std::mem::take(&mut *seen.lock().unwrap());
    (seen, st)
}

/// (messages delivered in the same turn as the one before them, how many of those found every earlier
/// message's write already in the pipe).
fn same_turn_pairs(s: &Seen) -> (usize, usize) {
    let mut pairs = 0;
    let mut submitted = 0;
    for (k, w) in s.windows(2).enumerate() {
        if w[0].1 == w[1].1 {
            pairs += 1;
            // k + 1 messages came before w[1], each with one byte.
            if w[1].2 == k + 1 {
                submitted += 1;
            }
        }
    }
    (pairs, submitted)
}

#[test]
fn a_large_messages_device_entries_are_submitted_before_the_next_receive() {
    // The receives are paced by the kernel, so retry until some messages share a turn.
    for attempt in 0..5 {
        let (s, st) = run(THRESHOLD);
        assert_eq!(s.len() as u64, N);
        let (pairs, submitted) = same_turn_pairs(&s);
        eprintln!("on, attempt {attempt}: {s:?}; {st:?}");
        if pairs == 0 {
            continue;
        }
        assert_eq!(submitted, pairs, "entries waited for the turn's end: {s:?}");
        assert!(st.rx_device_submits >= 1, "{st:?}");
        return;
    }
    panic!("no two large messages were ever delivered in one turn");
}

#[test]
fn without_it_they_wait_for_the_turns_end() {
    // The control: the test above can fail.
    for attempt in 0..5 {
        let (s, st) = run(0);
        assert_eq!(s.len() as u64, N);
        let (pairs, submitted) = same_turn_pairs(&s);
        eprintln!("off, attempt {attempt}: {s:?}; {st:?}");
        if pairs == 0 {
            continue;
        }
        assert_eq!(submitted, 0, "{s:?}");
        assert_eq!(st.rx_device_submits, 0, "{st:?}");
        return;
    }
    panic!("no two large messages were ever delivered in one turn");
}
