// SPDX-License-Identifier: LGPL-3.0-or-later
#![allow(clippy::unwrap_used)] // test harness
//! The MonClient core driven by a fake cluster of monitors on a simulated clock: hunting, subscriptions with the
//! right start epochs, OSDMap catch-up with gaps and bad incrementals, commands surviving mon failures,
//! keepalives and dead-session detection.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use bytes::Bytes;
use ceph_msgs::*;
use monclient::*;

mod common;
use common::{FakeMap, enc as full, enc as inc};

const FSID: [u8; 16] = [7; 16];

fn osdmap_msg(incs: &[(u32, Bytes)], fulls: &[(u32, Bytes)], newest: u32) -> Message {
    MOSDMap {
        fsid: FSID,
        incremental_maps: incs.iter().cloned().collect(),
        maps: fulls.iter().cloned().collect(),
        oldest_map: 1,
        newest_map: newest,
        gap_removed_snaps: BTreeMap::new(),
    }
    .to_message(u64::MAX)
}

fn targets(n: usize) -> Vec<MonTarget> {
    (0..n)
        .map(|i| MonTarget {
            name: format!("m{i}"),
            addr: format!("10.0.0.{}:3300", i + 1).parse().unwrap(),
        })
        .collect()
}

fn cfg() -> Config {
    Config {
        hunt_parallel: 2,
        fsid: Some(FSID),
        hostname: "host".into(),
        ..Config::default()
    }
}

fn drain(c: &mut MonClient<FakeMap>) -> (Vec<Output>, Vec<Event>) {
    let mut o = Vec::new();
    while let Some(x) = c.poll_output() {
        o.push(x);
    }
    let mut e = Vec::new();
    while let Some(x) = c.poll_event() {
        e.push(x);
    }
    (o, e)
}

fn connects(o: &[Output]) -> Vec<(ConnId, String)> {
    o.iter()
        .filter_map(|x| match x {
            Output::Connect { conn, target } => Some((*conn, target.name.clone())),
            _ => None,
        })
        .collect()
}

fn sent(o: &[Output]) -> Vec<(ConnId, Message)> {
    o.iter()
        .filter_map(|x| match x {
            Output::Send { conn, msg } => Some((*conn, msg.clone())),
            _ => None,
        })
        .collect()
}

fn subscribe_in(o: &[Output]) -> Option<MMonSubscribe> {
    sent(o)
        .into_iter()
        .rev()
        .find(|(_, m)| m.msg_type == msg_type::MON_SUBSCRIBE)
        .map(|(_, m)| MMonSubscribe::from_message(&m).unwrap())
}

/// Start a client and connect it to the first mon it tries.
fn connected(seed: u64, t0: Instant) -> (MonClient<FakeMap>, ConnId, Vec<Output>) {
    let mut c = MonClient::<FakeMap>::new(cfg(), targets(3), seed);
    c.start(t0).unwrap();
    let (o, _) = drain(&mut c);
    let conn = connects(&o)[0].0;
    c.handle_connected(conn, t0);
    let (o, _) = drain(&mut c);
    (c, conn, o)
}

#[test]
fn hunting_connects_in_parallel_and_first_success_wins() {
    let t0 = Instant::now();
    let mut c = MonClient::<FakeMap>::new(cfg(), targets(3), 42);
    c.start(t0).unwrap();
    let (o, _) = drain(&mut c);
    let cs = connects(&o);
    assert_eq!(cs.len(), 2, "hunt_parallel = 2 connections at once: {o:?}");
    assert_ne!(cs[0].1, cs[1].1);
    // The second attempt wins; the first is closed.
    c.handle_connected(cs[1].0, t0 + Duration::from_millis(5));
    let (o, e) = drain(&mut c);
    assert!(o.contains(&Output::Close { conn: cs[0].0 }));
    assert!(matches!(&e[0], Event::SessionEstablished { target } if target.name == cs[1].1));
    assert!(c.is_connected());
    // A late success of the loser is closed, not adopted.
    c.handle_connected(cs[0].0, t0 + Duration::from_millis(6));
    let (o, _) = drain(&mut c);
    assert_eq!(o, vec![Output::Close { conn: cs[0].0 }]);
    assert_eq!(c.current_mon().unwrap().name, cs[1].1);
}

#[test]
fn first_session_subscribes_to_everything_from_zero() {
    let (_c, conn, o) = connected(1, Instant::now());
    let s = subscribe_in(&o).unwrap();
    assert!(sent(&o).iter().all(|(c, _)| *c == conn));
    assert_eq!(s.hostname, "host");
    let keys: Vec<&str> = s.what.keys().map(|k| k.as_str()).collect();
    assert_eq!(keys, ["config", "mgrmap", "monmap", "osdmap"]);
    assert!(s.what.values().all(|i| i.start == 0 && i.flags == 0));
}

#[test]
fn hunt_order_is_random_but_reproducible_by_seed() {
    let order = |seed| {
        let mut c = MonClient::<FakeMap>::new(
            Config {
                hunt_parallel: 1,
                ..cfg()
            },
            targets(5),
            seed,
        );
        let t0 = Instant::now();
        c.start(t0).unwrap();
        let mut names = Vec::new();
        for i in 0..5 {
            let (o, _) = drain(&mut c);
            let cs = connects(&o);
            names.push(cs[0].1.clone());
            c.handle_connect_failed(cs[0].0, t0 + Duration::from_millis(i));
        }
        names
    };
    let a = order(7);
    assert_eq!(a, order(7));
    let mut sorted = a.clone();
    sorted.sort();
    assert_eq!(sorted, ["m0", "m1", "m2", "m3", "m4"], "each mon once per round");
    assert!(
        (0..20).any(|s| order(s) != a),
        "different seeds give different orders"
    );
}

#[test]
fn failed_round_waits_and_backs_off() {
    let t0 = Instant::now();
    let mut c = MonClient::<FakeMap>::new(
        Config {
            hunt_parallel: 3,
            ..cfg()
        },
        targets(3),
        3,
    );
    c.start(t0).unwrap();
    let (o, _) = drain(&mut c);
    for (conn, _) in connects(&o) {
        c.handle_connect_failed(conn, t0);
    }
    // All failed: nothing happens until the round's deadline (3 s).
    let (o, _) = drain(&mut c);
    assert!(o.is_empty());
    assert_eq!(c.poll_timeout(), Some(t0 + Duration::from_secs(3)));
    c.handle_timeout(t0 + Duration::from_secs(3));
    let (o, _) = drain(&mut c);
    assert_eq!(connects(&o).len(), 3);
    // The next round's interval is 1.5 × longer.
    assert_eq!(
        c.poll_timeout(),
        Some(t0 + Duration::from_secs(3) + Duration::from_millis(4500))
    );
    // Hung attempts are closed at the deadline and the next round starts.
    c.handle_timeout(t0 + Duration::from_millis(7500));
    let (o, _) = drain(&mut c);
    assert_eq!(o.iter().filter(|x| matches!(x, Output::Close { .. })).count(), 3);
    assert_eq!(connects(&o).len(), 3);
}

#[test]
fn osdmaps_full_then_incrementals_then_gap_is_requested() {
    let t0 = Instant::now();
    let (mut c, conn, _) = connected(5, t0);
    c.handle_message(
        conn,
        &osdmap_msg(&[(6, inc(6, 10)), (7, inc(7, 20))], &[(5, full(5, 100))], 7),
        t0,
    );
    let (o, e) = drain(&mut c);
    assert!(e.contains(&Event::OsdMap { epoch: 7 }));
    assert_eq!(c.osdmap().unwrap(), &FakeMap { epoch: 7, state: 130 });
    assert!(o.is_empty(), "continuous subscription: nothing to ask");
    assert_eq!(
        c.subscriptions()["osdmap"].start,
        8,
        "a new session would resume at 8"
    );
    // Epochs 9..10 arrive but 8 is missing: ask again from 8.
    c.handle_message(
        conn,
        &osdmap_msg(&[(9, inc(9, 1)), (10, inc(10, 1))], &[], 10),
        t0,
    );
    let (o, e) = drain(&mut c);
    assert!(!e.iter().any(|x| matches!(x, Event::OsdMap { .. })));
    let s = subscribe_in(&o).unwrap();
    assert_eq!(s.what["osdmap"].start, 8);
    c.handle_message(
        conn,
        &osdmap_msg(&[(8, inc(8, 1)), (9, inc(9, 1)), (10, inc(10, 1))], &[], 12),
        t0,
    );
    let (o, e) = drain(&mut c);
    assert!(e.contains(&Event::OsdMap { epoch: 10 }));
    // newest_map says 12 exists: ask from 11.
    assert_eq!(subscribe_in(&o).unwrap().what["osdmap"].start, 11);
    // Old or duplicate maps change nothing.
    c.handle_message(conn, &osdmap_msg(&[(9, inc(9, 1000))], &[], 10), t0);
    assert_eq!(
        c.osdmap().unwrap(),
        &FakeMap {
            epoch: 10,
            state: 133
        }
    );
}

#[test]
fn bad_incremental_falls_back_to_full_map() {
    let t0 = Instant::now();
    let (mut c, conn, _) = connected(6, t0);
    c.handle_message(conn, &osdmap_msg(&[], &[(3, full(3, 0))], 3), t0);
    let (_, e) = drain(&mut c);
    assert_eq!(
        e,
        vec![Event::OsdMap { epoch: 3 }],
        "a first full map alone is an update too"
    );
    // A corrupt incremental with the full map of the same epoch alongside: the full map is used.
    c.handle_message(
        conn,
        &osdmap_msg(&[(4, inc(4, u64::MAX))], &[(4, full(4, 44))], 4),
        t0,
    );
    let (_, e) = drain(&mut c);
    assert!(e.iter().any(|x| matches!(x, Event::OsdMapError { epoch: 4, .. })));
    assert_eq!(c.osdmap().unwrap(), &FakeMap { epoch: 4, state: 44 });
    // A corrupt incremental alone: the map is dropped and the latest full map requested (start 0).
    c.handle_message(conn, &osdmap_msg(&[(5, inc(5, u64::MAX))], &[], 5), t0);
    let (o, _) = drain(&mut c);
    assert!(c.osdmap().is_none());
    assert_eq!(subscribe_in(&o).unwrap().what["osdmap"].start, 0);
    c.handle_message(conn, &osdmap_msg(&[], &[(5, full(5, 55))], 5), t0);
    assert_eq!(c.osdmap().unwrap().epoch, 5);
}

#[test]
fn commands_survive_a_mon_failure_and_are_matched_by_tid() {
    let t0 = Instant::now();
    let mut c = MonClient::<FakeMap>::new(cfg(), targets(3), 9);
    // Queued before any session exists.
    let t1 = c
        .send_command(vec![r#"{"prefix":"status"}"#.into()], Bytes::new(), t0)
        .unwrap();
    let t2 = c
        .send_command(
            vec![r#"{"prefix":"osd dump"}"#.into()],
            Bytes::from_static(b"in"),
            t0,
        )
        .unwrap();
    c.start(t0).unwrap();
    let (o, _) = drain(&mut c);
    let first = connects(&o)[0].0;
    c.handle_connected(first, t0);
    let (o, _) = drain(&mut c);
    let cmds: Vec<Message> = sent(&o)
        .into_iter()
        .map(|(_, m)| m)
        .filter(|m| m.msg_type == msg_type::MON_COMMAND)
        .collect();
    assert_eq!(cmds.iter().map(|m| m.tid).collect::<Vec<_>>(), [t1, t2]);
    let c2 = MMonCommand::from_message(&cmds[1]).unwrap();
    assert_eq!((c2.fsid, &c2.inbl[..]), (FSID, &b"in"[..]));
    // The mon answers the first, then dies.
    let ack = MMonCommandAck {
        paxos: PaxosHeader::default(),
        r: 0,
        rs: "ok".into(),
        cmd: vec![],
        outbl: Bytes::from_static(b"{}"),
    };
    c.handle_message(first, &ack.to_message(0).with_tid(t1), t0);
    c.handle_disconnected(first, t0);
    let (o, e) = drain(&mut c);
    assert!(e.contains(&Event::CommandDone {
        tid: t1,
        reply: CommandReply {
            rc: 0,
            outs: "ok".into(),
            outbl: Bytes::from_static(b"{}")
        }
    }));
    assert!(e.iter().any(|x| matches!(x, Event::SessionLost { .. })));
    // Re-hunt; on the new session the unanswered command is resent with its tid, subscriptions too.
    let next = connects(&o)[0].0;
    c.handle_connected(next, t0);
    let (o, _) = drain(&mut c);
    let resent: Vec<u64> = sent(&o)
        .into_iter()
        .filter(|(_, m)| m.msg_type == msg_type::MON_COMMAND)
        .map(|(_, m)| m.tid)
        .collect();
    assert_eq!(resent, [t2]);
    assert!(subscribe_in(&o).is_some());
    // A late ack from the dead connection is ignored; the right one completes the command with its error.
    let nack = MMonCommandAck {
        r: -2,
        rs: "no such pool".into(),
        outbl: Bytes::new(),
        ..ack
    };
    c.handle_message(first, &nack.to_message(0).with_tid(t2), t0);
    assert!(drain(&mut c).1.is_empty());
    c.handle_message(next, &nack.to_message(0).with_tid(t2), t0);
    let (_, e) = drain(&mut c);
    assert!(matches!(&e[..], [Event::CommandDone { tid, reply }] if *tid == t2 && reply.rc == -2));
}

#[test]
fn reconnect_resubscribes_from_the_epochs_we_hold() {
    let t0 = Instant::now();
    let (mut c, conn, _) = connected(11, t0);
    c.handle_message(conn, &osdmap_msg(&[], &[(20, full(20, 0))], 20), t0);
    let mgr = MMgrMap {
        epoch: 4,
        map: {
            let mut e = denc::Encoder::default();
            e.versioned(12, 6, |e| e.u32(4));
            e.into_bytes()
        },
    };
    c.handle_message(conn, &mgr.to_message(0), t0);
    c.handle_disconnected(conn, t0);
    let (o, _) = drain(&mut c);
    let next = connects(&o)[0].0;
    c.handle_connected(next, t0);
    let (o, _) = drain(&mut c);
    let s = subscribe_in(&o).unwrap();
    assert_eq!(s.what["osdmap"].start, 21);
    assert_eq!(s.what["mgrmap"].start, 5);
    assert_eq!(s.what["config"].start, 0);
    assert_eq!(s.what["monmap"].start, 0);
}

#[test]
fn keepalives_and_dead_session_detection() {
    let t0 = Instant::now();
    let (mut c, conn, _) = connected(12, t0);
    assert_eq!(c.poll_timeout(), Some(t0 + Duration::from_secs(10)));
    c.handle_timeout(t0 + Duration::from_secs(10));
    assert_eq!(drain(&mut c).0, vec![Output::Keepalive { conn }]);
    c.handle_keepalive_ack(conn, t0 + Duration::from_secs(10));
    c.handle_timeout(t0 + Duration::from_secs(20));
    assert_eq!(drain(&mut c).0, vec![Output::Keepalive { conn }]);
    // No ack for 30 s after the last one: the session is declared dead and hunting restarts.
    c.handle_timeout(t0 + Duration::from_secs(30));
    drain(&mut c);
    c.handle_timeout(t0 + Duration::from_secs(40));
    let (o, e) = drain(&mut c);
    assert_eq!(o[0], Output::Close { conn });
    assert!(!connects(&o).is_empty());
    assert!(e.iter().any(|x| matches!(x, Event::SessionLost { .. })));
    assert!(!c.is_connected());
}

#[test]
fn command_timeout_and_busy_limit() {
    let t0 = Instant::now();
    let mut c = MonClient::<FakeMap>::new(
        Config {
            command_timeout: Some(Duration::from_secs(5)),
            max_pending: 2,
            ..cfg()
        },
        targets(1),
        1,
    );
    let tid = c.send_command(vec!["{}".into()], Bytes::new(), t0).unwrap();
    c.get_version("osdmap").unwrap();
    assert_eq!(
        c.send_command(vec![], Bytes::new(), t0),
        Err(MonClientError::Busy(2))
    );
    assert_eq!(c.poll_timeout(), Some(t0 + Duration::from_secs(5)));
    c.handle_timeout(t0 + Duration::from_secs(5));
    let (_, e) = drain(&mut c);
    assert!(
        matches!(&e[..], [Event::CommandDone { tid: t, reply }] if *t == tid && reply.rc == errno::ETIMEDOUT)
    );
}

#[test]
fn version_queries_are_answered_by_handle() {
    let t0 = Instant::now();
    let (mut c, conn, _) = connected(2, t0);
    let h = c.get_version("osdmap").unwrap();
    let (o, _) = drain(&mut c);
    let q = MMonGetVersion::from_message(&sent(&o)[0].1).unwrap();
    assert_eq!((q.handle, q.what.as_str()), (h, "osdmap"));
    let r = MMonGetVersionReply {
        handle: h,
        version: 30,
        oldest_version: 1,
    };
    c.handle_message(conn, &r.to_message(0), t0);
    let (_, e) = drain(&mut c);
    assert_eq!(
        e,
        vec![Event::Version {
            handle: h,
            what: "osdmap".into(),
            version: 30,
            oldest: 1
        }]
    );
}

/// The monmap of the captured crc-mode cluster (mon "a" at 127.0.0.1:3700, fsid d298bafc-...), from the
/// captured MMonMap in ceph-msgs' fixtures.
fn captured_monmap() -> Bytes {
    let raw = std::fs::read(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../ceph-msgs/testdata/mon-messages.bin"
    ))
    .unwrap();
    let pos = raw
        .windows(4)
        .position(|w| w == [0x09, 0x06, 0xa0, 0x00])
        .unwrap();
    Bytes::copy_from_slice(&raw[pos..pos + 0xa6])
}

#[test]
fn monmap_replaces_the_hunt_list_and_foreign_fsid_is_ignored() {
    let monmap = captured_monmap();
    let fsid = MonMapLite::decode(monmap.clone()).unwrap().fsid;
    let t0 = Instant::now();
    let mut c = MonClient::<FakeMap>::new(
        Config {
            fsid: Some(fsid),
            ..cfg()
        },
        targets(2),
        1,
    );
    c.start(t0).unwrap();
    let (o, _) = drain(&mut c);
    let conn = connects(&o)[0].0;
    c.handle_connected(conn, t0);
    drain(&mut c);
    c.handle_message(conn, &MMonMap { monmap }.to_message(0), t0);
    let (_, e) = drain(&mut c);
    assert!(matches!(&e[..], [Event::MonMap { epoch: 1, .. }]));
    assert_eq!(
        c.mons(),
        &[MonTarget {
            name: "a".into(),
            addr: "127.0.0.1:3700".parse().unwrap()
        }]
    );
    assert_eq!(c.subscriptions()["monmap"].start, 2);
    // An OSDMap for another cluster is ignored.
    c.handle_message(conn, &osdmap_msg(&[], &[(3, full(3, 0))], 3), t0);
    assert!(c.osdmap().is_none());
}

#[test]
fn without_an_fsid_commands_wait_for_the_monmap() {
    let monmap = captured_monmap();
    let fsid = MonMapLite::decode(monmap.clone()).unwrap().fsid;
    let t0 = Instant::now();
    let mut c = MonClient::<FakeMap>::new(Config { fsid: None, ..cfg() }, targets(1), 1);
    c.start(t0).unwrap();
    let (o, _) = drain(&mut c);
    let conn = connects(&o)[0].0;
    c.handle_connected(conn, t0);
    let tid = c.send_command(vec!["{}".into()], Bytes::new(), t0).unwrap();
    let (o, _) = drain(&mut c);
    assert!(
        sent(&o).iter().all(|(_, m)| m.msg_type != msg_type::MON_COMMAND),
        "a command with a zero fsid is refused by mons"
    );
    c.handle_message(conn, &MMonMap { monmap }.to_message(0), t0);
    let (o, _) = drain(&mut c);
    let cmds: Vec<_> = sent(&o)
        .into_iter()
        .filter(|(_, m)| m.msg_type == msg_type::MON_COMMAND)
        .collect();
    assert_eq!(cmds.len(), 1);
    assert_eq!(cmds[0].1.tid, tid);
    assert_eq!(MMonCommand::from_message(&cmds[0].1).unwrap().fsid, fsid);
}

mod hostile {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Whatever a (broken or hostile) monitor sends, the core neither panics nor loses its session state.
        #[test]
        fn arbitrary_messages_never_panic(msgs in proptest::collection::vec(
            (prop::sample::select(vec![4u16, 16, 18, 20, 41, 51, 62, 0x704, 999]), 0u16..6, 0u64..4,
             proptest::collection::vec(any::<u8>(), 0..80)), 1..20)) {
            let t0 = Instant::now();
            let (mut c, conn, _) = connected(3, t0);
            let tid = c.send_command(vec!["{}".into()], Bytes::new(), t0).unwrap();
            for (ty, version, mtid, front) in msgs {
                let m = Message { msg_type: ty, version, compat_version: 1, priority: 127, tid: mtid, front: Bytes::from(front), middle: Bytes::new(), data: Bytes::new(), ..Default::default() };
                c.handle_message(conn, &m, t0);
            }
            prop_assert!(c.is_connected());
            // A well-formed ack still completes the command afterwards (unless a random ack already did).
            let ack = MMonCommandAck { paxos: PaxosHeader::default(), r: 0, rs: String::new(), cmd: vec![], outbl: Bytes::new() };
            c.handle_message(conn, &ack.to_message(0).with_tid(tid), t0);
            let done = std::iter::from_fn(|| c.poll_event()).filter(|e| matches!(e, Event::CommandDone { tid: t, .. } if *t == tid)).count();
            prop_assert_eq!(done, 1);
        }
    }
}

#[test]
fn raw_messages_wait_for_a_session_and_unknown_replies_are_passed_on() {
    let t0 = Instant::now();
    let mut c = MonClient::<FakeMap>::new(cfg(), targets(1), 1);
    let boot = Message {
        msg_type: 71,
        version: 7,
        compat_version: 7,
        priority: 127,
        ..Message::default()
    };
    c.send_message(boot.clone()).unwrap();
    c.start(t0).unwrap();
    let (o, _) = drain(&mut c);
    assert!(sent(&o).is_empty());
    let conn = connects(&o)[0].0;
    c.handle_connected(conn, t0);
    let (o, _) = drain(&mut c);
    let types: Vec<u16> = sent(&o).iter().map(|(_, m)| m.msg_type).collect();
    assert_eq!(
        types,
        [msg_type::MON_SUBSCRIBE, 71],
        "subscriptions first, then the queued message"
    );
    // Connected: sent at once.
    c.send_message(boot.clone()).unwrap();
    assert_eq!(sent(&drain(&mut c).0).len(), 1);
    // An MAuthReply and an unknown type reach the owner.
    let reply = MAuthReply {
        protocol: 2,
        result: 0,
        global_id: 9,
        result_bl: Bytes::new(),
        result_msg: String::new(),
    };
    c.handle_message(conn, &reply.to_message(0), t0);
    c.handle_message(
        conn,
        &Message {
            msg_type: 120,
            ..Message::default()
        },
        t0,
    );
    let (_, e) = drain(&mut c);
    assert!(
        matches!(&e[..], [Event::Message(a), Event::Message(b)] if a.msg_type == 18 && b.msg_type == 120)
    );
}
