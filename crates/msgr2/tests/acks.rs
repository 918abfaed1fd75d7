// SPDX-License-Identifier: LGPL-3.0-or-later
#![allow(clippy::unwrap_used)] // test code: a panic is the failure report
//! The acknowledgement policy (docs/msgr2.md, "Acknowledgements"): acks ride on outgoing messages; a standalone
//! ACK frame goes out only after `ack_every` unacknowledged messages or when `ack_delay` passed with nothing sent;
//! lossy sessions (Ceph clients) get none at all; `ack_delay = None` with `ack_lossy` is the old behaviour.

mod common;

use std::time::{Duration, Instant};

use bytes::Bytes;
use common::{received, wire_of};
use msgr2::auth::{CON_MODE_CRC, CON_MODE_SECURE};
use msgr2::connection::ACK_DELAY_DEFAULT;
use msgr2::frame::{Frame, FrameDecoder, FrameLimits, Tag};
use msgr2::testing::{TestClientAuth, TestServerAuth};
use msgr2::types::{ENTITY_TYPE_CLIENT, ENTITY_TYPE_OSD, EntityName};
use msgr2::{AddrVec, Config, Connection, EntityAddr, Message};

const MODES: [u32; 2] = [CON_MODE_CRC, CON_MODE_SECURE];

/// A ready connector/acceptor pair; `tune` adjusts both configs (the acceptor's decides what it sends).
fn ready(mode: u32, lossy: bool, now: Instant, tune: impl Fn(&mut Config)) -> (Connection, Connection) {
    let addr = EntityAddr::msgr2("127.0.0.1:6800".parse().unwrap(), 0);
    let mut ccfg = Config::new(ENTITY_TYPE_CLIENT, 1);
    ccfg.my_addrs = AddrVec::one(EntityAddr::msgr2("127.0.0.1:40000".parse().unwrap(), 1));
    ccfg.lossy = lossy;
    tune(&mut ccfg);
    let client_auth = TestClientAuth::new(EntityName::new(ENTITY_TYPE_CLIENT, "z"), vec![mode]);
    let mut c = Connection::connector(ccfg, Box::new(client_auth), addr, ENTITY_TYPE_OSD, now);
    let server_auth = TestServerAuth::new(
        vec![CON_MODE_SECURE, CON_MODE_CRC],
        b"0123456789abcdef",
        &[5u8; 64],
    );
    let mut scfg = Config::new(ENTITY_TYPE_OSD, 0);
    tune(&mut scfg);
    let mut s = Connection::acceptor(scfg, Box::new(server_auth), now);
    common::handshake(&mut c, &mut s, now);
    assert_eq!(s.is_lossy(), lossy);
    (c, s)
}

fn msg(tid: u64) -> Message {
    let mut m = Message::new(42, 2, 1, Bytes::from(format!("op {tid}")));
    m.tid = tid;
    m
}

/// `from` sends `n` messages, `to` receives them at `at`.
fn deliver(from: &mut Connection, to: &mut Connection, tids: std::ops::RangeInclusive<u64>, at: Instant) {
    for t in tids {
        from.send(msg(t)).unwrap();
    }
    let w = wire_of(from);
    to.handle_input_bytes(at, w).unwrap();
}

/// Tags of the frames in `wire` (a decoder in the connection's mode would be needed for secure mode, so this is
/// used on crc sessions only).
fn tags(wire: Bytes) -> Vec<Tag> {
    let mut d = FrameDecoder::new(FrameLimits::default());
    d.push_bytes(wire);
    let mut v = Vec::new();
    while let Some(f) = d.next_frame().unwrap() {
        let f: Frame = f;
        v.push(f.tag().unwrap());
    }
    v
}

#[test]
fn the_ack_rides_on_the_reply() {
    for mode in MODES {
        let now = Instant::now();
        let (mut c, mut s) = ready(mode, false, now, |_| {});
        deliver(&mut c, &mut s, 1..=3, now);
        assert_eq!(received(&mut s).len(), 3);
        assert_eq!(c.queued().0, 3, "lossless: kept until acknowledged");
        // Nothing to write yet: the ack waits for a message (or its timer).
        assert!(!s.wants_write(), "no standalone ACK right after a message");
        assert_eq!(s.poll_timeout(), Some(now + ACK_DELAY_DEFAULT));
        // The reply carries it.
        let later = now + Duration::from_millis(1);
        deliver(&mut s, &mut c, 1..=1, later);
        let r = received(&mut c);
        assert_eq!((r.len(), r[0].ack_seq), (1, 3));
        assert_eq!(c.queued(), (0, 0), "the piggybacked ack trimmed the sent queue");
        let st = s.stats();
        assert_eq!((st.acks_sent, st.acks_piggybacked), (0, 1), "{st:?}");
        // And no timer is left for it.
        assert!(s.poll_timeout().unwrap() > now + Duration::from_secs(1));
        s.handle_timeout(now + ACK_DELAY_DEFAULT);
        assert!(!s.wants_write());
    }
}

#[test]
fn a_standalone_ack_goes_out_when_the_delay_passes() {
    for mode in MODES {
        let t0 = Instant::now();
        let (mut c, mut s) = ready(mode, false, t0, |_| {});
        deliver(&mut c, &mut s, 1..=1, t0);
        // More messages before the deadline do not move it.
        deliver(&mut c, &mut s, 2..=2, t0 + Duration::from_millis(5));
        deliver(&mut c, &mut s, 3..=3, t0 + Duration::from_millis(9));
        assert_eq!(received(&mut s).len(), 3);
        assert_eq!(s.poll_timeout(), Some(t0 + ACK_DELAY_DEFAULT));
        s.handle_timeout(t0 + ACK_DELAY_DEFAULT - Duration::from_micros(1));
        assert!(!s.wants_write(), "not due yet");
        s.handle_timeout(t0 + ACK_DELAY_DEFAULT);
        let w = wire_of(&mut s);
        if mode == CON_MODE_CRC {
            assert_eq!(tags(w.clone()), vec![Tag::Ack]);
        }
        c.handle_input_bytes(t0 + ACK_DELAY_DEFAULT, w).unwrap();
        assert_eq!(c.queued(), (0, 0), "one ACK acknowledged all three");
        assert_eq!(s.stats().acks_sent, 1);
        // Nothing pending any more: the next timer is the keepalive.
        assert!(s.poll_timeout().unwrap() > t0 + Duration::from_secs(1));
    }
}

#[test]
fn ack_every_sends_one_at_once() {
    let now = Instant::now();
    let (mut c, mut s) = ready(CON_MODE_CRC, false, now, |cfg| cfg.ack_every = 4);
    deliver(&mut c, &mut s, 1..=3, now);
    assert!(!s.wants_write());
    deliver(&mut c, &mut s, 4..=4, now);
    assert_eq!(tags(wire_of(&mut s)), vec![Tag::Ack]);
    assert_eq!(s.stats().acks_sent, 1);
}

#[test]
fn lossy_sessions_get_no_standalone_acks() {
    for mode in MODES {
        let now = Instant::now();
        let (mut c, mut s) = ready(mode, true, now, |_| {});
        deliver(&mut c, &mut s, 1..=100, now);
        assert_eq!(received(&mut s).len(), 100);
        assert!(
            !s.wants_write(),
            "Ceph clients keep no sent queue: an ACK would only cost them a wakeup"
        );
        assert!(
            s.poll_timeout().unwrap() > now + Duration::from_secs(1),
            "no ack timer"
        );
        s.handle_timeout(now + Duration::from_secs(1));
        assert!(!s.wants_write());
        assert_eq!(s.stats().acks_sent, 0);
        // Replies still carry ack_seq, as Ceph's do.
        deliver(&mut s, &mut c, 1..=1, now);
        assert_eq!(received(&mut c)[0].ack_seq, 100);
    }
}

#[test]
fn immediate_acks_restore_the_old_behaviour() {
    for lossy in [false, true] {
        let now = Instant::now();
        let (mut c, mut s) = ready(CON_MODE_CRC, lossy, now, |cfg| {
            cfg.ack_delay = None;
            cfg.ack_lossy = true;
        });
        deliver(&mut c, &mut s, 1..=2, now);
        assert_eq!(tags(wire_of(&mut s)), vec![Tag::Ack], "lossy {lossy}");
        assert_eq!(s.stats().acks_sent, 1);
        if !lossy {
            deliver(&mut s, &mut c, 1..=1, now);
            assert_eq!(c.queued(), (0, 0));
            assert_eq!(s.stats().acks_piggybacked, 0, "already acknowledged");
        }
    }
}

#[test]
fn ack_delay_none_without_lossy_acks_is_ceph_behaviour() {
    // Ceph: ACK at once on lossless sessions, never on lossy ones.
    for lossy in [false, true] {
        let now = Instant::now();
        let (mut c, mut s) = ready(CON_MODE_CRC, lossy, now, |cfg| cfg.ack_delay = None);
        deliver(&mut c, &mut s, 1..=1, now);
        let want: Vec<Tag> = if lossy { vec![] } else { vec![Tag::Ack] };
        assert_eq!(tags(wire_of(&mut s)), want, "lossy {lossy}");
    }
}

#[test]
fn ack_bytes_bounds_what_the_peer_keeps() {
    for mode in MODES {
        let now = Instant::now();
        let (mut c, mut s) = ready(mode, false, now, |_| {});
        // Two 512 KiB messages: the second reaches ack_bytes (1 MiB), so the ACK goes out at once.
        let mut m = msg(1);
        m.data = Bytes::from(vec![7u8; 512 << 10]);
        c.send(m).unwrap();
        s.handle_input_bytes(now, wire_of(&mut c)).unwrap();
        assert!(!s.wants_write(), "half of ack_bytes: deferred");
        let mut m = msg(2);
        m.data = Bytes::from(vec![8u8; 512 << 10]);
        c.send(m).unwrap();
        s.handle_input_bytes(now, wire_of(&mut c)).unwrap();
        assert_eq!(received(&mut s).len(), 2);
        let w = wire_of(&mut s);
        if mode == CON_MODE_CRC {
            assert_eq!(tags(w.clone()), vec![Tag::Ack]);
        }
        c.handle_input_bytes(now, w).unwrap();
        assert_eq!(c.queued(), (0, 0), "the sender dropped both");
        // The count starts again after the ACK.
        deliver(&mut c, &mut s, 3..=3, now);
        assert!(!s.wants_write());
    }
}
