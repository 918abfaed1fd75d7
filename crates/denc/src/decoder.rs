// SPDX-License-Identifier: LGPL-3.0-or-later
//! The decoding cursor: bounds-checked reads over a shared `Bytes`, with sub-decoders for versioned structs.

use bytes::Bytes;

use crate::error::{DecodeError, Result};

/// Upper bound on any single length-prefixed item (string, bufferlist, container count). A Ceph message is at most
/// a few hundred MiB; this exists so a hostile length can never make us allocate more than the input could hold.
pub const MAX_ITEM_LEN: usize = 1 << 30;

/// A read cursor over an immutable, reference-counted buffer. Byte strings taken from it (`bytes`, `bufferlist`)
/// share the buffer instead of copying it, so a payload received from the network travels on by reference.
#[derive(Clone, Debug)]
pub struct Decoder {
    buf: Bytes,
    pos: usize,
    /// Offset of `buf[0]` in the outermost buffer, for error messages.
    base: usize,
    features: u64,
}

/// The header of a versioned struct (ENCODE_START): version, oldest compatible version and the length of the body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StructHeader {
    pub version: u8,
    pub compat: u8,
    pub len: u32,
}

impl Decoder {
    pub fn new(buf: impl Into<Bytes>) -> Self {
        Decoder {
            buf: buf.into(),
            pos: 0,
            base: 0,
            features: u64::MAX,
        }
    }

    /// A decoder that knows the feature bits the sender encoded with (a few types decode differently by them).
    pub fn with_features(buf: impl Into<Bytes>, features: u64) -> Self {
        Decoder {
            buf: buf.into(),
            pos: 0,
            base: 0,
            features,
        }
    }

    pub fn features(&self) -> u64 {
        self.features
    }

    pub fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    pub fn is_empty(&self) -> bool {
        self.remaining() == 0
    }

    /// Offset from the start of the outermost buffer.
    pub fn offset(&self) -> usize {
        self.base + self.pos
    }

    /// The bytes not yet read, without consuming them.
    pub fn peek_rest(&self) -> &[u8] {
        &self.buf[self.pos..]
    }

    fn need(&self, n: usize) -> Result<()> {
        if n > self.remaining() {
            return Err(DecodeError::Truncated {
                offset: self.offset(),
                needed: n,
                remaining: self.remaining(),
            });
        }
        Ok(())
    }

    /// Borrow the next `n` bytes.
    pub fn take_slice(&mut self, n: usize) -> Result<&[u8]> {
        self.need(n)?;
        let s = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    /// The next `n` bytes as a shared `Bytes` (no copy).
    pub fn take_bytes(&mut self, n: usize) -> Result<Bytes> {
        self.need(n)?;
        let b = self.buf.slice(self.pos..self.pos + n);
        self.pos += n;
        Ok(b)
    }

    pub fn take_array<const N: usize>(&mut self) -> Result<[u8; N]> {
        let mut a = [0u8; N];
        a.copy_from_slice(self.take_slice(N)?);
        Ok(a)
    }

    pub fn skip(&mut self, n: usize) -> Result<()> {
        self.need(n)?;
        self.pos += n;
        Ok(())
    }

    pub fn u8(&mut self) -> Result<u8> {
        Ok(self.take_array::<1>()?[0])
    }
    pub fn u16(&mut self) -> Result<u16> {
        Ok(u16::from_le_bytes(self.take_array()?))
    }
    pub fn u32(&mut self) -> Result<u32> {
        Ok(u32::from_le_bytes(self.take_array()?))
    }
    pub fn u64(&mut self) -> Result<u64> {
        Ok(u64::from_le_bytes(self.take_array()?))
    }
    pub fn i8(&mut self) -> Result<i8> {
        Ok(self.u8()? as i8)
    }
    pub fn i16(&mut self) -> Result<i16> {
        Ok(self.u16()? as i16)
    }
    pub fn i32(&mut self) -> Result<i32> {
        Ok(self.u32()? as i32)
    }
    pub fn i64(&mut self) -> Result<i64> {
        Ok(self.u64()? as i64)
    }
    pub fn f32(&mut self) -> Result<f32> {
        Ok(f32::from_le_bytes(self.take_array()?))
    }
    pub fn f64(&mut self) -> Result<f64> {
        Ok(f64::from_le_bytes(self.take_array()?))
    }
    /// Ceph encodes `bool` as one byte; any non-zero value reads as true, as Ceph's decoder does.
    pub fn bool(&mut self) -> Result<bool> {
        Ok(self.u8()? != 0)
    }

    /// A `le32` length that must fit in what is left of the input (each item takes at least `min_item_size` bytes).
    /// This is what bounds every allocation a hostile peer can cause.
    pub fn length(&mut self, what: &'static str, min_item_size: usize) -> Result<usize> {
        let n = self.u32()? as usize;
        if n > MAX_ITEM_LEN {
            return Err(DecodeError::TooLong {
                what,
                len: n,
                limit: MAX_ITEM_LEN,
            });
        }
        let need = n.saturating_mul(min_item_size.max(1));
        if min_item_size > 0 && need > self.remaining() {
            return Err(DecodeError::Truncated {
                offset: self.offset(),
                needed: need,
                remaining: self.remaining(),
            });
        }
        Ok(n)
    }

    /// A `le32`-length-prefixed byte string (Ceph `bufferlist`), shared, not copied.
    pub fn bufferlist(&mut self) -> Result<Bytes> {
        let n = self.length("bufferlist", 1)?;
        self.take_bytes(n)
    }

    /// A `le32`-length-prefixed string. Ceph strings are arbitrary bytes; invalid UTF-8 is an error here because
    /// every string field we interpret (names, keys, namespaces) is text in practice. Use [`Decoder::bufferlist`]
    /// for fields that may hold binary data.
    pub fn string(&mut self) -> Result<String> {
        let n = self.length("string", 1)?;
        let offset = self.offset();
        let s = self.take_slice(n)?;
        String::from_utf8(s.to_vec())
            .map_err(|e| DecodeError::invalid("string", format!("not UTF-8 at offset {offset}: {e}")))
    }

    /// A sub-decoder over exactly the next `n` bytes; this decoder moves past them.
    pub fn sub(&mut self, n: usize) -> Result<Decoder> {
        let base = self.offset();
        let buf = self.take_bytes(n)?;
        Ok(Decoder {
            buf,
            pos: 0,
            base,
            features: self.features,
        })
    }

    /// Read a versioned struct header (ENCODE_START): `u8 version, u8 compat, le32 len`. Refuses a struct whose
    /// compat version is newer than `supported`, and returns a decoder confined to the struct body; the caller's
    /// cursor is already past the whole struct, so unread trailing bytes of a newer version are skipped.
    pub fn start_struct(
        &mut self,
        type_name: &'static str,
        supported: u8,
    ) -> Result<(StructHeader, Decoder)> {
        let version = self.u8()?;
        let compat = self.u8()?;
        if compat > supported {
            return Err(DecodeError::Incompatible {
                type_name,
                compat,
                supported,
            });
        }
        let len = self.u32()?;
        let body = self.sub(len as usize)?;
        Ok((StructHeader { version, compat, len }, body))
    }

    /// Like [`Decoder::start_struct`], but also refuses versions older than `oldest` (formats we do not read).
    pub fn start_struct_min(
        &mut self,
        type_name: &'static str,
        supported: u8,
        oldest: u8,
    ) -> Result<(StructHeader, Decoder)> {
        let (h, d) = self.start_struct(type_name, supported)?;
        if h.version < oldest {
            return Err(DecodeError::TooOld {
                type_name,
                version: h.version,
                oldest,
            });
        }
        Ok((h, d))
    }

    /// ENCODE_START/DECODE_START with the body handled by `f`: refuses `compat > supported`, confines `f` to the
    /// struct body and skips whatever `f` leaves unread (newer versions' trailing fields).
    pub fn decode_struct<T>(
        &mut self,
        type_name: &'static str,
        supported: u8,
        f: impl FnOnce(StructHeader, &mut Decoder) -> Result<T>,
    ) -> Result<T> {
        let (h, mut body) = self.start_struct(type_name, supported)?;
        f(h, &mut body)
    }

    /// Ceph's `DECODE_START_LEGACY_COMPAT_LEN` family, for types whose oldest encodings predate the envelope:
    /// the compat byte is present only from version `legacy.compat_since`, the length only from
    /// `legacy.len_since`, and versions before `compat_since` may carry `legacy.skip` filler bytes after the version
    /// (the `_16`/`_32` variants, whose version was once a wider integer).
    ///
    /// `f` decodes the body. With a length, it sees a decoder confined to the body and unread trailing bytes are
    /// skipped; without one (old versions) it reads straight from this decoder. For headers without a compat byte
    /// the header reports `compat = version`; without a length it reports `len = 0`.
    pub fn decode_struct_legacy<T>(
        &mut self,
        type_name: &'static str,
        supported: u8,
        legacy: LegacyHeader,
        f: impl FnOnce(StructHeader, &mut Decoder) -> Result<T>,
    ) -> Result<T> {
        let version = self.u8()?;
        let mut compat = version;
        if version >= legacy.compat_since {
            compat = self.u8()?;
            if compat > supported {
                return Err(DecodeError::Incompatible {
                    type_name,
                    compat,
                    supported,
                });
            }
        } else {
            self.skip(legacy.skip)?;
        }
        if version >= legacy.len_since {
            let len = self.u32()?;
            let mut body = self.sub(len as usize)?;
            f(StructHeader { version, compat, len }, &mut body)
        } else {
            f(
                StructHeader {
                    version,
                    compat,
                    len: 0,
                },
                self,
            )
        }
    }

    /// Decode a value of type `T`.
    pub fn decode<T: Decode>(&mut self) -> Result<T> {
        T::decode(self)
    }

    /// Fail if any input is left (for top-level decodes that must consume everything).
    pub fn finish(&self, type_name: &'static str) -> Result<()> {
        if self.remaining() != 0 {
            return Err(DecodeError::TrailingBytes {
                type_name,
                remaining: self.remaining(),
            });
        }
        Ok(())
    }
}

/// Which parts of a versioned-struct header old versions lack (see [`Decoder::decode_struct_legacy`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LegacyHeader {
    /// First version that has the compat byte (`compatv` in Ceph's macro).
    pub compat_since: u8,
    /// First version that has the `le32` length (`lenv`).
    pub len_since: u8,
    /// Filler bytes after the version in versions before `compat_since`: 0, 1 (`_16`) or 3 (`_32`).
    pub skip: usize,
}

impl LegacyHeader {
    /// `DECODE_START_LEGACY_COMPAT_LEN(v, compatv, lenv)`.
    pub const fn new(compat_since: u8, len_since: u8) -> Self {
        LegacyHeader {
            compat_since,
            len_since,
            skip: 0,
        }
    }
    /// `DECODE_START_LEGACY_COMPAT_LEN_16`.
    pub const fn len16(compat_since: u8, len_since: u8) -> Self {
        LegacyHeader {
            compat_since,
            len_since,
            skip: 1,
        }
    }
    /// `DECODE_START_LEGACY_COMPAT_LEN_32`.
    pub const fn len32(compat_since: u8, len_since: u8) -> Self {
        LegacyHeader {
            compat_since,
            len_since,
            skip: 3,
        }
    }
}

/// A type with a Ceph wire decoding.
pub trait Decode: Sized {
    fn decode(d: &mut Decoder) -> Result<Self>;

    /// Decode a whole buffer that must hold exactly one value.
    fn decode_all(buf: impl Into<Bytes>) -> Result<Self> {
        let mut d = Decoder::new(buf);
        let v = Self::decode(&mut d)?;
        d.finish(std::any::type_name::<Self>())?;
        Ok(v)
    }
}
