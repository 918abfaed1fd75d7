// SPDX-License-Identifier: LGPL-3.0-or-later
//! Arbitrary bytes from a peer never panic the state machine, in either role, after a valid banner or not.

#![no_main]

use std::time::Instant;

use libfuzzer_sys::fuzz_target;
use msgr2::auth::{AuthNone, AuthNoneServer};
use msgr2::control::{Banner, MSGR2_FEATURE_REVISION_1};
use msgr2::types::{ENTITY_TYPE_CLIENT, ENTITY_TYPE_OSD, EntityName};
use msgr2::{Config, Connection, EntityAddr};

fuzz_target!(|data: &[u8]| {
    let Some((&ctl, rest)) = data.split_first() else { return };
    let now = Instant::now();
    let mut conn = if ctl & 1 == 0 {
        Connection::acceptor(Config::new(ENTITY_TYPE_OSD, 0), Box::new(AuthNoneServer::default()), now)
    } else {
        let auth = Box::new(AuthNone::new(EntityName::new(ENTITY_TYPE_CLIENT, "f"), 0));
        let addr = EntityAddr::msgr2("127.0.0.1:1".parse().unwrap(), 0);
        Connection::connector(Config::new(ENTITY_TYPE_CLIENT, 1), auth, addr, ENTITY_TYPE_OSD, now)
    };
    if ctl & 2 != 0 {
        let b = Banner { supported: MSGR2_FEATURE_REVISION_1, required: 0 }.encode();
        let _ = conn.handle_input(now, &b);
    }
    let chunk = usize::from(ctl >> 2) + 1;
    for c in rest.chunks(chunk) {
        let _ = conn.handle_input(now, c);
        while conn.poll_output().is_some() {}
        while conn.poll_event().is_some() {}
    }
});
