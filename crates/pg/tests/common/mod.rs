// SPDX-License-Identifier: LGPL-3.0-or-later
#![allow(clippy::unwrap_used, dead_code)] // test harness
//! Reading the crc-mode capture: `ceph_capture` (pcap → TCP streams) → msgr2 frames → messages, with packet
//! timestamps.

use std::sync::Arc;

use ceph_capture::{Capture, Stream};
use msgr2::frame::{FrameDecoder, FrameLimits};

pub const MESSAGE_TAG: u8 = 17;

/// The crc-mode capture of a Ceph 16.2.15 cluster; `None` (with a "skipping" line) when it is not available.
pub fn read_capture() -> Option<Arc<Capture>> {
    ceph_capture::load("crc")
}

/// Every frame of a stream with the timestamp of the packet that completed it.
pub fn frames(s: &Stream) -> Vec<(u64, msgr2::frame::Frame)> {
    let mut out = Vec::new();
    let Some(start) = ceph_capture::msgr2_frames_start(s.bytes()) else {
        return out;
    };
    let mut dec = FrameDecoder::new(FrameLimits::default());
    for (t, d) in s.chunks_from(start) {
        dec.push(d);
        loop {
            match dec.next_frame() {
                Ok(Some(f)) => out.push((t, f)),
                Ok(None) => break,
                Err(_) => return out,
            }
        }
    }
    out
}

pub fn to_message(f: &msgr2::frame::Frame) -> ceph_msgs::Message {
    let m = msgr2::Message::from_segments(&f.segments).unwrap();
    ceph_msgs::Message {
        msg_type: m.msg_type,
        version: m.version,
        compat_version: m.compat_version,
        priority: m.priority,
        tid: m.tid,
        front: m.front,
        middle: m.middle,
        data: m.data,
        ..Default::default()
    }
}

pub fn messages(s: &Stream) -> Vec<ceph_msgs::Message> {
    frames(s)
        .iter()
        .filter(|(_, f)| f.tag == MESSAGE_TAG)
        .map(|(_, f)| to_message(f))
        .collect()
}
pub mod osdop;
pub mod sim;
