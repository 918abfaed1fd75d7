// SPDX-License-Identifier: LGPL-3.0-or-later
#![allow(clippy::unwrap_used)] // test helpers panic on broken fixtures
//! Real Pacific 16.2.15 mon traffic (testdata/mon-messages.bin, derived from the crc-mode capture by
//! testdata/extract.py): every message decodes, and re-encodes to the identical bytes and header versions.

use bytes::Bytes;
use ceph_msgs::*;

fn load() -> Vec<Message> {
    let raw = std::fs::read(concat!(env!("CARGO_MANIFEST_DIR"), "/testdata/mon-messages.bin")).unwrap();
    assert_eq!(&raw[..8], b"FRMSGS1\n");
    let mut d = denc::Decoder::new(Bytes::from(raw));
    d.skip(8).unwrap();
    let mut out = Vec::new();
    while !d.is_empty() {
        let msg_type = d.u16().unwrap();
        let version = d.u16().unwrap();
        let compat_version = d.u16().unwrap();
        let priority = d.u16().unwrap();
        let tid = d.u64().unwrap();
        out.push(Message {
            msg_type,
            version,
            compat_version,
            priority,
            tid,
            front: d.bufferlist().unwrap(),
            middle: d.bufferlist().unwrap(),
            data: d.bufferlist().unwrap(),
            ..Default::default()
        });
    }
    out
}

fn round_trip<T: CephMessage + std::fmt::Debug + PartialEq>(m: &Message) -> T {
    let v = T::from_message(m).unwrap_or_else(|e| panic!("decoding {m:?}: {e}"));
    let again = v.to_message(u64::MAX).with_tid(m.tid);
    assert_eq!(
        again.front,
        m.front,
        "front of {} re-encodes differently",
        T::NAME
    );
    assert_eq!(again.data, m.data, "data of {}", T::NAME);
    assert_eq!(
        (again.version, again.compat_version),
        (m.version, m.compat_version),
        "{} versions",
        T::NAME
    );
    assert_eq!(again.priority, m.priority, "{} priority", T::NAME);
    v
}

#[test]
fn every_captured_message_round_trips() {
    let msgs = load();
    let mut seen = std::collections::BTreeSet::new();
    for m in &msgs {
        seen.insert(m.msg_type);
        match m.msg_type {
            msg_type::MON_MAP => {
                let v: MMonMap = round_trip(m);
                assert_eq!(v.monmap.len() + 4, m.front.len());
            }
            msg_type::MON_GET_MAP => {
                round_trip::<MMonGetMap>(m);
            }
            msg_type::MON_SUBSCRIBE => {
                let v: MMonSubscribe = round_trip(m);
                assert_eq!(v.hostname, "vm");
                assert!(!v.what.is_empty());
            }
            msg_type::AUTH => {
                let v: MAuth = round_trip(m);
                assert_eq!(v.protocol, 2, "cephx");
                assert_eq!(v.paxos.session_mon, -1);
            }
            msg_type::AUTH_REPLY => {
                let v: MAuthReply = round_trip(m);
                assert_eq!((v.protocol, v.result), (2, 0));
            }
            msg_type::MON_GET_VERSION => {
                let v: MMonGetVersion = round_trip(m);
                assert_eq!(v.what, "osdmap");
            }
            msg_type::MON_GET_VERSION_REPLY => {
                let v: MMonGetVersionReply = round_trip(m);
                assert!(v.version >= v.oldest_version && v.oldest_version >= 1);
            }
            msg_type::OSD_MAP => {
                let v: MOSDMap = round_trip(m);
                assert_eq!(
                    ceph_msgs::uuid_to_string(&v.fsid),
                    "d298bafc-f546-4b02-8ab9-022c21a1a86c"
                );
                assert!(v.last_epoch().unwrap() <= v.newest_map);
                assert!(v.oldest_map <= v.first_epoch().unwrap());
            }
            msg_type::MON_COMMAND => {
                let v: MMonCommand = round_trip(m);
                assert!(v.cmd[0].starts_with('{'), "JSON command: {:?}", v.cmd);
            }
            msg_type::MON_COMMAND_ACK => {
                round_trip::<MMonCommandAck>(m);
            }
            msg_type::CONFIG => {
                round_trip::<MConfig>(m);
            }
            msg_type::MGR_MAP => {
                let v: MMgrMap = round_trip(m);
                assert_eq!(v.epoch, 1);
            }
            t => panic!("fixture holds an unexpected type {t}"),
        }
        // The dispatcher agrees with the typed decoders.
        assert!(MonIncoming::decode(m).is_ok());
    }
    for t in [4, 5, 15, 17, 18, 19, 20, 41, 50, 51, 62, 0x704] {
        assert!(seen.contains(&t), "fixture lacks type {t}");
    }
}

#[test]
fn captured_osdmap_messages_hold_full_and_incremental_maps() {
    let maps: Vec<MOSDMap> = load()
        .iter()
        .filter(|m| m.msg_type == msg_type::OSD_MAP)
        .map(|m| MOSDMap::from_message(m).unwrap())
        .collect();
    assert!(maps.iter().any(|m| !m.maps.is_empty()), "a full map");
    assert!(
        maps.iter().any(|m| !m.incremental_maps.is_empty()),
        "an incremental"
    );
    for m in &maps {
        for bl in m.maps.values().chain(m.incremental_maps.values()) {
            // OSDMap and Incremental both start with the 8/7 wrapper.
            assert_eq!(&bl[..2], &[8, 7]);
        }
    }
}

#[test]
fn truncated_captured_messages_fail_cleanly() {
    for m in load() {
        for cut in 0..m.front.len() {
            let mut t = m.clone();
            t.front = m.front.slice(..cut);
            // Every message here has a fixed or length-prefixed layout, so any cut is an error, never a panic.
            let r = match m.msg_type {
                msg_type::MON_SUBSCRIBE => MMonSubscribe::from_message(&t).map(drop),
                msg_type::MON_COMMAND => MMonCommand::from_message(&t).map(drop),
                msg_type::MON_GET_VERSION => MMonGetVersion::from_message(&t).map(drop),
                // MAuth may legitimately stop before its trailing monmap epoch.
                msg_type::AUTH if cut == m.front.len() - 4 => continue,
                msg_type::AUTH => MAuth::from_message(&t).map(drop),
                _ => MonIncoming::decode(&t).map(drop),
            };
            assert!(r.is_err(), "type {} cut at {cut} decoded", m.msg_type);
        }
    }
}
