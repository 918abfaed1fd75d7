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
