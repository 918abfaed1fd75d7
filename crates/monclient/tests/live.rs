// SPDX-License-Identifier: LGPL-3.0-or-later
#![allow(clippy::unwrap_used)] // test harness
//! The blocking MonClient against a real Ceph 16.2 monitor (crates/testcluster, cephx): session in crc and in
//! secure mode, subscriptions delivering monmap/osdmap/config/mgrmap, a mon command, a version query, and
//! following a new OSDMap epoch. Skipped when Ceph is not installed.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use monclient::blocking::{BlockingMonClient, DriverConfig};
use monclient::cephx_auth::CephxMonAuth;
use monclient::{Config, EpochOnlyMap, Event, MonTarget, OsdMapLike};
use msgr2::auth::{CON_MODE_CRC, CON_MODE_SECURE};

const T: Duration = Duration::from_secs(30);

fn client<M: OsdMapLike>(cluster: &testcluster::Cluster, modes: Vec<u32>) -> BlockingMonClient<M> {
    let key = cephx::CryptoKey::from_base64(&cluster.admin_key().unwrap()).unwrap();
    let mons = vec![MonTarget {
        name: "conf".into(),
        addr: cluster.mon_addr(),
    }];
    let driver = DriverConfig {
        msgr: msgr2::connection::Config::new(msgr2::types::ENTITY_TYPE_CLIENT, -1),
        connect_timeout: Duration::from_secs(5),
    };
    let auth = Box::new(move |_: &MonTarget| {
        Box::new(CephxMonAuth::new(
            Arc::new(cephx::AwsLcProvider),
            cephx::EntityName::new(msgr2::types::ENTITY_TYPE_CLIENT, "admin"),
            key.clone(),
            monclient::cephx_auth::WANT_MON_OSD_MGR,
            modes.clone(),
        )) as Box<dyn msgr2::auth::ClientAuth + Send>
    });
    BlockingMonClient::new(
        Config {
            hostname: "test".into(),
            ..Config::default()
        },
        mons,
        1,
        driver,
        auth,
    )
    .unwrap()
}

fn exercise<M: OsdMapLike>(cluster: &testcluster::Cluster, modes: Vec<u32>) {
    let mut c = client::<M>(cluster, modes);
    c.wait_connected(T)
        .unwrap_or_else(|e| panic!("{e}: last error {:?}", c.seen.last_error));
    let epoch = c.wait_osdmap(0, T).unwrap().epoch();
    assert!(epoch >= 1);
    c.run_until(T, "monmap, config and mgrmap", |c| {
        c.core().monmap().is_some() && c.seen.config.is_some() && c.seen.mgrmap.is_some()
    })
    .unwrap();
    // The monmap renamed our ceph.conf address to the mon's real name.
    assert_eq!(c.core().current_mon().unwrap().name, "a");
    let r = c
        .mon_command(
            vec![r#"{"prefix": "status", "format": "json"}"#.into()],
            Bytes::new(),
            T,
        )
        .unwrap();
    assert_eq!(r.rc, 0, "{}", r.outs);
    let v: serde_json::Value = serde_json::from_slice(&r.outbl).unwrap();
    assert_eq!(v["fsid"], cluster.fsid());
    let bad = c.mon_command(
        vec![r#"{"prefix": "osd pool get", "pool": "nope", "var": "size"}"#.into()],
        Bytes::new(),
        T,
    );
    assert_eq!(bad.unwrap().rc, -2, "ENOENT for a missing pool");
    let (newest, oldest) = c.get_version("osdmap", T).unwrap();
    assert!(newest >= u64::from(epoch) && oldest >= 1);
    // A new epoch (a pool) reaches us through the continuous osdmap subscription.
    let pool = format!("p{}", modes_name(&c));
    let r = c
        .mon_command(
            vec![format!(
                r#"{{"prefix": "osd pool create", "pool": "{pool}", "pg_num": 1}}"#
            )],
            Bytes::new(),
            T,
        )
        .unwrap();
    assert_eq!(r.rc, 0, "{}", r.outs);
    let (newest, _) = c.get_version("osdmap", T).unwrap();
    c.wait_osdmap(newest as u32, T).unwrap();
    let mut saw_map_event = false;
    while let Some(e) = c.poll_event() {
        saw_map_event |= matches!(e, Event::OsdMap { epoch } if u64::from(epoch) == newest);
        // Incrementals must apply cleanly (for the real OSDMap: with the monitor's full_crc).
        assert!(!matches!(e, Event::OsdMapError { .. }), "{e:?}");
    }
    assert!(saw_map_event);
}

fn modes_name<M: OsdMapLike>(c: &BlockingMonClient<M>) -> u64 {
    c.seen.global_id
}

#[test]
fn crc_and_secure_sessions_with_a_real_monitor() {
    let Some(cluster) = testcluster::start_or_skip(testcluster::ClusterSpec::default()) else {
        return;
    };
    exercise::<EpochOnlyMap>(&cluster, vec![CON_MODE_CRC]);
    exercise::<osdmap::OsdMap>(&cluster, vec![CON_MODE_SECURE]);
}
