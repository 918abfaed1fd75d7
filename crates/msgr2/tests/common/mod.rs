// SPDX-License-Identifier: LGPL-3.0-or-later
//! Test support shared by msgr2's integration tests: a client/OSD connection pair driven through memory.
#![allow(dead_code)]

use std::time::Instant;

use bytes::{Bytes, BytesMut};
use msgr2::auth::{CON_MODE_CRC, CON_MODE_SECURE};
use msgr2::testing::{TestClientAuth, TestServerAuth};
use msgr2::types::{ENTITY_TYPE_CLIENT, ENTITY_TYPE_OSD, EntityName};
use msgr2::{AddrVec, Config, Connection, EntityAddr, Event, Message};

/// A client connector asking for `mode` and an OSD acceptor offering secure and crc mode, before the handshake.
pub fn pair(mode: u32, now: Instant) -> (Connection, Connection) {
    let addr = EntityAddr::msgr2("127.0.0.1:6800".parse().unwrap(), 0);
    let mut ccfg = Config::new(ENTITY_TYPE_CLIENT, 1);
    ccfg.my_addrs = AddrVec::one(EntityAddr::msgr2("127.0.0.1:40000".parse().unwrap(), 1));
    let client_auth = TestClientAuth::new(EntityName::new(ENTITY_TYPE_CLIENT, "z"), vec![mode]);
    let c = Connection::connector(ccfg, Box::new(client_auth), addr, ENTITY_TYPE_OSD, now);
    let server_auth = TestServerAuth::new(
        vec![CON_MODE_SECURE, CON_MODE_CRC],
        b"0123456789abcdef",
        &[5u8; 64],
    );
    let s = Connection::acceptor(Config::new(ENTITY_TYPE_OSD, 0), Box::new(server_auth), now);
    (c, s)
}

/// Everything `c` has to send, as one buffer.
pub fn wire_of(c: &mut Connection) -> Bytes {
    let mut out = Vec::new();
    c.drain_output(&mut out);
    let mut w = BytesMut::new();
    for b in out {
        w.extend_from_slice(&b);
    }
    w.freeze()
}

/// Shuttle whole buffers between connector `c` and acceptor `s` until both are ready; their events are drained.
pub fn handshake(c: &mut Connection, s: &mut Connection, now: Instant) {
    for _ in 0..32 {
        let a = wire_of(c);
        if !a.is_empty() {
            s.handle_input_bytes(now, a).unwrap();
        }
        let b = wire_of(s);
        if !b.is_empty() {
            c.handle_input_bytes(now, b).unwrap();
        }
        if c.is_ready() && s.is_ready() {
            break;
        }
    }
    assert!(c.is_ready() && s.is_ready(), "handshake did not finish");
    while s.poll_event().is_some() {}
    while c.poll_event().is_some() {}
}

/// [`pair`] after a handshake through memory (whole buffers) with both sides ready and their events drained.
pub fn ready_pair(mode: u32, now: Instant) -> (Connection, Connection) {
    let (mut c, mut s) = pair(mode, now);
    handshake(&mut c, &mut s, now);
    (c, s)
}

/// The messages among `s`'s pending events (other events are dropped).
pub fn received(s: &mut Connection) -> Vec<Message> {
    let mut v = Vec::new();
    while let Some(e) = s.poll_event() {
        if let Event::Message(m) = e {
            v.push(m);
        }
    }
    v
}
