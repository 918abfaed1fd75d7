// SPDX-License-Identifier: LGPL-3.0-or-later
//! Identities and addresses: `entity_name_t`, `EntityName`, `entity_addr_t`, `entity_addrvec_t`, `entity_inst_t`
//! (src/msg/msg_types.{h,cc}, src/common/entity_name.h, src/include/msgr.h).

use std::cmp::Ordering;
use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV6};
use std::str::FromStr;

use crate::features::{MASK_SERVER_NAUTILUS, MSG_ADDR2, has};
use crate::{Decode, DecodeError, Decoder, Encode, Encoder, Result};

pub const ENTITY_TYPE_MON: u8 = 0x01;
pub const ENTITY_TYPE_MDS: u8 = 0x02;
pub const ENTITY_TYPE_OSD: u8 = 0x04;
pub const ENTITY_TYPE_CLIENT: u8 = 0x08;
pub const ENTITY_TYPE_MGR: u8 = 0x10;
pub const ENTITY_TYPE_AUTH: u8 = 0x20;
pub const ENTITY_TYPE_ANY: u8 = 0xFF;

/// Ceph's `ceph_entity_type_name`.
pub fn entity_type_name(t: u32) -> &'static str {
    match u8::try_from(t) {
        Ok(ENTITY_TYPE_MON) => "mon",
        Ok(ENTITY_TYPE_MDS) => "mds",
        Ok(ENTITY_TYPE_OSD) => "osd",
        Ok(ENTITY_TYPE_CLIENT) => "client",
        Ok(ENTITY_TYPE_MGR) => "mgr",
        Ok(ENTITY_TYPE_AUTH) => "auth",
        _ => "unknown",
    }
}

/// The inverse of [`entity_type_name`] for the daemon and client types.
pub fn entity_type_from_name(s: &str) -> Option<u8> {
    Some(match s {
        "mon" => ENTITY_TYPE_MON,
        "mds" => ENTITY_TYPE_MDS,
        "osd" => ENTITY_TYPE_OSD,
        "client" => ENTITY_TYPE_CLIENT,
        "mgr" => ENTITY_TYPE_MGR,
        "auth" => ENTITY_TYPE_AUTH,
        _ => return None,
    })
}

/// `entity_name_t`: a messenger identity, raw `u8 type, le64 num` (9 bytes, DENC). `osd.3`, `client.4123`.
/// Ordered by (type, num) as in Ceph.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct EntityNameT {
    pub ty: u8,
    pub num: i64,
}

impl EntityNameT {
    /// Ceph's `entity_name_t::NEW`: a number not assigned yet.
    pub const NEW: i64 = -1;
    pub const fn new(ty: u8, num: i64) -> Self {
        EntityNameT { ty, num }
    }
    pub const fn osd(num: i64) -> Self {
        EntityNameT::new(ENTITY_TYPE_OSD, num)
    }
    pub const fn client(num: i64) -> Self {
        EntityNameT::new(ENTITY_TYPE_CLIENT, num)
    }
    pub const fn mon(num: i64) -> Self {
        EntityNameT::new(ENTITY_TYPE_MON, num)
    }
    pub const fn mgr(num: i64) -> Self {
        EntityNameT::new(ENTITY_TYPE_MGR, num)
    }
    pub fn type_str(&self) -> &'static str {
        entity_type_name(u32::from(self.ty))
    }
}

impl Decode for EntityNameT {
    fn decode(d: &mut Decoder) -> Result<Self> {
        Ok(EntityNameT {
            ty: d.u8()?,
            num: d.i64()?,
        })
    }
}
impl Encode for EntityNameT {
    fn encode(&self, e: &mut Encoder) {
        e.u8(self.ty);
        e.i64(self.num);
    }
}

impl fmt::Display for EntityNameT {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.num < 0 {
            write!(f, "{}.?", self.type_str())
        } else {
            write!(f, "{}.{}", self.type_str(), self.num)
        }
    }
}

impl FromStr for EntityNameT {
    type Err = DecodeError;
    fn from_str(s: &str) -> Result<Self> {
        let bad = || DecodeError::invalid("entity_name_t", format!("{s:?}"));
        let (t, n) = s.split_once('.').ok_or_else(bad)?;
        let ty = entity_type_from_name(t)
            .filter(|t| *t != ENTITY_TYPE_AUTH)
            .ok_or_else(bad)?;
        let num = n.parse::<i64>().map_err(|_| bad())?;
        Ok(EntityNameT { ty, num })
    }
}

/// `EntityName`: an auth identity, `le32 type` + string id. `osd.0` is (OSD, "0"), `client.admin` (CLIENT, "admin").
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct EntityName {
    pub ty: u32,
    pub id: String,
}

impl EntityName {
    pub fn new(ty: u8, id: impl Into<String>) -> Self {
        EntityName {
            ty: u32::from(ty),
            id: id.into(),
        }
    }
}

impl Decode for EntityName {
    fn decode(d: &mut Decoder) -> Result<Self> {
        Ok(EntityName {
            ty: d.u32()?,
            id: d.string()?,
        })
    }
}
impl Encode for EntityName {
    fn encode(&self, e: &mut Encoder) {
        e.u32(self.ty);
        e.string(&self.id);
    }
}

impl fmt::Display for EntityName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", entity_type_name(self.ty), self.id)
    }
}

impl FromStr for EntityName {
    type Err = DecodeError;
    fn from_str(s: &str) -> Result<Self> {
        let bad = || DecodeError::invalid("EntityName", format!("{s:?}"));
        let (t, id) = s.split_once('.').ok_or_else(bad)?;
        let ty = entity_type_from_name(t).ok_or_else(bad)?;
        Ok(EntityName::new(ty, id))
    }
}

/// Linux address families, as they appear in a sockaddr.
pub(crate) const AF_INET: u16 = 2;
pub(crate) const AF_INET6: u16 = 10;
const SOCKADDR_LEN: usize = 28; // sizeof(sockaddr_in6), the size of entity_addr_t's union
const SOCKADDR_STORAGE_LEN: usize = 128;

/// `entity_addr_t`: address type (v1/v2/any), nonce and a Linux sockaddr.
///
/// The sockaddr is kept exactly as Ceph holds it in memory (a 28-byte `sockaddr_in6`-sized union: family in
/// little-endian host order, port and address in network order), because Ceph's encodings copy those bytes and its
/// ordering (`operator<`, used for `map<entity_addr_t, …>` such as the OSDMap blocklist) is a `memcmp` of the whole
/// struct. [`Ord`] here reproduces that memcmp.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct EntityAddr {
    pub addr_type: u32,
    pub nonce: u32,
    sa: [u8; SOCKADDR_LEN],
}

impl Default for EntityAddr {
    fn default() -> Self {
        EntityAddr {
            addr_type: EntityAddr::TYPE_NONE,
            nonce: 0,
            sa: [0; SOCKADDR_LEN],
        }
    }
}

impl EntityAddr {
    pub const TYPE_NONE: u32 = 0;
    /// msgr1.
    pub const TYPE_LEGACY: u32 = 1;
    /// msgr2.
    pub const TYPE_MSGR2: u32 = 2;
    /// Either protocol (used in the blocklist).
    pub const TYPE_ANY: u32 = 3;
    /// An address range (range blocklist).
    pub const TYPE_CIDR: u32 = 4;

    /// An address of the given type for a socket address.
    pub fn new(addr_type: u32, addr: SocketAddr, nonce: u32) -> Self {
        let mut a = EntityAddr {
            addr_type,
            nonce,
            sa: [0; SOCKADDR_LEN],
        };
        a.set_socket_addr(addr);
        a
    }

    /// Build from the raw in-memory sockaddr bytes (family little-endian, the rest in network order).
    pub fn from_raw(addr_type: u32, nonce: u32, sockaddr: [u8; SOCKADDR_LEN]) -> Self {
        EntityAddr {
            addr_type,
            nonce,
            sa: sockaddr,
        }
    }

    /// The raw in-memory sockaddr bytes.
    pub fn sockaddr_bytes(&self) -> &[u8; SOCKADDR_LEN] {
        &self.sa
    }

    pub fn family(&self) -> u16 {
        u16::from_le_bytes([self.sa[0], self.sa[1]])
    }

    pub fn is_legacy(&self) -> bool {
        self.addr_type == Self::TYPE_LEGACY
    }
    pub fn is_msgr2(&self) -> bool {
        self.addr_type == Self::TYPE_MSGR2
    }
    pub fn is_ip(&self) -> bool {
        matches!(self.family(), AF_INET | AF_INET6)
    }

    /// Ceph's `get_sockaddr_len()`: what the new encoding carries as `elen`.
    pub fn sockaddr_len(&self) -> usize {
        sockaddr_len_for(self.family())
    }

    pub fn set_socket_addr(&mut self, addr: SocketAddr) {
        self.sa = [0; SOCKADDR_LEN];
        match addr {
            SocketAddr::V4(v4) => {
                self.sa[0..2].copy_from_slice(&AF_INET.to_le_bytes());
                self.sa[2..4].copy_from_slice(&v4.port().to_be_bytes());
                self.sa[4..8].copy_from_slice(&v4.ip().octets());
            }
            SocketAddr::V6(v6) => {
                self.sa[0..2].copy_from_slice(&AF_INET6.to_le_bytes());
                self.sa[2..4].copy_from_slice(&v6.port().to_be_bytes());
                self.sa[4..8].copy_from_slice(&v6.flowinfo().to_be_bytes());
                self.sa[8..24].copy_from_slice(&v6.ip().octets());
                self.sa[24..28].copy_from_slice(&v6.scope_id().to_le_bytes());
            }
        }
    }

    /// The IP socket address, or `None` for a non-IP family (e.g. a blank address).
    pub fn socket_addr(&self) -> Option<SocketAddr> {
        let port = self.port();
        match self.family() {
            AF_INET => Some(SocketAddr::new(IpAddr::V4(self.ipv4()), port)),
            AF_INET6 => {
                let flow = u32::from_be_bytes([self.sa[4], self.sa[5], self.sa[6], self.sa[7]]);
                let scope = u32::from_le_bytes([self.sa[24], self.sa[25], self.sa[26], self.sa[27]]);
                Some(SocketAddr::V6(SocketAddrV6::new(self.ipv6(), port, flow, scope)))
            }
            _ => None,
        }
    }

    pub fn ip(&self) -> Option<IpAddr> {
        self.socket_addr().map(|s| s.ip())
    }

    fn ipv4(&self) -> Ipv4Addr {
        Ipv4Addr::new(self.sa[4], self.sa[5], self.sa[6], self.sa[7])
    }
    fn ipv6(&self) -> Ipv6Addr {
        let mut o = [0u8; 16];
        o.copy_from_slice(&self.sa[8..24]);
        Ipv6Addr::from(o)
    }

    /// The port for IP families, 0 otherwise (Ceph's `get_port`).
    pub fn port(&self) -> u16 {
        match self.family() {
            AF_INET | AF_INET6 => u16::from_be_bytes([self.sa[2], self.sa[3]]),
            _ => 0,
        }
    }

    /// Set the port of an IP address; returns false (and changes nothing) for other families.
    pub fn set_port(&mut self, port: u16) -> bool {
        if !self.is_ip() {
            return false;
        }
        self.sa[2..4].copy_from_slice(&port.to_be_bytes());
        true
    }

    /// Ceph's `is_blank_ip`: the any-address, or not an IP address at all.
    pub fn is_blank_ip(&self) -> bool {
        match self.family() {
            AF_INET => self.ipv4().is_unspecified(),
            AF_INET6 => self.ipv6().is_unspecified(),
            _ => true,
        }
    }

    /// The 36-byte in-memory image Ceph's comparisons `memcmp`.
    fn memcmp_image(&self) -> ([u8; 4], [u8; 4], &[u8; SOCKADDR_LEN]) {
        (self.addr_type.to_le_bytes(), self.nonce.to_le_bytes(), &self.sa)
    }

    /// After the first marker byte: the rest of the legacy form (`le32 0` type, nonce, 128-byte
    /// `sockaddr_storage` with a big-endian family). Ceph keeps only IPv4/IPv6 sockaddrs, typed v1; anything else
    /// becomes a blank address of type NONE.
    fn decode_legacy_after_marker(d: &mut Decoder) -> Result<Self> {
        d.skip(3)?; // the other three bytes of the zero type word
        let nonce = d.u32()?;
        let ss = d.take_slice(SOCKADDR_STORAGE_LEN)?;
        let family = u16::from_be_bytes([ss[0], ss[1]]);
        let mut sa = [0u8; SOCKADDR_LEN];
        let keep = match family {
            AF_INET => 16,
            AF_INET6 => SOCKADDR_LEN,
            _ => 0,
        };
        if keep > 0 {
            sa[0..2].copy_from_slice(&family.to_le_bytes());
            sa[2..keep].copy_from_slice(&ss[2..keep]);
        }
        Ok(EntityAddr {
            addr_type: if keep > 0 {
                Self::TYPE_LEGACY
            } else {
                Self::TYPE_NONE
            },
            nonce,
            sa,
        })
    }

    /// After the marker byte 1: ENCODE_START(1,1){ type, nonce, elen, elen sockaddr bytes }.
    fn decode_new_after_marker(d: &mut Decoder) -> Result<Self> {
        d.decode_struct("entity_addr_t", 1, |_, d| {
            let addr_type = d.u32()?;
            let nonce = d.u32()?;
            let elen = d.u32()? as usize;
            let mut sa = [0u8; SOCKADDR_LEN];
            if elen > 0 {
                if elen < 2 {
                    return Err(DecodeError::invalid(
                        "entity_addr_t",
                        "elen smaller than family len",
                    ));
                }
                let fam = d.take_array::<2>()?;
                if elen > sockaddr_len_for(u16::from_le_bytes(fam)) {
                    return Err(DecodeError::invalid(
                        "entity_addr_t",
                        format!("elen {elen} exceeds sockaddr len"),
                    ));
                }
                sa[0..2].copy_from_slice(&fam);
                sa[2..elen].copy_from_slice(d.take_slice(elen - 2)?);
            }
            Ok(EntityAddr { addr_type, nonce, sa })
        })
    }

    /// The legacy (pre-MSG_ADDR2) form: `le32 0`, nonce, `sockaddr_storage` with the family big-endian.
    fn encode_legacy(&self, e: &mut Encoder) {
        e.u32(0);
        e.u32(self.nonce);
        let mut ss = [0u8; SOCKADDR_STORAGE_LEN];
        ss[0..2].copy_from_slice(&self.family().to_be_bytes());
        ss[2..SOCKADDR_LEN].copy_from_slice(&self.sa[2..]);
        e.raw(&ss);
    }

    /// Parse Ceph's text form from the start of `s`, returning the address and the unparsed rest. Without a `v1:`,
    /// `v2:` or `any:` prefix the type is `default_type`; `-` alone is a blank address of type NONE.
    pub fn parse_prefix(s: &str, default_type: u32) -> Option<(EntityAddr, &str)> {
        let (addr_type, mut rest) = if let Some(r) = s.strip_prefix("v1:") {
            (Self::TYPE_LEGACY, r)
        } else if let Some(r) = s.strip_prefix("v2:") {
            (Self::TYPE_MSGR2, r)
        } else if let Some(r) = s.strip_prefix("any:") {
            (Self::TYPE_ANY, r)
        } else if let Some(r) = s.strip_prefix('-') {
            return Some((EntityAddr::default(), r));
        } else {
            (default_type, s)
        };
        let brackets = if let Some(r) = rest.strip_prefix('[') {
            rest = r;
            true
        } else {
            false
        };
        let run = |ok: fn(char) -> bool| rest.find(|c: char| !ok(c)).unwrap_or(rest.len());
        let n4 = run(|c| c == '.' || c.is_ascii_digit());
        let n6 = run(|c| c == ':' || c.is_ascii_hexdigit());
        let ip = if let Ok(v4) = rest[..n4].parse::<Ipv4Addr>() {
            rest = &rest[n4..];
            IpAddr::V4(v4)
        } else if let Ok(v6) = rest[..n6].parse::<Ipv6Addr>() {
            rest = &rest[n6..];
            IpAddr::V6(v6)
        } else {
            return None;
        };
        if brackets {
            rest = rest.strip_prefix(']')?;
        }
        let digits = |r: &str| r.find(|c: char| !c.is_ascii_digit()).unwrap_or(r.len());
        let mut port = 0u16;
        if let Some(r) = rest.strip_prefix(':') {
            let n = digits(r);
            port = if n == 0 { 0 } else { r[..n].parse::<u16>().ok()? };
            rest = &r[n..];
        }
        let mut nonce = 0u32;
        if let Some(r) = rest.strip_prefix('/') {
            let n = digits(r);
            nonce = if n == 0 { 0 } else { r[..n].parse::<u32>().ok()? };
            rest = &r[n..];
        }
        Some((EntityAddr::new(addr_type, SocketAddr::new(ip, port), nonce), rest))
    }

    /// The name Ceph prints before the address (`get_type_name`).
    pub fn type_name(t: u32) -> &'static str {
        match t {
            Self::TYPE_NONE => "none",
            Self::TYPE_LEGACY => "v1",
            Self::TYPE_MSGR2 => "v2",
            Self::TYPE_ANY => "any",
            Self::TYPE_CIDR => "cidr",
            _ => "???",
        }
    }

    fn fmt_sockaddr(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.family() {
            AF_INET => write!(f, "{}:{}", self.ipv4(), self.port()),
            AF_INET6 => write!(f, "[{}]:{}", self.ipv6(), self.port()),
            fam => write!(f, "(unrecognized address family {fam})"),
        }
    }
}

fn sockaddr_len_for(family: u16) -> usize {
    match family {
        AF_INET => 16,
        _ => SOCKADDR_LEN, // AF_INET6 and anything else: the size of the union
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

impl Decode for EntityAddr {
    fn decode(d: &mut Decoder) -> Result<Self> {
        match d.u8()? {
            0 => Self::decode_legacy_after_marker(d),
            1 => Self::decode_new_after_marker(d),
            m => Err(DecodeError::invalid("entity_addr_t", format!("marker {m}"))),
        }
    }
}

/// Legacy form for peers without MSG_ADDR2, else the versioned form; `any` is sent as `v1` to pre-Nautilus peers.
impl Encode for EntityAddr {
    fn encode(&self, e: &mut Encoder) {
        if e.features() & MSG_ADDR2 == 0 {
            return self.encode_legacy(e);
        }
        e.u8(1);
        e.versioned(1, 1, |e| {
            let t = if self.addr_type == Self::TYPE_ANY && !has(e.features(), MASK_SERVER_NAUTILUS) {
                Self::TYPE_LEGACY
            } else {
                self.addr_type
            };
            e.u32(t);
            e.u32(self.nonce);
            let elen = self.sockaddr_len();
            e.length(elen);
            e.raw(&self.sa[..elen]);
        });
    }
}

/// Ceph's text form: `v2:10.0.0.1:6800/1234`, `v1:[::1]:6789/0`, `any:` prints no prefix, a NONE address is `-`.
impl fmt::Display for EntityAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.addr_type == Self::TYPE_NONE {
            return f.write_str("-");
        }
        if self.addr_type != Self::TYPE_ANY {
            write!(f, "{}:", Self::type_name(self.addr_type))?;
        }
        self.fmt_sockaddr(f)?;
        write!(f, "/{}", self.nonce)
    }
}

/// Parses the whole string (see [`EntityAddr::parse_prefix`]); an unprefixed address is msgr2 (Ceph's default).
impl FromStr for EntityAddr {
    type Err = ParseAddrError;
    fn from_str(s: &str) -> Result<Self, ParseAddrError> {
        match EntityAddr::parse_prefix(s, EntityAddr::TYPE_MSGR2) {
            Some((a, "")) => Ok(a),
            _ => Err(ParseAddrError(s.to_string())),
        }
    }
}

/// A string that is not a Ceph address.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("not a Ceph address: {0:?}")]
pub struct ParseAddrError(pub String);

/// `entity_addrvec_t`: the addresses a daemon listens on, e.g. `[v2:10.0.0.1:6800/12,v1:10.0.0.1:6801/12]`.
/// Ordered lexicographically by the addresses' memcmp order, as Ceph's `operator<` on the vector is.
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct EntityAddrvec(pub Vec<EntityAddr>);

impl EntityAddrvec {
    pub fn new(addrs: Vec<EntityAddr>) -> Self {
        EntityAddrvec(addrs)
    }
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
    /// The first v1 address, or a blank one (what pre-MSG_ADDR2 peers receive).
    pub fn legacy_addr(&self) -> EntityAddr {
        self.0.iter().find(|a| a.is_legacy()).copied().unwrap_or_default()
    }
    pub fn msgr2_addr(&self) -> EntityAddr {
        self.0.iter().find(|a| a.is_msgr2()).copied().unwrap_or_default()
    }
    pub fn front(&self) -> EntityAddr {
        self.0.first().copied().unwrap_or_default()
    }
    pub fn legacy_or_front_addr(&self) -> EntityAddr {
        self.0
            .iter()
            .find(|a| a.is_legacy())
            .or(self.0.first())
            .copied()
            .unwrap_or_default()
    }
}

/// Markers: 0 = one legacy address, 1 = one versioned address, 2 = a vector of versioned addresses.
impl Decode for EntityAddrvec {
    fn decode(d: &mut Decoder) -> Result<Self> {
        match d.u8()? {
            0 => Ok(EntityAddrvec(vec![EntityAddr::decode_legacy_after_marker(d)?])),
            1 => Ok(EntityAddrvec(vec![EntityAddr::decode_new_after_marker(d)?])),
            2 => Ok(EntityAddrvec(Vec::decode(d)?)),
            m => Err(DecodeError::invalid("entity_addrvec_t", format!("marker {m}"))),
        }
    }
}

/// With MSG_ADDR2: `u8 2` + the vector; without it, only the legacy address in legacy form.
impl Encode for EntityAddrvec {
    fn encode(&self, e: &mut Encoder) {
        if e.features() & MSG_ADDR2 == 0 {
            return self.legacy_addr().encode_legacy(e);
        }
        e.u8(2);
        self.0.encode(e);
    }
}

/// Empty prints nothing, one address prints bare, several print as `[a,b]` (Ceph's `operator<<`).
impl fmt::Display for EntityAddrvec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0.as_slice() {
            [] => Ok(()),
            [a] => write!(f, "{a}"),
            v => {
                f.write_str("[")?;
                for (i, a) in v.iter().enumerate() {
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

/// Parses `[addr,addr,…]` or a single address (a bracketed IPv6 address such as `[::1]:6789` is one address).
impl FromStr for EntityAddrvec {
    type Err = ParseAddrError;
    fn from_str(s: &str) -> Result<Self, ParseAddrError> {
        let bad = || ParseAddrError(s.to_string());
        let single_v6 =
            EntityAddr::parse_prefix(s, EntityAddr::TYPE_MSGR2).is_some_and(|(a, _)| a.family() == AF_INET6);
        let Some(mut rest) = s.strip_prefix('[').filter(|_| !single_v6) else {
            return s.parse::<EntityAddr>().map(|a| EntityAddrvec(vec![a]));
        };
        let mut v = Vec::new();
        loop {
            let (a, r) = EntityAddr::parse_prefix(rest, EntityAddr::TYPE_MSGR2).ok_or_else(bad)?;
            v.push(a);
            match r.strip_prefix(',') {
                Some(r) => rest = r,
                None => {
                    return match r {
                        "]" => Ok(EntityAddrvec(v)),
                        _ => Err(bad()),
                    };
                }
            }
        }
    }
}

/// `entity_inst_t`: a name and an address (the address encoded per features).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct EntityInst {
    pub name: EntityNameT,
    pub addr: EntityAddr,
}

impl Decode for EntityInst {
    fn decode(d: &mut Decoder) -> Result<Self> {
        Ok(EntityInst {
            name: d.decode()?,
            addr: d.decode()?,
        })
    }
}
impl Encode for EntityInst {
    fn encode(&self, e: &mut Encoder) {
        self.name.encode(e);
        self.addr.encode(e);
    }
}
impl fmt::Display for EntityInst {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.name, self.addr)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::features::CEPH_FEATURES_ALL;
    use bytes::Bytes;

    fn v2(s: &str) -> EntityAddr {
        s.parse().unwrap()
    }

    #[test]
    fn addr_text_forms() {
        let a = v2("v2:127.0.0.1:6800/1234");
        assert_eq!(a.addr_type, EntityAddr::TYPE_MSGR2);
        assert_eq!(a.port(), 6800);
        assert_eq!(a.nonce, 1234);
        assert_eq!(a.to_string(), "v2:127.0.0.1:6800/1234");
        assert_eq!(v2("v1:[::1]:6789/0").to_string(), "v1:[::1]:6789/0");
        assert_eq!(v2("any:10.1.2.3:0/7").to_string(), "10.1.2.3:0/7");
        assert_eq!(v2("10.1.2.3:5").to_string(), "v2:10.1.2.3:5/0");
        assert_eq!(EntityAddr::default().to_string(), "-");
        assert_eq!(v2("-"), EntityAddr::default());
        for bad in [
            "",
            "v2:",
            "v2:1.2.3",
            "v2:1.2.3.4:70000/1",
            "v2:1.2.3.4/x",
            "v2:[::1",
            "v2:1.2.3.4:1/2 ",
        ] {
            assert!(bad.parse::<EntityAddr>().is_err(), "{bad:?}");
        }
    }

    #[test]
    fn addrvec_text_forms() {
        let s = "[v2:127.0.0.1:6800/1234,v1:127.0.0.1:6801/1234]";
        let v: EntityAddrvec = s.parse().unwrap();
        assert_eq!(v.0.len(), 2);
        assert_eq!(v.to_string(), s);
        assert_eq!(v.legacy_addr().port(), 6801);
        let one: EntityAddrvec = "[::1]:6789/3".parse().unwrap();
        assert_eq!(one.0.len(), 1);
        assert_eq!(one.to_string(), "v2:[::1]:6789/3");
        assert!("[v2:1.2.3.4:1/1,".parse::<EntityAddrvec>().is_err());
        assert!("[v2:1.2.3.4:1/1".parse::<EntityAddrvec>().is_err());
        assert_eq!(EntityAddrvec::default().to_string(), "");
    }

    #[test]
    fn addr_new_encoding_bytes() {
        let a = v2("v2:172.21.64.1:6800/12");
        let b = a.to_bytes(CEPH_FEATURES_ALL);
        let mut want = vec![1u8, 1, 1, 28, 0, 0, 0, 2, 0, 0, 0, 12, 0, 0, 0, 16, 0, 0, 0];
        want.extend_from_slice(&[2, 0, 0x1a, 0x90, 172, 21, 64, 1, 0, 0, 0, 0, 0, 0, 0, 0]);
        assert_eq!(&b[..], &want[..]);
        assert_eq!(EntityAddr::decode_all(b).unwrap(), a);
    }

    #[test]
    fn addr_legacy_encoding_round_trips_as_v1() {
        let a = v2("v2:10.0.0.1:6789/5");
        let b = a.to_bytes(0);
        assert_eq!(b.len(), 136);
        assert_eq!(
            &b[8..12],
            &[0, 2, 0x1a, 0x85],
            "family is big-endian in the legacy form"
        );
        let back = EntityAddr::decode_all(b).unwrap();
        assert_eq!(back.addr_type, EntityAddr::TYPE_LEGACY);
        assert_eq!(back.socket_addr(), a.socket_addr());
        assert_eq!(back.nonce, 5);
    }

    #[test]
    fn legacy_blank_addr_is_none() {
        let mut e = Encoder::new(0);
        EntityAddr::default().encode(&mut e);
        assert_eq!(e.len(), 136);
        let a = EntityAddr::decode_all(e.into_bytes()).unwrap();
        assert_eq!(a.addr_type, EntityAddr::TYPE_NONE);
        assert_eq!(a.to_string(), "-");
    }

    #[test]
    fn any_becomes_legacy_for_pre_nautilus_peers() {
        let a = v2("any:10.0.0.1:0/1");
        let pre = a.to_bytes(MSG_ADDR2);
        assert_eq!(
            EntityAddr::decode_all(pre).unwrap().addr_type,
            EntityAddr::TYPE_LEGACY
        );
        let now = a.to_bytes(CEPH_FEATURES_ALL);
        assert_eq!(
            EntityAddr::decode_all(now).unwrap().addr_type,
            EntityAddr::TYPE_ANY
        );
    }

    #[test]
    fn addrvec_features() {
        let v: EntityAddrvec = "[v2:1.2.3.4:3300/0,v1:1.2.3.4:6789/0]".parse().unwrap();
        let legacy = v.to_bytes(0);
        let back = EntityAddrvec::decode_all(legacy).unwrap();
        assert_eq!(back.0.len(), 1);
        assert_eq!(back.0[0].port(), 6789);
        let new = v.to_bytes(CEPH_FEATURES_ALL);
        assert_eq!(new[0], 2);
        assert_eq!(EntityAddrvec::decode_all(new).unwrap(), v);
        assert!(EntityAddrvec::decode_all(Bytes::from_static(&[3])).is_err());
    }

    #[test]
    fn hostile_elen_is_refused() {
        // marker 1, struct(1,1,len), type, nonce, elen 40 > 28
        let mut e = Encoder::default();
        e.u8(1);
        e.versioned(1, 1, |e| {
            e.u32(2);
            e.u32(0);
            e.u32(40);
            e.raw(&[10, 0]);
            e.raw(&[0; 38]);
        });
        assert!(matches!(
            EntityAddr::decode_all(e.into_bytes()),
            Err(DecodeError::Invalid { .. })
        ));
        let mut e = Encoder::default();
        e.u8(1);
        e.versioned(1, 1, |e| {
            e.u32(2);
            e.u32(0);
            e.u32(1);
            e.u8(2);
        });
        assert!(EntityAddr::decode_all(e.into_bytes()).is_err());
    }

    #[test]
    fn addr_order_is_memcmp() {
        // type 256 vs type 1: numerically larger, but its first LE byte is 0, so memcmp puts it first.
        let a = EntityAddr::from_raw(256, 0, [0; 28]);
        let b = EntityAddr::from_raw(1, 0, [0; 28]);
        assert!(a < b);
        let p1 = v2("v1:10.0.0.1:1/0");
        let p2 = v2("v1:10.0.0.1:256/0");
        // ports are big-endian in memory, so they compare numerically
        assert!(p1 < p2);
    }

    #[test]
    fn names() {
        assert_eq!(EntityNameT::osd(3).to_string(), "osd.3");
        assert_eq!(EntityNameT::client(-1).to_string(), "client.?");
        assert_eq!(
            "client.4123".parse::<EntityNameT>().unwrap(),
            EntityNameT::client(4123)
        );
        assert_eq!(&EntityNameT::osd(3).to_bytes(0)[..], &[4, 3, 0, 0, 0, 0, 0, 0, 0]);
        let n: EntityName = "client.admin".parse().unwrap();
        assert_eq!(n, EntityName::new(ENTITY_TYPE_CLIENT, "admin"));
        assert_eq!(n.to_string(), "client.admin");
        assert_eq!(&n.to_bytes(0)[..], b"\x08\0\0\0\x05\0\0\0admin");
    }
}
