// SPDX-License-Identifier: LGPL-3.0-or-later
//! Rough single-core costs of the cephx operations a daemon performs per connection:
//! `cargo run --release -p cephx --example cephx_bench`.

#![allow(clippy::unwrap_used)] // a benchmark: any failure is a bug to see at once

use std::sync::Arc;
use std::time::Instant;

use cephx::service::{
    AuthEntry, MonAuthConnection, MonAuthServer, ServiceAuthorizerVerifier, ServiceKeys, ServiceStep,
};
use cephx::*;

const NOW: UTime = UTime::new(1_700_000_000, 0);

fn main() {
    let p: Arc<dyn CryptoProvider> = Arc::new(AwsLcProvider);
    let key = CryptoKey::generate(&*p, NOW);
    let mut mon = MonAuthServer::new(p.clone());
    mon.entities.insert(
        parse_entity_name("client.admin").unwrap(),
        AuthEntry {
            key: key.clone(),
            caps: Default::default(),
        },
    );
    mon.add_rotating(ENTITY_TYPE_OSD, NOW);
    let n = 20_000;

    let t = Instant::now();
    let mut client = None;
    for _ in 0..n / 10 {
        let mut c = MonAuthClient::new(
            p.clone(),
            parse_entity_name("client.admin").unwrap(),
            key.clone(),
            ENTITY_TYPE_OSD,
        );
        let mut conn = MonAuthConnection::default();
        let ch = mon.handle_initial(&mut conn, &c.initial_request()).unwrap();
        let more = c.handle_reply_more(&ch).unwrap();
        let (gid, done) = mon.handle_authenticate(&mut conn, &more, 64, NOW).unwrap();
        c.handle_done(gid, &done, NOW).unwrap();
        client = Some(c);
    }
    let per = t.elapsed() / (n / 10);
    println!(
        "mon authentication (both sides, 2 tickets): {per:?} each, {:.0}/s",
        1.0 / per.as_secs_f64()
    );

    let client = client.unwrap();
    let keys = ServiceKeys {
        service_id: ENTITY_TYPE_OSD,
        rotating: mon.rotating[&ENTITY_TYPE_OSD].clone(),
        own: None,
    };
    let t = Instant::now();
    for _ in 0..n {
        let mut a = client.build_authorizer(ENTITY_TYPE_OSD).unwrap();
        let mut v = ServiceAuthorizerVerifier::new(p.clone());
        let ServiceStep::Challenge(ch) = v.verify(&keys, a.payload(), 64).unwrap() else {
            unreachable!()
        };
        let again = a.add_challenge(&ch).unwrap();
        let ServiceStep::Done { reply, .. } = v.verify(&keys, &again, 64).unwrap() else {
            unreachable!()
        };
        a.verify_reply(&reply).unwrap();
    }
    let per = t.elapsed() / n;
    println!(
        "authorizer with CEPHX_V2 challenge (client + service, 2 rounds): {per:?} each, {:.0}/s",
        1.0 / per.as_secs_f64()
    );

    let t = Instant::now();
    let data = vec![7u8; 64];
    for _ in 0..n * 10 {
        std::hint::black_box(key.encrypt(&*p, &data).unwrap());
    }
    let per = t.elapsed() / (n * 10);
    println!("AES-128-CBC encrypt of 64 B: {per:?}");
}
