// SPDX-License-Identifier: LGPL-3.0-or-later
//! Against a real Ceph 16.2 monitor (crates/testcluster; skipped when Ceph is not installed unless
//! FERRO_REQUIRE_CLUSTER is set): our cephx client authenticates over our msgr2 in secure and crc mode, renews
//! service tickets and fetches rotating keys with MAuth, and a wrong key fails with a clear EACCES error; a real
//! ceph-osd accepts our authorizer (CEPHX_V2 challenge) in secure and crc mode.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use cephx::client::ResponseKind;
use cephx::msgr2_auth::CephxMonClientAuth;
use cephx::*;
use denc::{Decoder, Encoder};
use msgr2::auth::{CON_MODE_CRC, CON_MODE_SECURE};
use msgr2::{AddrVec, Config, Connection, EntityAddr, Event, Message};
use testcluster::{Cluster, ClusterSpec};

const CEPH_MSG_AUTH: u16 = 17;
const CEPH_MSG_AUTH_REPLY: u16 = 18;

fn now_utime() -> UTime {
    let d = SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
    UTime::new(d.as_secs() as u32, d.subsec_nanos())
}

/// A minimal blocking driver: move bytes between the socket and the sans-IO connection until `done` or timeout.
struct Driver {
    sock: TcpStream,
    conn: Connection,
    events: Vec<Event>,
}

impl Driver {
    fn connect(mon: SocketAddr, auth: CephxMonClientAuth) -> Driver {
        Driver::connect_to(mon, 0, Box::new(auth), msgr2::types::ENTITY_TYPE_MON)
    }

    /// `nonce`: the target's address nonce (a daemon refuses a CLIENT_IDENT aimed at another instance).
    fn connect_to(
        mon: SocketAddr,
        nonce: u32,
        auth: Box<dyn msgr2::auth::ClientAuth + Send>,
        target_type: u8,
    ) -> Driver {
        let sock = TcpStream::connect_timeout(&mon, Duration::from_secs(5)).unwrap();
        sock.set_read_timeout(Some(Duration::from_millis(50))).unwrap();
        let mut cfg = Config::new(msgr2::types::ENTITY_TYPE_CLIENT, 0);
        cfg.my_addrs = AddrVec::one(EntityAddr::msgr2("127.0.0.1:0".parse().unwrap(), 0));
        cfg.lossy = true;
        let conn = Connection::connector(
            cfg,
            auth,
            EntityAddr::msgr2(mon, nonce),
            target_type,
            Instant::now(),
        );
        Driver {
            sock,
            conn,
            events: Vec::new(),
        }
    }

    fn run_until(&mut self, mut done: impl FnMut(&mut Self) -> bool) -> bool {
        let deadline = Instant::now() + Duration::from_secs(20);
        let mut buf = vec![0u8; 65536];
        while Instant::now() < deadline {
            while let Some(out) = self.conn.poll_output() {
                if self.sock.write_all(&out).is_err() {
                    return done(self);
                }
            }
            while let Some(e) = self.conn.poll_event() {
                self.events.push(e);
            }
            if done(self) || self.conn.is_closed() {
                return done(self);
            }
            match self.sock.read(&mut buf) {
                Ok(0) => {
                    self.conn.handle_transport_closed();
                }
                Ok(n) => {
                    if let Err(e) = self.conn.handle_input(Instant::now(), &buf[..n]) {
                        self.events.push(Event::Closed { error: e });
                    }
                }
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ) => {}
                Err(_) => self.conn.handle_transport_closed(),
            }
        }
        false
    }

    /// Send MAuth with a cephx payload and wait for MAuthReply: `(result, result_bl)`.
    fn mauth(&mut self, payload: &[u8]) -> (i32, Bytes) {
        let mut e = Encoder::default();
        e.u64(0); // PaxosServiceMessage version
        e.i16(-1); // deprecated session_mon
        e.u64(0); // deprecated session_mon_tid
        e.u32(2); // protocol: cephx
        e.bytes(payload);
        e.u32(0); // monmap_epoch
        self.conn
            .send(Message::new(CEPH_MSG_AUTH, 1, 1, e.into_bytes()))
            .unwrap();
        let mut reply = None;
        self.run_until(|d| {
            for ev in d.events.drain(..) {
                if let Event::Message(m) = ev
                    && m.msg_type == CEPH_MSG_AUTH_REPLY
                {
                    reply = Some(m.front.clone());
                }
            }
            reply.is_some()
        });
        let front = reply.expect("MAuthReply");
        let mut d = Decoder::new(front);
        assert_eq!(d.u32().unwrap(), 2);
        let result = d.i32().unwrap();
        let _gid = d.u64().unwrap();
        (result, d.bufferlist().unwrap())
    }
}

fn connect(
    mon: SocketAddr,
    name: &str,
    key: CryptoKey,
    want: u32,
    modes: Vec<u32>,
) -> (Driver, Arc<Mutex<MonAuthClient>>) {
    let client = Arc::new(Mutex::new(MonAuthClient::new(
        Arc::new(AwsLcProvider),
        parse_entity_name(name).unwrap(),
        key,
        want,
    )));
    let mut auth = CephxMonClientAuth::new(client.clone(), now_utime());
    auth.modes = modes;
    let mut d = Driver::connect(mon, auth);
    d.run_until(|d| d.conn.is_ready());
    (d, client)
}

/// One throwaway cluster (mon, mgr, one classic OSD) for all live checks, to keep CI time down.
#[test]
fn live_against_real_ceph() {
    let Some(cluster) = testcluster::start_or_skip(ClusterSpec::default().classic_osds(1)) else {
        return;
    };
    mon_authentication(&cluster);
    osd_accepts_our_authorizer(&cluster);
}

fn mon_authentication(cluster: &Cluster) {
    let conf = ceph_config::ConfSource {
        explicit: Some(cluster.conf_path().display().to_string()),
        ..Default::default()
    }
    .load("client.admin", "")
    .unwrap();
    let (_, keyring) = conf.load_keyring().unwrap();
    let admin_key = CryptoKey::from_base64(keyring.key_of("client.admin").unwrap()).unwrap();
    let mon = cluster.mon_addr();

    for mode in [CON_MODE_SECURE, CON_MODE_CRC] {
        let (mut d, client) = connect(
            mon,
            "client.admin",
            admin_key.clone(),
            ENTITY_TYPE_MON | ENTITY_TYPE_OSD | ENTITY_TYPE_MGR,
            vec![mode],
        );
        assert!(
            d.conn.is_ready(),
            "mode {mode}: not connected: {} {:?}",
            d.conn.state_name(),
            d.events
        );
        assert_eq!(d.conn.peer().unwrap().con_mode, mode);
        let now = now_utime();
        {
            let c = client.lock().unwrap();
            assert!(c.global_id() > 0);
            let (have, need) = c.validate_tickets(now);
            assert_eq!(
                have,
                ENTITY_TYPE_AUTH | ENTITY_TYPE_MON | ENTITY_TYPE_OSD | ENTITY_TYPE_MGR
            );
            assert_eq!(need, 0);
            eprintln!(
                "mode {mode}: authenticated as client.admin, global_id {}",
                c.global_id()
            );
        }
        // Renewal through MAuth (CEPHX_GET_PRINCIPAL_SESSION_KEY): pretend the tickets are due.
        let later = UTime::new(now.sec + 3000, 0);
        let req = client
            .lock()
            .unwrap()
            .build_ticket_request(later)
            .unwrap()
            .expect("due");
        let (result, bl) = d.mauth(&req);
        let kind = client
            .lock()
            .unwrap()
            .handle_response(result, &bl, later)
            .unwrap();
        match kind {
            ResponseKind::ServiceTickets { services } => {
                assert!(services.contains(&ENTITY_TYPE_OSD), "{services:?}")
            }
            k => panic!("unexpected {k:?}"),
        }
        // Our authorizer for the OSD service is built from the renewed ticket.
        client.lock().unwrap().build_authorizer(ENTITY_TYPE_OSD).unwrap();
        d.conn.close();
    }

    // A daemon identity fetches rotating keys (CEPHX_GET_ROTATING_KEY).
    cluster
        .ceph(&[
            "auth",
            "get-or-create",
            "osd.77",
            "mon",
            "allow profile osd",
            "-o",
            &cluster.dir().join("osd77.keyring").display().to_string(),
        ])
        .unwrap();
    let text = std::fs::read_to_string(cluster.dir().join("osd77.keyring")).unwrap();
    let kr = ceph_config::Keyring::parse(&text, "osd77").unwrap();
    let osd_key = CryptoKey::from_base64(kr.key_of("osd.77").unwrap()).unwrap();
    let (mut d, client) = connect(
        mon,
        "osd.77",
        osd_key,
        ENTITY_TYPE_MON | ENTITY_TYPE_OSD | ENTITY_TYPE_MGR,
        vec![CON_MODE_SECURE, CON_MODE_CRC],
    );
    assert!(d.conn.is_ready(), "osd.77: {:?}", d.events);
    let req = client.lock().unwrap().build_rotating_request();
    let (result, bl) = d.mauth(&req);
    let now = now_utime();
    assert_eq!(
        client.lock().unwrap().handle_response(result, &bl, now).unwrap(),
        ResponseKind::RotatingKeys
    );
    let rotating = client.lock().unwrap().rotating_secrets().cloned().unwrap();
    assert_eq!(rotating.secrets.len(), 3, "previous, current, next");
    eprintln!(
        "osd.77 rotating secret ids {:?}",
        rotating.secrets.keys().collect::<Vec<_>>()
    );
    // A peer's authorizer sealed by the real mon opens with those keys (the OSD ticket of osd.77 itself).
    let keys = cephx::service::ServiceKeys {
        service_id: ENTITY_TYPE_OSD,
        rotating,
        own: None,
    };
    let a = client.lock().unwrap().build_authorizer(ENTITY_TYPE_OSD).unwrap();
    let step = cephx::service::ServiceAuthorizerVerifier::new(Arc::new(AwsLcProvider))
        .verify(&keys, a.payload(), 64)
        .unwrap();
    assert!(matches!(step, cephx::service::ServiceStep::Challenge(_)));
    d.conn.close();

    // A wrong key: the monitor refuses with EACCES and we say so.
    let wrong = CryptoKey::generate(&AwsLcProvider, now_utime());
    let (d, client) = connect(mon, "client.admin", wrong, ENTITY_TYPE_MON, vec![CON_MODE_SECURE]);
    assert!(!d.conn.is_ready());
    assert!(!client.lock().unwrap().is_authenticated());
    let events = format!("{:?}", d.events);
    eprintln!("wrong key: {events}");
    assert!(
        events.contains("Permission denied") || events.contains("-13"),
        "expected EACCES, got {events}"
    );
}

/// Our authorizer against a real ceph-osd: the OSD opens our ticket, challenges (CEPHX_V2), accepts our answer,
/// and its reply verifies (nonce + 1); in secure mode the connection secret then keys working AES-GCM frames.
fn osd_accepts_our_authorizer(cluster: &Cluster) {
    let key = CryptoKey::from_base64(cluster.admin_key().unwrap().trim()).unwrap();
    let dump = cluster.ceph_json(&["osd", "dump"]).unwrap();
    let v2 = dump["osds"][0]["public_addrs"]["addrvec"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["type"] == "v2")
        .unwrap()
        .clone();
    let addr: SocketAddr = v2["addr"].as_str().unwrap().parse().unwrap();
    let nonce = v2["nonce"].as_u64().unwrap() as u32;
    let (_mon, client) = connect(
        cluster.mon_addr(),
        "client.admin",
        key,
        ENTITY_TYPE_MON | ENTITY_TYPE_OSD,
        vec![CON_MODE_SECURE],
    );
    for mode in [CON_MODE_SECURE, CON_MODE_CRC] {
        let a = client.lock().unwrap().build_authorizer(ENTITY_TYPE_OSD).unwrap();
        let mut auth = cephx::msgr2_auth::CephxAuthorizerClientAuth::new(a);
        auth.modes = vec![mode];
        let mut d = Driver::connect_to(addr, nonce, Box::new(auth), msgr2::types::ENTITY_TYPE_OSD);
        d.run_until(|d| d.conn.is_ready());
        assert!(
            d.conn.is_ready(),
            "mode {mode}: {} {:?}",
            d.conn.state_name(),
            d.events
        );
        assert_eq!(d.conn.peer().unwrap().con_mode, mode);
        // A keepalive round trip proves frames flow both ways after auth (encrypted in secure mode).
        d.conn.send_keepalive(Instant::now());
        assert!(
            d.run_until(|d| d.events.iter().any(|e| matches!(e, Event::KeepaliveAck { .. }))),
            "{:?}",
            d.events
        );
        eprintln!("osd accepted our authorizer in mode {mode}");
        d.conn.close();
    }
}

/// `auth_*_required = none`: the monitor refuses cephx and our client falls back to auth none (crc mode).
#[test]
fn live_auth_none_cluster() {
    let spec = ClusterSpec::default()
        .conf("global", "auth cluster required", "none")
        .conf("global", "auth service required", "none")
        .conf("global", "auth client required", "none");
    let Some(cluster) = testcluster::start_or_skip(spec) else {
        return;
    };
    let key = CryptoKey::generate(&AwsLcProvider, now_utime());
    let (d, client) = connect(
        cluster.mon_addr(),
        "client.admin",
        key,
        ENTITY_TYPE_MON,
        vec![CON_MODE_SECURE, CON_MODE_CRC],
    );
    assert!(d.conn.is_ready(), "{} {:?}", d.conn.state_name(), d.events);
    assert_eq!(d.conn.peer().unwrap().con_mode, CON_MODE_CRC);
    assert!(
        !client.lock().unwrap().is_authenticated(),
        "no cephx session: auth none was used"
    );
}
