// SPDX-License-Identifier: LGPL-3.0-or-later
//! The encoding side: little-endian appends into a `BytesMut`, versioned-struct framing, and the peer's features.

use bytes::{BufMut, Bytes, BytesMut};

/// An output buffer plus the feature bits of the peer we encode for (the intersection of both sides' features on a
/// connection). Types whose encoding depends on features (`entity_addr_t`, `pg_pool_t`, `OSDMap`) read them here.
#[derive(Debug)]
pub struct Encoder {
    buf: BytesMut,
    features: u64,
}

impl Default for Encoder {
    fn default() -> Self {
        Encoder::new(u64::MAX)
    }
}

/// What [`Encoder::new`] reserves: most Ceph structs and message fronts encode to 50–300 bytes, and growing from
/// zero costs 6 reallocations (8, 16, … 256) for a 200-byte one; 256 bytes is one allocation for them. Measured
/// with a micro-benchmark (docs/benchmarks.md, "What we tried — network path").
pub const DEFAULT_CAPACITY: usize = 256;

impl Encoder {
    pub fn new(features: u64) -> Self {
        Encoder::with_capacity(features, DEFAULT_CAPACITY)
    }

    pub fn with_capacity(features: u64, cap: usize) -> Self {
        Encoder {
            buf: BytesMut::with_capacity(cap),
            features,
        }
    }

    pub fn features(&self) -> u64 {
        self.features
    }

    pub fn has_feature(&self, mask: u64) -> bool {
        self.features & mask == mask
    }

    pub fn len(&self) -> usize {
        self.buf.len()
    }

    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }

    pub fn as_slice(&self) -> &[u8] {
        &self.buf
    }

    pub fn into_bytes(self) -> Bytes {
        self.buf.freeze()
    }

    pub fn into_inner(self) -> BytesMut {
        self.buf
    }

    pub fn u8(&mut self, v: u8) {
        self.buf.put_u8(v)
    }
    pub fn u16(&mut self, v: u16) {
        self.buf.put_u16_le(v)
    }
    pub fn u32(&mut self, v: u32) {
        self.buf.put_u32_le(v)
    }
    pub fn u64(&mut self, v: u64) {
        self.buf.put_u64_le(v)
    }
    pub fn i8(&mut self, v: i8) {
        self.buf.put_i8(v)
    }
    pub fn i16(&mut self, v: i16) {
        self.buf.put_i16_le(v)
    }
    pub fn i32(&mut self, v: i32) {
        self.buf.put_i32_le(v)
    }
    pub fn i64(&mut self, v: i64) {
        self.buf.put_i64_le(v)
    }
    pub fn f32(&mut self, v: f32) {
        self.buf.put_f32_le(v)
    }
    pub fn f64(&mut self, v: f64) {
        self.buf.put_f64_le(v)
    }
    pub fn bool(&mut self, v: bool) {
        self.buf.put_u8(v as u8)
    }
    pub fn raw(&mut self, b: &[u8]) {
        self.buf.put_slice(b)
    }

    /// A `le32` length prefix. Lengths above `u32::MAX` cannot be expressed in Ceph's encoding at all.
    pub fn length(&mut self, n: usize) {
        let n = u32::try_from(n).expect("Ceph encodes lengths as le32; a larger item is a caller bug");
        self.u32(n)
    }

    /// `le32 len` + bytes: Ceph's `std::string` and `bufferlist`.
    pub fn bytes(&mut self, b: &[u8]) {
        self.length(b.len());
        self.raw(b)
    }

    pub fn string(&mut self, s: &str) {
        self.bytes(s.as_bytes())
    }

    /// Encode `body` inside an ENCODE_START(version, compat) envelope; the length is patched in afterwards.
    pub fn versioned(&mut self, version: u8, compat: u8, body: impl FnOnce(&mut Encoder)) {
        self.u8(version);
        self.u8(compat);
        let at = self.buf.len();
        self.u32(0);
        body(self);
        let len = u32::try_from(self.buf.len() - at - 4).expect("struct body larger than 4 GiB");
        self.buf[at..at + 4].copy_from_slice(&len.to_le_bytes());
    }

    /// ENCODE_START(version, compat) ... ENCODE_FINISH_NEW_COMPAT: `body` returns the compat version actually
    /// needed, which may be raised above `compat` by what it encoded (e.g. `object_locator_t` with a hash).
    pub fn versioned_new_compat(&mut self, version: u8, compat: u8, body: impl FnOnce(&mut Encoder) -> u8) {
        let start = self.buf.len();
        let mut new_compat = compat;
        self.versioned(version, compat, |e| new_compat = body(e));
        if new_compat != compat {
            self.set_compat_at(start, new_compat);
        }
    }

    /// Overwrite the compat byte of a struct started at `struct_start` (Ceph's ENCODE_FINISH_NEW_COMPAT).
    pub fn set_compat_at(&mut self, struct_start: usize, compat: u8) {
        self.buf[struct_start + 1] = compat;
    }

    pub fn encode<T: Encode + ?Sized>(&mut self, v: &T) {
        v.encode(self)
    }
}

/// A type with a Ceph wire encoding.
pub trait Encode {
    fn encode(&self, e: &mut Encoder);

    /// Encode into a fresh buffer for a peer with `features`.
    fn to_bytes(&self, features: u64) -> Bytes {
        let mut e = Encoder::new(features);
        self.encode(&mut e);
        e.into_bytes()
    }
}
