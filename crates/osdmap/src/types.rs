// SPDX-License-Identifier: LGPL-3.0-or-later
//! Small Ceph value types the maps are built from: `utime_t`, `uuid_d`, `pg_t`, `eversion_t`, `entity_addr_t`,
//! `entity_addrvec_t`, snap interval sets. Kept here until `denc` grows its own; their byte images are Ceph's.

use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::fmt;

use denc::{Decode, DecodeError, Decoder, Encode, Encoder, Result};

use crate::features;

/// `utime_t`: `le32 sec, le32 nsec`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Utime {
    pub sec: u32,
    pub nsec: u32,
}

impl Utime {
    pub fn is_zero(&self) -> bool {
        self.sec == 0 && self.nsec == 0
    }
}

impl Decode for Utime {
    fn decode(d: &mut Decoder) -> Result<Self> {
        Ok(Utime {
            sec: d.u32()?,
            nsec: d.u32()?,
        })
    }
}
impl Encode for Utime {
    fn encode(&self, e: &mut Encoder) {
        e.u32(self.sec);
        e.u32(self.nsec);
    }
}

/// `uuid_d`: 16 raw bytes in textual order.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Uuid(pub [u8; 16]);

impl Uuid {
    /// Parse the canonical `8-4-4-4-12` hex form.
    pub fn parse(s: &str) -> Option<Uuid> {
        let hex: Vec<u8> = s.bytes().filter(|b| *b != b'-').collect();
        if hex.len() != 32 || s.len() != 36 {
            return None;
        }
        let mut out = [0u8; 16];
        for (i, pair) in hex.chunks(2).enumerate() {
            let txt = std::str::from_utf8(pair).ok()?;
            out[i] = u8::from_str_radix(txt, 16).ok()?;
        }
        Some(Uuid(out))
    }
}

impl fmt::Display for Uuid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, b) in self.0.iter().enumerate() {
            if matches!(i, 4 | 6 | 8 | 10) {
                f.write_str("-")?;
            }
            write!(f, "{b:02x}")?;
        }
        Ok(())
    }
}

impl Decode for Uuid {
    fn decode(d: &mut Decoder) -> Result<Self> {
        Ok(Uuid(d.take_array()?))
    }
}
impl Encode for Uuid {
    fn encode(&self, e: &mut Encoder) {
        e.raw(&self.0)
    }
}

/// `pg_t`: a pool and a placement seed. Wire: `u8 1, le64 pool, le32 seed, le32 preferred (-1)`.
/// Ordered by (pool, seed) as Ceph's `operator<` does, which fixes the order of every `map<pg_t, …>`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PgId {
    pub pool: u64,
    pub seed: u32,
}

impl PgId {
    pub fn new(pool: u64, seed: u32) -> Self {
        PgId { pool, seed }
    }
}

impl fmt::Display for PgId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{:x}", self.pool, self.seed)
    }
}

impl Decode for PgId {
    fn decode(d: &mut Decoder) -> Result<Self> {
        let v = d.u8()?;
        if v != 1 {
            return Err(DecodeError::invalid("pg_t", format!("unknown version {v}")));
        }
        let pool = d.u64()?;
        let seed = d.u32()?;
        let _preferred = d.i32()?;
        Ok(PgId { pool, seed })
    }
}
impl Encode for PgId {
    fn encode(&self, e: &mut Encoder) {
        e.u8(1);
        e.u64(self.pool);
        e.u32(self.seed);
        e.i32(-1);
    }
}

/// `eversion_t`: `le64 version, le32 epoch` (version first on the wire).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Eversion {
    pub epoch: u32,
    pub version: u64,
}

impl Decode for Eversion {
    fn decode(d: &mut Decoder) -> Result<Self> {
        let version = d.u64()?;
        let epoch = d.u32()?;
        Ok(Eversion { epoch, version })
    }
}
impl Encode for Eversion {
    fn encode(&self, e: &mut Encoder) {
        e.u64(self.version);
        e.u32(self.epoch);
    }
}

/// `interval_set<snapid_t>` (and the mempool flavour `snap_interval_set_t`): `le32 n` + n × (start, len).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IntervalSet {
    /// start → length, disjoint and non-adjacent when built by the mutators below.
    pub m: BTreeMap<u64, u64>,
}

impl IntervalSet {
    pub fn is_empty(&self) -> bool {
        self.m.is_empty()
    }

    pub fn contains(&self, x: u64) -> bool {
        self.m
            .range(..=x)
            .next_back()
            .is_some_and(|(s, l)| x < s.saturating_add(*l))
    }

    /// Insert `[start, start+len)`, merging with neighbours (Ceph's `union_of` for one interval).
    pub fn insert(&mut self, start: u64, len: u64) {
        if len == 0 {
            return;
        }
        let mut s = start;
        let mut end = start.saturating_add(len);
        let overlapping: Vec<(u64, u64)> = self
            .m
            .range(..=end)
            .filter(|(a, l)| a.saturating_add(**l) >= s)
            .map(|(a, l)| (*a, *l))
            .collect();
        for (a, l) in overlapping {
            self.m.remove(&a);
            s = s.min(a);
            end = end.max(a.saturating_add(l));
        }
        self.m.insert(s, end - s);
    }

    pub fn union_of(&mut self, other: &IntervalSet) {
        for (s, l) in &other.m {
            self.insert(*s, *l);
        }
    }

    /// Remove every point of `other` (Ceph's `subtract`; Ceph asserts containment, we simply remove).
    pub fn subtract(&mut self, other: &IntervalSet) {
        for (os, ol) in &other.m {
            let oe = os.saturating_add(*ol);
            let hit: Vec<(u64, u64)> = self
                .m
                .range(..oe)
                .filter(|(a, l)| a.saturating_add(**l) > *os)
                .map(|(a, l)| (*a, *l))
                .collect();
            for (a, l) in hit {
                self.m.remove(&a);
                let e = a.saturating_add(l);
                if a < *os {
                    self.m.insert(a, os - a);
                }
                if e > oe {
                    self.m.insert(oe, e - oe);
                }
            }
        }
    }
}

impl Decode for IntervalSet {
    fn decode(d: &mut Decoder) -> Result<Self> {
        let n = d.length("interval_set", 16)?;
        let mut m = BTreeMap::new();
        for _ in 0..n {
            let s = d.u64()?;
            let l = d.u64()?;
            m.insert(s, l);
        }
        Ok(IntervalSet { m })
    }
}
impl Encode for IntervalSet {
    fn encode(&self, e: &mut Encoder) {
        self.m.encode(e)
    }
}

/// Address kinds (`entity_addr_t::TYPE_*`).
pub mod addr_type {
    pub const NONE: u32 = 0;
    pub const LEGACY: u32 = 1;
    pub const MSGR2: u32 = 2;
    pub const ANY: u32 = 3;
    pub const CIDR: u32 = 4;
}

const AF_INET: u16 = 2;
const AF_INET6: u16 = 10;
/// `sizeof(sockaddr_in6)`: the size of the address union inside `entity_addr_t`.
const SOCKADDR_UNION_LEN: usize = 28;

/// `entity_addr_t`: type, nonce and a socket address. The socket address is kept as Ceph's in-memory union image
/// (family little-endian, then `sa_data` as the kernel lays it out: port big-endian, address bytes), which is
/// what both the wire form and Ceph's `memcmp` ordering are made of.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct EntityAddr {
    pub kind: u32,
    pub nonce: u32,
    /// The union image; `sa[0..2]` is the family (LE).
    pub sa: [u8; SOCKADDR_UNION_LEN],
}

impl Default for EntityAddr {
    fn default() -> Self {
        EntityAddr {
            kind: addr_type::NONE,
            nonce: 0,
            sa: [0; SOCKADDR_UNION_LEN],
        }
    }
}

impl EntityAddr {
    pub fn family(&self) -> u16 {
        u16::from_le_bytes([self.sa[0], self.sa[1]])
    }
    pub fn port(&self) -> u16 {
        u16::from_be_bytes([self.sa[2], self.sa[3]])
    }

    /// An IPv4 address of the given kind.
    pub fn v4(kind: u32, ip: [u8; 4], port: u16, nonce: u32) -> Self {
        let mut sa = [0u8; SOCKADDR_UNION_LEN];
        sa[0..2].copy_from_slice(&AF_INET.to_le_bytes());
        sa[2..4].copy_from_slice(&port.to_be_bytes());
        sa[4..8].copy_from_slice(&ip);
        EntityAddr { kind, nonce, sa }
    }

    fn sockaddr_len(&self) -> usize {
        match self.family() {
            AF_INET => 16,
            AF_INET6 => 28,
            _ => SOCKADDR_UNION_LEN,
        }
    }

    /// The bytes Ceph compares with `memcmp` (`type`, `nonce`, union, all host-endian).
    fn memcmp_image(&self) -> [u8; 36] {
        let mut b = [0u8; 36];
        b[0..4].copy_from_slice(&self.kind.to_le_bytes());
        b[4..8].copy_from_slice(&self.nonce.to_le_bytes());
        b[8..].copy_from_slice(&self.sa);
        b
    }

    fn decode_legacy_after_marker(d: &mut Decoder) -> Result<Self> {
        // 3 pad bytes complete the old `__u32 type`, then nonce and a 128-byte sockaddr_storage whose family is
        // big-endian.
        d.skip(3)?;
        let nonce = d.u32()?;
        let ss: [u8; 128] = d.take_array()?;
        let family = u16::from_be_bytes([ss[0], ss[1]]);
        let mut sa = [0u8; SOCKADDR_UNION_LEN];
        sa[0..2].copy_from_slice(&family.to_le_bytes());
        sa[2..].copy_from_slice(&ss[2..SOCKADDR_UNION_LEN]);
        Ok(EntityAddr {
            kind: addr_type::LEGACY,
            nonce,
            sa,
        })
    }

    fn encode_legacy(&self, e: &mut Encoder) {
        e.u32(0);
        e.u32(self.nonce);
        let mut ss = [0u8; 128];
        ss[0..2].copy_from_slice(&self.family().to_be_bytes());
        ss[2..SOCKADDR_UNION_LEN].copy_from_slice(&self.sa[2..]);
        e.raw(&ss);
    }
}

impl Ord for EntityAddr {
    fn cmp(&self, other: &Self) -> Ordering {
        self.memcmp_image().cmp(&other.memcmp_image())
    }
}
impl PartialOrd for EntityAddr {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl fmt::Display for EntityAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let prefix = match self.kind {
            addr_type::NONE => return f.write_str("-"),
            addr_type::LEGACY => "v1:",
            addr_type::MSGR2 => "v2:",
            addr_type::ANY => "any:",
            addr_type::CIDR => "cidr:",
            _ => "?:",
        };
        f.write_str(prefix)?;
        match self.family() {
            AF_INET => write!(
                f,
                "{}.{}.{}.{}:{}",
                self.sa[4],
                self.sa[5],
                self.sa[6],
                self.sa[7],
                self.port()
            )?,
            AF_INET6 => {
                let ip = std::net::Ipv6Addr::from(<[u8; 16]>::try_from(&self.sa[8..24]).unwrap_or([0; 16]));
                write!(f, "[{ip}]:{}", self.port())?
            }
            _ => f.write_str("-")?,
        }
        write!(f, "/{}", self.nonce)
    }
}

impl Decode for EntityAddr {
    fn decode(d: &mut Decoder) -> Result<Self> {
        let marker = d.u8()?;
        match marker {
            0 => Self::decode_legacy_after_marker(d),
            1 => {
                let (_, mut b) = d.start_struct("entity_addr_t", 1)?;
                let kind = b.u32()?;
                let nonce = b.u32()?;
                let elen = b.u32()?;
                let mut sa = [0u8; SOCKADDR_UNION_LEN];
                if elen > 0 {
                    let n = elen as usize;
                    if !(2..=SOCKADDR_UNION_LEN).contains(&n) {
                        return Err(DecodeError::invalid(
                            "entity_addr_t",
                            format!("sockaddr length {elen}"),
                        ));
                    }
                    sa[..n].copy_from_slice(b.take_slice(n)?);
                }
                Ok(EntityAddr { kind, nonce, sa })
            }
            m => Err(DecodeError::invalid(
                "entity_addr_t",
                format!("unknown marker {m}"),
            )),
        }
    }
}

impl Encode for EntityAddr {
    fn encode(&self, e: &mut Encoder) {
        if !e.has_feature(features::MSG_ADDR2) {
            self.encode_legacy(e);
            return;
        }
        e.u8(1);
        e.versioned(1, 1, |e| {
            let mut kind = self.kind;
            if kind == addr_type::ANY && !features::has(e.features(), features::MASK_SERVER_NAUTILUS) {
                kind = addr_type::LEGACY;
            }
            e.u32(kind);
            e.u32(self.nonce);
            // Ceph's get_sockaddr_len(): by family, the whole union for anything else (blank included).
            let n = self.sockaddr_len();
            e.u32(n as u32);
            e.raw(&self.sa[..n]);
        });
    }
}

/// `entity_addrvec_t`: every address a daemon listens on.
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct EntityAddrvec {
    pub v: Vec<EntityAddr>,
}

impl EntityAddrvec {
    pub fn is_empty(&self) -> bool {
        self.v.is_empty()
    }

    /// Ceph's `legacy_addr()`: the first v1 address, else a blank one.
    pub fn legacy_addr(&self) -> EntityAddr {
        self.v
            .iter()
            .find(|a| a.kind == addr_type::LEGACY)
            .copied()
            .unwrap_or_default()
    }
}

impl fmt::Display for EntityAddrvec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.v.as_slice() {
            [] => f.write_str("-"),
            [one] => write!(f, "{one}"),
            many => {
                f.write_str("[")?;
                for (i, a) in many.iter().enumerate() {
                    if i > 0 {
                        f.write_str(",")?;
                    }
                    write!(f, "{a}")?;
                }
                f.write_str("]")
            }
        }
    }
}

impl Decode for EntityAddrvec {
    fn decode(d: &mut Decoder) -> Result<Self> {
        let marker = d.peek_rest().first().copied().ok_or(DecodeError::Truncated {
            offset: d.offset(),
            needed: 1,
            remaining: 0,
        })?;
        match marker {
            // A single address (legacy or new form) stands for a one-element vector; a blank one for none.
            0 | 1 => {
                let a = EntityAddr::decode(d)?;
                Ok(EntityAddrvec {
                    v: if a.kind == addr_type::NONE && a.family() == 0 && a.nonce == 0 {
                        Vec::new()
                    } else {
                        vec![a]
                    },
                })
            }
            2 => {
                d.u8()?;
                Ok(EntityAddrvec {
                    v: Vec::<EntityAddr>::decode(d)?,
                })
            }
            m => Err(DecodeError::invalid(
                "entity_addrvec_t",
                format!("unknown marker {m}"),
            )),
        }
    }
}

impl Encode for EntityAddrvec {
    fn encode(&self, e: &mut Encoder) {
        if !e.has_feature(features::MSG_ADDR2) {
            self.legacy_addr().encode(e);
            return;
        }
        e.u8(2);
        self.v.encode(e);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interval_set_ops() {
        let mut s = IntervalSet::default();
        s.insert(1, 2);
        s.insert(5, 1);
        s.insert(3, 2);
        assert_eq!(
            s.m.iter().map(|(a, b)| (*a, *b)).collect::<Vec<_>>(),
            vec![(1, 5)]
        );
        assert!(s.contains(5) && !s.contains(6) && !s.contains(0));
        let mut r = IntervalSet::default();
        r.insert(2, 2);
        s.subtract(&r);
        assert_eq!(
            s.m.iter().map(|(a, b)| (*a, *b)).collect::<Vec<_>>(),
            vec![(1, 1), (4, 2)]
        );
    }

    #[test]
    fn addr_round_trip_and_order() {
        let a = EntityAddr::v4(addr_type::MSGR2, [127, 0, 0, 1], 3300, 0);
        let b = a.to_bytes(u64::MAX);
        assert_eq!(b.len(), 1 + 6 + 12 + 16);
        let back = EntityAddr::decode_all(b).unwrap();
        assert_eq!(back.sa, a.sa);
        assert_eq!(format!("{back}"), "v2:127.0.0.1:3300/0");
        // memcmp order: the type is compared byte-wise little-endian first.
        let c = EntityAddr::v4(addr_type::LEGACY, [127, 0, 0, 1], 6789, 0);
        assert!(c < a);
        let u = Uuid::parse("e4f6c2a6-3b6e-4e8e-9d6b-0f1a2b3c4d5e").unwrap();
        assert_eq!(u.to_string(), "e4f6c2a6-3b6e-4e8e-9d6b-0f1a2b3c4d5e");
    }
}
