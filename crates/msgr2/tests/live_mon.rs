// SPDX-License-Identifier: LGPL-3.0-or-later
//! Against a real Ceph 16.2 monitor (started by crates/testcluster; skipped when Ceph is not installed): the
//! banner and HELLO exchange, and an AUTH_REQUEST the mon refuses with AUTH_BAD_METHOD (cephx is required, and
//! the full cephx handshake is tested by crates/cephx and crates/monclient).
#![allow(clippy::unwrap_used)] // test code: a panic is the failure report

use std::time::Duration;

use msgr2::auth::{AUTH_METHOD_CEPHX, AuthError, AuthNone};
use msgr2::blocking::{BlockingConnection, BlockingError, probe};
use msgr2::types::{ENTITY_TYPE_CLIENT, ENTITY_TYPE_MON, EntityName};
use msgr2::{Config, ConnError};

#[test]
fn real_mon_banner_hello_and_auth_bad_method() {
    let Some(cluster) = testcluster::start_or_skip(testcluster::ClusterSpec::default()) else {
        return;
    };
    let mon = cluster.mon_addr();
    let (supported, peer_type, my_addr) = probe(mon, ENTITY_TYPE_CLIENT, Duration::from_secs(10)).unwrap();
    assert_eq!(supported & 1, 1, "Pacific advertises msgr2 revision 1");
    assert_eq!(peer_type, ENTITY_TYPE_MON);
    // The mon tells us the address it sees for us (loopback, our ephemeral port).
    let seen = my_addr.addr.expect("the mon reports our address");
    assert!(seen.ip().is_loopback(), "{my_addr}");
    assert_ne!(seen.port(), 0);

    // Auth none against a cephx-only mon: the mon answers AUTH_BAD_METHOD, which we decode and report.
    let auth = Box::new(AuthNone::new(EntityName::new(ENTITY_TYPE_CLIENT, "admin"), 0));
    let r = BlockingConnection::connect(
        mon,
        Config::new(ENTITY_TYPE_CLIENT, -1),
        auth,
        ENTITY_TYPE_MON,
        Duration::from_secs(10),
    );
    match r {
        Err(BlockingError::Closed(ConnError::Auth(AuthError::NoUsableMethod {
            method,
            allowed_methods,
            ..
        }))) => {
            assert_eq!(method, 1);
            assert!(
                allowed_methods.contains(&AUTH_METHOD_CEPHX),
                "{allowed_methods:?}"
            );
        }
        other => panic!("expected AUTH_BAD_METHOD from the mon, got {other:?}"),
    }
}

/// A full msgr2 session with a real monitor, using nothing but this crate: the mon runs with auth none, so our
/// AuthNone client completes banner, HELLO, AUTH_REQUEST/AUTH_DONE, AUTH_SIGNATURE, CLIENT_IDENT/SERVER_IDENT,
/// then a KEEPALIVE2 round trip and an MMonGetVersion → MMonGetVersionReply exchange.
#[test]
fn real_mon_full_session_with_auth_none() {
    let spec = testcluster::ClusterSpec::default()
        .conf("global", "auth cluster required", "none")
        .conf("global", "auth service required", "none")
        .conf("global", "auth client required", "none");
    let Some(cluster) = testcluster::start_or_skip(spec) else {
        return;
    };
    let mon = cluster.mon_addr();
    let auth = Box::new(AuthNone::new(EntityName::new(ENTITY_TYPE_CLIENT, "admin"), 0));
    let mut cfg = Config::new(ENTITY_TYPE_CLIENT, -1);
    cfg.lossy = true;
    cfg.nonce = 777;
    let mut c =
        BlockingConnection::connect(mon, cfg, auth, ENTITY_TYPE_MON, Duration::from_secs(10)).unwrap();
    let peer = c.peer().unwrap().clone();
    assert_eq!(peer.peer_type, ENTITY_TYPE_MON);
    assert!(peer.global_id > 0, "the mon assigned a global id");
    assert_eq!(
        peer.features,
        msgr2::connection::PACIFIC_FEATURES,
        "Pacific ∩ Pacific"
    );
    assert!(peer.lossy, "mons make client sessions lossy");
    // KEEPALIVE2 → KEEPALIVE2_ACK.
    c.connection().send_keepalive(std::time::Instant::now());
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        match c
            .recv(deadline.saturating_duration_since(std::time::Instant::now()))
            .unwrap()
        {
            Some(msgr2::Event::KeepaliveAck { .. }) => break,
            Some(_) => {}
            None => panic!("no KEEPALIVE2_ACK from the mon"),
        }
    }
    // MMonGetVersion (type 19): u64 handle, string what. Reply type 20: u64 handle, u64 version, u64 oldest.
    let mut e = denc::Encoder::default();
    e.u64(42);
    e.string("osdmap");
    let mut m = msgr2::Message::new(19, 1, 1, e.into_bytes());
    m.tid = 42;
    c.send(m).unwrap();
    let reply = loop {
        let m = c
            .recv_message(Duration::from_secs(10))
            .unwrap()
            .expect("a reply from the mon");
        if m.msg_type == 20 {
            break m;
        }
    };
    let mut d = denc::Decoder::new(reply.front.clone());
    assert_eq!(d.u64().unwrap(), 42, "our handle");
    let version = d.u64().unwrap();
    assert!(version >= 1, "osdmap epoch {version}");
    c.close();
}
