// SPDX-License-Identifier: LGPL-3.0-or-later
//! The blocking std::net driver over real loopback sockets: handshake, a stream of messages echoed back (with
//! large data segments), secure mode, bounded connect, read timeouts.
#![allow(clippy::unwrap_used)] // test code: a panic is the failure report

use std::time::{Duration, Instant};

use bytes::Bytes;
use msgr2::auth::{AuthNone, AuthNoneServer, CON_MODE_CRC, CON_MODE_SECURE};
use msgr2::blocking::{BlockingConnection, BlockingError, BlockingListener};
use msgr2::testing::{TestClientAuth, TestServerAuth};
use msgr2::types::{ENTITY_TYPE_CLIENT, ENTITY_TYPE_OSD, EntityName};
use msgr2::{AddrVec, Config, EntityAddr, Message};

const T: Duration = Duration::from_secs(10);

fn echo_server(secure: bool) -> (std::net::SocketAddr, std::thread::JoinHandle<usize>) {
    let l = BlockingListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let h = std::thread::spawn(move || {
        let mut cfg = Config::new(ENTITY_TYPE_OSD, 0);
        cfg.my_addrs = AddrVec::one(EntityAddr::msgr2(addr, 77));
        let auth: Box<dyn msgr2::auth::ServerAuth + Send> = if secure {
            Box::new(TestServerAuth::new(vec![CON_MODE_SECURE], b"k", &[7u8; 64]))
        } else {
            Box::new(AuthNoneServer::default())
        };
        let mut c = l.accept(cfg, auth, T).unwrap();
        let mut n = 0;
        // Echo until the client goes away.
        while let Ok(Some(m)) = c.recv_message(T) {
            n += 1;
            let mut r = Message::new(m.msg_type + 1, 1, 1, m.front.clone());
            r.tid = m.tid;
            r.data = m.data.clone();
            if c.send(r).is_err() {
                break;
            }
        }
        n
    });
    (addr, h)
}

fn run_echo(secure: bool) {
    let (addr, server) = echo_server(secure);
    let auth: Box<dyn msgr2::auth::ClientAuth + Send> = if secure {
        Box::new(TestClientAuth::new(
            EntityName::new(ENTITY_TYPE_CLIENT, "t"),
            vec![CON_MODE_SECURE],
        ))
    } else {
        Box::new(AuthNone::new(EntityName::new(ENTITY_TYPE_CLIENT, "t"), 0))
    };
    let mut c = BlockingConnection::connect_to(
        EntityAddr::msgr2(addr, 77),
        Config::new(ENTITY_TYPE_CLIENT, 1),
        auth,
        ENTITY_TYPE_OSD,
        T,
    )
    .unwrap();
    let mode = c.peer().unwrap().con_mode;
    assert_eq!(mode, if secure { CON_MODE_SECURE } else { CON_MODE_CRC });
    let start = Instant::now();
    let n = 64u64;
    let mut bytes = 0;
    for i in 1..=n {
        let mut m = Message::new(0x50, 1, 1, Bytes::from(format!("ping {i}")));
        m.tid = i;
        m.data = Bytes::from(vec![i as u8; (i as usize % 4) * 300_000]);
        bytes += m.data.len();
        c.send(m).unwrap();
    }
    for i in 1..=n {
        let m = c.recv_message(T).unwrap().expect("echo");
        assert_eq!(m.tid, i);
        assert_eq!(m.msg_type, 0x51);
        assert_eq!(m.front, Bytes::from(format!("ping {i}")));
        assert_eq!(m.data.len(), (i as usize % 4) * 300_000);
        assert!(m.data.iter().all(|b| *b == i as u8));
    }
    let el = start.elapsed();
    eprintln!(
        "{} mode: {n} round trips, {:.1} MB each way in {el:?} ({:.0} MB/s, debug build)",
        if secure { "secure" } else { "crc" },
        bytes as f64 / 1e6,
        2.0 * bytes as f64 / 1e6 / el.as_secs_f64()
    );
    c.close();
    assert_eq!(server.join().unwrap(), n as usize);
}

#[test]
fn echo_crc_auth_none() {
    run_echo(false);
}

#[test]
fn echo_secure() {
    run_echo(true);
}

#[test]
fn connect_to_a_closed_port_fails_fast() {
    // Bind then drop, so the port is (almost certainly) closed.
    let addr = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let start = Instant::now();
    let auth = Box::new(AuthNone::new(EntityName::new(ENTITY_TYPE_CLIENT, "t"), 0));
    let r = BlockingConnection::connect(addr, Config::new(ENTITY_TYPE_CLIENT, 1), auth, ENTITY_TYPE_OSD, T);
    assert!(matches!(r, Err(BlockingError::Io(_))), "{r:?}");
    assert!(start.elapsed() < T);
}

#[test]
fn handshake_with_a_silent_peer_times_out() {
    // A listener that accepts and never answers.
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let h = std::thread::spawn(move || {
        let (s, _) = l.accept().unwrap();
        std::thread::sleep(Duration::from_millis(800));
        drop(s);
    });
    let start = Instant::now();
    let auth = Box::new(AuthNone::new(EntityName::new(ENTITY_TYPE_CLIENT, "t"), 0));
    let r = BlockingConnection::connect(
        addr,
        Config::new(ENTITY_TYPE_CLIENT, 1),
        auth,
        ENTITY_TYPE_OSD,
        Duration::from_millis(300),
    );
    assert!(matches!(r, Err(BlockingError::Timeout(_))), "{r:?}");
    assert!(start.elapsed() < Duration::from_secs(2));
    h.join().unwrap();
}

#[test]
fn recv_times_out_without_traffic() {
    let (addr, server) = echo_server(false);
    let auth = Box::new(AuthNone::new(EntityName::new(ENTITY_TYPE_CLIENT, "t"), 0));
    let mut c = BlockingConnection::connect_to(
        EntityAddr::msgr2(addr, 77),
        Config::new(ENTITY_TYPE_CLIENT, 1),
        auth,
        ENTITY_TYPE_OSD,
        T,
    )
    .unwrap();
    let start = Instant::now();
    assert!(c.recv_message(Duration::from_millis(200)).unwrap().is_none());
    assert!(start.elapsed() >= Duration::from_millis(190));
    c.close();
    assert_eq!(server.join().unwrap(), 0);
}

#[test]
fn a_stale_nonce_is_refused_by_the_acceptor() {
    let (addr, server) = echo_server(false);
    let auth = Box::new(AuthNone::new(EntityName::new(ENTITY_TYPE_CLIENT, "t"), 0));
    // The server's nonce is 77: dialling nonce 0 is dialling another incarnation.
    let r = BlockingConnection::connect(addr, Config::new(ENTITY_TYPE_CLIENT, 1), auth, ENTITY_TYPE_OSD, T);
    assert!(r.is_err(), "{r:?}");
    assert!(server.join().is_err(), "the server side refused the ident");
}
