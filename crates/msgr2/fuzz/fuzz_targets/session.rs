// SPDX-License-Identifier: LGPL-3.0-or-later
//! Well-framed but arbitrary frames (valid crcs, any tag, any payload) into an established session, on either
//! side, never panic the state machine; the other side keeps working or closes cleanly.

#![no_main]

use std::time::{Duration, Instant};

use bytes::Bytes;
use libfuzzer_sys::fuzz_target;
use msgr2::auth::{AuthNone, AuthNoneServer};
use msgr2::frame::{Tag, encode_frame};
use msgr2::types::{ENTITY_TYPE_CLIENT, ENTITY_TYPE_OSD, EntityName};
use msgr2::{AddrVec, Config, Connection, EntityAddr};

fn pump(a: &mut Connection, b: &mut Connection, now: Instant) {
    for _ in 0..64 {
        let mut moved = false;
        while let Some(x) = a.poll_output() {
            moved = true;
            if b.handle_input(now, &x).is_err() {
                return;
            }
        }
        while let Some(x) = b.poll_output() {
            moved = true;
            if a.handle_input(now, &x).is_err() {
                return;
            }
        }
        if !moved {
            return;
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&ctl, mut rest)) = data.split_first() else { return };
    let now = Instant::now();
    let auth = Box::new(AuthNone::new(EntityName::new(ENTITY_TYPE_CLIENT, "f"), 0));
    let addr = EntityAddr::msgr2("127.0.0.1:1".parse().unwrap(), 0);
    let mut ccfg = Config::new(ENTITY_TYPE_CLIENT, 1);
    ccfg.lossy = ctl & 2 != 0;
    // Acceptors refuse a client without an address (as Ceph does).
    ccfg.my_addrs = AddrVec::one(EntityAddr::msgr2("127.0.0.1:40000".parse().unwrap(), 1));
    let mut c = Connection::connector(ccfg, auth, addr, ENTITY_TYPE_OSD, now);
    let mut s = Connection::acceptor(Config::new(ENTITY_TYPE_OSD, 0), Box::new(AuthNoneServer::default()), now);
    pump(&mut c, &mut s, now);
    assert!(c.is_ready() && s.is_ready());
    let target = if ctl & 1 == 0 { &mut s } else { &mut c };
    // Input: repeated [tag][nseg 1..4][u16 len each][segment bytes].
    while rest.len() >= 2 {
        let tag = Tag::from_u8(rest[0] % 21).unwrap_or(Tag::Message);
        let n = usize::from(rest[1] % 4) + 1;
        rest = &rest[2..];
        let mut segs = Vec::new();
        for _ in 0..n {
            if rest.len() < 2 {
                break;
            }
            let len = usize::from(u16::from_le_bytes([rest[0], rest[1]])).min(rest.len() - 2);
            segs.push(Bytes::copy_from_slice(&rest[2..2 + len]));
            rest = &rest[2 + len..];
        }
        if segs.is_empty() {
            break;
        }
        let aligns = [8u16, 8, 8, 4096];
        let Ok(bufs) = encode_frame(None, tag, &segs, &aligns[..segs.len()]) else { break };
        let mut failed = false;
        for b in bufs {
            if target.handle_input(now, &b).is_err() {
                failed = true;
                break;
            }
        }
        while target.poll_output().is_some() {}
        while target.poll_event().is_some() {}
        target.handle_timeout(now + Duration::from_secs(1));
        if failed {
            break;
        }
    }
    let _ = target.send(msgr2::Message::new(1, 1, 1, Bytes::from_static(b"x")));
    while target.poll_output().is_some() {}
});
