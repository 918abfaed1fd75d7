// SPDX-License-Identifier: LGPL-3.0-or-later
//! `CephxMonClientAuth` at the msgr2 auth seam, sans-IO: parallel hunting attempts each run their own handshake on
//! a fork of the principal, the winner is published, the next attempt reclaims its global id, and a mode the
//! monitor refuses is retried with the modes both allow.

#![allow(clippy::unwrap_used)] // test code

use std::sync::{Arc, Mutex};

use cephx::msgr2_auth::{CephxMonClientAuth, WANT_MON_OSD_MGR, parse_modes};
use cephx::service::{AuthEntry, MonAuthConnection, MonAuthServer};
use cephx::*;
use msgr2::auth::{AUTH_METHOD_CEPHX, AuthContext, CON_MODE_CRC, CON_MODE_SECURE, ClientAuth};

const NOW: UTime = UTime::new(1_700_000_000, 0);
const CTX: AuthContext = AuthContext {
    local_type: 8,
    peer_type: 1,
};

fn setup() -> (MonAuthServer, Arc<Mutex<MonAuthClient>>) {
    let p: Arc<dyn CryptoProvider> = Arc::new(AwsLcProvider);
    let key = CryptoKey::generate(&*p, NOW);
    let name = parse_entity_name("client.admin").unwrap();
    let mut mon = MonAuthServer::new(p.clone());
    mon.entities.insert(
        name.clone(),
        AuthEntry {
            key: key.clone(),
            caps: Default::default(),
        },
    );
    for s in [ENTITY_TYPE_MON, ENTITY_TYPE_OSD, ENTITY_TYPE_MGR] {
        mon.add_rotating(s, NOW);
    }
    let client = MonAuthClient::new(p, name, key, WANT_MON_OSD_MGR);
    (mon, Arc::new(Mutex::new(client)))
}

#[test]
fn parallel_attempts_do_not_interleave_and_the_winner_is_reclaimed() {
    let (mut mon, shared) = setup();
    let mut a = CephxMonClientAuth::per_attempt(&shared, NOW);
    let mut b = CephxMonClientAuth::per_attempt(&shared, NOW);
    let (mut ca, mut cb) = (MonAuthConnection::default(), MonAuthConnection::default());
    // Both attempts are in flight at once, their rounds interleaved (two monitors answering).
    let ra = a.initial_request(&CTX).unwrap();
    let rb = b.initial_request(&CTX).unwrap();
    assert_eq!(ra.method, AUTH_METHOD_CEPHX);
    let cha = mon.handle_initial(&mut ca, &ra.payload).unwrap();
    let chb = mon.handle_initial(&mut cb, &rb.payload).unwrap();
    let ma = a.handle_reply_more(cha).unwrap();
    let mb = b.handle_reply_more(chb).unwrap();
    let (gb, db) = mon.handle_authenticate(&mut cb, &mb, 64, NOW).unwrap();
    let (ga, da) = mon.handle_authenticate(&mut ca, &ma, 64, NOW).unwrap();
    // A shared client would have lost the first attempt's challenge to the second: both must complete.
    let done_b = b.handle_done(gb, CON_MODE_SECURE, db).unwrap();
    let done_a = a.handle_done(ga, CON_MODE_SECURE, da).unwrap();
    assert_eq!(done_a.connection_secret.len(), 64);
    assert_ne!(done_a.connection_secret, done_b.connection_secret);
    assert_ne!(ga, gb);
    // The shared principal is the last to authenticate, with its tickets.
    {
        let s = shared.lock().unwrap();
        assert_eq!(s.global_id(), ga);
        assert!(s.is_authenticated());
        assert_eq!(s.need_tickets(NOW), 0);
    }
    // The next attempt claims that global id and presents the AUTH ticket; the monitor keeps the id.
    let mut c = CephxMonClientAuth::per_attempt(&shared, NOW);
    let rc = c.initial_request(&CTX).unwrap();
    let mut cc = MonAuthConnection::default();
    let ch = mon.handle_initial(&mut cc, &rc.payload).unwrap();
    let more = c.handle_reply_more(ch).unwrap();
    let (gc, dc) = mon.handle_authenticate(&mut cc, &more, 0, NOW).unwrap();
    assert_eq!(gc, ga, "global id reclaimed");
    c.handle_done(gc, CON_MODE_CRC, dc).unwrap();
}

#[test]
fn a_failed_attempt_leaves_the_shared_principal_alone() {
    let (mut mon, shared) = setup();
    let mut a = CephxMonClientAuth::per_attempt(&shared, NOW);
    let r = a.initial_request(&CTX).unwrap();
    let mut conn = MonAuthConnection::default();
    let ch = mon.handle_initial(&mut conn, &r.payload).unwrap();
    a.handle_reply_more(ch).unwrap();
    assert!(
        a.handle_done(7, CON_MODE_SECURE, bytes::Bytes::from_static(b"junk"))
            .is_err()
    );
    let s = shared.lock().unwrap();
    assert_eq!((s.global_id(), s.is_authenticated()), (0, false));
}

#[test]
fn refused_modes_are_retried_with_the_common_ones_then_reported() {
    let (_, shared) = setup();
    let mut a = CephxMonClientAuth::per_attempt(&shared, NOW).with_modes(parse_modes("secure, crc"));
    assert_eq!(a.modes, [CON_MODE_SECURE, CON_MODE_CRC]);
    a.initial_request(&CTX).unwrap();
    let retry = a
        .handle_bad_method(AUTH_METHOD_CEPHX, -95, &[AUTH_METHOD_CEPHX], &[CON_MODE_CRC])
        .unwrap();
    assert_eq!(retry.preferred_modes, [CON_MODE_CRC]);
    assert_eq!(retry.method, AUTH_METHOD_CEPHX);
    // The same refusal again: nothing left to try.
    assert!(
        a.handle_bad_method(AUTH_METHOD_CEPHX, -95, &[AUTH_METHOD_CEPHX], &[CON_MODE_CRC])
            .is_err()
    );
    assert_eq!(parse_modes("crc"), [CON_MODE_CRC]);
    assert!(parse_modes("none").is_empty());
}

#[test]
fn the_clock_is_read_at_auth_done() {
    let (mut mon, shared) = setup();
    let later = UTime::new(NOW.sec + 1000, 0);
    let mut a = CephxMonClientAuth::per_attempt(&shared, NOW).with_clock(Arc::new(move || later));
    let r = a.initial_request(&CTX).unwrap();
    let mut conn = MonAuthConnection::default();
    let ch = mon.handle_initial(&mut conn, &r.payload).unwrap();
    let more = a.handle_reply_more(ch).unwrap();
    let (g, d) = mon.handle_authenticate(&mut conn, &more, 0, NOW).unwrap();
    a.handle_done(g, CON_MODE_CRC, d).unwrap();
    // Expiries are stamped from the clock's time, not from the construction time.
    let s = shared.lock().unwrap();
    let exp = s.tickets().tickets[&ENTITY_TYPE_AUTH].expires;
    assert!(exp > Some(later), "{exp:?} stamped from {later:?}");
}
