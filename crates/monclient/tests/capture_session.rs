// SPDX-License-Identifier: LGPL-3.0-or-later
#![allow(clippy::unwrap_used)] // test harness
//! A real client↔mon session from the crc-mode capture (testdata/session, raw TCP bytes of a Pacific `ceph` CLI
//! talking to a Pacific mon), parsed with msgr2's frame decoder: every MESSAGE frame decodes with ceph-msgs and
//! re-encodes to the same bytes, and the mon's side of it drives the MonClient core to the same state a real
//! client reaches (monmap with the mon's address, config).

use std::time::Instant;

use bytes::Bytes;
use ceph_msgs::{CephMessage, MMonGetMap, MMonSubscribe, Message, MonIncoming, msg_type};
use monclient::{Config, Event, MonClient, MonTarget, OsdMapLike, Output};
use msgr2::frame::{FrameDecoder, FrameLimits};

const MESSAGE_TAG: u8 = 17;

fn messages(raw: &[u8]) -> Vec<Message> {
    let frames_at = ceph_capture::msgr2_frames_start(raw).expect("an msgr2 stream");
    let mut dec = FrameDecoder::new(FrameLimits::default());
    dec.push(&raw[frames_at..]);
    let mut out = Vec::new();
    while let Some(f) = dec.next_frame().unwrap() {
        if f.tag == MESSAGE_TAG {
            let m = msgr2::Message::from_segments(&f.segments).unwrap();
            out.push(monclient::blocking::to_ceph_message(m));
        }
    }
    assert_eq!(dec.buffered(), 0, "the stream ends on a frame boundary");
    out
}

fn read(name: &str) -> Vec<u8> {
    std::fs::read(format!("{}/testdata/session/{name}", env!("CARGO_MANIFEST_DIR"))).unwrap()
}

#[test]
fn client_side_messages_are_what_we_would_send() {
    let msgs = messages(&read("c2s.bin"));
    let types: Vec<u16> = msgs.iter().map(|m| m.msg_type).collect();
    assert_eq!(types, [msg_type::MON_GET_MAP, msg_type::MON_SUBSCRIBE]);
    assert_eq!(MMonGetMap.to_message(u64::MAX).front, msgs[0].front);
    let sub = MMonSubscribe::from_message(&msgs[1]).unwrap();
    assert_eq!(sub.to_message(u64::MAX).front, msgs[1].front);
    assert_eq!(sub.what.keys().collect::<Vec<_>>(), ["config", "monmap"]);
}

struct NoMap;
impl OsdMapLike for NoMap {
    type Error = String;
    fn decode_full(_: &Bytes) -> Result<Self, String> {
        Err("unused".into())
    }
    fn epoch(&self) -> u32 {
        0
    }
    fn apply_incremental(&mut self, _: &Bytes) -> Result<(), String> {
        Err("unused".into())
    }
}

#[test]
fn mon_side_messages_drive_the_core() {
    let msgs = messages(&read("s2c.bin"));
    assert!(msgs.iter().all(|m| MonIncoming::decode(m).is_ok()));
    let t0 = Instant::now();
    let seed_mon = MonTarget {
        name: "seed".into(),
        addr: "127.0.0.1:3700".parse().unwrap(),
    };
    let mut c = MonClient::<NoMap>::new(Config::default(), vec![seed_mon], 1);
    c.start(t0).unwrap();
    let Some(Output::Connect { conn, .. }) = c.poll_output() else {
        panic!("expected a connect")
    };
    c.handle_connected(conn, t0);
    for m in &msgs {
        c.handle_message(conn, m, t0);
    }
    let mut events = Vec::new();
    while let Some(e) = c.poll_event() {
        events.push(e);
    }
    assert!(events.iter().any(|e| matches!(e, Event::MonMap { epoch: 1, .. })));
    assert!(
        events
            .iter()
            .any(|e| matches!(e, Event::Config(c) if c.is_empty()))
    );
    // The ceph.conf address became the map's named monitor.
    assert_eq!(c.current_mon().unwrap().name, "a");
    assert_eq!(c.subscriptions()["monmap"].start, 2);
}
