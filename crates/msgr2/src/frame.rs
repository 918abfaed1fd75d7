// SPDX-License-Identifier: LGPL-3.0-or-later
//! msgr2 rev1 frames: preamble, segments, inline crc / epilogue (crc mode) and the AES-GCM layout (secure mode).
//!
//! ```text
//! preamble (32 B): u8 tag, u8 num_segments, 4 x {le32 len, le16 align}, u8[2] reserved, le32 crc32c(0, ..28)
//!
//! crc mode (rev1):
//!   preamble | seg0 | le32 crc32c(-1, seg0)   (crc only if seg0 is non-empty)
//!   [num_segments > 1:] seg1 | seg2 | seg3 | epilogue{u8 late_status, 3 x le32 crc32c(-1, seg_i)}  (13 B)
//!
//! secure mode (rev1), every segment zero-padded to 16 B, one GCM nonce per sealed block:
//!   seal(preamble | first 48 B of seg0, zero-padded) = 80 + 16 tag = 96 B
//!   [padded seg0 > 48:] seal(rest of padded seg0) + tag
//!   [num_segments > 1:] seal(pad(seg1) | pad(seg2) | pad(seg3) | epilogue{u8 late_status, 15 zero B}) + tag
//! ```

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};

use bytes::{Buf, BufMut, Bytes, BytesMut};
use ceph_crc::ceph_crc32c;
pub use pagepool::PageBuf;

use crate::crypto::{AeadKey, CryptoError, CryptoProvider, KEY_LEN, NONCE_LEN, TAG_LEN};

pub const PREAMBLE_LEN: usize = 32;
/// Bytes of segment 0 carried inside the first sealed block in secure mode.
pub const INLINE_LEN: usize = 48;
/// The first sealed block of a secure frame: preamble + inline area + tag.
pub const SECURE_HEAD_LEN: usize = PREAMBLE_LEN + INLINE_LEN + TAG_LEN;
pub const MAX_SEGMENTS: usize = 4;
pub const CRC_LEN: usize = 4;
/// rev1 crc-mode epilogue: late_status + crcs of segments 1..3.
pub const CRC_EPILOGUE_LEN: usize = 1 + 3 * 4;
/// rev1 secure-mode epilogue (before the tag): late_status + padding to one cipher block.
pub const SECURE_EPILOGUE_LEN: usize = 16;
const CIPHER_BLOCK: usize = 16;

/// Epilogue late_status: the frame is complete (low nibble 0xE); 0x1 means the sender aborted it.
pub const LATE_STATUS_COMPLETE: u8 = 0x0E;
pub const LATE_STATUS_ABORTED: u8 = 0x01;
const LATE_STATUS_MASK: u8 = 0x0F;

/// Segment alignment hints as Ceph sets them: control payloads and message header/front/middle use 8 (the size of
/// a pointer), message data uses the page size so the receiver can read it into aligned buffers.
pub const ALIGN_DEFAULT: u16 = 8;
pub const ALIGN_PAGE: u16 = 4096;

const _: () = assert!(PREAMBLE_LEN.is_multiple_of(CIPHER_BLOCK) && INLINE_LEN.is_multiple_of(CIPHER_BLOCK));
const _: () = assert!(SECURE_HEAD_LEN == 96);

/// Frame tags (`frames_v2.h` `enum class Tag`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Tag {
    Hello = 1,
    AuthRequest = 2,
    AuthBadMethod = 3,
    AuthReplyMore = 4,
    AuthRequestMore = 5,
    AuthDone = 6,
    AuthSignature = 7,
    ClientIdent = 8,
    ServerIdent = 9,
    IdentMissingFeatures = 10,
    SessionReconnect = 11,
    SessionReset = 12,
    SessionRetry = 13,
    SessionRetryGlobal = 14,
    SessionReconnectOk = 15,
    Wait = 16,
    Message = 17,
    Keepalive2 = 18,
    Keepalive2Ack = 19,
    Ack = 20,
}

impl Tag {
    /// The tag's name as Ceph spells it in logs (`frames_v2.h`).
    pub fn name(self) -> &'static str {
        match self {
            Tag::Hello => "HELLO",
            Tag::AuthRequest => "AUTH_REQUEST",
            Tag::AuthBadMethod => "AUTH_BAD_METHOD",
            Tag::AuthReplyMore => "AUTH_REPLY_MORE",
            Tag::AuthRequestMore => "AUTH_REQUEST_MORE",
            Tag::AuthDone => "AUTH_DONE",
            Tag::AuthSignature => "AUTH_SIGNATURE",
            Tag::ClientIdent => "CLIENT_IDENT",
            Tag::ServerIdent => "SERVER_IDENT",
            Tag::IdentMissingFeatures => "IDENT_MISSING_FEATURES",
            Tag::SessionReconnect => "SESSION_RECONNECT",
            Tag::SessionReset => "SESSION_RESET",
            Tag::SessionRetry => "SESSION_RETRY",
            Tag::SessionRetryGlobal => "SESSION_RETRY_GLOBAL",
            Tag::SessionReconnectOk => "SESSION_RECONNECT_OK",
            Tag::Wait => "WAIT",
            Tag::Message => "MESSAGE",
            Tag::Keepalive2 => "KEEPALIVE2",
            Tag::Keepalive2Ack => "KEEPALIVE2_ACK",
            Tag::Ack => "ACK",
        }
    }

    pub fn from_u8(v: u8) -> Option<Tag> {
        use Tag::*;
        Some(match v {
            1 => Hello,
            2 => AuthRequest,
            3 => AuthBadMethod,
            4 => AuthReplyMore,
            5 => AuthRequestMore,
            6 => AuthDone,
            7 => AuthSignature,
            8 => ClientIdent,
            9 => ServerIdent,
            10 => IdentMissingFeatures,
            11 => SessionReconnect,
            12 => SessionReset,
            13 => SessionRetry,
            14 => SessionRetryGlobal,
            15 => SessionReconnectOk,
            16 => Wait,
            17 => Message,
            18 => Keepalive2,
            19 => Keepalive2Ack,
            20 => Ack,
            _ => return None,
        })
    }
}

/// Everything that can be wrong with a frame. Any of these closes the connection.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    #[error("bad preamble crc: computed {computed:#010x}, frame says {expected:#010x}")]
    PreambleCrc { computed: u32, expected: u32 },
    #[error("bad crc of segment {segment}: computed {computed:#010x}, frame says {expected:#010x}")]
    SegmentCrc {
        segment: usize,
        computed: u32,
        expected: u32,
    },
    #[error("bad number of segments {0} (1..=4)")]
    SegmentCount(u8),
    #[error("last segment of a multi-segment frame is empty")]
    EmptyLastSegment,
    #[error("segment {segment} of {len} bytes exceeds the limit of {limit}")]
    SegmentTooLong { segment: usize, len: u32, limit: u32 },
    #[error("frame of {len} bytes exceeds the limit of {limit}")]
    FrameTooLong { len: u64, limit: u64 },
    /// Cannot happen for a validated preamble; kept as an error rather than a panic on input bytes.
    #[error("frame shorter than its preamble says")]
    Truncated,
    #[error("unknown frame tag {0}")]
    UnknownTag(u8),
    #[error("bad epilogue late_status {0:#04x}")]
    LateStatus(u8),
    #[error("secure mode: {0}")]
    Crypto(#[from] CryptoError),
    #[error("connection secret of {0} bytes is too short for secure mode (need 40)")]
    ShortSecret(usize),
    #[error("too many segments ({0}) for one frame")]
    TooManySegments(usize),
    #[error("receive sink filled past its segment")]
    SinkOverrun,
    #[error("stream bytes pushed while a receive sink was lent out")]
    SinkOrder,
}

/// Size limits applied to every received frame before any buffer is reserved for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameLimits {
    pub max_segment_len: u32,
    pub max_frame_len: u64,
}

impl FrameLimits {
    /// Limits before authentication completes: auth frames are small (cephx's are a few KiB), so an
    /// unauthenticated peer cannot make us buffer large frames.
    pub const PRE_AUTH: FrameLimits = FrameLimits {
        max_segment_len: 1 << 20,
        max_frame_len: 1 << 20,
    };
}

impl Default for FrameLimits {
    /// 256 MiB per frame: above Ceph's largest messages (osd_max_write_size 90 MiB, large OSDMap batches).
    fn default() -> Self {
        FrameLimits {
            max_segment_len: 256 << 20,
            max_frame_len: 256 << 20,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SegmentDesc {
    pub len: u32,
    pub align: u16,
}

/// The 32-byte frame preamble.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Preamble {
    pub tag: u8,
    pub num_segments: u8,
    pub segments: [SegmentDesc; MAX_SEGMENTS],
}

impl Preamble {
    pub fn encode(&self) -> [u8; PREAMBLE_LEN] {
        let mut b = [0u8; PREAMBLE_LEN];
        b[0] = self.tag;
        b[1] = self.num_segments;
        for (i, s) in self.segments.iter().enumerate() {
            let o = 2 + i * 6;
            b[o..o + 4].copy_from_slice(&s.len.to_le_bytes());
            b[o + 4..o + 6].copy_from_slice(&s.align.to_le_bytes());
        }
        let crc = ceph_crc32c(0, &b[..28]);
        b[28..32].copy_from_slice(&crc.to_le_bytes());
        b
    }

    /// Parse and validate a preamble: crc first, then the segment count and lengths against `limits`.
    pub fn decode(b: &[u8; PREAMBLE_LEN], limits: &FrameLimits) -> Result<Preamble, FrameError> {
        let expected = u32::from_le_bytes([b[28], b[29], b[30], b[31]]);
        let computed = ceph_crc32c(0, &b[..28]);
        if computed != expected {
            return Err(FrameError::PreambleCrc { computed, expected });
        }
        let num_segments = b[1];
        if !(1..=MAX_SEGMENTS as u8).contains(&num_segments) {
            return Err(FrameError::SegmentCount(num_segments));
        }
        let mut segments = [SegmentDesc::default(); MAX_SEGMENTS];
        let mut total: u64 = 0;
        for (i, s) in segments.iter_mut().enumerate() {
            let o = 2 + i * 6;
            s.len = u32::from_le_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]]);
            s.align = u16::from_le_bytes([b[o + 4], b[o + 5]]);
            if i < num_segments as usize {
                if s.len > limits.max_segment_len {
                    return Err(FrameError::SegmentTooLong {
                        segment: i,
                        len: s.len,
                        limit: limits.max_segment_len,
                    });
                }
                total += u64::from(s.len);
            }
        }
        if total > limits.max_frame_len {
            return Err(FrameError::FrameTooLong {
                len: total,
                limit: limits.max_frame_len,
            });
        }
        if num_segments > 1 && segments[num_segments as usize - 1].len == 0 {
            return Err(FrameError::EmptyLastSegment);
        }
        Ok(Preamble {
            tag: b[0],
            num_segments,
            segments,
        })
    }

    fn n(&self) -> usize {
        self.num_segments as usize
    }

    fn seg_len(&self, i: usize) -> usize {
        self.segments[i].len as usize
    }
}

/// Which side of the connection we are: it decides which half of the connection secret keys which direction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// The side that opened the TCP connection (Ceph's "client" side of msgr2, even between daemons).
    Connector,
    /// The side that accepted it.
    Acceptor,
}

/// One direction of AES-128-GCM with the rev1 nonce: `le32 fixed, le64 counter`; the counter advances by one after
/// each sealed block.
struct GcmStream {
    key: Box<dyn AeadKey>,
    nonce: [u8; NONCE_LEN],
}

impl std::fmt::Debug for GcmStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GcmStream").finish_non_exhaustive()
    }
}

impl GcmStream {
    /// Key = secret[0..16]; the connector receives with nonce secret[16..28] and sends with secret[28..40]; the
    /// acceptor the other way round.
    fn new(
        provider: &dyn CryptoProvider,
        secret: &[u8],
        role: Role,
        rx: bool,
    ) -> Result<GcmStream, FrameError> {
        if secret.len() < KEY_LEN + 2 * NONCE_LEN {
            return Err(FrameError::ShortSecret(secret.len()));
        }
        let mut key = [0u8; KEY_LEN];
        key.copy_from_slice(&secret[..KEY_LEN]);
        let first = matches!((role, rx), (Role::Connector, true) | (Role::Acceptor, false));
        let at = if first { KEY_LEN } else { KEY_LEN + NONCE_LEN };
        let mut nonce = [0u8; NONCE_LEN];
        nonce.copy_from_slice(&secret[at..at + NONCE_LEN]);
        Ok(GcmStream {
            key: provider.aes128_gcm(&key)?,
            nonce,
        })
    }

    fn next_nonce(&mut self) -> [u8; NONCE_LEN] {
        let n = self.nonce;
        let mut ctr = [0u8; 8];
        ctr.copy_from_slice(&self.nonce[4..12]);
        let c = u64::from_le_bytes(ctr).wrapping_add(1);
        self.nonce[4..12].copy_from_slice(&c.to_le_bytes());
        n
    }

    /// Seal `buf` (plaintext) in place and append the tag.
    fn seal(&mut self, buf: &mut BytesMut) -> Result<(), FrameError> {
        let nonce = self.next_nonce();
        let tag = self.key.seal_in_place(&nonce, &mut buf[..])?;
        buf.extend_from_slice(&tag);
        Ok(())
    }

    /// Open `buf` = ciphertext ‖ tag in place; the plaintext is `buf[..len - TAG_LEN]` (the tag bytes stay).
    fn open_slice(&mut self, buf: &mut [u8]) -> Result<(), FrameError> {
        let nonce = self.next_nonce();
        self.key.open_in_place(&nonce, buf)?;
        Ok(())
    }
}

/// The sending half of secure mode.
#[derive(Debug)]
pub struct SecureTx(GcmStream);

impl SecureTx {
    pub fn new(
        provider: &dyn CryptoProvider,
        connection_secret: &[u8],
        role: Role,
    ) -> Result<Self, FrameError> {
        Ok(SecureTx(GcmStream::new(
            provider,
            connection_secret,
            role,
            false,
        )?))
    }
}

/// The receiving half of secure mode. Usable on its own on a captured byte stream: build it from the connection
/// secret and the role of the side that *received* the stream, then feed a [`FrameDecoder`] in secure mode.
#[derive(Debug)]
pub struct SecureRx(GcmStream);

impl SecureRx {
    pub fn new(
        provider: &dyn CryptoProvider,
        connection_secret: &[u8],
        role: Role,
    ) -> Result<Self, FrameError> {
        Ok(SecureRx(GcmStream::new(provider, connection_secret, role, true)?))
    }
}

fn padded(len: usize) -> usize {
    len.div_ceil(CIPHER_BLOCK) * CIPHER_BLOCK
}

/// Build the preamble for `segments` (trailing empty segments are not counted; at least one).
fn preamble_for(tag: Tag, segments: &[Bytes], aligns: &[u16]) -> Result<Preamble, FrameError> {
    if segments.len() > MAX_SEGMENTS {
        return Err(FrameError::TooManySegments(segments.len()));
    }
    let mut lens = [0usize; MAX_SEGMENTS];
    for (l, s) in lens.iter_mut().zip(segments) {
        *l = s.len();
    }
    preamble_for_lens(tag, &lens[..segments.len()], aligns)
}

/// [`preamble_for`] from the segments' lengths.
pub(crate) fn preamble_for_lens(
    tag: Tag,
    segments: &[usize],
    aligns: &[u16],
) -> Result<Preamble, FrameError> {
    if segments.is_empty() || segments.len() > MAX_SEGMENTS || aligns.len() < segments.len() {
        return Err(FrameError::TooManySegments(segments.len()));
    }
    let mut p = Preamble {
        tag: tag as u8,
        num_segments: 1,
        segments: [SegmentDesc::default(); MAX_SEGMENTS],
    };
    for (i, s) in segments.iter().enumerate() {
        let len = u32::try_from(*s).map_err(|_| FrameError::SegmentTooLong {
            segment: i,
            len: u32::MAX,
            limit: u32::MAX,
        })?;
        if len > 0 {
            p.num_segments = i as u8 + 1;
        }
        p.segments[i] = SegmentDesc {
            len,
            align: aligns[i],
        };
    }
    // Segments past the last non-empty one are not described at all (zeroed).
    for d in p.segments.iter_mut().skip(p.num_segments as usize) {
        *d = SegmentDesc::default();
    }
    Ok(p)
}

/// Assemble one frame. In crc mode the returned list shares the segment buffers (nothing is copied but small
/// segments glued to the preamble); in secure mode it is one freshly encrypted buffer.
pub fn encode_frame(
    tx: Option<&mut SecureTx>,
    tag: Tag,
    segments: &[Bytes],
    aligns: &[u16],
) -> Result<Vec<Bytes>, FrameError> {
    let p = preamble_for(tag, segments, aligns)?;
    let n = p.n();
    match tx {
        None => {
            // Glue small seg0 (control payloads, message headers) to the preamble: one buffer instead of three.
            const GLUE_MAX: usize = 512;
            let mut out = Vec::with_capacity(2 + n);
            let seg0 = &segments[0];
            let mut head = BytesMut::with_capacity(PREAMBLE_LEN + GLUE_MAX.min(seg0.len()) + CRC_LEN);
            head.put_slice(&p.encode());
            if !seg0.is_empty() {
                let crc = ceph_crc32c(u32::MAX, seg0);
                if seg0.len() <= GLUE_MAX {
                    head.put_slice(seg0);
                    head.put_u32_le(crc);
                    out.push(head.freeze());
                } else {
                    out.push(head.freeze());
                    out.push(seg0.clone());
                    out.push(Bytes::copy_from_slice(&crc.to_le_bytes()));
                }
            } else {
                out.push(head.freeze());
            }
            if n > 1 {
                let mut epi = BytesMut::with_capacity(CRC_EPILOGUE_LEN);
                epi.put_u8(LATE_STATUS_COMPLETE);
                for i in 1..MAX_SEGMENTS {
                    epi.put_u32_le(
                        segments
                            .get(i)
                            .filter(|_| i < n)
                            .map_or(0, |s| ceph_crc32c(u32::MAX, s)),
                    );
                }
                for s in &segments[1..n] {
                    if !s.is_empty() {
                        out.push(s.clone());
                    }
                }
                out.push(epi.freeze());
            }
            Ok(out)
        }
        Some(tx) => {
            let rest: Vec<&[Bytes]> = segments[1..n].iter().map(std::slice::from_ref).collect();
            Ok(vec![encode_secure_pieces(tx, &p, &segments[0], &rest)?])
        }
    }
}

/// A secure-mode frame whose segments after the first are chains of pieces (each segment the concatenation of
/// its pieces: a message's data segment can be a sender's rope). The pieces are copied once, into the
/// plaintext that is sealed in place. `rest` holds segments 1..n of the preamble `p`.
pub(crate) fn encode_secure_pieces(
    tx: &mut SecureTx,
    p: &Preamble,
    seg0: &[u8],
    rest: &[&[Bytes]],
) -> Result<Bytes, FrameError> {
    let SecureTx(gcm) = tx;
    let n = p.n();
    debug_assert_eq!(rest.len() + 1, n.max(1));
    let seg_len = |s: &[Bytes]| s.iter().map(Bytes::len).sum::<usize>();
    let seg0_pad = padded(seg0.len());
    let mut total = SECURE_HEAD_LEN;
    if seg0_pad > INLINE_LEN {
        total += seg0_pad - INLINE_LEN + TAG_LEN;
    }
    if n > 1 {
        total += rest.iter().map(|s| padded(seg_len(s))).sum::<usize>() + SECURE_EPILOGUE_LEN + TAG_LEN;
    }
    let mut out = BytesMut::with_capacity(total);
    // Block 1: preamble + inline part of seg0.
    let mut block = BytesMut::with_capacity(SECURE_HEAD_LEN);
    block.put_slice(&p.encode());
    let inline = seg0.len().min(INLINE_LEN);
    block.put_slice(&seg0[..inline]);
    block.put_bytes(0, INLINE_LEN - inline);
    gcm.seal(&mut block)?;
    out.unsplit(block);
    // Block 2: the rest of seg0.
    if seg0_pad > INLINE_LEN {
        let mut block = BytesMut::with_capacity(seg0_pad - INLINE_LEN + TAG_LEN);
        block.put_slice(&seg0[INLINE_LEN..]);
        block.put_bytes(0, seg0_pad - seg0.len());
        gcm.seal(&mut block)?;
        out.unsplit(block);
    }
    // Block 3: segments 1.. and the epilogue.
    if n > 1 {
        let mut block = BytesMut::with_capacity(total - out.len());
        for s in rest {
            let len = seg_len(s);
            for piece in s.iter() {
                block.put_slice(piece);
            }
            block.put_bytes(0, padded(len) - len);
        }
        block.put_u8(LATE_STATUS_COMPLETE);
        block.put_bytes(0, SECURE_EPILOGUE_LEN - 1);
        gcm.seal(&mut block)?;
        out.unsplit(block);
    }
    debug_assert_eq!(out.len(), total);
    Ok(out.freeze())
}

/// A received frame: the tag byte, its segments (unpadded, shared with the receive buffer), and in crc mode the
/// raw on-wire bytes (for AUTH_SIGNATURE and for re-encoding checks).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    pub tag: u8,
    pub preamble: Preamble,
    pub segments: [Bytes; MAX_SEGMENTS],
    /// The frame exactly as it was on the wire (crc mode only).
    pub raw: Option<Bytes>,
}

impl Frame {
    pub fn tag(&self) -> Option<Tag> {
        Tag::from_u8(self.tag)
    }
    /// Segment 0: the payload of a control frame, the header of a MESSAGE frame.
    pub fn payload(&self) -> &Bytes {
        &self.segments[0]
    }
}

#[derive(Debug)]
enum RxState {
    Preamble,
    /// Secure mode: the first block is decrypted in place at the start of `frame`, the one buffer the whole frame
    /// is decrypted into; waiting for the rest.
    SecureRest {
        preamble: Preamble,
        frame: BytesMut,
        rest_len: usize,
    },
}

/// Received bytes as the chain of buffers they arrived in. Taking a range that lies inside one buffer is a
/// refcounted slice of it; only a range that spans buffers is assembled (copied once).
#[derive(Debug, Default, Clone)]
struct RxChain {
    bufs: VecDeque<Bytes>,
    len: usize,
    /// Bytes assembled by copying (ranges that spanned buffers).
    copied: u64,
}

impl RxChain {
    fn push(&mut self, b: Bytes) {
        if !b.is_empty() {
            self.len += b.len();
            self.bufs.push_back(b);
        }
    }

    fn len(&self) -> usize {
        self.len
    }

    fn clear(&mut self) {
        self.bufs.clear();
        self.len = 0;
    }

    /// Copy the first `out.len()` bytes without consuming them; false if fewer are buffered.
    fn peek(&self, out: &mut [u8]) -> bool {
        if self.len < out.len() {
            return false;
        }
        let mut at = 0;
        for b in &self.bufs {
            if at == out.len() {
                break;
            }
            let k = b.len().min(out.len() - at);
            out[at..at + k].copy_from_slice(&b[..k]);
            at += k;
        }
        true
    }

    /// Drop the first `n` bytes (callers check `n <= len`).
    fn advance(&mut self, mut n: usize) {
        debug_assert!(n <= self.len);
        n = n.min(self.len);
        self.len -= n;
        while n > 0 {
            let Some(front) = self.bufs.front_mut() else {
                return;
            };
            if front.len() > n {
                let _ = front.split_to(n);
                return;
            }
            n -= front.len();
            self.bufs.pop_front();
        }
    }

    /// Consume `out.len()` bytes into `out`; false (nothing consumed) if fewer are buffered.
    fn read(&mut self, out: &mut [u8]) -> bool {
        if !self.peek(out) {
            return false;
        }
        self.advance(out.len());
        true
    }

    /// Consume `n` contiguous bytes: a slice of the receive buffer when they lie in one, else assembled once.
    fn take(&mut self, n: usize) -> Option<Bytes> {
        self.take_aligned(n, false)
    }

    /// As [`RxChain::take`]; an assembled copy starts on a page boundary when `page` is set (data segments).
    fn take_aligned(&mut self, n: usize, page: bool) -> Option<Bytes> {
        if self.len < n {
            return None;
        }
        if n == 0 {
            return Some(Bytes::new());
        }
        if let Some(front) = self.bufs.front_mut()
            && front.len() >= n
        {
            let b = front.split_to(n);
            if front.is_empty() {
                self.bufs.pop_front();
            }
            self.len -= n;
            return Some(b);
        }
        self.copied += n as u64;
        if page {
            let mut out = aligned_buf(n);
            self.take_into(n, &mut out);
            return Some(out.freeze());
        }
        let mut out = BytesMut::with_capacity(n);
        self.take_into(n, &mut out);
        Some(out.freeze())
    }

    /// Consume `n` bytes (callers check `n <= len`) by appending them to `out`.
    fn take_into(&mut self, mut n: usize, out: &mut impl Fill) {
        debug_assert!(n <= self.len);
        while n > 0 {
            let Some(front) = self.bufs.front_mut() else {
                return;
            };
            let k = front.len().min(n);
            out.fill(&front[..k]);
            self.len -= k;
            n -= k;
            if k == front.len() {
                self.bufs.pop_front();
            } else {
                let _ = front.split_to(k);
            }
        }
    }

    /// Split off the first `n` bytes as their own chain (no copy; callers check `n <= len`).
    fn split_chain(&mut self, mut n: usize) -> RxChain {
        debug_assert!(n <= self.len);
        let mut head = RxChain::default();
        while n > 0 {
            let Some(front) = self.bufs.front_mut() else {
                break;
            };
            if front.len() > n {
                head.push(front.split_to(n));
                self.len -= n;
                break;
            }
            n -= front.len();
            self.len -= front.len();
            if let Some(b) = self.bufs.pop_front() {
                head.push(b);
            }
        }
        head
    }
}

/// An incremental frame parser. Feed received buffers with [`FrameDecoder::push_bytes`] (or copy a slice in with
/// [`FrameDecoder::push`]); take frames with [`FrameDecoder::next_frame`]. Nothing is reserved for a frame until
/// its preamble has passed the crc and the limits, and every length is checked before slicing.
///
/// In crc mode segments are slices of the received buffers (no copy) unless a segment spans two of them, when it
/// is assembled once. In secure mode each frame is copied once into its own buffer and decrypted there in place.
#[derive(Debug)]
pub struct FrameDecoder {
    chain: RxChain,
    state: RxState,
    limits: FrameLimits,
    rx: Option<SecureRx>,
    keep_raw: bool,
    /// Segments at least this long are received into a buffer of their own ([`FrameDecoder::take_sink`]).
    direct_min: Option<usize>,
    sink: SinkState,
    /// The input broke the sink protocol (bytes pushed while a sink was lent out): the stream order is lost.
    misuse: bool,
    /// The last frame had a direct segment: cap stream receives so the next one does not run deep into its data.
    big_recent: bool,
    /// How many bytes of the next frame to take with the stream after a direct segment: the head (preamble up to
    /// the direct segment) of the last frame that had one, so a run of same-shaped frames (a client's 64K
    /// writes) is read up to exactly where the next data starts.
    head_guess: usize,
    copied: u64,
    direct: u64,
}

/// Stream receives after a frame with a direct segment take at most this much (like Ceph's
/// `ms_tcp_prefetch_max_size`): enough for the next frame's preamble, header and front, little of its data.
/// Once a frame with a direct segment was seen, its head length is the guess instead (at most this much).
pub const PREFETCH_AFTER_DIRECT: usize = 1024;

/// Buffers for direct segments start on a page boundary (the data segment's advertised alignment), so an
/// O_DIRECT write can use them as they are.
const SINK_ALIGN: usize = ALIGN_PAGE as usize;

/// Tells lent sinks apart across decoders and resets (a stale sink coming back is dropped, never spliced in).
static SINK_IDS: AtomicU64 = AtomicU64::new(1);

#[derive(Debug, Default)]
enum SinkState {
    #[default]
    None,
    /// Created, some bytes still to come, held by the decoder (filled by copying if input arrives as stream).
    Held(RxSink),
    /// Handed to the IO layer (its id): the next input must be this sink coming back.
    Lent(u64),
}

/// A large segment's own buffer while its bytes arrive: page-aligned, exactly the segment's length. The IO layer
/// receives up to [`RxSink::remaining`] bytes into the spare capacity of [`RxSink::buf_mut`] (then sets the
/// length) and returns it with [`FrameDecoder::put_sink`]; once full it becomes the segment without a copy.
#[derive(Debug)]
pub struct RxSink {
    id: u64,
    buf: PageBuf,
    len: usize,
    /// Bytes put in by copying (the head that came with stream data) rather than received into it.
    copied: usize,
    /// Stream bytes worth receiving right after the segment: the rest of its frame plus the decoder's guess of
    /// the next frame's head ([`RxSink::stream_after`]).
    after: usize,
}

impl RxSink {
    /// Bytes of the segment still to receive.
    pub fn remaining(&self) -> usize {
        self.len.saturating_sub(self.buf.len())
    }

    /// The buffer: `len()` bytes received so far; receive into its spare capacity, at most `remaining()` bytes.
    pub fn buf_mut(&mut self) -> &mut PageBuf {
        &mut self.buf
    }

    /// The segment's length.
    pub fn segment_len(&self) -> usize {
        self.len
    }

    /// How many stream bytes a receive may take right behind this segment (a second iovec after the sink's
    /// spare capacity): the rest of the segment's frame (later segments, epilogue) and the head of the next
    /// frame up to where its own large segment would start, if it is shaped like this one. Taking more would
    /// pull the next frame's data into the stream buffer (a copy into its sink later); taking less costs one
    /// more receive. Valid for the receive that fills the sink.
    pub fn stream_after(&self) -> usize {
        self.after
    }
}

/// An empty buffer with room for `len` bytes whose first byte sits on a `SINK_ALIGN` boundary.
fn aligned_buf(len: usize) -> PageBuf {
    aligned_buf_at(len, 0)
}

/// As [`aligned_buf`], the first byte `in_page` bytes (taken modulo the page size) past a page boundary. Large
/// buffers (a 4 MiB write's data) come from the process's [`pagepool`]: recycled mappings, so they neither pay
/// page faults on every message nor stay resident in malloc's arenas once freed; small ones from the heap.
fn aligned_buf_at(len: usize, in_page: usize) -> PageBuf {
    pagepool::global().alloc(len, in_page)
}

const _: () = assert!(SINK_ALIGN == pagepool::PAGE);

/// Where [`RxChain::take_into`] appends.
trait Fill {
    fn fill(&mut self, data: &[u8]);
}

impl Fill for BytesMut {
    fn fill(&mut self, data: &[u8]) {
        self.put_slice(data);
    }
}

impl Fill for PageBuf {
    fn fill(&mut self, data: &[u8]) {
        self.extend_from_slice(data);
    }
}

/// The segment of a frame that goes into a sink: its index and byte range within the crc-mode frame.
#[derive(Debug, Clone, Copy)]
struct DirectSeg {
    index: usize,
    start: usize,
    end: usize,
}

/// Offset of `data_off` (le16) in `ceph_msg_header2`: seq 8, tid 8, type 2, priority 2, version 2,
/// data_pre_padding_len 4.
const MSG_HEADER_DATA_OFF: usize = 26;

/// Where segment `i` starts and ends within a crc-mode frame.
fn crc_seg_range(p: &Preamble, i: usize) -> (usize, usize) {
    let seg0 = p.seg_len(0);
    let mut at = PREAMBLE_LEN + seg0 + if seg0 > 0 { CRC_LEN } else { 0 };
    for k in 1..i {
        at += p.seg_len(k);
    }
    (at, at + p.seg_len(i))
}

impl FrameDecoder {
    pub fn new(limits: FrameLimits) -> Self {
        FrameDecoder {
            chain: RxChain::default(),
            state: RxState::Preamble,
            limits,
            rx: None,
            keep_raw: true,
            direct_min: None,
            sink: SinkState::None,
            misuse: false,
            big_recent: false,
            head_guess: PREFETCH_AFTER_DIRECT,
            copied: 0,
            direct: 0,
        }
    }

    /// Receive segments of at least `min` bytes (crc mode, after auth) into buffers of their own: see
    /// [`FrameDecoder::take_sink`]. Off (`None`) by default: callers that only push stream buffers would pay a
    /// copy into the sink instead of getting slices.
    pub fn set_direct_min(&mut self, min: Option<usize>) {
        self.direct_min = min.map(|m| m.max(1));
    }

    /// Payload bytes copied by the decoder so far (segments assembled across receive buffers, the part of a
    /// direct segment that had already arrived with stream data, secure-mode frames).
    pub fn copied_bytes(&self) -> u64 {
        self.copied + self.chain.copied
    }

    /// Bytes that arrived through sinks (received straight into their segment's own buffer).
    pub fn direct_bytes(&self) -> u64 {
        self.direct
    }

    fn direct_enabled(&self) -> bool {
        self.direct_min.is_some() && self.rx.is_none() && !self.keep_raw
    }

    /// The frame at the front of the chain, if its preamble is complete and valid: its crc-mode length, and the
    /// range of its direct segment (the last one of at least `direct_min` bytes), if any.
    fn front_frame(&self) -> Option<(usize, Option<DirectSeg>)> {
        let min = self.direct_min?;
        let mut pb = [0u8; PREAMBLE_LEN];
        if !self.chain.peek(&mut pb) {
            return None;
        }
        let p = Preamble::decode(&pb, &self.limits).ok()?;
        let n = p.n();
        let seg0 = p.seg_len(0);
        let mut total = PREAMBLE_LEN + seg0 + if seg0 > 0 { CRC_LEN } else { 0 };
        if n > 1 {
            total += (1..n).map(|i| p.seg_len(i)).sum::<usize>() + CRC_EPILOGUE_LEN;
        }
        let direct = (1..n).rev().find(|&i| p.seg_len(i) >= min).map(|i| {
            let (start, end) = crc_seg_range(&p, i);
            DirectSeg { index: i, start, end }
        });
        Some((total, direct))
    }

    /// Where in its page the first byte of segment `i` of the front frame should land: for a MESSAGE's data
    /// segment, `ceph_msg_header2::data_off` modulo the page size — Ceph's convention from msgr1, which clients
    /// fill with the write's object offset, so the whole blocks of an unaligned write still land page-aligned (a
    /// sender can use it to align a payload placed inside the data segment); 0 otherwise. The header precedes the
    /// data segment, so it is in the chain when the sink is made.
    fn data_page_offset(&self, i: usize) -> usize {
        let mut h = [0u8; PREAMBLE_LEN + MSG_HEADER_DATA_OFF + 2];
        if i != 3 || !self.chain.peek(&mut h) || h[0] != Tag::Message as u8 {
            return 0;
        }
        let seg0 = u32::from_le_bytes([h[2], h[3], h[4], h[5]]) as usize;
        if seg0 < MSG_HEADER_DATA_OFF + 2 {
            return 0;
        }
        let at = PREAMBLE_LEN + MSG_HEADER_DATA_OFF;
        usize::from(u16::from_le_bytes([h[at], h[at + 1]])) % SINK_ALIGN
    }

    /// When the next bytes on the wire are (the rest of) a large segment: a page-aligned buffer of exactly its
    /// length to receive them into. The part of the segment that already arrived with stream data is moved into
    /// it (one copy of those bytes; [`FrameDecoder::stream_limit`] keeps that part small). `enabled` is the
    /// session's say (only once it is ready). Give the sink back with [`FrameDecoder::put_sink`] before any other
    /// input.
    pub fn take_sink(&mut self, enabled: bool) -> Option<RxSink> {
        match std::mem::take(&mut self.sink) {
            SinkState::Held(s) => {
                self.sink = SinkState::Lent(s.id);
                return Some(s);
            }
            SinkState::Lent(id) => {
                self.sink = SinkState::Lent(id);
                return None;
            }
            SinkState::None => {}
        }
        if !enabled || !self.direct_enabled() || self.misuse {
            return None;
        }
        let (total, direct) = self.front_frame()?;
        let DirectSeg { index: i, start, end } = direct?;
        let have = self.chain.len();
        if have < start || have >= end {
            return None;
        }
        self.head_guess = start.clamp(PREAMBLE_LEN, PREFETCH_AFTER_DIRECT);
        let len = end - start;
        let mut buf = aligned_buf_at(len, self.data_page_offset(i));
        let prefix = have - start;
        if prefix > 0 {
            // The chain ends inside the segment: its last `prefix` bytes are the segment's beginning.
            let head = self.chain.split_chain(start);
            let mut rest = std::mem::replace(&mut self.chain, head);
            rest.take_into(prefix, &mut buf);
            self.copied += prefix as u64;
        }
        self.big_recent = true;
        let id = SINK_IDS.fetch_add(1, Ordering::Relaxed);
        self.sink = SinkState::Lent(id);
        Some(RxSink {
            id,
            buf,
            len,
            copied: prefix,
            after: total.saturating_sub(end) + self.head_guess,
        })
    }

    /// A sink back from the IO layer with whatever it received. A full sink joins the stream as one buffer (its
    /// segment is then handed out without a copy); a partial one waits for the next [`FrameDecoder::take_sink`].
    /// A sink this decoder did not lend (reset since) is dropped.
    pub fn put_sink(&mut self, sink: RxSink) -> Result<(), FrameError> {
        match self.sink {
            SinkState::Lent(id) if id == sink.id => {}
            _ => return Ok(()),
        }
        if sink.buf.len() > sink.len {
            self.misuse = true;
            self.sink = SinkState::None;
            return Err(FrameError::SinkOverrun);
        }
        self.sink = SinkState::None;
        self.hold_sink(sink);
        Ok(())
    }

    fn hold_sink(&mut self, sink: RxSink) {
        if sink.buf.len() == sink.len {
            self.direct += (sink.len - sink.copied) as u64;
            self.chain.push(sink.buf.freeze());
        } else {
            self.sink = SinkState::Held(sink);
        }
    }

    /// How many bytes the next stream receive should take at most (`None`: as many as it likes): up to the start
    /// of a large segment whose frame head is still arriving, so the segment itself can go into a sink whole;
    /// [`PREFETCH_AFTER_DIRECT`] right after such a frame.
    pub fn stream_limit(&self) -> Option<usize> {
        if !self.direct_enabled() || !matches!(self.sink, SinkState::None) {
            return None;
        }
        let have = self.chain.len();
        match self.front_frame() {
            // Stop where the large segment starts: it then goes into a sink whole.
            Some((_, Some(DirectSeg { start, .. }))) if have < start => Some(start - have),
            // A frame without one (or whose large segment is already here): the rest of it, and the next frame's
            // head if it looks like the last large one.
            Some((total, _)) if self.big_recent => Some(total.saturating_sub(have) + self.head_guess),
            Some(_) => None,
            // The next preamble is not here yet: its head, guessed from the last large frame.
            None => self
                .big_recent
                .then(|| self.head_guess.saturating_sub(have).max(1)),
        }
    }

    /// Switch to secure mode (after AUTH_DONE). Bytes already buffered are parsed with the new mode.
    pub fn set_secure(&mut self, rx: Option<SecureRx>) {
        self.rx = rx;
    }

    /// Change the limits (they apply from the next preamble on).
    pub fn set_limits(&mut self, limits: FrameLimits) {
        self.limits = limits;
    }

    /// Whether crc-mode frames carry [`Frame::raw`] (default on). Assembling the raw frame copies it when it
    /// spans receive buffers, so a session turns this off once it no longer needs the bytes (after auth).
    pub fn set_keep_raw(&mut self, keep: bool) {
        self.keep_raw = keep;
    }

    pub fn is_secure(&self) -> bool {
        self.rx.is_some()
    }

    /// Copy `data` in (for callers that do not own their receive buffer).
    pub fn push(&mut self, data: &[u8]) {
        self.push_bytes(Bytes::copy_from_slice(data));
    }

    /// Keep a received buffer without copying it; segments are handed out as slices of it. (While a sink is held
    /// its remaining bytes are copied into it first; bytes pushed while a sink is lent out break the stream
    /// order and fail the next [`FrameDecoder::next_frame`].)
    pub fn push_bytes(&mut self, mut data: Bytes) {
        match std::mem::take(&mut self.sink) {
            SinkState::None => {}
            SinkState::Lent(id) => {
                self.sink = SinkState::Lent(id);
                if !data.is_empty() {
                    self.misuse = true;
                }
                return;
            }
            SinkState::Held(mut s) => {
                let k = s.remaining().min(data.len());
                s.buf.extend_from_slice(&data[..k]);
                s.copied += k;
                self.copied += k as u64;
                data.advance(k);
                self.hold_sink(s);
            }
        }
        self.chain.push(data);
    }

    /// Bytes received but not yet parsed.
    pub fn buffered(&self) -> usize {
        self.chain.len()
            + match &self.sink {
                SinkState::Held(s) => s.buf.len(),
                _ => 0,
            }
    }

    /// Take exactly `n` raw bytes (for the banner, which precedes framing), if that many are buffered.
    pub fn take_raw(&mut self, n: usize) -> Option<Bytes> {
        self.chain.take(n)
    }

    /// The bytes buffered but not parsed yet (assembled into one buffer; for tools).
    pub fn peek_buffered(&self) -> Bytes {
        let mut c = self.chain.clone();
        let n = c.len();
        c.take(n).unwrap_or_default()
    }

    /// Discard buffered input and any partial frame (the transport was replaced).
    pub fn reset(&mut self) {
        self.chain.clear();
        self.state = RxState::Preamble;
        self.rx = None;
        self.sink = SinkState::None;
        self.misuse = false;
        self.big_recent = false;
        self.head_guess = PREFETCH_AFTER_DIRECT;
    }

    /// The next complete frame, `Ok(None)` if more input is needed. Frames the sender aborted (late_status) are
    /// skipped.
    pub fn next_frame(&mut self) -> Result<Option<Frame>, FrameError> {
        if self.misuse {
            return Err(FrameError::SinkOrder);
        }
        if !matches!(self.sink, SinkState::None) {
            // A segment is still arriving in its own buffer; nothing after it can be parsed yet.
            return Ok(None);
        }
        loop {
            let r = if self.rx.is_some() {
                self.next_secure()?
            } else {
                self.next_crc()?
            };
            match r {
                None => return Ok(None),
                Some(Some(f)) => return Ok(Some(f)),
                Some(None) => continue, // aborted frame
            }
        }
    }

    fn next_crc(&mut self) -> Result<Option<Option<Frame>>, FrameError> {
        let mut pb = [0u8; PREAMBLE_LEN];
        if !self.chain.peek(&mut pb) {
            return Ok(None);
        }
        let p = Preamble::decode(&pb, &self.limits)?;
        let n = p.n();
        let seg0 = p.seg_len(0);
        let mut total = PREAMBLE_LEN + seg0 + if seg0 > 0 { CRC_LEN } else { 0 };
        if n > 1 {
            total += (1..n).map(|i| p.seg_len(i)).sum::<usize>() + CRC_EPILOGUE_LEN;
        }
        if self.chain.len() < total {
            return Ok(None);
        }
        let mut f = self.chain.split_chain(total);
        let raw = if self.keep_raw {
            f.clone().take(total)
        } else {
            None
        };
        f.advance(PREAMBLE_LEN);
        self.big_recent = self.direct_min.is_some_and(|m| (1..n).any(|i| p.seg_len(i) >= m));
        let mut segments: [Bytes; MAX_SEGMENTS] = Default::default();
        segments[0] = f.take(seg0).ok_or(FrameError::Truncated)?;
        self.copied += std::mem::take(&mut f.copied);
        if seg0 > 0 {
            let mut c = [0u8; CRC_LEN];
            if !f.read(&mut c) {
                return Err(FrameError::Truncated);
            }
            let expected = u32::from_le_bytes(c);
            let computed = ceph_crc32c(u32::MAX, &segments[0]);
            if computed != expected {
                return Err(FrameError::SegmentCrc {
                    segment: 0,
                    computed,
                    expected,
                });
            }
        }
        if n > 1 {
            for (i, seg) in segments.iter_mut().enumerate().take(n).skip(1) {
                let page = p.segments[i].align == ALIGN_PAGE;
                *seg = f.take_aligned(p.seg_len(i), page).ok_or(FrameError::Truncated)?;
            }
            let mut epi = [0u8; CRC_EPILOGUE_LEN];
            if !f.read(&mut epi) {
                return Err(FrameError::Truncated);
            }
            self.copied += f.copied;
            for (i, seg) in segments.iter_mut().enumerate().take(n).skip(1) {
                let expected = le32(&epi[1 + (i - 1) * 4..1 + i * 4]);
                let computed = if p.segments[i].align == ALIGN_PAGE {
                    // A data segment is checked page by page and keeps the page crcs (the segment crc is
                    // derived from them): ferrostore's block crcs and a resend's segment crc reuse this pass.
                    let (crc, attached) = ceph_crc::blocks::attach(std::mem::take(seg));
                    *seg = attached;
                    !crc
                } else {
                    ceph_crc32c(u32::MAX, seg)
                };
                if computed != expected {
                    return Err(FrameError::SegmentCrc {
                        segment: i,
                        computed,
                        expected,
                    });
                }
            }
            if !late_status_ok(epi[0])? {
                return Ok(Some(None));
            }
        }
        Ok(Some(Some(Frame {
            tag: p.tag,
            preamble: p,
            segments,
            raw,
        })))
    }

    fn next_secure(&mut self) -> Result<Option<Option<Frame>>, FrameError> {
        let Some(SecureRx(gcm)) = self.rx.as_mut() else {
            return Ok(None);
        };
        if let RxState::Preamble = self.state {
            if self.chain.len() < SECURE_HEAD_LEN {
                return Ok(None);
            }
            let mut frame = BytesMut::with_capacity(SECURE_HEAD_LEN);
            self.chain.take_into(SECURE_HEAD_LEN, &mut frame);
            gcm.open_slice(&mut frame[..])?;
            let mut pb = [0u8; PREAMBLE_LEN];
            pb.copy_from_slice(&frame[..PREAMBLE_LEN]);
            let p = Preamble::decode(&pb, &self.limits)?;
            let n = p.n();
            let seg0_pad = padded(p.seg_len(0));
            let mut rest_len = 0;
            if seg0_pad > INLINE_LEN {
                rest_len += seg0_pad - INLINE_LEN + TAG_LEN;
            }
            if n > 1 {
                rest_len +=
                    (1..n).map(|i| padded(p.seg_len(i))).sum::<usize>() + SECURE_EPILOGUE_LEN + TAG_LEN;
            }
            self.state = RxState::SecureRest {
                preamble: p,
                frame,
                rest_len,
            };
        }
        let RxState::SecureRest {
            preamble: p,
            rest_len,
            ..
        } = &self.state
        else {
            return Ok(None);
        };
        let (p, rest_len) = (*p, *rest_len);
        if self.chain.len() < rest_len {
            return Ok(None);
        }
        let RxState::SecureRest { mut frame, .. } = std::mem::replace(&mut self.state, RxState::Preamble)
        else {
            return Ok(None);
        };
        // The one copy: ciphertext from the receive chain into this frame's buffer, decrypted there in place.
        frame.reserve(rest_len);
        self.chain.take_into(rest_len, &mut frame);
        self.copied += (SECURE_HEAD_LEN + rest_len) as u64;
        let n = p.n();
        let seg0 = p.seg_len(0);
        let seg0_pad = padded(seg0);
        let mut off = SECURE_HEAD_LEN;
        let seg0_at = if seg0_pad > INLINE_LEN {
            let blk = seg0_pad - INLINE_LEN + TAG_LEN;
            let b = frame.get_mut(off..off + blk).ok_or(FrameError::Truncated)?;
            gcm.open_slice(b)?;
            // Close the gap left by the first block's tag: move the 48 inline bytes up against the rest of
            // segment 0 (a short memmove inside the frame buffer, not a copy of the segment).
            let to = off - INLINE_LEN;
            frame.copy_within(PREAMBLE_LEN..PREAMBLE_LEN + INLINE_LEN, to);
            off += blk;
            to
        } else {
            PREAMBLE_LEN
        };
        let mut seg_ranges = [(0usize, 0usize); MAX_SEGMENTS];
        seg_ranges[0] = (seg0_at, seg0_at + seg0);
        let mut late = LATE_STATUS_COMPLETE;
        if n > 1 {
            let len = (1..n).map(|i| padded(p.seg_len(i))).sum::<usize>() + SECURE_EPILOGUE_LEN + TAG_LEN;
            let b = frame.get_mut(off..off + len).ok_or(FrameError::Truncated)?;
            gcm.open_slice(b)?;
            let mut at = off;
            for (i, r) in seg_ranges.iter_mut().enumerate().take(n).skip(1) {
                let l = p.seg_len(i);
                *r = (at, at + l);
                at += padded(l);
            }
            late = *frame.get(at).ok_or(FrameError::Truncated)?;
        }
        let frame = frame.freeze();
        let mut segments: [Bytes; MAX_SEGMENTS] = Default::default();
        for (seg, &(a, b)) in segments.iter_mut().zip(seg_ranges.iter()).take(n.max(1)) {
            if b > frame.len() {
                return Err(FrameError::Truncated);
            }
            *seg = frame.slice(a..b);
        }
        if !late_status_ok(late)? {
            return Ok(Some(None));
        }
        Ok(Some(Some(Frame {
            tag: p.tag,
            preamble: p,
            segments,
            raw: None,
        })))
    }
}

fn le32(b: &[u8]) -> u32 {
    let mut a = [0u8; 4];
    a.copy_from_slice(&b[..4]);
    u32::from_le_bytes(a)
}

/// true = complete, false = aborted by the sender (drop the frame).
fn late_status_ok(late: u8) -> Result<bool, FrameError> {
    match late & LATE_STATUS_MASK {
        LATE_STATUS_COMPLETE => Ok(true),
        LATE_STATUS_ABORTED => Ok(false),
        _ => Err(FrameError::LateStatus(late)),
    }
}

/// Total bytes of a list of buffers.
pub fn iov_len(bufs: &[Bytes]) -> usize {
    bufs.iter().map(|b| b.len()).sum()
}

/// Concatenate a list of buffers (tests and tools).
pub fn concat(bufs: &[Bytes]) -> Bytes {
    let mut out = BytesMut::with_capacity(iov_len(bufs));
    for b in bufs {
        out.put_slice(b);
    }
    out.freeze()
}
