// SPDX-License-Identifier: LGPL-3.0-or-later
//! Messages: `ceph_msg_header2` (segment 0 of a MESSAGE frame) plus the front, middle and data segments.

use bytes::{BufMut, Bytes, BytesMut};

use crate::frame::{ALIGN_DEFAULT, ALIGN_PAGE, FrameError};

/// Size of the packed `ceph_msg_header2`.
pub const HEADER2_LEN: usize = 41;

pub const PRIORITY_LOW: u16 = 64;
pub const PRIORITY_DEFAULT: u16 = 127;
pub const PRIORITY_HIGH: u16 = 196;
pub const PRIORITY_HIGHEST: u16 = 255;

/// Segment alignments of a MESSAGE frame: header, front, middle, data.
pub const MESSAGE_ALIGNS: [u16; 4] = [ALIGN_DEFAULT, ALIGN_DEFAULT, ALIGN_DEFAULT, ALIGN_PAGE];

/// A Ceph message as msgr2 carries it. `seq` and `ack_seq` are filled in by the connection when sending; on
/// receipt they are what the peer sent.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Message {
    pub msg_type: u16,
    pub version: u16,
    pub compat_version: u16,
    pub priority: u16,
    pub tid: u64,
    pub seq: u64,
    pub ack_seq: u64,
    /// Footer flags (`CEPH_MSG_FOOTER_*`); msgr2 carries them in the header.
    pub flags: u8,
    pub data_off: u16,
    pub data_pre_padding_len: u32,
    pub reserved: u16,
    pub front: Bytes,
    pub middle: Bytes,
    pub data: Bytes,
}

impl Message {
    pub fn new(msg_type: u16, version: u16, compat_version: u16, front: Bytes) -> Self {
        Message {
            msg_type,
            version,
            compat_version,
            priority: PRIORITY_DEFAULT,
            front,
            ..Default::default()
        }
    }

    pub fn with_data(mut self, data: Bytes) -> Self {
        self.data = data;
        self
    }

    /// Payload bytes (front + middle + data), for flow-control accounting.
    pub fn payload_len(&self) -> usize {
        self.front.len() + self.middle.len() + self.data.len()
    }

    /// Encode `ceph_msg_header2` (41 bytes).
    pub fn encode_header(&self) -> Bytes {
        let mut b = BytesMut::with_capacity(HEADER2_LEN);
        b.put_u64_le(self.seq);
        b.put_u64_le(self.tid);
        b.put_u16_le(self.msg_type);
        b.put_u16_le(self.priority);
        b.put_u16_le(self.version);
        b.put_u32_le(self.data_pre_padding_len);
        b.put_u16_le(self.data_off);
        b.put_u64_le(self.ack_seq);
        b.put_u8(self.flags);
        b.put_u16_le(self.compat_version);
        b.put_u16_le(self.reserved);
        debug_assert_eq!(b.len(), HEADER2_LEN);
        b.freeze()
    }

    /// Segments of the MESSAGE frame, in order.
    pub fn segments(&self) -> [Bytes; 4] {
        [
            self.encode_header(),
            self.front.clone(),
            self.middle.clone(),
            self.data.clone(),
        ]
    }

    /// Rebuild a message from a MESSAGE frame's segments.
    pub fn from_segments(segs: &[Bytes; 4]) -> Result<Message, MessageError> {
        let h = &segs[0];
        if h.len() < HEADER2_LEN {
            return Err(MessageError::ShortHeader(h.len()));
        }
        let u16_at = |o: usize| u16::from_le_bytes([h[o], h[o + 1]]);
        let u32_at = |o: usize| u32::from_le_bytes([h[o], h[o + 1], h[o + 2], h[o + 3]]);
        let u64_at = |o: usize| {
            let mut a = [0u8; 8];
            a.copy_from_slice(&h[o..o + 8]);
            u64::from_le_bytes(a)
        };
        Ok(Message {
            seq: u64_at(0),
            tid: u64_at(8),
            msg_type: u16_at(16),
            priority: u16_at(18),
            version: u16_at(20),
            data_pre_padding_len: u32_at(22),
            data_off: u16_at(26),
            ack_seq: u64_at(28),
            flags: h[36],
            compat_version: u16_at(37),
            reserved: u16_at(39),
            front: segs[1].clone(),
            middle: segs[2].clone(),
            data: segs[3].clone(),
        })
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MessageError {
    #[error("MESSAGE header segment of {0} bytes, need 41")]
    ShortHeader(usize),
    #[error(transparent)]
    Frame(#[from] FrameError),
}
