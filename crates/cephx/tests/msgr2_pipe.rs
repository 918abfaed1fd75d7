// SPDX-License-Identifier: LGPL-3.0-or-later
//! cephx over our msgr2 engine, both ends in memory: a client's authorizer against a daemon's `CephxServerAuth`
//! in secure and crc mode, a message through the encrypted session, and a refused forged authorizer.

#![allow(clippy::unwrap_used)] // test code

use std::sync::{Arc, RwLock};
use std::time::Instant;

use bytes::Bytes;
use cephx::msgr2_auth::{CephxAuthorizerClientAuth, CephxServerAuth};
use cephx::service::{AuthEntry, MonAuthConnection, MonAuthServer, ServiceKeys};
use cephx::*;
use msgr2::auth::{AUTH_METHOD_NONE, AuthNone, CON_MODE_CRC, CON_MODE_SECURE};
use msgr2::{AddrVec, Config, Connection, EntityAddr, Event, Message};

const NOW: UTime = UTime::new(1_700_000_000, 0);

fn addr() -> EntityAddr {
    EntityAddr::msgr2("127.0.0.1:6800".parse().unwrap(), 7)
}

fn pump(a: &mut Connection, b: &mut Connection, now: Instant) {
    for _ in 0..1000 {
        let mut moved = false;
        while let Some(buf) = a.poll_output() {
            moved = true;
            if let Err(e) = b.handle_input(now, &buf) {
                eprintln!("server input error: {e:?}");
            }
        }
        while let Some(buf) = b.poll_output() {
            moved = true;
            if let Err(e) = a.handle_input(now, &buf) {
                eprintln!("client input error: {e:?}");
            }
        }
        if !moved {
            return;
        }
    }
}

fn events(c: &mut Connection) -> Vec<Event> {
    std::iter::from_fn(|| c.poll_event()).collect()
}

struct World {
    client: MonAuthClient,
    osd_keys: Arc<RwLock<ServiceKeys>>,
}

fn world() -> World {
    let p: Arc<dyn CryptoProvider> = Arc::new(AwsLcProvider);
    let key = CryptoKey::generate(&*p, NOW);
    let mut mon = MonAuthServer::new(p.clone());
    mon.entities.insert(
        parse_entity_name("client.admin").unwrap(),
        AuthEntry {
            key: key.clone(),
            caps: [("osd".to_string(), "allow *".to_string())].into(),
        },
    );
    mon.add_rotating(ENTITY_TYPE_OSD, NOW);
    let mut client = MonAuthClient::new(
        p,
        parse_entity_name("client.admin").unwrap(),
        key,
        ENTITY_TYPE_OSD,
    );
    let mut conn = MonAuthConnection::default();
    let ch = mon.handle_initial(&mut conn, &client.initial_request()).unwrap();
    let more = client.handle_reply_more(&ch).unwrap();
    let (gid, done) = mon.handle_authenticate(&mut conn, &more, 64, NOW).unwrap();
    client.handle_done(gid, &done, NOW).unwrap();
    let osd_keys = ServiceKeys {
        service_id: ENTITY_TYPE_OSD,
        rotating: mon.rotating[&ENTITY_TYPE_OSD].clone(),
        own: None,
    };
    World {
        client,
        osd_keys: Arc::new(RwLock::new(osd_keys)),
    }
}

fn run(mode: u32) {
    let w = world();
    let now = Instant::now();
    let mut auth = CephxAuthorizerClientAuth::new(w.client.build_authorizer(ENTITY_TYPE_OSD).unwrap());
    auth.modes = vec![mode];
    let mut ccfg = Config::new(msgr2::types::ENTITY_TYPE_CLIENT, 4101);
    ccfg.my_addrs = AddrVec::one(EntityAddr::msgr2("127.0.0.1:0".parse().unwrap(), 9));
    let mut c = Connection::connector(ccfg, Box::new(auth), addr(), msgr2::types::ENTITY_TYPE_OSD, now);
    let server_auth = CephxServerAuth::new(Arc::new(AwsLcProvider), w.osd_keys.clone());
    let peer_slot = server_auth.peer.clone();
    let mut scfg = Config::new(msgr2::types::ENTITY_TYPE_OSD, 0);
    scfg.my_addrs = AddrVec::one(addr());
    let mut s = Connection::acceptor(scfg, Box::new(server_auth), now);
    pump(&mut c, &mut s, now);
    assert!(
        c.is_ready(),
        "client state {}: {:?}",
        c.state_name(),
        events(&mut c)
    );
    assert!(s.is_ready(), "server state {}", s.state_name());
    assert_eq!(c.peer().unwrap().con_mode, mode);
    let peer = peer_slot.lock().unwrap().clone().unwrap();
    assert_eq!(peer.name.to_string(), "client.admin");
    assert_eq!(peer.global_id, w.client.global_id());
    assert_eq!(peer.caps.caps_text().unwrap(), "allow *");
    c.send(Message::new(42, 1, 1, Bytes::from_static(b"front")))
        .unwrap();
    pump(&mut c, &mut s, now);
    let got = events(&mut s).into_iter().find_map(|e| match e {
        Event::Message(m) => Some(m),
        _ => None,
    });
    assert_eq!(&got.unwrap().front[..], b"front");
}

#[test]
fn authorizer_over_msgr2_secure() {
    run(CON_MODE_SECURE);
}

#[test]
fn authorizer_over_msgr2_crc() {
    run(CON_MODE_CRC);
}

#[test]
fn forged_authorizer_is_refused_and_none_only_when_allowed() {
    let w = world();
    let now = Instant::now();
    // A ticket sealed under keys the daemon does not have: empty rotating keys.
    let empty = Arc::new(RwLock::new(ServiceKeys {
        service_id: ENTITY_TYPE_OSD,
        ..Default::default()
    }));
    let auth = CephxAuthorizerClientAuth::new(w.client.build_authorizer(ENTITY_TYPE_OSD).unwrap());
    let mut ccfg = Config::new(msgr2::types::ENTITY_TYPE_CLIENT, 4101);
    ccfg.my_addrs = AddrVec::one(EntityAddr::msgr2("127.0.0.1:0".parse().unwrap(), 9));
    let mut c = Connection::connector(
        ccfg.clone(),
        Box::new(auth),
        addr(),
        msgr2::types::ENTITY_TYPE_OSD,
        now,
    );
    let mut scfg = Config::new(msgr2::types::ENTITY_TYPE_OSD, 0);
    scfg.my_addrs = AddrVec::one(addr());
    let mut s = Connection::acceptor(
        scfg.clone(),
        Box::new(CephxServerAuth::new(Arc::new(AwsLcProvider), empty.clone())),
        now,
    );
    pump(&mut c, &mut s, now);
    assert!(!c.is_ready() && !s.is_ready());
    let ev = format!("{:?}", events(&mut c));
    assert!(ev.contains("13") || ev.contains("Permission denied"), "{ev}");

    // auth none is refused unless the daemon allows it (auth_*_required = none).
    let name = msgr2::EntityName::new(msgr2::types::ENTITY_TYPE_CLIENT, "admin");
    let mut c = Connection::connector(
        ccfg.clone(),
        Box::new(AuthNone::new(name.clone(), 0)),
        addr(),
        msgr2::types::ENTITY_TYPE_OSD,
        now,
    );
    let mut s = Connection::acceptor(
        scfg.clone(),
        Box::new(CephxServerAuth::new(Arc::new(AwsLcProvider), empty.clone())),
        now,
    );
    pump(&mut c, &mut s, now);
    assert!(!c.is_ready());
    let mut allow = CephxServerAuth::new(Arc::new(AwsLcProvider), empty);
    allow.methods = vec![msgr2::auth::AUTH_METHOD_CEPHX, AUTH_METHOD_NONE];
    let mut c = Connection::connector(
        ccfg,
        Box::new(AuthNone::new(name, 0)),
        addr(),
        msgr2::types::ENTITY_TYPE_OSD,
        now,
    );
    let mut s = Connection::acceptor(scfg, Box::new(allow), now);
    pump(&mut c, &mut s, now);
    assert!(c.is_ready() && s.is_ready(), "{}", c.state_name());
}

#[test]
fn falls_back_to_auth_none_when_the_daemon_allows_only_none() {
    let w = world();
    let now = Instant::now();
    let mut auth = CephxAuthorizerClientAuth::new(w.client.build_authorizer(ENTITY_TYPE_OSD).unwrap());
    auth.fallback_none = Some(AuthNone::new(
        msgr2::EntityName::new(msgr2::types::ENTITY_TYPE_CLIENT, "admin"),
        4101,
    ));
    let mut ccfg = Config::new(msgr2::types::ENTITY_TYPE_CLIENT, 4101);
    ccfg.my_addrs = AddrVec::one(EntityAddr::msgr2("127.0.0.1:0".parse().unwrap(), 9));
    let mut c = Connection::connector(ccfg, Box::new(auth), addr(), msgr2::types::ENTITY_TYPE_OSD, now);
    let mut server = CephxServerAuth::new(Arc::new(AwsLcProvider), w.osd_keys.clone());
    server.methods = vec![AUTH_METHOD_NONE];
    let mut scfg = Config::new(msgr2::types::ENTITY_TYPE_OSD, 0);
    scfg.my_addrs = AddrVec::one(addr());
    let mut s = Connection::acceptor(scfg, Box::new(server), now);
    pump(&mut c, &mut s, now);
    assert!(
        c.is_ready() && s.is_ready(),
        "{} {:?}",
        c.state_name(),
        events(&mut c)
    );
    assert_eq!(c.peer().unwrap().con_mode, CON_MODE_CRC);
}
