// SPDX-License-Identifier: LGPL-3.0-or-later
//! End-to-end cephx flows, sans-IO: a principal against `MonAuthServer`, then an authorizer against a daemon's
//! `ServiceAuthorizerVerifier` with the rotating keys fetched from the same monitor.

#![allow(clippy::unwrap_used)] // test helpers outside #[test] fns

use std::sync::Arc;

use cephx::client::ResponseKind;
use cephx::service::{AuthEntry, MonAuthConnection, MonAuthServer, ServiceStep};
use cephx::*;

const NOW: UTime = UTime::new(1_700_000_000, 0);

fn provider() -> Arc<dyn CryptoProvider> {
    Arc::new(AwsLcProvider)
}

type Entity<'a> = (&'a str, &'a CryptoKey, &'a [(&'a str, &'a str)]);

fn mon_with(entities: &[Entity<'_>]) -> MonAuthServer {
    let mut mon = MonAuthServer::new(provider());
    for (name, key, caps) in entities {
        mon.entities.insert(
            parse_entity_name(name).unwrap(),
            AuthEntry {
                key: (*key).clone(),
                caps: caps.iter().map(|(s, c)| (s.to_string(), c.to_string())).collect(),
            },
        );
    }
    for s in [ENTITY_TYPE_MON, ENTITY_TYPE_OSD, ENTITY_TYPE_MGR] {
        mon.add_rotating(s, NOW);
    }
    mon
}

/// Run the msgr2 AUTH exchange; returns the client's session or the errno the mon put in AUTH_BAD_METHOD.
fn authenticate(
    mon: &mut MonAuthServer,
    client: &mut MonAuthClient,
    secret_len: usize,
) -> Result<(client::MonSession, MonAuthConnection), i32> {
    let mut conn = MonAuthConnection::default();
    let req = client.initial_request();
    let challenge = mon.handle_initial(&mut conn, &req).unwrap();
    let more = client.handle_reply_more(&challenge).unwrap();
    let (gid, done) = mon.handle_authenticate(&mut conn, &more, secret_len, NOW)?;
    let s = client.handle_done(gid, &done, NOW).unwrap();
    Ok((s, conn))
}

#[test]
fn client_gets_session_tickets_and_connection_secret() {
    let p = provider();
    let key = CryptoKey::generate(&*p, NOW);
    let mut mon = mon_with(&[("client.admin", &key, &[("osd", "allow rwx pool=rbd")])]);
    let mut c = MonAuthClient::new(
        p.clone(),
        parse_entity_name("client.admin").unwrap(),
        key,
        ENTITY_TYPE_MON | ENTITY_TYPE_OSD | ENTITY_TYPE_MGR,
    );
    let (s, conn) = authenticate(&mut mon, &mut c, 64).unwrap();
    assert_eq!(s.global_id, 4101);
    assert_eq!(s.connection_secret.len(), 64);
    assert_eq!(
        Some(&s.session_key),
        conn.session_key.as_ref(),
        "both sides must hold the same session key"
    );
    // Tickets for every wanted service arrived in the same round trip (other_keys).
    assert_eq!(
        c.validate_tickets(NOW),
        (
            ENTITY_TYPE_AUTH | ENTITY_TYPE_MON | ENTITY_TYPE_OSD | ENTITY_TYPE_MGR,
            0
        )
    );
    assert_eq!(c.need_tickets(NOW), 0);
    assert!(c.build_ticket_request(NOW).unwrap().is_none());
    // Service tickets last 3600 s and want renewal after 3/4 of that.
    let later = UTime::new(NOW.sec + 2800, 0);
    assert_eq!(
        c.need_tickets(later),
        ENTITY_TYPE_OSD | ENTITY_TYPE_MON | ENTITY_TYPE_MGR
    );
    let req = c.build_ticket_request(later).unwrap().expect("tickets are due");
    let reply = mon.handle_request(&conn, &req, later).unwrap();
    match c.handle_response(0, &reply, later).unwrap() {
        ResponseKind::ServiceTickets { services } => {
            assert_eq!(services, vec![ENTITY_TYPE_MON, ENTITY_TYPE_OSD, ENTITY_TYPE_MGR])
        }
        r => panic!("unexpected {r:?}"),
    }
    assert_eq!(c.need_tickets(later), 0);
}

#[test]
fn crc_mode_gets_an_empty_connection_secret() {
    let p = provider();
    let key = CryptoKey::generate(&*p, NOW);
    let mut mon = mon_with(&[("client.admin", &key, &[])]);
    let mut c = MonAuthClient::new(
        p,
        parse_entity_name("client.admin").unwrap(),
        key,
        ENTITY_TYPE_MON,
    );
    let (s, _) = authenticate(&mut mon, &mut c, 0).unwrap();
    assert!(s.connection_secret.is_empty());
}

#[test]
fn wrong_key_is_refused_with_eacces() {
    let p = provider();
    let key = CryptoKey::generate(&*p, NOW);
    let wrong = CryptoKey::generate(&*p, NOW);
    let mut mon = mon_with(&[("client.admin", &key, &[])]);
    let mut c = MonAuthClient::new(
        p,
        parse_entity_name("client.admin").unwrap(),
        wrong,
        ENTITY_TYPE_MON,
    );
    let errno = authenticate(&mut mon, &mut c, 64).unwrap_err();
    assert_eq!(errno, -13);
    let e = CephxError::Rejected { errno };
    assert_eq!(e.errno(), 13);
    assert!(e.to_string().contains("Permission denied"), "{e}");
}

#[test]
fn a_session_reply_sealed_for_another_key_is_eperm() {
    let p = provider();
    let key = CryptoKey::generate(&*p, NOW);
    let mut mon = mon_with(&[("client.admin", &key, &[])]);
    let mut good = MonAuthClient::new(
        p.clone(),
        parse_entity_name("client.admin").unwrap(),
        key.clone(),
        ENTITY_TYPE_MON,
    );
    let mut conn = MonAuthConnection::default();
    let ch = mon.handle_initial(&mut conn, &good.initial_request()).unwrap();
    let more = good.handle_reply_more(&ch).unwrap();
    let (gid, done) = mon.handle_authenticate(&mut conn, &more, 64, NOW).unwrap();
    // An impostor that received the same reply cannot open it.
    let mut impostor = MonAuthClient::new(
        p.clone(),
        parse_entity_name("client.admin").unwrap(),
        CryptoKey::generate(&*p, NOW),
        ENTITY_TYPE_MON,
    );
    impostor.initial_request();
    impostor.handle_reply_more(&ch).unwrap();
    let err = impostor.handle_done(gid, &done, NOW).unwrap_err();
    assert_eq!(err.errno(), 1, "{err}");
}

struct Daemon {
    client: MonAuthClient,
    keys: service::ServiceKeys,
}

fn osd_daemon(mon: &mut MonAuthServer, osd_key: &CryptoKey) -> Daemon {
    let p = provider();
    let mut c = MonAuthClient::new(
        p,
        parse_entity_name("osd.0").unwrap(),
        osd_key.clone(),
        ENTITY_TYPE_MON | ENTITY_TYPE_OSD | ENTITY_TYPE_MGR,
    );
    let (_, conn) = authenticate(mon, &mut c, 64).unwrap();
    assert!(c.needs_rotating_keys() && c.rotating_keys_due(NOW));
    let due = c.due_requests(NOW).unwrap();
    assert_eq!(
        due,
        vec![c.build_rotating_request()],
        "a fresh daemon wants its rotating keys; tickets are fresh"
    );
    let reply = mon.handle_request(&conn, &due[0], NOW).unwrap();
    assert_eq!(
        c.handle_response(0, &reply, NOW).unwrap(),
        ResponseKind::RotatingKeys
    );
    assert!(!c.rotating_keys_due(NOW));
    // The test monitor's current key expires after 2 h; past that (+30 s) a refresh is due.
    assert!(c.rotating_keys_due(UTime::new(NOW.sec + 7200 + 31, 0)));
    let rotating = c.rotating_secrets().unwrap().clone();
    assert_eq!(rotating.secrets.len(), 3);
    assert!(c.due_requests(NOW).unwrap().is_empty());
    let keys = c.service_keys().unwrap();
    assert_eq!(
        (keys.service_id, keys.rotating.secrets.len()),
        (ENTITY_TYPE_OSD, rotating.secrets.len())
    );
    Daemon { client: c, keys }
}

#[test]
fn authorizer_with_challenge_against_osd() {
    let p = provider();
    let admin_key = CryptoKey::generate(&*p, NOW);
    let osd_key = CryptoKey::generate(&*p, NOW);
    let mut mon = mon_with(&[
        ("client.admin", &admin_key, &[("osd", "allow rwx pool=rbd")]),
        ("osd.0", &osd_key, &[("osd", "allow *")]),
    ]);
    let osd = osd_daemon(&mut mon, &osd_key);
    let mut c = MonAuthClient::new(
        p.clone(),
        parse_entity_name("client.admin").unwrap(),
        admin_key,
        ENTITY_TYPE_MON | ENTITY_TYPE_OSD,
    );
    authenticate(&mut mon, &mut c, 64).unwrap();

    let mut a = c.build_authorizer(ENTITY_TYPE_OSD).unwrap();
    let mut v = service::ServiceAuthorizerVerifier::new(p.clone());
    let ServiceStep::Challenge(ch) = v.verify(&osd.keys, a.payload(), 64).unwrap() else {
        panic!("msgr2 services always challenge first")
    };
    let again = a.add_challenge(&ch).unwrap();
    let ServiceStep::Done {
        reply,
        peer,
        connection_secret,
    } = v.verify(&osd.keys, &again, 64).unwrap()
    else {
        panic!("expected done")
    };
    assert_eq!(peer.name.to_string(), "client.admin");
    assert_eq!(peer.global_id, c.global_id());
    assert_eq!(peer.caps.caps_text().unwrap(), "allow rwx pool=rbd");
    assert_eq!(peer.session_key, a.session_key);
    assert_eq!(a.verify_reply(&reply).unwrap(), connection_secret);
    assert_eq!(connection_secret.len(), 64);

    // Peer OSDs authenticate the same way with their own tickets.
    let mut a2 = osd.client.build_authorizer(ENTITY_TYPE_OSD).unwrap();
    let mut v2 = service::ServiceAuthorizerVerifier::new(p.clone());
    let ServiceStep::Challenge(ch) = v2.verify(&osd.keys, a2.payload(), 0).unwrap() else {
        panic!()
    };
    let ServiceStep::Done { reply, peer, .. } =
        v2.verify(&osd.keys, &a2.add_challenge(&ch).unwrap(), 0).unwrap()
    else {
        panic!()
    };
    assert_eq!(peer.name.to_string(), "osd.0");
    assert_eq!(peer.caps.caps_text().unwrap(), "allow *");
    assert!(
        a2.verify_reply(&reply).unwrap().is_empty(),
        "crc mode: reply v1 without secret"
    );
}

#[test]
fn authorizer_failures() {
    let p = provider();
    let admin_key = CryptoKey::generate(&*p, NOW);
    let osd_key = CryptoKey::generate(&*p, NOW);
    let mut mon = mon_with(&[("client.admin", &admin_key, &[]), ("osd.0", &osd_key, &[])]);
    let osd = osd_daemon(&mut mon, &osd_key);
    let mut c = MonAuthClient::new(
        p.clone(),
        parse_entity_name("client.admin").unwrap(),
        admin_key,
        ENTITY_TYPE_OSD,
    );
    authenticate(&mut mon, &mut c, 64).unwrap();

    // Wrong challenge answer: replay the first authorizer (no challenge) after being challenged gets a new
    // challenge, but a forged +1 is refused.
    let mut a = c.build_authorizer(ENTITY_TYPE_OSD).unwrap();
    let mut v = service::ServiceAuthorizerVerifier::new(p.clone());
    let ServiceStep::Challenge(_) = v.verify(&osd.keys, a.payload(), 64).unwrap() else {
        panic!()
    };
    let mut other = service::ServiceAuthorizerVerifier::new(p.clone());
    let ServiceStep::Challenge(ch_other) = other.verify(&osd.keys, a.payload(), 64).unwrap() else {
        panic!()
    };
    let answered_wrong = a.add_challenge(&ch_other).unwrap();
    assert_eq!(
        v.verify(&osd.keys, &answered_wrong, 64).unwrap_err(),
        CephxError::ChallengeMismatch
    );

    // Unknown rotating secret id.
    let empty = service::ServiceKeys {
        service_id: ENTITY_TYPE_OSD,
        ..Default::default()
    };
    let err = service::ServiceAuthorizerVerifier::new(p.clone())
        .verify(&empty, a.payload(), 64)
        .unwrap_err();
    assert!(
        matches!(
            err,
            CephxError::UnknownSecret {
                service_id: ENTITY_TYPE_OSD,
                ..
            }
        ),
        "{err}"
    );
    assert_eq!(err.errno(), 13);

    // A tampered global_id.
    let mut forged = a.payload().to_vec();
    forged[1] ^= 1;
    let err = service::ServiceAuthorizerVerifier::new(p.clone())
        .verify(&osd.keys, &forged, 64)
        .unwrap_err();
    assert!(matches!(err, CephxError::GlobalIdMismatch { .. }), "{err}");

    // A reply for another nonce.
    let b = c.build_authorizer(ENTITY_TYPE_OSD).unwrap();
    let mut v = service::ServiceAuthorizerVerifier::new(p.clone());
    let ServiceStep::Challenge(ch) = v.verify(&osd.keys, b.payload(), 0).unwrap() else {
        panic!()
    };
    let mut b2 = b;
    let ServiceStep::Done { reply, .. } = v.verify(&osd.keys, &b2.add_challenge(&ch).unwrap(), 0).unwrap()
    else {
        panic!()
    };
    let c2 = c.build_authorizer(ENTITY_TYPE_OSD).unwrap();
    assert!(matches!(
        c2.verify_reply(&reply),
        Err(CephxError::NonceMismatch { .. })
    ));

    // Truncations never panic.
    for n in 0..a.payload().len() {
        let _ = service::ServiceAuthorizerVerifier::new(p.clone()).verify(&osd.keys, &a.payload()[..n], 64);
    }
    // No ticket for a service we did not ask for.
    assert_eq!(
        c.build_authorizer(ENTITY_TYPE_MGR).unwrap_err(),
        CephxError::NoTicket(ENTITY_TYPE_MGR)
    );
}

mod hostile {
    use super::*;
    use denc::Decode;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(200))]
        /// Arbitrary bytes in every position a peer controls: errors, never panics.
        #[test]
        fn arbitrary_peer_bytes_never_panic(data in proptest::collection::vec(any::<u8>(), 0..200)) {
            let p = provider();
            let key = CryptoKey::new_aes([7; 16], NOW);
            let mut c = MonAuthClient::new(p.clone(), parse_entity_name("client.admin").unwrap(), key.clone(), ENTITY_TYPE_OSD);
            c.initial_request();
            let _ = c.handle_reply_more(&data);
            let _ = c.handle_done(1, &data, NOW);
            let _ = c.handle_response(0, &data, NOW);
            let keys = service::ServiceKeys { service_id: ENTITY_TYPE_OSD, ..Default::default() };
            let _ = service::ServiceAuthorizerVerifier::new(p.clone()).verify(&keys, &data, 64);
            let mut a = Authorizer::build(p.clone(), 1, ENTITY_TYPE_OSD, &CephXTicketBlob::default(), key.clone()).unwrap();
            let _ = a.add_challenge(&data);
            let _ = a.verify_reply(&data);
            let mut mon = MonAuthServer::new(p.clone());
            let mut conn = MonAuthConnection::default();
            let _ = mon.handle_initial(&mut conn, &data);
            let _ = mon.handle_authenticate(&mut conn, &data, 64, NOW);
            let _ = mon.handle_request(&conn, &data, NOW);
            for t in [0usize, 1, 2] {
                let b = bytes::Bytes::from(data.clone());
                let _ = match t {
                    0 => AuthTicket::decode_all(b).map(|_| ()),
                    1 => RotatingSecrets::decode_all(b).map(|_| ()),
                    _ => EntityAuth::decode_all(b).map(|_| ()),
                };
            }
        }
    }
}
