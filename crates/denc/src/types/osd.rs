// SPDX-License-Identifier: LGPL-3.0-or-later
//! OSD identifiers (src/osd/osd_types.{h,cc}, src/include/object.h, src/include/types.h): `snapid_t`, `shard_id_t`,
//! `object_t`, `sobject_t`, `eversion_t`, `osd_reqid_t`, `pg_t`, `spg_t`, `pg_shard_t`, `object_locator_t`, `coll_t`.

use std::fmt;
use std::str::FromStr;

use bytes::Bytes;

use crate::decoder::LegacyHeader;
use crate::types::entity::EntityNameT;
use crate::{Decode, DecodeError, Decoder, Encode, Encoder, Result};

/// A text form that does not parse (pg ids, collection names).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("cannot parse {what} from {text:?}")]
pub struct ParseIdError {
    pub what: &'static str,
    pub text: String,
}

fn parse_err(what: &'static str, text: &str) -> ParseIdError {
    ParseIdError {
        what,
        text: text.to_string(),
    }
}

/// `snapid_t`: a snapshot id (u64). [`SnapId::NOSNAP`] is the head object, [`SnapId::SNAPDIR`] the snapdir.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SnapId(pub u64);

impl SnapId {
    /// CEPH_NOSNAP: the head (writable) version of an object.
    pub const NOSNAP: SnapId = SnapId(u64::MAX - 1);
    /// CEPH_SNAPDIR: the snapdir pseudo-object (sorts after head).
    pub const SNAPDIR: SnapId = SnapId(u64::MAX);
    /// The largest real snapshot id (CEPH_MAXSNAP).
    pub const MAXSNAP: SnapId = SnapId(u64::MAX - 3);
}

impl Decode for SnapId {
    fn decode(d: &mut Decoder) -> Result<Self> {
        Ok(SnapId(d.u64()?))
    }
}
impl Encode for SnapId {
    fn encode(&self, e: &mut Encoder) {
        e.u64(self.0)
    }
}

/// `head`, `snapdir`, or the id in hex (Ceph's `operator<<`).
impl fmt::Display for SnapId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            SnapId::NOSNAP => f.write_str("head"),
            SnapId::SNAPDIR => f.write_str("snapdir"),
            SnapId(s) => write!(f, "{s:x}"),
        }
    }
}

/// `shard_id_t`: an erasure-code shard (i8); [`ShardId::NO_SHARD`] (−1) for replicated pools.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ShardId(pub i8);

impl ShardId {
    pub const NO_SHARD: ShardId = ShardId(-1);
    pub fn is_no_shard(&self) -> bool {
        *self == Self::NO_SHARD
    }
}
impl Default for ShardId {
    fn default() -> Self {
        Self::NO_SHARD
    }
}
impl Decode for ShardId {
    fn decode(d: &mut Decoder) -> Result<Self> {
        Ok(ShardId(d.i8()?))
    }
}
impl Encode for ShardId {
    fn encode(&self, e: &mut Encoder) {
        e.i8(self.0)
    }
}
/// Printed as an unsigned byte, as Ceph does.
impl fmt::Display for ShardId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0 as u8)
    }
}

/// `object_t`: an object's name. Arbitrary bytes (RADOS does not require UTF-8); compares bytewise as
/// `std::string` does.
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ObjectName(pub Bytes);

impl ObjectName {
    pub fn new(name: impl Into<Bytes>) -> Self {
        ObjectName(name.into())
    }
    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}
impl From<&'static str> for ObjectName {
    fn from(s: &'static str) -> Self {
        ObjectName(Bytes::from_static(s.as_bytes()))
    }
}
impl Decode for ObjectName {
    fn decode(d: &mut Decoder) -> Result<Self> {
        Ok(ObjectName(d.bufferlist()?))
    }
}
impl Encode for ObjectName {
    fn encode(&self, e: &mut Encoder) {
        e.bytes(&self.0)
    }
}
impl fmt::Display for ObjectName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&String::from_utf8_lossy(&self.0))
    }
}

/// `sobject_t`: an object name and a snap id.
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SObject {
    pub oid: ObjectName,
    pub snap: SnapId,
}
impl Decode for SObject {
    fn decode(d: &mut Decoder) -> Result<Self> {
        Ok(SObject {
            oid: d.decode()?,
            snap: d.decode()?,
        })
    }
}
impl Encode for SObject {
    fn encode(&self, e: &mut Encoder) {
        self.oid.encode(e);
        self.snap.encode(e);
    }
}
impl fmt::Display for SObject {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.oid, self.snap)
    }
}

/// `eversion_t`: (epoch, version) of a PG log entry. **Encoded version first** (`le64 version, le32 epoch`),
/// printed and ordered epoch first: `5'42`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Eversion {
    pub epoch: u32,
    pub version: u64,
}

impl Eversion {
    pub const fn new(epoch: u32, version: u64) -> Self {
        Eversion { epoch, version }
    }
    /// `eversion_t::max()`.
    pub const MAX: Eversion = Eversion {
        epoch: u32::MAX,
        version: u64::MAX,
    };
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
impl fmt::Display for Eversion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}'{}", self.epoch, self.version)
    }
}

/// `osd_reqid_t`: a client request's identity (DENC 2/2): entity name, tid, incarnation. Printed
/// `client.4123.0:17`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct OsdReqId {
    pub name: EntityNameT,
    pub tid: u64,
    pub inc: i32,
}
impl Decode for OsdReqId {
    fn decode(d: &mut Decoder) -> Result<Self> {
        d.decode_struct("osd_reqid_t", 2, |_, d| {
            Ok(OsdReqId {
                name: d.decode()?,
                tid: d.u64()?,
                inc: d.i32()?,
            })
        })
    }
}
impl Encode for OsdReqId {
    fn encode(&self, e: &mut Encoder) {
        e.versioned(2, 2, |e| {
            self.name.encode(e);
            e.u64(self.tid);
            e.i32(self.inc);
        })
    }
}
impl fmt::Display for OsdReqId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}:{}", self.name, self.inc, self.tid)
    }
}

/// `pg_t`: a placement group (pool, placement seed). Encoded `u8 1, le64 pool, le32 seed, le32 -1` (the retired
/// "preferred" osd); printed `2.f` (seed in hex).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PgId {
    pub pool: u64,
    pub seed: u32,
}
impl PgId {
    pub const fn new(pool: u64, seed: u32) -> Self {
        PgId { pool, seed }
    }

    /// The number of low hash bits that identify this PG in a pool of `pg_num` PGs (Ceph's `get_split_bits`):
    /// PGs below the last power-of-two boundary that have already split use one more bit.
    pub fn get_split_bits(&self, pg_num: u32) -> u32 {
        if pg_num <= 1 {
            return 0;
        }
        let p = u32::BITS - pg_num.leading_zeros(); // pg_num in [2^(p-1), 2^p)
        let half = 1u32 << (p - 1);
        if self.seed % half < pg_num % half {
            p
        } else {
            p - 1
        }
    }

    /// Whether `obj` belongs to this PG when the PG is identified by `bits` hash bits (Ceph's `pg_t::contains`).
    pub fn contains(&self, bits: u32, obj: &crate::types::HObject) -> bool {
        obj.get_logical_pool() == self.pool as i64 && obj.match_hash(bits, self.seed)
    }
}

/// Ceph's `ceph_stable_mod`: maps a placement seed onto `b` buckets so that growing `b` moves few inputs.
/// `bmask` is the next power of two above `b`, minus one.
pub fn ceph_stable_mod(x: u32, b: u32, bmask: u32) -> u32 {
    if x & bmask < b {
        x & bmask
    } else {
        x & (bmask >> 1)
    }
}
impl Decode for PgId {
    fn decode(d: &mut Decoder) -> Result<Self> {
        // Ceph ignores both the version byte and the retired "preferred" field.
        let _v = d.u8()?;
        let pool = d.u64()?;
        let seed = d.u32()?;
        d.skip(4)?;
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
impl fmt::Display for PgId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{:x}", self.pool, self.seed)
    }
}
impl FromStr for PgId {
    type Err = ParseIdError;
    fn from_str(s: &str) -> Result<Self, ParseIdError> {
        let (p, h) = s.split_once('.').ok_or_else(|| parse_err("pg_t", s))?;
        let ok = |t: &str, hex: bool| {
            !t.is_empty()
                && t.chars().all(|c| {
                    if hex {
                        c.is_ascii_hexdigit()
                    } else {
                        c.is_ascii_digit()
                    }
                })
        };
        if !ok(p, false) || !ok(h, true) {
            return Err(parse_err("pg_t", s));
        }
        Ok(PgId {
            pool: p.parse().map_err(|_| parse_err("pg_t", s))?,
            seed: u32::from_str_radix(h, 16).map_err(|_| parse_err("pg_t", s))?,
        })
    }
}

/// `spg_t`: a PG and, for erasure-coded pools, the shard. ENCODE_START(1,1){ pg_t, i8 shard }. Printed `2.f` or
/// `2.fs1`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SpgId {
    pub pgid: PgId,
    pub shard: ShardId,
}
impl SpgId {
    pub const fn new(pgid: PgId, shard: ShardId) -> Self {
        SpgId { pgid, shard }
    }
    /// The PG's metadata object (`spg_t::make_pgmeta_oid`): where its info and log live.
    pub fn make_pgmeta_oid(&self) -> crate::types::GHObject {
        crate::types::GHObject::make_pgmeta(self.pgid.pool as i64, self.pgid.seed, self.shard)
    }
}
impl Decode for SpgId {
    fn decode(d: &mut Decoder) -> Result<Self> {
        d.decode_struct("spg_t", 1, |_, d| {
            Ok(SpgId {
                pgid: d.decode()?,
                shard: d.decode()?,
            })
        })
    }
}
impl Encode for SpgId {
    fn encode(&self, e: &mut Encoder) {
        e.versioned(1, 1, |e| {
            self.pgid.encode(e);
            self.shard.encode(e);
        })
    }
}
impl fmt::Display for SpgId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.pgid)?;
        if !self.shard.is_no_shard() {
            write!(f, "s{}", self.shard)?;
        }
        Ok(())
    }
}
impl FromStr for SpgId {
    type Err = ParseIdError;
    fn from_str(s: &str) -> Result<Self, ParseIdError> {
        let (pg, shard) = match s.split_once('s') {
            Some((pg, sh)) => {
                let n = sh
                    .parse::<u8>()
                    .ok()
                    .filter(|_| sh.chars().all(|c| c.is_ascii_digit()))
                    .ok_or_else(|| parse_err("spg_t", s))?;
                (pg, ShardId(n as i8))
            }
            None => (s, ShardId::NO_SHARD),
        };
        Ok(SpgId {
            pgid: pg.parse().map_err(|_| parse_err("spg_t", s))?,
            shard,
        })
    }
}

/// `pg_shard_t`: an OSD and the shard it holds. ENCODE_START(1,1){ i32 osd, i8 shard }. Printed `3` or `3(1)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PgShard {
    pub osd: i32,
    pub shard: ShardId,
}
impl PgShard {
    /// CRUSH_ITEM_NONE / "no osd".
    pub const NO_OSD: i32 = 0x7fff_ffff;
    pub const fn new(osd: i32, shard: ShardId) -> Self {
        PgShard { osd, shard }
    }
}
impl Default for PgShard {
    fn default() -> Self {
        PgShard {
            osd: -1,
            shard: ShardId::NO_SHARD,
        }
    }
}
impl Decode for PgShard {
    fn decode(d: &mut Decoder) -> Result<Self> {
        d.decode_struct("pg_shard_t", 1, |_, d| {
            Ok(PgShard {
                osd: d.i32()?,
                shard: d.decode()?,
            })
        })
    }
}
impl Encode for PgShard {
    fn encode(&self, e: &mut Encoder) {
        e.versioned(1, 1, |e| {
            e.i32(self.osd);
            self.shard.encode(e);
        })
    }
}
impl fmt::Display for PgShard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.osd == -1 {
            return f.write_str("?");
        }
        if self.shard.is_no_shard() {
            return write!(f, "{}", self.osd);
        }
        write!(f, "{}({})", self.osd, self.shard)
    }
}

/// `object_locator_t`: where an object lives: pool, locator key, namespace, explicit hash (−1 = hash the name).
/// ENCODE_START(6, 3) — compat raised to 6 when a hash is set (ENCODE_FINISH_NEW_COMPAT), since older decoders
/// would misplace the object. A key and a hash together are invalid (Ceph asserts).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ObjectLocator {
    pub pool: i64,
    pub key: Bytes,
    pub nspace: Bytes,
    pub hash: i64,
}
impl Default for ObjectLocator {
    fn default() -> Self {
        ObjectLocator {
            pool: -1,
            key: Bytes::new(),
            nspace: Bytes::new(),
            hash: -1,
        }
    }
}
impl ObjectLocator {
    pub fn new(pool: i64) -> Self {
        ObjectLocator {
            pool,
            ..Default::default()
        }
    }
}
impl Decode for ObjectLocator {
    fn decode(d: &mut Decoder) -> Result<Self> {
        let loc = d.decode_struct_legacy("object_locator_t", 6, LegacyHeader::new(3, 3), |h, d| {
            let pool = if h.version < 2 {
                let p = i64::from(d.i32()?);
                d.skip(2)?; // i16 preferred
                p
            } else {
                let p = d.i64()?;
                d.skip(4)?; // i32 preferred
                p
            };
            let key = d.bufferlist()?;
            let nspace = if h.version >= 5 {
                d.bufferlist()?
            } else {
                Bytes::new()
            };
            let hash = if h.version >= 6 { d.i64()? } else { -1 };
            Ok(ObjectLocator {
                pool,
                key,
                nspace,
                hash,
            })
        })?;
        if loc.hash != -1 && !loc.key.is_empty() {
            return Err(DecodeError::invalid("object_locator_t", "both a key and a hash"));
        }
        Ok(loc)
    }
}
impl Encode for ObjectLocator {
    fn encode(&self, e: &mut Encoder) {
        debug_assert!(
            self.hash == -1 || self.key.is_empty(),
            "object_locator_t with both key and hash"
        );
        e.versioned_new_compat(6, 3, |e| {
            e.i64(self.pool);
            e.i32(-1); // preferred, retired
            e.bytes(&self.key);
            e.bytes(&self.nspace);
            e.i64(self.hash);
            if self.hash != -1 { 6 } else { 3 }
        })
    }
}
impl fmt::Display for ObjectLocator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "@{}", self.pool)?;
        if !self.nspace.is_empty() {
            write!(f, ";{}", String::from_utf8_lossy(&self.nspace))?;
        }
        if !self.key.is_empty() {
            write!(f, ":{}", String::from_utf8_lossy(&self.key))?;
        }
        Ok(())
    }
}

/// The kind of an ObjectStore collection.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum CollType {
    /// The OSD's own metadata collection, `meta`.
    #[default]
    Meta = 0,
    /// A PG's objects, `2.f_head`.
    Pg = 2,
    /// A PG's temporary objects, `2.f_TEMP`.
    PgTemp = 3,
}

/// `coll_t`: an ObjectStore collection. Encoded as `u8 2, u8 type, spg_t, le64 snap(NOSNAP)`, except temp
/// collections, which only the string form (`u8 3` + string) can express. Version 1 (`spg_t, snap`) decodes too.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Coll {
    pub ty: CollType,
    pub pgid: SpgId,
}
impl Coll {
    pub const META: Coll = Coll {
        ty: CollType::Meta,
        pgid: SpgId {
            pgid: PgId { pool: 0, seed: 0 },
            shard: ShardId::NO_SHARD,
        },
    };
    pub fn pg(pgid: SpgId) -> Self {
        Coll {
            ty: CollType::Pg,
            pgid,
        }
    }
    pub fn pg_temp(pgid: SpgId) -> Self {
        Coll {
            ty: CollType::PgTemp,
            pgid,
        }
    }
    pub fn is_meta(&self) -> bool {
        self.ty == CollType::Meta
    }
    /// The PG of a `_head` collection.
    pub fn pg_id(&self) -> Option<SpgId> {
        (self.ty == CollType::Pg).then_some(self.pgid)
    }
    pub fn is_temp(&self) -> bool {
        self.ty == CollType::PgTemp
    }
    /// The temp collection of a PG collection (`coll_t::get_temp`).
    pub fn temp(&self) -> Coll {
        Coll::pg_temp(self.pgid)
    }
}
impl Decode for Coll {
    fn decode(d: &mut Decoder) -> Result<Self> {
        match d.u8()? {
            1 => {
                let pgid: SpgId = d.decode()?;
                let snap = d.u64()?;
                let ty = if pgid == SpgId::default() && snap == 0 {
                    CollType::Meta
                } else {
                    CollType::Pg
                };
                Ok(Coll { ty, pgid })
            }
            2 => {
                let ty = match d.u8()? {
                    0 => CollType::Meta,
                    2 => CollType::Pg,
                    3 => CollType::PgTemp,
                    t => return Err(DecodeError::invalid("coll_t", format!("type {t}"))),
                };
                let pgid = d.decode()?;
                d.skip(8)?; // snap, always NOSNAP
                Ok(Coll { ty, pgid })
            }
            3 => {
                let s = d.string()?;
                s.parse()
                    .map_err(|e: ParseIdError| DecodeError::invalid("coll_t", e.to_string()))
            }
            v => Err(DecodeError::invalid("coll_t", format!("version {v}"))),
        }
    }
}
impl Encode for Coll {
    fn encode(&self, e: &mut Encoder) {
        if self.ty == CollType::PgTemp {
            e.u8(3);
            e.string(&self.to_string());
        } else {
            e.u8(2);
            e.u8(self.ty as u8);
            self.pgid.encode(e);
            SnapId::NOSNAP.encode(e);
        }
    }
}
impl fmt::Display for Coll {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.ty {
            CollType::Meta => f.write_str("meta"),
            CollType::Pg => write!(f, "{}_head", self.pgid),
            CollType::PgTemp => write!(f, "{}_TEMP", self.pgid),
        }
    }
}
/// Parses `meta`, `<spg>_head`, `<spg>_TEMP`. Only the canonical spelling is accepted (Ceph asserts on others).
impl FromStr for Coll {
    type Err = ParseIdError;
    fn from_str(s: &str) -> Result<Self, ParseIdError> {
        let c = if s == "meta" {
            Coll::META
        } else if let Some(p) = s.strip_suffix("_head") {
            Coll::pg(p.parse().map_err(|_| parse_err("coll_t", s))?)
        } else if let Some(p) = s.strip_suffix("_TEMP") {
            Coll::pg_temp(p.parse().map_err(|_| parse_err("coll_t", s))?)
        } else {
            return Err(parse_err("coll_t", s));
        };
        if c.to_string() != s {
            return Err(parse_err("coll_t", s));
        }
        Ok(c)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pg_text_and_bytes() {
        let pg = PgId::new(2, 0xf);
        assert_eq!(pg.to_string(), "2.f");
        assert_eq!("2.f".parse::<PgId>().unwrap(), pg);
        assert_eq!(pg.to_bytes(0).len(), 17);
        assert_eq!(&pg.to_bytes(0)[13..], &[0xff; 4]);
        let s = SpgId::new(pg, ShardId(1));
        assert_eq!(s.to_string(), "2.fs1");
        assert_eq!("2.fs1".parse::<SpgId>().unwrap(), s);
        assert_eq!("2.f".parse::<SpgId>().unwrap().shard, ShardId::NO_SHARD);
        for bad in ["2", ".f", "2.", "2.g", "x.1", "2.fs", "2.fsx", "2.fs1 "] {
            assert!(bad.parse::<SpgId>().is_err(), "{bad}");
        }
    }

    #[test]
    fn eversion_is_version_first_on_the_wire() {
        let v = Eversion::new(5, 42);
        assert_eq!(v.to_string(), "5'42");
        assert_eq!(&v.to_bytes(0)[..], &[42, 0, 0, 0, 0, 0, 0, 0, 5, 0, 0, 0]);
        assert!(Eversion::new(4, 100) < Eversion::new(5, 1));
    }

    #[test]
    fn locator_compat_depends_on_hash() {
        let mut l = ObjectLocator::new(3);
        assert_eq!(&l.to_bytes(0)[..2], &[6, 3]);
        l.hash = 7;
        let b = l.to_bytes(0);
        assert_eq!(&b[..2], &[6, 6]);
        assert_eq!(ObjectLocator::decode_all(b).unwrap(), l);
        l.key = Bytes::from_static(b"k");
        // a key plus a hash never decodes
        let mut e = Encoder::default();
        e.versioned(6, 6, |e| {
            e.i64(3);
            e.i32(-1);
            e.string("k");
            e.string("");
            e.i64(7);
        });
        assert!(ObjectLocator::decode_all(e.into_bytes()).is_err());
    }

    #[test]
    fn coll_forms() {
        let c = Coll::pg(SpgId::new(PgId::new(1, 0x1f), ShardId(2)));
        assert_eq!(c.to_string(), "1.1fs2_head");
        assert_eq!(c.to_bytes(0)[0], 2);
        let t = Coll::pg_temp(SpgId::new(PgId::new(0, 1), ShardId::NO_SHARD));
        assert_eq!(&t.to_bytes(0)[..], b"\x03\x08\0\0\x000.1_TEMP");
        assert_eq!("meta".parse::<Coll>().unwrap(), Coll::META);
        assert!("1.1F_head".parse::<Coll>().is_err(), "non-canonical spelling");
        assert_eq!(Coll::decode_all(t.to_bytes(0)).unwrap(), t);
    }

    #[test]
    fn split_bits_and_stable_mod() {
        // pg_num 12: PGs 0-3 have split (use 4 bits), 4-7 have not (3 bits), 8-11 are the new children.
        assert_eq!(PgId::new(1, 0).get_split_bits(12), 4);
        assert_eq!(PgId::new(1, 3).get_split_bits(12), 4);
        assert_eq!(PgId::new(1, 5).get_split_bits(12), 3);
        assert_eq!(PgId::new(1, 9).get_split_bits(12), 4);
        assert_eq!(PgId::new(1, 0).get_split_bits(8), 3);
        assert_eq!(PgId::new(1, 0).get_split_bits(1), 0);
        assert_eq!(ceph_stable_mod(13, 12, 15), 13 & 7);
        assert_eq!(ceph_stable_mod(9, 12, 15), 9);
        let obj = crate::types::HObject::new("o", "", SnapId::NOSNAP, 0xabc5, 1, "");
        assert!(PgId::new(1, 5).contains(3, &obj));
        assert!(PgId::new(1, 5).contains(4, &obj));
        assert!(!PgId::new(1, 0xd).contains(4, &obj));
        assert!(!PgId::new(2, 5).contains(3, &obj));
    }

    #[test]
    fn snap_and_shard_text() {
        assert_eq!(SnapId::NOSNAP.to_string(), "head");
        assert_eq!(SnapId::SNAPDIR.to_string(), "snapdir");
        assert_eq!(SnapId(0x1a).to_string(), "1a");
        assert_eq!(PgShard::new(3, ShardId(1)).to_string(), "3(1)");
        assert_eq!(PgShard::new(3, ShardId::NO_SHARD).to_string(), "3");
        let r = OsdReqId {
            name: EntityNameT::client(4123),
            tid: 17,
            inc: 0,
        };
        assert_eq!(r.to_string(), "client.4123.0:17");
    }
}
