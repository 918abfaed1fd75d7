// SPDX-License-Identifier: LGPL-3.0-or-later
#![allow(clippy::unwrap_used)] // test harness
//! An OSD's map catch-up after a restart: it starts from its stored map (`set_osdmap`), subscribes to the
//! osdmap from the epoch after it, and sees every epoch the monitor sends, in order (`take_osdmap_epochs`);
//! when the monitor has trimmed the epochs it missed, it continues from a full map (Ceph's `handle_osd_map`).

use std::collections::BTreeMap;
use std::time::Instant;

use bytes::Bytes;
use ceph_msgs::*;
use monclient::*;

mod common;
use common::{FakeMap, enc};

const FSID: [u8; 16] = [7; 16];

fn osdmap_msg(incs: &[(u32, Bytes)], fulls: &[(u32, Bytes)], oldest: u32, newest: u32) -> Message {
    MOSDMap {
        fsid: FSID,
        incremental_maps: incs.iter().cloned().collect(),
        maps: fulls.iter().cloned().collect(),
        oldest_map: oldest,
        newest_map: newest,
        gap_removed_snaps: BTreeMap::new(),
    }
    .to_message(u64::MAX)
}

fn subscribe_start(c: &mut MonClient<FakeMap>) -> Option<u64> {
    let mut start = None;
    while let Some(o) = c.poll_output() {
        if let Output::Send { msg, .. } = o
            && msg.msg_type == msg_type::MON_SUBSCRIBE
        {
            let s = MMonSubscribe::from_message(&msg).unwrap();
            start = s.what.get("osdmap").map(|i| i.start);
        }
    }
    start
}

/// A client holding epoch 5 from before, connected to a monitor.
fn restarted(t0: Instant) -> (MonClient<FakeMap>, ConnId) {
    let cfg = Config {
        fsid: Some(FSID),
        ..Config::default()
    };
    let target = MonTarget {
        name: "a".into(),
        addr: "10.0.0.1:3300".parse().unwrap(),
    };
    let mut c = MonClient::<FakeMap>::new(cfg, vec![target], 1);
    c.set_osdmap(FakeMap { epoch: 5, state: 50 });
    c.keep_osdmap_epochs();
    c.start(t0).unwrap();
    let mut conn = None;
    while let Some(o) = c.poll_output() {
        if let Output::Connect { conn: id, .. } = o {
            conn = Some(id);
        }
    }
    let conn = conn.unwrap();
    c.handle_connected(conn, t0);
    (c, conn)
}

#[test]
fn restart_subscribes_after_the_stored_epoch_and_sees_every_epoch() {
    let t0 = Instant::now();
    let (mut c, conn) = restarted(t0);
    assert_eq!(
        subscribe_start(&mut c),
        Some(6),
        "subscription starts at newest + 1"
    );
    // the monitor answers with epochs 6..=9 as incrementals, in two messages
    let m = osdmap_msg(&[(6, enc(6, 1)), (7, enc(7, 1))], &[], 1, 9);
    c.handle_message(conn, &m, t0);
    let m = osdmap_msg(&[(8, enc(8, 1)), (9, enc(9, 1))], &[], 1, 9);
    c.handle_message(conn, &m, t0);
    let epochs: Vec<u32> = c.take_osdmap_epochs().iter().map(|m| m.epoch).collect();
    assert_eq!(epochs, vec![6, 7, 8, 9]);
    assert_eq!(c.osdmap().unwrap().state, 54);
    assert!(c.take_osdmap_epochs().is_empty());
}

#[test]
fn a_gap_the_monitor_still_has_is_asked_for_again() {
    let t0 = Instant::now();
    let (mut c, conn) = restarted(t0);
    subscribe_start(&mut c);
    // epochs 8..9 without 6..7, and the monitor still has them (oldest 1): ask from 6 again
    let m = osdmap_msg(&[(8, enc(8, 1)), (9, enc(9, 1))], &[], 1, 9);
    c.handle_message(conn, &m, t0);
    assert_eq!(subscribe_start(&mut c), Some(6));
    assert!(c.take_osdmap_epochs().is_empty());
    assert_eq!(c.osdmap().unwrap().epoch, 5);
}

#[test]
fn trimmed_epochs_continue_from_a_full_map() {
    let t0 = Instant::now();
    let (mut c, conn) = restarted(t0);
    subscribe_start(&mut c);
    // the monitor kept only 20.. : without a full map in the message, ask from just below its oldest
    let m = osdmap_msg(&[(21, enc(21, 1))], &[], 20, 21);
    c.handle_message(conn, &m, t0);
    assert_eq!(subscribe_start(&mut c), Some(19));
    assert!(c.take_osdmap_epochs().is_empty());
    // its answer starts with the full map of 20: taken, then the incrementals after it
    let m = osdmap_msg(&[(21, enc(21, 1))], &[(20, enc(20, 200))], 20, 21);
    c.handle_message(conn, &m, t0);
    let epochs: Vec<u32> = c.take_osdmap_epochs().iter().map(|m| m.epoch).collect();
    assert_eq!(epochs, vec![20, 21]);
    assert_eq!(c.osdmap().unwrap().state, 201);
}
