// SPDX-License-Identifier: LGPL-3.0-or-later
//! A byte rope (Ceph's `bufferlist`): a chain of shared `Bytes`. Payloads handed in by reference (a client's
//! write data) stay the caller's buffers; small encoded pieces are appended into one owned buffer at the tail.
//! Equality is by content, not by how the bytes are split.

use bytes::{Bytes, BytesMut};
use denc::{Decode, DecodeError, Decoder};

/// A chain of `Bytes`; see the module docs.
#[derive(Debug, Clone, Default)]
pub struct BufferList {
    pieces: Vec<Bytes>,
    len: usize,
    /// The last piece is a buffer we built (safe to extend in place when uniquely owned).
    owned_tail: bool,
}

impl BufferList {
    pub fn new() -> Self {
        Self::default()
    }
    pub fn len(&self) -> usize {
        self.len
    }
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    /// The pieces, in order (no empty ones).
    pub fn pieces(&self) -> &[Bytes] {
        &self.pieces
    }
    /// Append a buffer by reference (no copy).
    pub fn push(&mut self, b: Bytes) {
        if b.is_empty() {
            return;
        }
        self.len += b.len();
        self.pieces.push(b);
        self.owned_tail = false;
    }
    /// Append bytes by copying them into the owned tail piece (for small encoded fields).
    pub fn extend_from_slice(&mut self, b: &[u8]) {
        if b.is_empty() {
            return;
        }
        self.len += b.len();
        if self.owned_tail
            && let Some(last) = self.pieces.pop()
        {
            match last.try_into_mut() {
                Ok(mut m) => {
                    m.extend_from_slice(b);
                    self.pieces.push(m.freeze());
                    return;
                }
                Err(shared) => self.pieces.push(shared),
            }
        }
        let mut m = BytesMut::with_capacity(b.len().max(256));
        m.extend_from_slice(b);
        self.pieces.push(m.freeze());
        self.owned_tail = true;
    }
    /// One contiguous buffer: free for zero or one piece, a copy otherwise.
    pub fn to_bytes(&self) -> Bytes {
        match self.pieces.as_slice() {
            [] => Bytes::new(),
            [one] => one.clone(),
            many => {
                let mut m = BytesMut::with_capacity(self.len);
                for p in many {
                    m.extend_from_slice(p);
                }
                m.freeze()
            }
        }
    }
    /// A reader from the start.
    pub fn cursor(&self) -> Cursor<'_> {
        Cursor {
            pieces: &self.pieces,
            at: 0,
            off: 0,
        }
    }
    fn iter_bytes(&self) -> impl Iterator<Item = &u8> {
        self.pieces.iter().flat_map(|p| p.iter())
    }
}

impl From<Bytes> for BufferList {
    fn from(b: Bytes) -> Self {
        let mut l = BufferList::new();
        l.push(b);
        l
    }
}

impl From<Vec<u8>> for BufferList {
    fn from(v: Vec<u8>) -> Self {
        Bytes::from(v).into()
    }
}

impl PartialEq for BufferList {
    fn eq(&self, other: &Self) -> bool {
        self.len == other.len && self.iter_bytes().eq(other.iter_bytes())
    }
}
impl Eq for BufferList {}

impl PartialEq<[u8]> for BufferList {
    fn eq(&self, other: &[u8]) -> bool {
        self.len == other.len() && self.iter_bytes().eq(other.iter())
    }
}

/// Reads a [`BufferList`] front to back; what lies within one piece comes out as a slice of it (no copy).
#[derive(Debug, Clone)]
pub struct Cursor<'a> {
    pieces: &'a [Bytes],
    at: usize,
    off: usize,
}

fn short(what: &'static str) -> DecodeError {
    DecodeError::invalid(what, "buffer list ends early".to_string())
}

impl Cursor<'_> {
    fn skip_empty(&mut self) {
        while self.at < self.pieces.len() && self.off >= self.pieces[self.at].len() {
            self.at += 1;
            self.off = 0;
        }
    }
    /// The next `n` bytes: a slice of one piece when they lie in one, otherwise gathered (copied).
    pub fn take(&mut self, n: usize) -> Result<Bytes, DecodeError> {
        self.skip_empty();
        if n == 0 {
            return Ok(Bytes::new());
        }
        let Some(p) = self.pieces.get(self.at) else {
            return Err(short("bufferlist"));
        };
        if p.len() - self.off >= n {
            let b = p.slice(self.off..self.off + n);
            self.off += n;
            return Ok(b);
        }
        let avail: usize = self.remaining();
        if avail < n {
            return Err(short("bufferlist"));
        }
        let mut m = BytesMut::with_capacity(n);
        while m.len() < n {
            self.skip_empty();
            let p = self.pieces.get(self.at).ok_or_else(|| short("bufferlist"))?;
            let k = (n - m.len()).min(p.len() - self.off);
            m.extend_from_slice(&p[self.off..self.off + k]);
            self.off += k;
        }
        Ok(m.freeze())
    }
    pub fn u32(&mut self) -> Result<u32, DecodeError> {
        let b = self.take(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }
    /// A `le32`-length-prefixed `bufferlist`.
    pub fn bufferlist(&mut self) -> Result<Bytes, DecodeError> {
        let n = self.u32()? as usize;
        self.take(n)
    }
    /// Bytes left.
    pub fn remaining(&self) -> usize {
        self.pieces
            .iter()
            .skip(self.at)
            .map(|p| p.len())
            .sum::<usize>()
            .saturating_sub(self.off)
    }
    /// Decode a value: from the current piece when it holds all of it, else from the rest gathered.
    pub fn decode<T: Decode>(&mut self) -> Result<T, DecodeError> {
        self.skip_empty();
        let Some(p) = self.pieces.get(self.at) else {
            return T::decode(&mut Decoder::new(Bytes::new()));
        };
        let mut d = Decoder::new(p.slice(self.off..));
        match T::decode(&mut d) {
            Ok(v) => {
                self.off = p.len() - d.remaining();
                Ok(v)
            }
            Err(_) if self.at + 1 < self.pieces.len() => {
                let n = self.remaining();
                let rest = self.clone().take(n)?;
                let mut d = Decoder::new(rest);
                let v = T::decode(&mut d)?;
                let used = n - d.remaining();
                self.take(used)?;
                Ok(v)
            }
            Err(e) => Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn pieces_are_shared_and_reads_slice_them() {
        let payload = Bytes::from(vec![7u8; 4096]);
        let mut l = BufferList::new();
        l.extend_from_slice(&4096u32.to_le_bytes());
        l.push(payload.clone());
        l.extend_from_slice(b"ab");
        l.extend_from_slice(b"cd");
        assert_eq!(l.pieces().len(), 3);
        assert_eq!(l.len(), 4 + 4096 + 4);
        let mut c = l.cursor();
        let got = c.bufferlist().unwrap();
        assert_eq!(got.as_ptr(), payload.as_ptr());
        assert_eq!(&c.take(4).unwrap()[..], b"abcd");
        assert!(c.take(1).is_err());
        // equal by content whatever the split
        assert_eq!(l, BufferList::from(l.to_bytes()));
    }

    #[test]
    fn reads_across_pieces_gather() {
        let mut l = BufferList::new();
        l.push(Bytes::from_static(&[3, 0]));
        l.push(Bytes::from_static(&[0, 0, b'x', b'y']));
        l.push(Bytes::from_static(b"z"));
        let mut c = l.cursor();
        assert_eq!(&c.bufferlist().unwrap()[..], b"xyz");
        assert_eq!(c.remaining(), 0);
        let mut c = l.cursor();
        let v: Bytes = c.decode().unwrap();
        assert_eq!(&v[..], b"xyz");
    }
}
