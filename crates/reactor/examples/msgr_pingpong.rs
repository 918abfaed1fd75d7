// SPDX-License-Identifier: LGPL-3.0-or-later
//! msgr2 ping-pong over loopback: the reactor (server core + client core) against the blocking std::net adapter
//! (server thread + client thread), same messages, same run. Reports round trips per second and process CPU time
//! per message (user+system, both ends included: the build machines are shared, wall time alone is noisy).
//!
//! cargo run --release -p reactor --example msgr_pingpong [-- SECONDS]
//!
//! "reactor" runs the two cores unpinned, "reactor-pinned" pins them to CPUs 0 and 1: on a shared, oversubscribed
//! build machine a pinned core cannot flee a CPU another process is using, which the two lines make visible.
#![allow(clippy::unwrap_used)]

use bytes::Bytes;
use msgr2::auth::{AuthNone, AuthNoneServer, CON_MODE_SECURE, ClientAuth, ServerAuth};
use msgr2::blocking::{BlockingConnection, BlockingListener};
use msgr2::testing::{TestClientAuth, TestServerAuth};
use msgr2::types::{ENTITY_TYPE_CLIENT, ENTITY_TYPE_OSD, EntityName};
use msgr2::{Config, Message, PeerInfo};
use reactor::{ConnId, ConnectProto, CoreCtx, CoreId, ListenProto, Runtime, RuntimeConfig, Service};
use std::net::SocketAddr;
use std::sync::{Arc, mpsc};
use std::time::{Duration, Instant};

fn cpu_time() -> Duration {
    // SAFETY: getrusage fills the struct we own.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

fn server_auth(secure: bool) -> Box<dyn ServerAuth + Send> {
    if secure {
        Box::new(TestServerAuth::new(vec![CON_MODE_SECURE], b"k", &[5u8; 64]))
    } else {
        Box::new(AuthNoneServer::default())
    }
}

fn client_auth(secure: bool) -> Box<dyn ClientAuth + Send> {
    let name = EntityName::new(ENTITY_TYPE_CLIENT, "bench");
    if secure {
        Box::new(TestClientAuth::new(name, vec![CON_MODE_SECURE]))
    } else {
        Box::new(AuthNone::new(name, 0))
    }
}

fn msg(tid: u64, size: usize) -> Message {
    let mut m = Message::new(
        0x70,
        1,
        1,
        Bytes::from_static(b"ping-pong front 32 bytes........"),
    );
    m.tid = tid;
    if size > 0 {
        m.data = Bytes::from(vec![0xab; size]);
    }
    m
}

#[derive(Clone, Copy)]
struct Params {
    pin: bool,
    secure: bool,
    window: u64,
    size: usize,
    dur: Duration,
}

struct Result {
    round_trips: u64,
    wall: Duration,
    cpu: Duration,
}

impl Result {
    fn print(&self, name: &str, p: Params) {
        let rt_s = self.round_trips as f64 / self.wall.as_secs_f64();
        let msgs = 2 * self.round_trips;
        println!(
            "{name:14} {} window {:3} data {:7} B: {:9.0} round trips/s  {:9.0} msgs/s  CPU {:6.2} us/msg  ({} round trips, wall {:.2?}, cpu {:.2?})",
            if p.secure { "secure" } else { "crc   " },
            p.window,
            p.size,
            rt_s,
            2.0 * rt_s,
            self.cpu.as_secs_f64() * 1e6 / msgs as f64,
            self.round_trips,
            self.wall,
            self.cpu
        );
    }
}

// --- reactor ----------------------------------------------------------------------------------------------------

enum Ctl {
    Go(SocketAddr),
}

struct Node {
    p: Params,
    done: mpsc::Sender<(u64, Duration)>,
    conn: Option<ConnId>,
    sent: u64,
    got: u64,
    start: Option<Instant>,
    finished: bool,
}

impl Service for Node {
    type Msg = Ctl;
    fn on_start(&mut self, ctx: &mut CoreCtx<Ctl>) {
        if ctx.core_id() == 0 {
            let secure = self.p.secure;
            let auth: reactor::ServerAuthFactory = Arc::new(move || server_auth(secure));
            let (_, a) = ctx
                .listen(
                    "127.0.0.1:0".parse().unwrap(),
                    ListenProto::Msgr2 {
                        cfg: Config::new(ENTITY_TYPE_OSD, 0),
                        auth,
                    },
                )
                .unwrap();
            ctx.post(1, Ctl::Go(a)).map_err(|_| ()).unwrap();
        }
    }
    fn on_cross_core(&mut self, ctx: &mut CoreCtx<Ctl>, _from: CoreId, m: Ctl) {
        let Ctl::Go(a) = m;
        let proto = ConnectProto::Msgr2 {
            cfg: Config::new(ENTITY_TYPE_CLIENT, 1),
            auth: client_auth(self.p.secure),
            target_type: ENTITY_TYPE_OSD,
        };
        self.conn = Some(ctx.connect(a, proto, Duration::from_secs(5)).unwrap());
    }
    fn on_connected(&mut self, ctx: &mut CoreCtx<Ctl>, conn: ConnId, _p: Option<&PeerInfo>) {
        if Some(conn) != self.conn {
            return;
        }
        self.start = Some(Instant::now());
        for _ in 0..self.p.window {
            self.sent += 1;
            ctx.send_message(conn, msg(self.sent, self.p.size)).unwrap();
        }
    }
    fn on_message(&mut self, ctx: &mut CoreCtx<Ctl>, conn: ConnId, m: Message) {
        if ctx.core_id() == 0 {
            let mut r = Message::new(0x71, 1, 1, m.front.clone());
            r.tid = m.tid;
            r.data = m.data;
            ctx.send_message(conn, r).unwrap();
            return;
        }
        self.got += 1;
        if self.finished {
            return;
        }
        let el = self.start.map(|s| s.elapsed()).unwrap_or_default();
        if el >= self.p.dur {
            self.finished = true;
            self.done.send((self.got, el)).unwrap();
            return;
        }
        self.sent += 1;
        ctx.send_message(conn, msg(self.sent, self.p.size)).unwrap();
    }
}

fn run_reactor(p: Params) -> Result {
    let (tx, rx) = mpsc::channel();
    let cpu0 = cpu_time();
    let rt = Runtime::start(
        RuntimeConfig {
            cores: 2,
            pin: p.pin,
            ..Default::default()
        },
        move |_| Node {
            p,
            done: tx.clone(),
            conn: None,
            sent: 0,
            got: 0,
            start: None,
            finished: false,
        },
    )
    .unwrap();
    let (n, wall) = rx.recv_timeout(p.dur + Duration::from_secs(30)).unwrap();
    let cpu = cpu_time() - cpu0;
    rt.stop();
    let st = rt.join();
    if std::env::var_os("PINGPONG_STATS").is_some() {
        eprintln!("{st:?}");
    }
    Result {
        round_trips: n,
        wall,
        cpu,
    }
}

// --- blocking ---------------------------------------------------------------------------------------------------

fn run_blocking(p: Params) -> Result {
    let l = BlockingListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let t = Duration::from_secs(10);
    let srv = std::thread::spawn(move || {
        let mut c = l
            .accept(Config::new(ENTITY_TYPE_OSD, 0), server_auth(p.secure), t)
            .unwrap();
        while let Ok(Some(m)) = c.recv_message(t) {
            let mut r = Message::new(0x71, 1, 1, m.front.clone());
            r.tid = m.tid;
            r.data = m.data;
            if c.send(r).is_err() {
                break;
            }
        }
    });
    let auth = client_auth(p.secure);
    let mut c =
        BlockingConnection::connect(addr, Config::new(ENTITY_TYPE_CLIENT, 1), auth, ENTITY_TYPE_OSD, t)
            .unwrap();
    let cpu0 = cpu_time();
    let start = Instant::now();
    let mut sent = 0;
    for _ in 0..p.window {
        sent += 1;
        c.send(msg(sent, p.size)).unwrap();
    }
    let mut got = 0u64;
    let wall = loop {
        c.recv_message(t).unwrap().unwrap();
        got += 1;
        let el = start.elapsed();
        if el >= p.dur {
            break el;
        }
        sent += 1;
        c.send(msg(sent, p.size)).unwrap();
    };
    let cpu = cpu_time() - cpu0;
    c.close();
    srv.join().unwrap();
    Result {
        round_trips: got,
        wall,
        cpu,
    }
}

fn main() {
    let secs: f64 = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(2.0);
    let dur = Duration::from_secs_f64(secs);
    println!(
        "msgr2 ping-pong over loopback, {secs} s per case, {} CPUs",
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    for (secure, window, size) in [
        (false, 1, 0),
        (false, 32, 0),
        (false, 32, 4096),
        (true, 32, 4096),
        (false, 16, 64 << 10),
        (false, 8, 1 << 20),
    ] {
        let p = Params {
            pin: false,
            secure,
            window,
            size,
            dur,
        };
        run_reactor(p).print("reactor", p);
        run_reactor(Params { pin: true, ..p }).print("reactor-pinned", p);
        run_blocking(p).print("blocking", p);
    }
}
