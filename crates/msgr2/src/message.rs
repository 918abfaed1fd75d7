// SPDX-License-Identifier: LGPL-3.0-or-later
//! Messages: `ceph_msg_header2` (segment 0 of a MESSAGE frame) plus the front, middle and data segments.

use bytes::{BufMut, Bytes, BytesMut};

use std::collections::VecDeque;

use ceph_crc::ceph_crc32c;

use crate::frame::{
    ALIGN_DEFAULT, ALIGN_PAGE, CRC_EPILOGUE_LEN, CRC_LEN, FrameError, LATE_STATUS_COMPLETE, PREAMBLE_LEN,
    SecureTx, Tag, encode_frame, preamble_for_lens,
};

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
        Bytes::copy_from_slice(&self.header_bytes())
    }

    /// `ceph_msg_header2` as an array (no allocation; the crc-mode sender writes it into the frame head).
    pub fn header_bytes(&self) -> [u8; HEADER2_LEN] {
        let mut a = [0u8; HEADER2_LEN];
        let mut b = &mut a[..];
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
        debug_assert!(b.is_empty());
        a
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

/// Segments after the header up to this size in total are copied into the frame's one buffer (with the
/// epilogue); a front up to this size is copied after the header. Larger ones go out by reference.
const GLUE_MAX: usize = 512;

/// Append the MESSAGE frame of `m` to `out` (buffers for one vectored write). Crc mode writes the preamble, the
/// header and its crc straight into one buffer — with the front, and with everything else when the rest is
/// small (a reply without data is then a single buffer); data and large segments are shared, not copied.
/// The bytes are exactly those of [`encode_frame`] over [`Message::segments`], which secure mode uses.
pub(crate) fn encode_message_frame(
    tx: Option<&mut SecureTx>,
    m: &Message,
    out: &mut VecDeque<Bytes>,
) -> Result<(), FrameError> {
    if tx.is_some() {
        out.extend(encode_frame(tx, Tag::Message, &m.segments(), &MESSAGE_ALIGNS)?);
        return Ok(());
    }
    let hdr = m.header_bytes();
    let rest = [&m.front, &m.middle, &m.data];
    let lens = [HEADER2_LEN, m.front.len(), m.middle.len(), m.data.len()];
    let p = preamble_for_lens(Tag::Message, &lens, &MESSAGE_ALIGNS)?;
    let n = p.num_segments as usize;
    let tail_len: usize = rest.iter().map(|b| b.len()).sum();
    let glue_all = tail_len <= GLUE_MAX;
    let glue_front = m.front.len() <= GLUE_MAX;
    let mut cap = PREAMBLE_LEN + HEADER2_LEN + CRC_LEN;
    if n > 1 {
        if glue_all {
            cap += tail_len + CRC_EPILOGUE_LEN;
        } else if glue_front {
            cap += m.front.len();
        }
    }
    let mut head = BytesMut::with_capacity(cap);
    head.put_slice(&p.encode());
    head.put_slice(&hdr);
    head.put_u32_le(ceph_crc32c(u32::MAX, &hdr));
    if n == 1 {
        out.push_back(head.freeze());
        return Ok(());
    }
    let mut epi = [0u8; CRC_EPILOGUE_LEN];
    epi[0] = LATE_STATUS_COMPLETE;
    for (i, seg) in rest.iter().enumerate() {
        // Segments past the last non-empty one are not described; their crc field stays 0.
        let crc = if i + 1 < n { ceph_crc32c(u32::MAX, seg) } else { 0 };
        epi[1 + i * 4..5 + i * 4].copy_from_slice(&crc.to_le_bytes());
    }
    if glue_all {
        for seg in rest {
            head.put_slice(seg);
        }
        head.put_slice(&epi);
        out.push_back(head.freeze());
        return Ok(());
    }
    let mut first = 0;
    if glue_front {
        head.put_slice(&m.front);
        first = 1;
    }
    out.push_back(head.freeze());
    for seg in &rest[first..] {
        if !seg.is_empty() {
            out.push_back((*seg).clone());
        }
    }
    out.push_back(Bytes::copy_from_slice(&epi));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::{FrameDecoder, FrameLimits, concat};
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]
        /// The crc-mode fast path writes exactly the bytes of the generic frame encoder, and decodes back.
        #[test]
        fn message_frame_is_byte_identical_to_encode_frame(
            front in 0usize..1200, middle in 0usize..700, data in 0usize..9000, tid in any::<u64>(),
        ) {
            let mut m = Message::new(42, 3, 1, (0..front).map(|i| i as u8).collect::<Vec<u8>>().into());
            m.middle = (0..middle).map(|i| (i * 7) as u8).collect::<Vec<u8>>().into();
            m.data = (0..data).map(|i| (i * 3) as u8).collect::<Vec<u8>>().into();
            m.tid = tid;
            m.seq = 5;
            let mut fast = VecDeque::new();
            encode_message_frame(None, &m, &mut fast).unwrap();
            let fast: Vec<Bytes> = fast.into();
            let generic = encode_frame(None, Tag::Message, &m.segments(), &MESSAGE_ALIGNS).unwrap();
            prop_assert_eq!(concat(&fast), concat(&generic));
            // Small replies are one buffer; data above the glue limit goes by reference.
            if front + middle + data <= GLUE_MAX {
                prop_assert_eq!(fast.len(), 1);
            }
            if data > GLUE_MAX {
                prop_assert!(fast.iter().any(|b| b.as_ptr() == m.data.as_ptr()));
            }
            let mut d = FrameDecoder::new(FrameLimits::default());
            d.set_keep_raw(false);
            d.push_bytes(concat(&fast));
            let f = d.next_frame().unwrap().unwrap();
            let back = Message::from_segments(&f.segments).unwrap();
            prop_assert_eq!(back, m);
        }
    }
}
