// SPDX-License-Identifier: LGPL-3.0-or-later
#![allow(clippy::unwrap_used)] // test helpers panic on broken fixtures
//! Round trips of generated messages, and arbitrary bytes never panic any decoder.

use bytes::Bytes;
use ceph_msgs::*;
use proptest::prelude::*;

fn raw(msg_type: u16, version: u16, front: Vec<u8>, data: Vec<u8>) -> Message {
    Message {
        msg_type,
        version,
        compat_version: 1,
        priority: 127,
        tid: 7,
        front: Bytes::from(front),
        middle: Bytes::new(),
        data: Bytes::from(data),
        ..Default::default()
    }
}

proptest! {
    #[test]
    fn subscribe_round_trips(what in proptest::collection::btree_map("[a-z_]{1,12}", (any::<u64>(), 0u8..2), 0..6),
                             host in "[a-z0-9.-]{0,20}") {
        let m = MMonSubscribe {
            what: what.into_iter().map(|(k, (start, flags))| (k, SubscribeItem { start, flags })).collect(),
            hostname: host,
        };
        prop_assert_eq!(MMonSubscribe::from_message(&m.to_message(u64::MAX)).unwrap(), m);
    }

    #[test]
    fn command_and_ack_round_trip(cmd in proptest::collection::vec(".{0,40}", 0..3), r in any::<i32>(),
                                  rs in ".{0,30}", data in proptest::collection::vec(any::<u8>(), 0..64)) {
        let c = MMonCommand { paxos: PaxosHeader::default(), fsid: [9; 16], cmd: cmd.clone(), inbl: Bytes::from(data.clone()) };
        prop_assert_eq!(MMonCommand::from_message(&c.to_message(0).with_tid(5)).unwrap(), c);
        let a = MMonCommandAck { paxos: PaxosHeader::default(), r, rs, cmd, outbl: Bytes::from(data) };
        prop_assert_eq!(MMonCommandAck::from_message(&a.to_message(0)).unwrap(), a);
    }

    #[test]
    fn osdmap_round_trips(inc in proptest::collection::btree_map(any::<u32>(), proptest::collection::vec(any::<u8>(), 0..16), 0..4),
                          full in proptest::collection::btree_map(any::<u32>(), proptest::collection::vec(any::<u8>(), 0..16), 0..3),
                          oldest in any::<u32>(), newest in any::<u32>(),
                          gaps in proptest::collection::btree_map(any::<i64>(), proptest::collection::vec((any::<u64>(), any::<u64>()), 0..3), 0..3)) {
        let m = MOSDMap {
            fsid: [1; 16],
            incremental_maps: inc.into_iter().map(|(k, v)| (k, Bytes::from(v))).collect(),
            maps: full.into_iter().map(|(k, v)| (k, Bytes::from(v))).collect(),
            oldest_map: oldest,
            newest_map: newest,
            gap_removed_snaps: gaps,
        };
        prop_assert_eq!(MOSDMap::from_message(&m.to_message(u64::MAX)).unwrap(), m);
    }

    #[test]
    fn arbitrary_bytes_never_panic(t in prop::sample::select(vec![4u16, 5, 15, 16, 17, 18, 19, 20, 41, 50, 51, 62, 0x704]),
                                   version in 0u16..6,
                                   front in proptest::collection::vec(any::<u8>(), 0..96)) {
        let m = raw(t, version, front, vec![]);
        let _ = MonIncoming::decode(&m);
        let _ = MMonSubscribe::from_message(&m);
        let _ = MMonCommand::from_message(&m);
        let _ = MAuth::from_message(&m);
        let _ = MMonGetVersion::from_message(&m);
    }

    #[test]
    fn huge_counts_are_refused_without_allocating(n in 1u32 << 20..u32::MAX) {
        // A MOSDMap claiming n incremental maps in a few bytes.
        let mut front = vec![0u8; 16];
        front.extend_from_slice(&n.to_le_bytes());
        front.extend_from_slice(&[0; 8]);
        prop_assert!(MOSDMap::from_message(&raw(41, 4, front, vec![])).is_err());
    }
}
