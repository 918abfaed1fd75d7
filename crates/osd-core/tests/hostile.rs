// SPDX-License-Identifier: LGPL-3.0-or-later
//! Hostile peer input: random bytes under every peer message type the core routes never panic, are counted
//! as dropped when they do not decode, and leave the PGs serving.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use ceph_msgs::osd_rep::rep_msg;
use common::Cluster;
use osd_core::{Input, route_peer_message, state_string};
use proptest::prelude::*;

const TYPES: [u16; 22] = [
    rep_msg::REPOP,
    rep_msg::REPOPREPLY,
    rep_msg::PG_NOTIFY2,
    rep_msg::PG_QUERY2,
    rep_msg::PG_INFO2,
    rep_msg::PG_LOG,
    rep_msg::PG_LEASE,
    rep_msg::PG_LEASE_ACK,
    rep_msg::PG_PUSH,
    rep_msg::PG_PULL,
    rep_msg::PG_PUSH_REPLY,
    rep_msg::PG_SCAN,
    rep_msg::PG_BACKFILL,
    rep_msg::PG_BACKFILL_REMOVE,
    rep_msg::PG_RECOVERY_DELETE,
    rep_msg::PG_RECOVERY_DELETE_REPLY,
    rep_msg::PG_UPDATE_LOG_MISSING,
    rep_msg::PG_UPDATE_LOG_MISSING_REPLY,
    rep_msg::PG_TRIM,
    rep_msg::RECOVERY_RESERVE,
    rep_msg::BACKFILL_RESERVE,
    7,
];

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]
    #[test]
    fn random_peer_messages_never_panic(
        msgs in proptest::collection::vec(
            (0usize..TYPES.len(), 0u16..8, proptest::collection::vec(any::<u8>(), 0..160), proptest::collection::vec(any::<u8>(), 0..64)),
            1..12,
        )
    ) {
        let mut c = Cluster::new(3, 3, 2, 2);
        let (now, wall) = (c.now, c.wall);
        for (t, v, front, data) in msgs {
            let msg = ceph_msgs::Message {
                msg_type: TYPES[t],
                version: v,
                compat_version: 1,
                priority: 127,
                tid: 0,
                front: bytes::Bytes::from(front),
                middle: bytes::Bytes::new(),
                data: bytes::Bytes::from(data),
                ..Default::default()
            };
            let _ = route_peer_message(&msg);
            c.osds.get_mut(&0).unwrap().handle(now, wall, Input::Peer { from: 1, msg });
        }
        c.run();
        for s in c.osds.values() {
            for r in s.pg_stats().iter().filter(|r| r.primary) {
                prop_assert_eq!(state_string(r.state), "active+clean");
            }
        }
        let w = c.write_full("still-works", b"ok");
        c.run();
        prop_assert_eq!(c.reply(w).map(|r| r.result), Some(0));
    }
}
