// SPDX-License-Identifier: LGPL-3.0-or-later
//! Messages: `ceph_msg_header2` (segment 0 of a MESSAGE frame) plus the front, middle and data segments.

use bytes::{BufMut, Bytes, BytesMut};

use std::collections::VecDeque;

use ceph_crc::ceph_crc32c;

use crate::frame::{
    ALIGN_DEFAULT, ALIGN_PAGE, CRC_EPILOGUE_LEN, CRC_LEN, FrameError, LATE_STATUS_COMPLETE, PREAMBLE_LEN,
    SecureTx, Tag, encode_secure_pieces, preamble_for_lens,
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
    /// More of the data segment after `data`, by reference: a sender's rope (e.g. an encoded transaction whose
    /// write payload is the client's received buffer) goes out without being flattened. The data segment is
    /// `data` followed by these pieces; received messages always have it all in `data` and this empty.
    pub data_tail: Vec<Bytes>,
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
        self.front.len() + self.middle.len() + self.data_len()
    }

    /// Length of the data segment (`data` and `data_tail`).
    pub fn data_len(&self) -> usize {
        self.data.len() + self.data_tail.iter().map(Bytes::len).sum::<usize>()
    }

    /// The data segment in one buffer: `data` itself unless the message has a tail (then a copy).
    pub fn data_flat(&self) -> Bytes {
        if self.data_tail.is_empty() {
            return self.data.clone();
        }
        let mut b = BytesMut::with_capacity(self.data_len());
        b.put_slice(&self.data);
        for p in &self.data_tail {
            b.put_slice(p);
        }
        b.freeze()
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

    /// Segments of the MESSAGE frame, in order (the data segment flattened: [`Message::data_flat`]).
    pub fn segments(&self) -> [Bytes; 4] {
        [
            self.encode_header(),
            self.front.clone(),
            self.middle.clone(),
            self.data_flat(),
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
            data_tail: Vec::new(),
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
/// The bytes are exactly those of [`crate::frame::encode_frame`] over [`Message::segments`]; a data segment with
/// a tail goes out piece by piece (crc mode: by reference; secure mode: copied once, into the sealed block).
pub(crate) fn encode_message_frame(
    tx: Option<&mut SecureTx>,
    m: &Message,
    out: &mut VecDeque<Bytes>,
) -> Result<(), FrameError> {
    let hdr = m.header_bytes();
    // each segment after the header as a chain of pieces (only the data segment can have more than one)
    let one = [&m.data];
    let chained: Vec<&Bytes>;
    let data: &[&Bytes] = if m.data_tail.is_empty() {
        // The common case, one data piece: no list to allocate.
        &one
    } else {
        chained = std::iter::once(&m.data).chain(m.data_tail.iter()).collect();
        &chained
    };
    let lens = [HEADER2_LEN, m.front.len(), m.middle.len(), m.data_len()];
    let p = preamble_for_lens(Tag::Message, &lens, &MESSAGE_ALIGNS)?;
    let n = p.num_segments as usize;
    if let Some(tx) = tx {
        let data_owned: Vec<Bytes> = data.iter().map(|b| (*b).clone()).collect();
        let rest: [&[Bytes]; 3] = [
            std::slice::from_ref(&m.front),
            std::slice::from_ref(&m.middle),
            &data_owned,
        ];
        out.push_back(encode_secure_pieces(tx, &p, &hdr, &rest[..n.saturating_sub(1)])?);
        return Ok(());
    }
    let rest: [&[&Bytes]; 3] = [&[&m.front], &[&m.middle], data];
    let tail_len: usize = lens[1..].iter().sum();
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
        // Segments past the last non-empty one are not described; their crc field stays 0. A chained segment's
        // crc runs on from piece to piece.
        let crc = if i + 1 < n {
            // pages received with crcs attached (a replica's copy of the client's data, a verified read)
            // are not read again: their crcs are combined
            ceph_crc::blocks::ceph_segment_crc_pieces(seg.iter().map(|piece| &piece[..]))
        } else {
            0
        };
        epi[1 + i * 4..5 + i * 4].copy_from_slice(&crc.to_le_bytes());
    }
    if glue_all {
        for piece in rest.iter().flat_map(|s| s.iter()) {
            head.put_slice(piece);
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
    for piece in rest[first..].iter().flat_map(|s| s.iter()) {
        if !piece.is_empty() {
            out.push_back((*piece).clone());
        }
    }
    out.push_back(Bytes::copy_from_slice(&epi));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crypto::default_provider;
    use crate::frame::{FrameDecoder, FrameLimits, Role, concat, encode_frame};
    use proptest::prelude::*;

    /// `m` with its data cut into a rope at `cuts` (positions within the data).
    fn rope(mut m: Message, cuts: &[usize]) -> Message {
        let data = std::mem::take(&mut m.data);
        let mut at: Vec<usize> = cuts.iter().map(|c| c % (data.len() + 1)).collect();
        at.sort_unstable();
        let mut prev = 0;
        let mut pieces = Vec::new();
        for c in at.into_iter().chain([data.len()]) {
            pieces.push(data.slice(prev..c));
            prev = c;
        }
        m.data = pieces.remove(0);
        m.data_tail = pieces;
        m
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]
        /// The crc-mode fast path writes exactly the bytes of the generic frame encoder, and decodes back; a data
        /// segment given as a rope encodes to the same bytes as the flat one, its pieces by reference.
        #[test]
        fn message_frame_is_byte_identical_to_encode_frame(
            front in 0usize..1200, middle in 0usize..700, data in 0usize..9000, tid in any::<u64>(),
            cuts in proptest::collection::vec(any::<usize>(), 0..4),
        ) {
            let mut m = Message::new(42, 3, 1, (0..front).map(|i| i as u8).collect::<Vec<u8>>().into());
            m.middle = (0..middle).map(|i| (i * 7) as u8).collect::<Vec<u8>>().into();
            m.data = (0..data).map(|i| (i * 3) as u8).collect::<Vec<u8>>().into();
            m.tid = tid;
            m.seq = 5;
            let generic = encode_frame(None, Tag::Message, &m.segments(), &MESSAGE_ALIGNS).unwrap();
            let mut fast = VecDeque::new();
            encode_message_frame(None, &m, &mut fast).unwrap();
            let fast: Vec<Bytes> = fast.into();
            prop_assert_eq!(concat(&fast), concat(&generic));
            // Small replies are one buffer; data above the glue limit goes by reference.
            if front + middle + data <= GLUE_MAX {
                prop_assert_eq!(fast.len(), 1);
            }
            if data > GLUE_MAX {
                prop_assert!(fast.iter().any(|b| b.as_ptr() == m.data.as_ptr()));
            }
            let roped = rope(m.clone(), &cuts);
            prop_assert_eq!(roped.data_len(), data);
            prop_assert_eq!(roped.payload_len(), m.payload_len());
            let mut fast_rope = VecDeque::new();
            encode_message_frame(None, &roped, &mut fast_rope).unwrap();
            let fast_rope: Vec<Bytes> = fast_rope.into();
            prop_assert_eq!(concat(&fast_rope), concat(&generic));
            if front + middle + data > GLUE_MAX {
                for p in std::iter::once(&roped.data).chain(&roped.data_tail).filter(|p| !p.is_empty()) {
                    prop_assert!(fast_rope.iter().any(|b| b.as_ptr() == p.as_ptr() && b.len() == p.len()));
                }
            }
            let mut d = FrameDecoder::new(FrameLimits::default());
            d.set_keep_raw(false);
            d.push_bytes(concat(&fast_rope));
            let f = d.next_frame().unwrap().unwrap();
            let back = Message::from_segments(&f.segments).unwrap();
            prop_assert_eq!(back, m);
        }

        /// Secure mode seals a rope's pieces into exactly the frame of the flat message.
        #[test]
        fn secure_message_frame_with_a_rope_is_the_flat_frame(
            front in 0usize..300, data in 0usize..9000,
            cuts in proptest::collection::vec(any::<usize>(), 0..4),
        ) {
            let p = default_provider();
            let secret = [7u8; 64];
            let mut tx_a = SecureTx::new(p.as_ref(), &secret, Role::Connector).unwrap();
            let mut tx_b = SecureTx::new(p.as_ref(), &secret, Role::Connector).unwrap();
            let mut m = Message::new(42, 3, 1, (0..front).map(|i| i as u8).collect::<Vec<u8>>().into());
            m.data = (0..data).map(|i| (i * 5) as u8).collect::<Vec<u8>>().into();
            m.seq = 9;
            let flat = encode_frame(Some(&mut tx_a), Tag::Message, &m.segments(), &MESSAGE_ALIGNS).unwrap();
            let roped = rope(m, &cuts);
            let mut out = VecDeque::new();
            encode_message_frame(Some(&mut tx_b), &roped, &mut out).unwrap();
            let out: Vec<Bytes> = out.into();
            prop_assert_eq!(concat(&out), concat(&flat));
        }
    }
}
