// SPDX-License-Identifier: LGPL-3.0-or-later
//! Raw TCP through the reactor on 2 cores: both cores listen on one port (SO_REUSEPORT); every received chunk is
//! handed to the *other* core over the SPSC mesh, transformed there, and handed back to be written on the
//! connection's own core. Clients are plain std threads that check every byte. Also: a reactor-side client
//! (connect), connect failures and timeouts, backpressure, and timer ordering.
#![allow(clippy::unwrap_used)]

use bytes::Bytes;
use reactor::{
    CloseReason, ConnId, ConnectProto, CoreCtx, CoreId, ListenProto, Runtime, RuntimeConfig, SendError,
    Service, TimerId,
};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::mpsc;
use std::time::{Duration, Instant};

enum Msg {
    /// Transform this chunk and send it back to `home`.
    Work {
        home: CoreId,
        conn: ConnId,
        data: Bytes,
    },
    /// Write this reply on `conn` (owned by the receiving core).
    Reply {
        conn: ConnId,
        data: Bytes,
        by: CoreId,
    },
    Listening(SocketAddr),
}

struct Echo {
    addr_tx: mpsc::Sender<SocketAddr>,
    port: Option<u16>,
    handed: u64,
}

impl Service for Echo {
    type Msg = Msg;
    fn on_start(&mut self, ctx: &mut CoreCtx<Msg>) {
        // Core 0 picks the port; core 1 joins it once told.
        if ctx.core_id() == 0 {
            let (_, a) = ctx
                .listen("127.0.0.1:0".parse().unwrap(), ListenProto::Raw)
                .unwrap();
            self.port = Some(a.port());
            ctx.post(1, Msg::Listening(a)).map_err(|_| ()).unwrap();
        }
    }
    fn on_data(&mut self, ctx: &mut CoreCtx<Msg>, conn: ConnId, data: Bytes) {
        let other = 1 - ctx.core_id();
        self.handed += 1;
        ctx.post(
            other,
            Msg::Work {
                home: ctx.core_id(),
                conn,
                data,
            },
        )
        .map_err(|_| ())
        .unwrap();
    }
    fn on_cross_core(&mut self, ctx: &mut CoreCtx<Msg>, _from: CoreId, msg: Msg) {
        match msg {
            Msg::Listening(a) => {
                ctx.listen(a, ListenProto::Raw).unwrap();
                self.addr_tx.send(a).unwrap();
            }
            Msg::Work { home, conn, data } => {
                let out: Vec<u8> = data.iter().map(|b| b ^ 0x5a).collect();
                let by = ctx.core_id();
                ctx.post(
                    home,
                    Msg::Reply {
                        conn,
                        data: Bytes::from(out),
                        by,
                    },
                )
                .map_err(|_| ())
                .unwrap();
            }
            Msg::Reply { conn, data, by } => {
                assert_ne!(by, ctx.core_id(), "work must have crossed cores");
                // Backpressure is not expected here (the clients read everything), but a refusal must not lose
                // data: retry on the next turn through the local queue.
                if let Err(SendError::Backpressure(mut d)) = ctx.send_bytes(conn, vec![data]) {
                    let me = ctx.core_id();
                    ctx.post(
                        me,
                        Msg::Reply {
                            conn,
                            data: d.remove(0),
                            by,
                        },
                    )
                    .map_err(|_| ())
                    .unwrap();
                }
            }
        }
    }
}

/// Unpinned: the test machines are shared, and a pinned core waits behind whatever else runs on its CPU.
fn cfg(cores: usize) -> RuntimeConfig {
    let mut c = RuntimeConfig {
        cores,
        pin: false,
        ..Default::default()
    };
    c.core.recv_buf_bytes = 16 * 1024;
    c
}

#[test]
fn echo_two_cores_with_cross_core_handoff() {
    let (addr_tx, addr_rx) = mpsc::channel();
    let rt = Runtime::start(cfg(2), move |_core| Echo {
        addr_tx: addr_tx.clone(),
        port: None,
        handed: 0,
    })
    .unwrap();
    let addr = addr_rx.recv_timeout(Duration::from_secs(10)).unwrap();
    let deadline = Instant::now() + Duration::from_secs(40);
    let clients: Vec<_> = (0..8u64)
        .map(|k| {
            std::thread::spawn(move || {
                let mut s = TcpStream::connect(addr).unwrap();
                s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
                let mut rng = 0x9e3779b97f4a7c15u64 ^ k;
                let mut total = 0usize;
                for round in 0..200 {
                    rng ^= rng << 13;
                    rng ^= rng >> 7;
                    rng ^= rng << 17;
                    let len = 1 + (rng % 70_000) as usize;
                    let msg: Vec<u8> = (0..len).map(|i| (i as u64 ^ rng ^ round) as u8).collect();
                    s.write_all(&msg).unwrap();
                    let mut back = vec![0u8; len];
                    s.read_exact(&mut back).unwrap();
                    for (a, b) in msg.iter().zip(&back) {
                        assert_eq!(a ^ 0x5a, *b);
                    }
                    total += len;
                    assert!(Instant::now() < deadline, "client {k} too slow");
                }
                total
            })
        })
        .collect();
    let total: usize = clients.into_iter().map(|h| h.join().unwrap()).sum();
    rt.stop();
    let stats = rt.join();
    eprintln!("echoed {total} bytes; stats {stats:?}");
    assert!(
        stats.iter().all(|s| s.mesh_in > 0),
        "both cores took cross-core work"
    );
    assert_eq!(stats.iter().map(|s| s.sent_bytes).sum::<u64>(), total as u64);
    assert!(stats[0].accepted + stats[1].accepted == 8);
}

// ---------------------------------------------------------------------------------------------------------------

/// A reactor-side raw client: connect, send, read the echo back; connect failure and timeout are reported.
struct Client {
    server: SocketAddr,
    closed_port: SocketAddr,
    full_backlog: SocketAddr,
    done: mpsc::Sender<String>,
    got: Vec<u8>,
    want: Vec<u8>,
    conn: Option<ConnId>,
}

impl Service for Client {
    type Msg = ();
    fn on_start(&mut self, ctx: &mut CoreCtx<()>) {
        self.conn = Some(
            ctx.connect(self.server, ConnectProto::Raw, Duration::from_secs(5))
                .unwrap(),
        );
        ctx.connect(self.closed_port, ConnectProto::Raw, Duration::from_secs(5))
            .unwrap();
        // A listener whose accept queue is full drops our SYN: the connect must time out (linked timeout).
        ctx.connect(self.full_backlog, ConnectProto::Raw, Duration::from_millis(300))
            .unwrap();
    }
    fn on_connected(&mut self, ctx: &mut CoreCtx<()>, conn: ConnId, _p: Option<&reactor::msgr2::PeerInfo>) {
        assert_eq!(Some(conn), self.conn);
        // Many small buffers in one gathered write.
        let bufs: Vec<Bytes> = self.want.chunks(1000).map(Bytes::copy_from_slice).collect();
        ctx.send_bytes(conn, bufs).unwrap();
    }
    fn on_data(&mut self, ctx: &mut CoreCtx<()>, conn: ConnId, data: Bytes) {
        self.got.extend_from_slice(&data);
        if self.got.len() == self.want.len() {
            assert_eq!(self.got, self.want);
            self.done.send("echo ok".into()).unwrap();
            ctx.close(conn);
        }
    }
    fn on_reset(&mut self, _ctx: &mut CoreCtx<()>, _conn: ConnId, reason: CloseReason) {
        self.done.send(format!("{reason:?}")).unwrap();
    }
}

#[test]
fn reactor_client_connect_send_and_failures() {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let server = l.local_addr().unwrap();
    let closed_port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let (full_backlog, _keep) = full_listener();
    let srv = std::thread::spawn(move || {
        let (mut s, _) = l.accept().unwrap();
        let mut buf = vec![0u8; 300_000];
        s.read_exact(&mut buf).unwrap();
        s.write_all(&buf).unwrap();
        let _ = s.read(&mut [0u8; 1]);
    });
    let (done_tx, done_rx) = mpsc::channel();
    let want: Vec<u8> = (0..300_000u32).map(|i| (i * 7 % 251) as u8).collect();
    let rt = Runtime::start(cfg(1), move |_| Client {
        server,
        closed_port,
        full_backlog,
        done: done_tx.clone(),
        got: Vec::new(),
        want: want.clone(),
        conn: None,
    })
    .unwrap();
    let mut seen = Vec::new();
    for _ in 0..3 {
        seen.push(done_rx.recv_timeout(Duration::from_secs(20)).unwrap());
    }
    seen.sort();
    assert!(seen.contains(&"echo ok".to_string()), "{seen:?}");
    assert!(
        seen.iter()
            .any(|s| s == &format!("{:?}", CloseReason::ConnectFailed(libc_econnrefused()))),
        "{seen:?}"
    );
    assert!(seen.iter().any(|s| s == "ConnectTimeout"), "{seen:?}");
    drop(rt);
    srv.join().unwrap();
}

fn libc_econnrefused() -> i32 {
    libc::ECONNREFUSED
}

/// A listening socket with backlog 0 whose accept queue is already full (never accepted): further SYNs are
/// dropped, so connects to it hang until they time out.
fn full_listener() -> (SocketAddr, Vec<TcpStream>) {
    use std::os::fd::FromRawFd;
    // SAFETY: plain syscalls on a fresh socket; the fd is handed to a TcpListener that owns it.
    let l = unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM, 0);
        assert!(fd >= 0);
        let mut sin: libc::sockaddr_in = std::mem::zeroed();
        sin.sin_family = libc::AF_INET as libc::sa_family_t;
        sin.sin_addr.s_addr = u32::from_ne_bytes([127, 0, 0, 1]);
        assert_eq!(
            libc::bind(
                fd,
                &sin as *const _ as *const libc::sockaddr,
                std::mem::size_of::<libc::sockaddr_in>() as u32
            ),
            0
        );
        assert_eq!(libc::listen(fd, 0), 0);
        std::net::TcpListener::from_raw_fd(fd)
    };
    let addr = l.local_addr().unwrap();
    let mut keep = Vec::new();
    for _ in 0..4 {
        if let Ok(s) = TcpStream::connect_timeout(&addr, Duration::from_millis(200)) {
            keep.push(s);
        }
    }
    std::mem::forget(l);
    (addr, keep)
}

// ---------------------------------------------------------------------------------------------------------------

struct Timers {
    outside: Option<String>,
    fired: Vec<u64>,
    done: mpsc::Sender<Vec<u64>>,
    cancel: Option<TimerId>,
}

impl Service for Timers {
    type Msg = String;
    fn on_start(&mut self, ctx: &mut CoreCtx<String>) {
        let base = ctx.now() + Duration::from_millis(30);
        // Same deadline: creation order. Different deadlines: deadline order, whatever the creation order.
        for (token, ms) in [(5u64, 20u64), (1, 0), (2, 0), (3, 0), (4, 10), (6, 20), (99, 15)] {
            let id = ctx.set_timer_at(base + Duration::from_millis(ms), token);
            if token == 99 {
                self.cancel = Some(id);
            }
        }
        assert!(ctx.cancel_timer(self.cancel.unwrap()));
        assert!(!ctx.cancel_timer(self.cancel.unwrap()));
        ctx.set_timer(Duration::from_millis(200), 1000);
    }
    fn on_cross_core(&mut self, _ctx: &mut CoreCtx<String>, from: CoreId, msg: String) {
        assert_eq!(from, usize::MAX);
        self.outside = Some(msg);
    }
    fn on_timer(&mut self, ctx: &mut CoreCtx<String>, _id: TimerId, token: u64) {
        if token == 1000 {
            assert_eq!(self.outside.as_deref(), Some("from outside"));
            self.done.send(std::mem::take(&mut self.fired)).unwrap();
            ctx.stop_all();
        } else {
            assert!(ctx.now() >= Instant::now() - Duration::from_secs(5));
            self.fired.push(token);
        }
    }
}

#[test]
fn timers_fire_in_deadline_then_creation_order() {
    let (tx, rx) = mpsc::channel();
    let start = Instant::now();
    let rt = Runtime::start(cfg(1), move |_| Timers {
        outside: None,
        fired: Vec::new(),
        done: tx.clone(),
        cancel: None,
    })
    .unwrap();
    rt.post(0, "from outside".to_string()).unwrap();
    assert!(rt.post(5, "no such core".to_string()).is_err());
    let fired = rx.recv_timeout(Duration::from_secs(10)).unwrap();
    assert_eq!(fired, vec![1, 2, 3, 4, 5, 6]);
    assert!(start.elapsed() >= Duration::from_millis(200));
    rt.join();
}

// ---------------------------------------------------------------------------------------------------------------

struct Where(mpsc::Sender<(CoreId, Vec<usize>, &'static str)>);

impl Service for Where {
    type Msg = ();
    fn on_start(&mut self, ctx: &mut CoreCtx<()>) {
        self.0
            .send((ctx.core_id(), ctx.cpus(), ctx.ring_setup()))
            .unwrap();
    }
}

#[test]
fn cores_are_pinned_when_asked() {
    let (tx, rx) = mpsc::channel();
    let rt = Runtime::start(
        RuntimeConfig {
            cores: 2,
            pin: true,
            ..Default::default()
        },
        move |_| Where(tx.clone()),
    )
    .unwrap();
    let mut seen: Vec<_> = (0..2)
        .map(|_| rx.recv_timeout(Duration::from_secs(10)).unwrap())
        .collect();
    seen.sort();
    let allowed = std::thread::available_parallelism().map_or(1, |n| n.get());
    for (core, cpus, setup) in &seen {
        eprintln!("core {core}: cpus {cpus:?}, ring {setup}");
        assert_eq!(cpus.len(), 1, "pinned to one CPU");
        assert_eq!(
            *setup, "single_issuer+defer_taskrun+coop_taskrun",
            "this kernel (6.x) takes every flag"
        );
    }
    if allowed >= 2 {
        assert_ne!(seen[0].1, seen[1].1, "two cores, two CPUs");
    }
    rt.stop();
    rt.join();
}

/// The CPUs this thread may run on (sched_getaffinity), for choosing a list the test may pin to.
fn allowed_cpus() -> Vec<usize> {
    // SAFETY: cpu_set_t is plain data; the call writes at most its size; CPU_ISSET reads the set we own.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        assert_eq!(
            libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set),
            0
        );
        (0..libc::CPU_SETSIZE as usize)
            .filter(|&c| libc::CPU_ISSET(c, &set))
            .collect()
    }
}

#[test]
fn cores_run_on_the_listed_cpus() {
    // The allowed CPUs in reverse: core 0 must land on the last one, not on the first (what `pin` alone does).
    let mut listed = allowed_cpus();
    listed.reverse();
    let cores = listed.len().min(2);
    let (tx, rx) = mpsc::channel();
    let rt = Runtime::start(
        RuntimeConfig {
            cores,
            pin: true,
            cpus: listed.clone(),
            strict_pin: true,
            ..Default::default()
        },
        move |_| Where(tx.clone()),
    )
    .unwrap();
    let mut seen: Vec<_> = (0..cores)
        .map(|_| rx.recv_timeout(Duration::from_secs(10)).unwrap())
        .collect();
    seen.sort();
    for (core, cpus, _) in &seen {
        assert_eq!(
            cpus,
            &vec![listed[*core]],
            "core {core} on the {core}-th listed CPU"
        );
    }
    rt.stop();
    rt.join();

    // A CPU this process may not run on fails the start instead of leaving the core unpinned.
    let not_allowed = libc::CPU_SETSIZE as usize - 1;
    assert!(!listed.contains(&not_allowed));
    let err = Runtime::start(
        RuntimeConfig {
            cores: 1,
            pin: true,
            cpus: vec![not_allowed],
            strict_pin: true,
            ..Default::default()
        },
        |_| Where(mpsc::channel().0),
    )
    .err()
    .expect("an unusable CPU list is an error");
    assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput, "{err}");
}

struct Bounded(mpsc::Sender<SocketAddr>);

impl Service for Bounded {
    type Msg = ();
    fn on_start(&mut self, ctx: &mut CoreCtx<()>) {
        let (_, a) = ctx
            .listen("127.0.0.1:0".parse().unwrap(), ListenProto::Raw)
            .unwrap();
        self.0.send(a).unwrap();
    }
    fn on_data(&mut self, ctx: &mut CoreCtx<()>, conn: ConnId, data: Bytes) {
        ctx.send_bytes(conn, vec![data]).unwrap();
    }
}

#[test]
fn accepts_beyond_max_connections_are_refused() {
    let (tx, rx) = mpsc::channel();
    let mut c = cfg(1);
    c.core.max_connections = 1;
    let rt = Runtime::start(c, move |_| Bounded(tx.clone())).unwrap();
    let addr = rx.recv_timeout(Duration::from_secs(10)).unwrap();
    let mut a = TcpStream::connect(addr).unwrap();
    a.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    a.write_all(b"x").unwrap();
    let mut one = [0u8; 1];
    a.read_exact(&mut one).unwrap();
    let mut b = TcpStream::connect(addr).unwrap();
    b.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let _ = b.write_all(b"y");
    let n = b.read(&mut one).unwrap_or(0);
    assert_eq!(n, 0, "the second connection is closed unanswered");
    rt.stop();
    let st = rt.join();
    assert_eq!((st[0].accepted, st[0].refused), (1, 1));
}

struct Throttled {
    addr: mpsc::Sender<SocketAddr>,
    got: usize,
    paused_at: Option<usize>,
    conn: Option<ConnId>,
}

impl Service for Throttled {
    type Msg = ();
    fn on_start(&mut self, ctx: &mut CoreCtx<()>) {
        let (_, a) = ctx
            .listen("127.0.0.1:0".parse().unwrap(), ListenProto::Raw)
            .unwrap();
        self.addr.send(a).unwrap();
    }
    fn on_data(&mut self, ctx: &mut CoreCtx<()>, conn: ConnId, data: Bytes) {
        self.got += data.len();
        self.conn = Some(conn);
        if self.paused_at.is_none() && self.got >= 100_000 {
            self.paused_at = Some(self.got);
            ctx.pause_recv(conn);
            ctx.set_timer(Duration::from_millis(300), 1);
        }
        if self.got == 4_000_000 {
            ctx.send_bytes(conn, vec![Bytes::from_static(b"ok")]).unwrap();
        }
    }
    fn on_timer(&mut self, ctx: &mut CoreCtx<()>, _t: TimerId, _token: u64) {
        // Nothing arrived while paused (beyond the one recv that may have been in flight).
        let paused_at = self.paused_at.unwrap();
        assert!(
            self.got <= paused_at + 16 * 1024,
            "got {} paused at {paused_at}",
            self.got
        );
        ctx.resume_recv(self.conn.unwrap());
    }
}

#[test]
fn paused_receive_pushes_back_on_the_peer() {
    let (tx, rx) = mpsc::channel();
    let rt = Runtime::start(cfg(1), move |_| Throttled {
        addr: tx.clone(),
        got: 0,
        paused_at: None,
        conn: None,
    })
    .unwrap();
    let addr = rx.recv_timeout(Duration::from_secs(10)).unwrap();
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let start = Instant::now();
    s.write_all(&vec![7u8; 4_000_000]).unwrap();
    let mut ok = [0u8; 2];
    s.read_exact(&mut ok).unwrap();
    assert_eq!(&ok, b"ok");
    assert!(
        start.elapsed() >= Duration::from_millis(300),
        "the pause held the writer back"
    );
    rt.stop();
    rt.join();
}

struct Crasher;

impl Service for Crasher {
    type Msg = ();
    fn on_start(&mut self, ctx: &mut CoreCtx<()>) {
        if ctx.core_id() == 1 {
            ctx.set_timer(Duration::from_millis(50), 0);
        }
    }
    fn on_timer(&mut self, _ctx: &mut CoreCtx<()>, _t: TimerId, _token: u64) {
        panic!("deliberate panic on core 1 (expected by the test)");
    }
}

#[test]
fn a_panicking_core_stops_the_runtime() {
    let rt = Runtime::start(cfg(2), |_| Crasher).unwrap();
    let start = Instant::now();
    while !rt.is_stopping() {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "core 0 kept running alone"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    let stats = rt.join();
    assert_eq!(stats.len(), 2);
}

/// Sends a numbered byte stream in odd-sized chunks as fast as backpressure allows; the client reads late, so
/// `sendmsg` completes partially and recycled send slots are reused many times.
struct Streamer {
    addr: mpsc::Sender<SocketAddr>,
    sent: usize,
    conn: Option<ConnId>,
}

const STREAM_TOTAL: usize = 6_000_000;

fn stream_byte(i: usize) -> u8 {
    (i % 251) as u8
}

impl Streamer {
    fn pump(&mut self, ctx: &mut CoreCtx<()>) {
        let Some(conn) = self.conn else { return };
        while self.sent < STREAM_TOTAL {
            // Chunk sizes 1..=8191, several per call: many iovecs per sendmsg, splits at odd offsets.
            let mut bufs = Vec::new();
            for _ in 0..7 {
                let n = (1 + (self.sent * 7919) % 8191).min(STREAM_TOTAL - self.sent);
                if n == 0 {
                    break;
                }
                let chunk: Vec<u8> = (self.sent..self.sent + n).map(stream_byte).collect();
                bufs.push(Bytes::from(chunk));
                self.sent += n;
            }
            let n: usize = bufs.iter().map(Bytes::len).sum();
            if ctx.send_bytes(conn, bufs).is_err() {
                // Over the outgoing bound: take the bytes back and wait for on_writable.
                self.sent -= n;
                return;
            }
        }
    }
}

impl Service for Streamer {
    type Msg = ();
    fn on_start(&mut self, ctx: &mut CoreCtx<()>) {
        let (_, a) = ctx
            .listen("127.0.0.1:0".parse().unwrap(), ListenProto::Raw)
            .unwrap();
        self.addr.send(a).unwrap();
    }
    fn on_data(&mut self, ctx: &mut CoreCtx<()>, conn: ConnId, _data: Bytes) {
        self.conn = Some(conn);
        self.pump(ctx);
    }
    fn on_writable(&mut self, ctx: &mut CoreCtx<()>, _conn: ConnId) {
        self.pump(ctx);
    }
}

/// Returns once the receive queue of `s` has held the same non-zero byte count for 200 ms (at most 10 s).
fn wait_until_queue_settles(s: &TcpStream) {
    use std::os::fd::AsRawFd;
    let deadline = Instant::now() + Duration::from_secs(10);
    let (mut last, mut since) = (-1, Instant::now());
    while Instant::now() < deadline {
        let mut queued: libc::c_int = 0;
        // SAFETY: FIONREAD writes one c_int through the pointer, which points at a live local.
        if unsafe { libc::ioctl(s.as_raw_fd(), libc::FIONREAD, &mut queued) } != 0 {
            return;
        }
        if queued != last {
            (last, since) = (queued, Instant::now());
        } else if queued > 0 && since.elapsed() >= Duration::from_millis(200) {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn partial_sends_keep_the_byte_order() {
    let (tx, rx) = mpsc::channel();
    let rt = Runtime::start(cfg(1), move |_| Streamer {
        addr: tx.clone(),
        sent: 0,
        conn: None,
    })
    .unwrap();
    let addr = rx.recv_timeout(Duration::from_secs(10)).unwrap();
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    s.write_all(b"go").unwrap();
    // Let the socket buffers fill so sends complete partially: wait until the bytes queued here stop growing (the
    // sender is then held by a full window), not a fixed time, which a loaded machine can outlast.
    wait_until_queue_settles(&s);
    let mut got = vec![0u8; STREAM_TOTAL];
    s.read_exact(&mut got).unwrap();
    if let Some(i) = (0..STREAM_TOTAL).find(|&i| got[i] != stream_byte(i)) {
        panic!("byte {i} is {} instead of {}", got[i], stream_byte(i));
    }
    rt.stop();
    let st = rt.join();
    assert_eq!(st[0].sent_bytes, STREAM_TOTAL as u64);
    // Partial: a ring send that wrote less than asked, or a direct send that left bytes for the ring.
    assert!(
        st[0].partial_sends + st[0].direct_sends_partial > 0,
        "no partial send happened: {:?}",
        st[0]
    );
}
