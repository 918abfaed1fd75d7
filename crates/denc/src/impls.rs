// SPDX-License-Identifier: LGPL-3.0-or-later
//! Encode/Decode for scalars and the standard containers, with Ceph's layouts (encoding.h):
//! vector/list/set: `le32 count` + items; map: `le32 count` + (key, value) in key order; pair: first, second;
//! optional: `u8 present` + value; string and bufferlist: `le32 len` + bytes.

use std::collections::{BTreeMap, BTreeSet};

use bytes::Bytes;

use crate::decoder::{Decode, Decoder};
use crate::encoder::{Encode, Encoder};
use crate::error::Result;

/// The most a container decode reserves before seeing its elements; beyond this the vector grows as elements
/// actually decode.
const MAX_PREALLOC_BYTES: usize = 1 << 20;

macro_rules! scalar {
    ($($t:ty => $m:ident),* $(,)?) => {$(
        impl Decode for $t {
            fn decode(d: &mut Decoder) -> Result<Self> { d.$m() }
        }
        impl Encode for $t {
            fn encode(&self, e: &mut Encoder) { e.$m(*self) }
        }
    )*};
}
scalar!(u8 => u8, u16 => u16, u32 => u32, u64 => u64, i8 => i8, i16 => i16, i32 => i32, i64 => i64,
        f32 => f32, f64 => f64, bool => bool);

impl Decode for String {
    fn decode(d: &mut Decoder) -> Result<Self> {
        d.string()
    }
}
impl Encode for String {
    fn encode(&self, e: &mut Encoder) {
        e.string(self)
    }
}
impl Encode for str {
    fn encode(&self, e: &mut Encoder) {
        e.string(self)
    }
}

/// `Bytes` is Ceph's `bufferlist`: decoded by reference into the input buffer.
impl Decode for Bytes {
    fn decode(d: &mut Decoder) -> Result<Self> {
        d.bufferlist()
    }
}
impl Encode for Bytes {
    fn encode(&self, e: &mut Encoder) {
        e.bytes(self)
    }
}

impl<const N: usize> Decode for [u8; N] {
    fn decode(d: &mut Decoder) -> Result<Self> {
        d.take_array()
    }
}
impl<const N: usize> Encode for [u8; N] {
    fn encode(&self, e: &mut Encoder) {
        e.raw(self)
    }
}

impl<T: Decode> Decode for Vec<T> {
    fn decode(d: &mut Decoder) -> Result<Self> {
        let n = d.length("vector", 1)?;
        // Each element takes at least one input byte, but may be far larger in memory than on the wire: cap the
        // up-front reservation so a hostile count cannot amplify a small input into a large allocation.
        let cap = n
            .min(d.remaining())
            .min(MAX_PREALLOC_BYTES / std::mem::size_of::<T>().max(1));
        let mut v = Vec::with_capacity(cap);
        for _ in 0..n {
            v.push(T::decode(d)?);
        }
        Ok(v)
    }
}
impl<T: Encode> Encode for Vec<T> {
    fn encode(&self, e: &mut Encoder) {
        self.as_slice().encode(e)
    }
}
impl<T: Encode> Encode for [T] {
    fn encode(&self, e: &mut Encoder) {
        e.length(self.len());
        for x in self {
            x.encode(e);
        }
    }
}

impl<T: Decode + Ord> Decode for BTreeSet<T> {
    fn decode(d: &mut Decoder) -> Result<Self> {
        let n = d.length("set", 1)?;
        let mut s = BTreeSet::new();
        for _ in 0..n {
            s.insert(T::decode(d)?);
        }
        Ok(s)
    }
}
impl<T: Encode> Encode for BTreeSet<T> {
    fn encode(&self, e: &mut Encoder) {
        e.length(self.len());
        for x in self {
            x.encode(e);
        }
    }
}

/// `std::map`: the byte image depends on iteration order, so keys must order as Ceph's `operator<` does. Strings
/// compare bytewise in both languages; types with a custom order implement `Ord` to match Ceph's.
impl<K: Decode + Ord, V: Decode> Decode for BTreeMap<K, V> {
    fn decode(d: &mut Decoder) -> Result<Self> {
        let n = d.length("map", 1)?;
        let mut m = BTreeMap::new();
        for _ in 0..n {
            let k = K::decode(d)?;
            let v = V::decode(d)?;
            m.insert(k, v);
        }
        Ok(m)
    }
}
impl<K: Encode, V: Encode> Encode for BTreeMap<K, V> {
    fn encode(&self, e: &mut Encoder) {
        e.length(self.len());
        for (k, v) in self {
            k.encode(e);
            v.encode(e);
        }
    }
}

impl<A: Decode, B: Decode> Decode for (A, B) {
    fn decode(d: &mut Decoder) -> Result<Self> {
        Ok((A::decode(d)?, B::decode(d)?))
    }
}
impl<A: Encode, B: Encode> Encode for (A, B) {
    fn encode(&self, e: &mut Encoder) {
        self.0.encode(e);
        self.1.encode(e);
    }
}

impl<A: Decode, B: Decode, C: Decode> Decode for (A, B, C) {
    fn decode(d: &mut Decoder) -> Result<Self> {
        Ok((A::decode(d)?, B::decode(d)?, C::decode(d)?))
    }
}
impl<A: Encode, B: Encode, C: Encode> Encode for (A, B, C) {
    fn encode(&self, e: &mut Encoder) {
        self.0.encode(e);
        self.1.encode(e);
        self.2.encode(e);
    }
}

impl<T: Encode + ?Sized> Encode for &T {
    fn encode(&self, e: &mut Encoder) {
        (**self).encode(e)
    }
}

/// `std::optional` / `boost::optional`: `u8 present` then the value.
impl<T: Decode> Decode for Option<T> {
    fn decode(d: &mut Decoder) -> Result<Self> {
        if d.bool()? {
            Ok(Some(T::decode(d)?))
        } else {
            Ok(None)
        }
    }
}
impl<T: Encode> Encode for Option<T> {
    fn encode(&self, e: &mut Encoder) {
        match self {
            Some(v) => {
                e.u8(1);
                v.encode(e)
            }
            None => e.u8(0),
        }
    }
}
