// SPDX-License-Identifier: LGPL-3.0-or-later
#![allow(clippy::unwrap_used)] // test harness
//! The blocking MonClient against a real Ceph 16.2 monitor (crates/testcluster, cephx): session in crc and in
//! secure mode, subscriptions delivering monmap/osdmap/config/mgrmap, a mon command, a version query, and
//! following a new OSDMap epoch. Skipped when Ceph is not installed.

use std::time::Duration;

use bytes::Bytes;
use cephx::msgr2_auth::WANT_MON_OSD_MGR;
use monclient::blocking::{BlockingMonClient, DriverConfig};
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
    let auth = monclient::blocking::cephx_auth(
        cephx::EntityName::new(msgr2::types::ENTITY_TYPE_CLIENT, "admin"),
        key,
        WANT_MON_OSD_MGR,
        modes,
    );
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

fn fast_client(cluster: &testcluster::Cluster) -> BlockingMonClient<osdmap::OsdMap> {
    let key = cephx::CryptoKey::from_base64(&cluster.admin_key().unwrap()).unwrap();
    let driver = DriverConfig {
        msgr: msgr2::connection::Config::new(msgr2::types::ENTITY_TYPE_CLIENT, -1),
        connect_timeout: Duration::from_secs(2),
    };
    let auth = monclient::blocking::cephx_auth(
        cephx::EntityName::new(msgr2::types::ENTITY_TYPE_CLIENT, "admin"),
        key,
        WANT_MON_OSD_MGR,
        vec![CON_MODE_SECURE, CON_MODE_CRC],
    );
    let cfg = Config {
        // Fast liveness so a hung mon is noticed within seconds.
        ping_interval: Duration::from_millis(500),
        ping_timeout: Duration::from_secs(2),
        hunt_interval: Duration::from_secs(1),
        ..Config::default()
    };
    let mons = vec![MonTarget {
        name: "conf".into(),
        addr: cluster.mon_addr(),
    }];
    BlockingMonClient::new(cfg, mons, 7, driver, auth).unwrap()
}

fn signal(pid: u32, sig: &str) {
    let ok = std::process::Command::new("kill")
        .arg(format!("-{sig}"))
        .arg(pid.to_string())
        .status()
        .unwrap();
    assert!(ok.success());
}

/// The monitor hangs (SIGSTOP: sockets stay open, nothing is answered) while a command is outstanding. The
/// client notices through its keepalives, drops the session and hunts; once the monitor runs again (SIGCONT)
/// the client reconnects, resends the command (it completes exactly once: the pool exists afterwards) and
/// resumes its osdmap subscription from the epoch after the one it holds.
#[test]
fn a_hung_mon_is_detected_and_the_session_resumes() {
    let Some(cluster) = testcluster::start_or_skip(testcluster::ClusterSpec::default()) else {
        return;
    };
    let mon_pid = cluster
        .daemons()
        .into_iter()
        .find(|(n, _)| n == "mon.a")
        .unwrap()
        .1;
    let mut c = fast_client(&cluster);
    c.wait_connected(T).unwrap();
    let e0 = c.wait_osdmap(0, T).unwrap().epoch;
    c.run_until(T, "monmap", |c| c.core().monmap().is_some()).unwrap();
    while c.poll_event().is_some() {}

    signal(mon_pid, "STOP");
    let stopped = std::time::Instant::now();
    // Run until the client gives up on the hung session (keepalive timeout 2 s).
    let lost = c.run_until(Duration::from_secs(10), "losing the session", |c| {
        !c.core().is_connected()
    });
    // Whatever happened, let the monitor run again before asserting anything.
    let command_sent_while_hung = c.core().is_connected();
    signal(mon_pid, "CONT");
    lost.unwrap();
    assert!(!command_sent_while_hung);
    assert!(
        stopped.elapsed() < Duration::from_secs(6),
        "noticed after {:?}",
        stopped.elapsed()
    );

    // A command issued with no session: queued, sent after the re-hunt.
    let r = c
        .mon_command(
            vec![r#"{"prefix": "osd pool create", "pool": "afterhang", "pg_num": 1}"#.into()],
            Bytes::new(),
            T,
        )
        .unwrap();
    assert_eq!(r.rc, 0, "{}", r.outs);
    let mut lost = false;
    let mut regained = false;
    while let Some(e) = c.poll_event() {
        lost |= matches!(e, Event::SessionLost { .. });
        regained |= lost && matches!(e, Event::SessionEstablished { .. });
    }
    assert!(lost && regained, "session lost {lost}, regained {regained}");
    // The new epoch arrives through the resubscription, applied as an incremental on the map we held.
    let (newest, _) = c.get_version("osdmap", T).unwrap();
    let m = c.wait_osdmap(newest as u32, T).unwrap();
    assert!(m.epoch > e0 && m.pool_by_name("afterhang").is_some());
    assert!(c.core().subscriptions()["osdmap"].start > u64::from(e0));
}
