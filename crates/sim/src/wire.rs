// SPDX-License-Identifier: LGPL-3.0-or-later
//! Every message on the simulated network goes over the wire as Ceph would put it: a msgr2 MESSAGE frame in crc
//! mode (preamble, `ceph_msg_header2`, front/middle/data segments, crcs), decoded again by msgr2's frame decoder
//! on the receiving side. A frame that does not decode back to the same message is a simulation failure.

use bytes::Bytes;
use msgr2::frame::{FrameDecoder, FrameLimits, Tag, encode_frame};
use msgr2::message::MESSAGE_ALIGNS;

/// Frame `m` for the wire (crc mode), with the connection's message sequence number.
pub fn to_wire(m: &ceph_msgs::Message, seq: u64) -> Result<Bytes, String> {
    let wm = msgr2::Message {
        msg_type: m.msg_type,
        version: m.version,
        compat_version: m.compat_version,
        priority: m.priority,
        tid: m.tid,
        seq,
        front: m.front.clone(),
        middle: m.middle.clone(),
        data: m.data.clone(),
        data_tail: m.data_tail.clone(),
        data_off: m.data_off,
        ..Default::default()
    };
    let parts = encode_frame(None, Tag::Message, &wm.segments(), &MESSAGE_ALIGNS)
        .map_err(|e| format!("encoding frame for message type {}: {e}", m.msg_type))?;
    Ok(msgr2::frame::concat(&parts))
}

/// Decode one frame received whole.
pub fn from_wire(bytes: Bytes) -> Result<(ceph_msgs::Message, u64), String> {
    let mut d = FrameDecoder::new(FrameLimits::default());
    d.set_keep_raw(false);
    d.push_bytes(bytes);
    let f = d
        .next_frame()
        .map_err(|e| format!("frame: {e}"))?
        .ok_or("incomplete frame")?;
    if f.tag() != Some(Tag::Message) {
        return Err(format!("frame tag {} is not MESSAGE", f.tag));
    }
    if d.buffered() != 0 {
        return Err(format!("{} bytes after the frame", d.buffered()));
    }
    let segs = [
        f.segments[0].clone(),
        f.segments[1].clone(),
        f.segments[2].clone(),
        f.segments[3].clone(),
    ];
    let wm = msgr2::Message::from_segments(&segs).map_err(|e| format!("message: {e}"))?;
    Ok((
        ceph_msgs::Message {
            msg_type: wm.msg_type,
            version: wm.version,
            compat_version: wm.compat_version,
            priority: wm.priority,
            tid: wm.tid,
            front: wm.front,
            middle: wm.middle,
            data: wm.data,
            data_tail: Vec::new(),
            data_off: wm.data_off,
        },
        wm.seq,
    ))
}
