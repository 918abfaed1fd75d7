// SPDX-License-Identifier: LGPL-3.0-or-later
//! msgr2 over real loopback TCP through the reactor: a server core and a client core (crc mode with AuthNone,
//! secure mode with the test auth), many messages with data segments up to ~1 MB, every payload checked, order
//! checked; and the reactor's server against the independent blocking std::net client.
#![allow(clippy::unwrap_used)]

use bytes::Bytes;
use msgr2::auth::{AuthNone, AuthNoneServer, CON_MODE_CRC, CON_MODE_SECURE, ClientAuth, ServerAuth};
use msgr2::blocking::BlockingConnection;
use msgr2::testing::{TestClientAuth, TestServerAuth};
use msgr2::types::{ENTITY_TYPE_CLIENT, ENTITY_TYPE_OSD, EntityName};
use msgr2::{AddrVec, Config, EntityAddr, Message, PeerInfo};
use reactor::{
    CloseReason, ConnId, ConnectProto, CoreCtx, CoreId, ListenProto, Runtime, RuntimeConfig, SendError,
    Service,
};
use std::net::SocketAddr;
use std::sync::{Arc, mpsc};
use std::time::{Duration, Instant};

const N: u64 = 250;

fn payload(i: u64) -> Bytes {
    let len = match i % 5 {
        0 => 0,
        1 => 17,
        2 => 4096,
        3 => 65_537,
        _ => 1_000_000,
    };
    Bytes::from((0..len).map(|k| (k as u64 * 31 + i) as u8).collect::<Vec<u8>>())
}

fn server_auth(secure: bool) -> reactor::ServerAuthFactory {
    if secure {
        Arc::new(|| {
            Box::new(TestServerAuth::new(vec![CON_MODE_SECURE], b"key", &[9u8; 64]))
                as Box<dyn ServerAuth + Send>
        })
    } else {
        Arc::new(|| Box::new(AuthNoneServer::default()) as Box<dyn ServerAuth + Send>)
    }
}

fn client_auth(secure: bool) -> Box<dyn ClientAuth + Send> {
    let name = EntityName::new(ENTITY_TYPE_CLIENT, "t");
    if secure {
        Box::new(TestClientAuth::new(name, vec![CON_MODE_SECURE]))
    } else {
        Box::new(AuthNone::new(name, 0))
    }
}

enum Ctl {
    Listening(SocketAddr),
}

struct Node {
    secure: bool,
    addr_tx: mpsc::Sender<SocketAddr>,
    done: mpsc::Sender<Result<(u32, u64), String>>,
    next_send: u64,
    next_recv: u64,
    conn: Option<ConnId>,
}

impl Node {
    /// Keep a window of messages in flight; a refusal (msgr2 queue bound) waits for on_writable.
    fn pump(&mut self, ctx: &mut CoreCtx<Ctl>) {
        let Some(c) = self.conn else { return };
        while self.next_send <= N && self.next_send < self.next_recv + 64 {
            let i = self.next_send;
            let mut m = Message::new(0x70, 1, 1, Bytes::from(format!("msg {i}")));
            m.tid = i;
            m.data = payload(i);
            match ctx.send_message(c, m) {
                Ok(()) => self.next_send += 1,
                Err(SendError::Backpressure(_)) => return,
                Err(e) => panic!("send: {e:?}"),
            }
        }
    }
}

impl Service for Node {
    type Msg = Ctl;
    fn on_start(&mut self, ctx: &mut CoreCtx<Ctl>) {
        if ctx.core_id() == 0 {
            let mut cfg = Config::new(ENTITY_TYPE_OSD, 0);
            let (_, a) = ctx
                .listen(
                    "127.0.0.1:0".parse().unwrap(),
                    ListenProto::Msgr2 {
                        cfg: cfg.clone(),
                        auth: server_auth(self.secure),
                    },
                )
                .unwrap();
            cfg.my_addrs = AddrVec::one(EntityAddr::msgr2(a, 1));
            self.addr_tx.send(a).unwrap();
            ctx.post(1, Ctl::Listening(a)).map_err(|_| ()).unwrap();
        }
    }
    fn on_cross_core(&mut self, ctx: &mut CoreCtx<Ctl>, _from: CoreId, msg: Ctl) {
        let Ctl::Listening(a) = msg;
        if ctx.core_id() == 1 && a.port() != 0 {
            let proto = ConnectProto::Msgr2 {
                cfg: Config::new(ENTITY_TYPE_CLIENT, 1),
                auth: client_auth(self.secure),
                target_type: ENTITY_TYPE_OSD,
            };
            self.conn = Some(ctx.connect(a, proto, Duration::from_secs(5)).unwrap());
        }
    }
    fn on_connected(&mut self, ctx: &mut CoreCtx<Ctl>, conn: ConnId, peer: Option<&PeerInfo>) {
        let p = peer.unwrap();
        assert_eq!(
            p.con_mode,
            if self.secure {
                CON_MODE_SECURE
            } else {
                CON_MODE_CRC
            }
        );
        if Some(conn) == self.conn {
            self.next_send = 1;
            self.next_recv = 1;
            self.pump(ctx);
        }
    }
    fn on_message(&mut self, ctx: &mut CoreCtx<Ctl>, conn: ConnId, m: Message) {
        if ctx.core_id() == 0 {
            // crc mode: large data segments were received straight into page-aligned buffers of their own
            // (CoreConfig::direct_rx_min), ready for an O_DIRECT write without a bounce copy.
            if !self.secure && m.data.len() >= 16 << 10 && !(m.data.as_ptr() as usize).is_multiple_of(4096) {
                let _ = self.done.send(Err(format!("data of {} not page-aligned", m.tid)));
            }
            // Server: echo with type+1 (front, data shared: no copies on our side).
            let mut r = Message::new(m.msg_type + 1, 1, 1, m.front.clone());
            r.tid = m.tid;
            r.data = m.data.clone();
            ctx.send_message(conn, r).map_err(|e| format!("{e:?}")).unwrap();
            return;
        }
        let i = self.next_recv;
        let ok = m.msg_type == 0x71
            && m.tid == i
            && m.front == format!("msg {i}").as_bytes()
            && m.data == payload(i);
        if !ok {
            self.done
                .send(Err(format!("bad echo {} (want {i})", m.tid)))
                .unwrap();
            return;
        }
        self.next_recv += 1;
        if self.next_recv > N {
            let mode = ctx
                .msgr2(conn)
                .and_then(|c| c.peer().map(|p| p.con_mode))
                .unwrap_or(0);
            self.done.send(Ok((mode, N))).unwrap();
            ctx.close(conn);
        } else {
            self.pump(ctx);
        }
    }
    fn on_writable(&mut self, ctx: &mut CoreCtx<Ctl>, _conn: ConnId) {
        self.pump(ctx);
    }
    fn on_reset(&mut self, ctx: &mut CoreCtx<Ctl>, conn: ConnId, reason: CloseReason) {
        if ctx.core_id() == 1 && Some(conn) == self.conn && self.next_recv <= N {
            self.done
                .send(Err(format!("client conn reset: {reason:?}")))
                .unwrap();
        }
    }
}

fn run(secure: bool) {
    let (addr_tx, _addr_rx) = mpsc::channel();
    let (done_tx, done_rx) = mpsc::channel();
    let start = Instant::now();
    let rt = Runtime::start(
        RuntimeConfig {
            cores: 2,
            pin: false,
            ..Default::default()
        },
        move |_| Node {
            secure,
            addr_tx: addr_tx.clone(),
            done: done_tx.clone(),
            next_send: 0,
            next_recv: 0,
            conn: None,
        },
    )
    .unwrap();
    let r = done_rx.recv_timeout(Duration::from_secs(50)).expect("bounded");
    let (mode, n) = r.unwrap();
    assert_eq!(mode, if secure { CON_MODE_SECURE } else { CON_MODE_CRC });
    assert_eq!(n, N);
    rt.stop();
    let stats = rt.join();
    if !secure {
        // Most bytes of the large payloads (both directions) went straight into their segment's buffer; what
        // did not is the head of a frame that came with a stream receive.
        let large: u64 = (1..=N)
            .map(|i| payload(i).len() as u64)
            .filter(|&l| l >= 16 << 10)
            .sum();
        let direct: u64 = stats.iter().map(|s| s.direct_recv_bytes).sum();
        assert!(
            direct >= large,
            "direct {direct} of {} large bytes (want at least half)",
            2 * large
        );
    }
    eprintln!(
        "{}: {N} echoes in {:?}; core stats {stats:?}",
        if secure { "secure" } else { "crc" },
        start.elapsed()
    );
}

#[test]
fn msgr2_crc_through_the_reactor() {
    run(false);
}

#[test]
fn msgr2_secure_through_the_reactor() {
    run(true);
}

// ---------------------------------------------------------------------------------------------------------------

struct EchoServer {
    addr_tx: mpsc::Sender<SocketAddr>,
    secure: bool,
}

impl Service for EchoServer {
    type Msg = ();
    fn on_start(&mut self, ctx: &mut CoreCtx<()>) {
        let (_, a) = ctx
            .listen(
                "127.0.0.1:0".parse().unwrap(),
                ListenProto::Msgr2 {
                    cfg: Config::new(ENTITY_TYPE_OSD, 0),
                    auth: server_auth(self.secure),
                },
            )
            .unwrap();
        self.addr_tx.send(a).unwrap();
    }
    fn on_message(&mut self, ctx: &mut CoreCtx<()>, conn: ConnId, m: Message) {
        let mut r = Message::new(m.msg_type + 1, 1, 1, m.front.clone());
        r.tid = m.tid;
        r.data = m.data.clone();
        ctx.send_message(conn, r).map_err(|e| format!("{e:?}")).unwrap();
    }
}

#[test]
fn blocking_client_against_reactor_server() {
    for secure in [false, true] {
        let (addr_tx, addr_rx) = mpsc::channel();
        let rt = Runtime::start(RuntimeConfig::default(), move |_| EchoServer {
            addr_tx: addr_tx.clone(),
            secure,
        })
        .unwrap();
        let addr = addr_rx.recv_timeout(Duration::from_secs(10)).unwrap();
        let t = Duration::from_secs(20);
        let mut c = BlockingConnection::connect(
            addr,
            Config::new(ENTITY_TYPE_CLIENT, 1),
            client_auth(secure),
            ENTITY_TYPE_OSD,
            t,
        )
        .unwrap();
        for i in 1..=60u64 {
            let mut m = Message::new(0x70, 1, 1, Bytes::from(format!("msg {i}")));
            m.tid = i;
            m.data = payload(i);
            c.send(m).unwrap();
            let r = c.recv_message(t).unwrap().unwrap();
            assert_eq!((r.msg_type, r.tid), (0x71, i));
            assert_eq!(r.data, payload(i));
        }
        c.close();
        rt.stop();
        rt.join();
    }
}

// ---------------------------------------------------------------------------------------------------------------

/// Acceptors built by the service (per-connection auth state) and a connector built by the caller (exact target
/// address with a nonce).
struct Custom {
    listen: Option<SocketAddr>,
    built: u32,
    result: mpsc::Sender<String>,
}

impl Service for Custom {
    type Msg = ();
    fn on_start(&mut self, ctx: &mut CoreCtx<()>) {
        let (_, a) = ctx
            .listen("127.0.0.1:0".parse().unwrap(), ListenProto::Msgr2ByService)
            .unwrap();
        self.listen = Some(a);
        let conn = msgr2::Connection::connector(
            Config::new(ENTITY_TYPE_CLIENT, 1),
            client_auth(true),
            EntityAddr::msgr2(a, 4242),
            ENTITY_TYPE_OSD,
            ctx.now(),
        );
        ctx.connect(a, ConnectProto::Msgr2Conn(Box::new(conn)), Duration::from_secs(5))
            .unwrap();
    }
    fn msgr2_acceptor(&mut self, _l: reactor::ListenerId, peer: SocketAddr) -> Option<msgr2::Connection> {
        self.built += 1;
        let mut cfg = Config::new(ENTITY_TYPE_OSD, 0);
        cfg.auto_accept = true;
        // The connector checks it reached exactly the address (and nonce) it dialled.
        cfg.my_addrs = AddrVec::one(EntityAddr::msgr2(self.listen?, 4242));
        let mut c = msgr2::Connection::acceptor(cfg, server_auth(true)(), Instant::now());
        c.set_peer_socket_addr(peer);
        Some(c)
    }
    fn on_connected(&mut self, ctx: &mut CoreCtx<()>, conn: ConnId, peer: Option<&PeerInfo>) {
        let p = peer.unwrap();
        if p.peer_type == ENTITY_TYPE_OSD {
            // The client side: say hello.
            ctx.send_message(conn, Message::new(0x99, 1, 1, Bytes::from_static(b"hi")))
                .unwrap();
        }
    }
    fn on_reset(&mut self, _ctx: &mut CoreCtx<()>, _conn: ConnId, reason: CloseReason) {
        let _ = self.result.send(format!("reset: {reason:?}"));
    }
    fn on_message(&mut self, _ctx: &mut CoreCtx<()>, _conn: ConnId, m: Message) {
        self.result
            .send(format!(
                "{} {} built={}",
                m.msg_type,
                String::from_utf8_lossy(&m.front),
                self.built
            ))
            .unwrap();
    }
}

#[test]
fn service_built_acceptor_and_caller_built_connector() {
    let (tx, rx) = mpsc::channel();
    let rt = Runtime::start(
        RuntimeConfig {
            pin: false,
            ..Default::default()
        },
        move |_| Custom {
            listen: None,
            built: 0,
            result: tx.clone(),
        },
    )
    .unwrap();
    assert_eq!(
        rx.recv_timeout(Duration::from_secs(20)).unwrap(),
        "153 hi built=1"
    );
    rt.stop();
    rt.join();
}
