// SPDX-License-Identifier: LGPL-3.0-or-later
//! `entity_addr_t` and `entity_addrvec_t` as msgr2 frames carry them (always with MSG_ADDR2: frames assume
//! MSG_ADDR2 + SERVER_NAUTILUS). Decoding also accepts the legacy form, as Ceph does.
//!
//! `denc` has the general, feature-aware `EntityAddr`/`EntityAddrvec` (byte-exact sockaddr, Ceph's ordering);
//! these frame-level types convert to and from them losslessly for IP addresses.
//
// TODO: use denc's types directly in the frame payloads (changes this crate's public API: monclient uses
// `msgr2::EntityAddr::msgr2`).

use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};

use denc::{DecodeError, Decoder, Encoder};

pub const ADDR_TYPE_NONE: u32 = 0;
pub const ADDR_TYPE_LEGACY: u32 = 1;
pub const ADDR_TYPE_MSGR2: u32 = 2;
pub const ADDR_TYPE_ANY: u32 = 3;

const AF_INET: u16 = 2;
const AF_INET6: u16 = 10;

/// `entity_addr_t`: type, nonce and an optional socket address (blank when `addr` is None).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct EntityAddr {
    pub ty: u32,
    pub nonce: u32,
    pub addr: Option<SocketAddr>,
}

impl EntityAddr {
    pub fn msgr2(addr: SocketAddr, nonce: u32) -> Self {
        EntityAddr {
            ty: ADDR_TYPE_MSGR2,
            nonce,
            addr: Some(addr),
        }
    }

    pub fn blank() -> Self {
        EntityAddr::default()
    }

    /// New-style encoding: `u8 1`, ENCODE_START(1,1){ le32 type, le32 nonce, le32 elen, sockaddr }.
    pub fn encode_to(&self, e: &mut Encoder) {
        e.u8(1);
        e.versioned(1, 1, |e| {
            e.u32(self.ty);
            e.u32(self.nonce);
            match self.addr {
                // Ceph encodes a blank address with the size of the whole sockaddr union, all zeros.
                None => {
                    e.u32(28);
                    e.raw(&[0; 28]);
                }
                Some(SocketAddr::V4(a)) => {
                    e.u32(16);
                    e.u16(AF_INET);
                    e.raw(&a.port().to_be_bytes());
                    e.raw(&a.ip().octets());
                    e.raw(&[0; 8]);
                }
                Some(SocketAddr::V6(a)) => {
                    e.u32(28);
                    e.u16(AF_INET6);
                    e.raw(&a.port().to_be_bytes());
                    e.raw(&a.flowinfo().to_be_bytes());
                    e.raw(&a.ip().octets());
                    e.raw(&a.scope_id().to_le_bytes());
                }
            }
        });
    }

    pub fn decode_from(d: &mut Decoder) -> denc::Result<Self> {
        let marker = d.u8()?;
        match marker {
            0 => {
                // Legacy: 3 more bytes of the le32 "type" 0, le32 nonce, 128-byte sockaddr_storage (family BE).
                d.skip(3)?;
                let nonce = d.u32()?;
                let ss = d.take_slice(128)?;
                let family = u16::from_be_bytes([ss[0], ss[1]]);
                let addr = sockaddr(family, &ss[2..])?;
                Ok(EntityAddr {
                    ty: ADDR_TYPE_LEGACY,
                    nonce,
                    addr,
                })
            }
            1 => {
                let (_, mut b) = d.start_struct("entity_addr_t", 1)?;
                let ty = b.u32()?;
                let nonce = b.u32()?;
                let elen = b.u32()? as usize;
                let addr = if elen == 0 {
                    None
                } else {
                    let sa = b.take_slice(elen)?;
                    if sa.len() < 2 {
                        return Err(DecodeError::invalid(
                            "entity_addr_t",
                            "sockaddr shorter than its family",
                        ));
                    }
                    let family = u16::from_le_bytes([sa[0], sa[1]]);
                    sockaddr(family, &sa[2..])?
                };
                Ok(EntityAddr { ty, nonce, addr })
            }
            m => Err(DecodeError::invalid(
                "entity_addr_t",
                format!("unknown marker {m}"),
            )),
        }
    }
}

fn sockaddr(family: u16, rest: &[u8]) -> denc::Result<Option<SocketAddr>> {
    let short = || DecodeError::invalid("entity_addr_t", "sockaddr too short for its family");
    match family {
        0 => Ok(None),
        AF_INET => {
            let r = rest.get(..6).ok_or_else(short)?;
            let port = u16::from_be_bytes([r[0], r[1]]);
            let ip = Ipv4Addr::new(r[2], r[3], r[4], r[5]);
            Ok(Some(SocketAddr::V4(SocketAddrV4::new(ip, port))))
        }
        AF_INET6 => {
            let r = rest.get(..26).ok_or_else(short)?;
            let port = u16::from_be_bytes([r[0], r[1]]);
            let flow = u32::from_be_bytes([r[2], r[3], r[4], r[5]]);
            let mut ip = [0u8; 16];
            ip.copy_from_slice(&r[6..22]);
            let scope = u32::from_le_bytes([r[22], r[23], r[24], r[25]]);
            Ok(Some(SocketAddr::V6(SocketAddrV6::new(
                Ipv6Addr::from(ip),
                port,
                flow,
                scope,
            ))))
        }
        f => Err(DecodeError::invalid(
            "entity_addr_t",
            format!("unknown address family {f}"),
        )),
    }
}

impl std::fmt::Display for EntityAddr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let t = match self.ty {
            ADDR_TYPE_NONE => "none",
            ADDR_TYPE_LEGACY => "v1",
            ADDR_TYPE_MSGR2 => "v2",
            ADDR_TYPE_ANY => "any",
            _ => "?",
        };
        match self.addr {
            Some(a) => write!(f, "{t}:{a}/{}", self.nonce),
            None => write!(f, "{t}:-/{}", self.nonce),
        }
    }
}

/// `entity_addrvec_t`: with MSG_ADDR2, `u8 2` + vector of addresses.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct AddrVec(pub Vec<EntityAddr>);

impl AddrVec {
    pub fn one(a: EntityAddr) -> Self {
        AddrVec(vec![a])
    }

    pub fn encode_to(&self, e: &mut Encoder) {
        e.u8(2);
        e.length(self.0.len());
        for a in &self.0 {
            a.encode_to(e);
        }
    }

    pub fn decode_from(d: &mut Decoder) -> denc::Result<Self> {
        let marker = d.u8()?;
        match marker {
            // A single address in either encoding, marker byte included.
            0 | 1 => Ok(AddrVec(vec![decode_addr_after_marker(marker, d)?])),
            2 => {
                let n = d.length("entity_addrvec_t", 1)?;
                let mut v = Vec::with_capacity(n.min(16));
                for _ in 0..n {
                    v.push(EntityAddr::decode_from(d)?);
                }
                Ok(AddrVec(v))
            }
            m => Err(DecodeError::invalid(
                "entity_addrvec_t",
                format!("unknown marker {m}"),
            )),
        }
    }

    /// The msgr2 address, if any.
    pub fn msgr2(&self) -> Option<&EntityAddr> {
        self.0
            .iter()
            .find(|a| a.ty == ADDR_TYPE_MSGR2 || a.ty == ADDR_TYPE_ANY)
    }
}

fn decode_addr_after_marker(marker: u8, d: &mut Decoder) -> denc::Result<EntityAddr> {
    // Build a tiny decoder that sees the marker again followed by the rest; cheaper than cloning the input.
    let mut e = Encoder::default();
    e.u8(marker);
    let rest_needed = if marker == 0 { 3 + 4 + 128 } else { 0 };
    if marker == 0 {
        e.raw(d.take_slice(rest_needed)?);
        return EntityAddr::decode_from(&mut Decoder::new(e.into_bytes()));
    }
    // marker 1: header is u8 v, u8 compat, le32 len, body.
    let hdr = d.take_slice(6)?.to_vec();
    let len = u32::from_le_bytes([hdr[2], hdr[3], hdr[4], hdr[5]]) as usize;
    e.raw(&hdr);
    e.raw(d.take_slice(len)?);
    EntityAddr::decode_from(&mut Decoder::new(e.into_bytes()))
}

impl std::fmt::Display for AddrVec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "[")?;
        for (i, a) in self.0.iter().enumerate() {
            if i > 0 {
                write!(f, ",")?;
            }
            write!(f, "{a}")?;
        }
        write!(f, "]")
    }
}

impl From<&EntityAddr> for denc::EntityAddr {
    fn from(a: &EntityAddr) -> Self {
        match a.addr {
            Some(sa) => denc::EntityAddr::new(a.ty, sa, a.nonce),
            None => denc::EntityAddr::from_raw(a.ty, a.nonce, [0; 28]),
        }
    }
}

impl From<&denc::EntityAddr> for EntityAddr {
    fn from(a: &denc::EntityAddr) -> Self {
        EntityAddr {
            ty: a.addr_type,
            nonce: a.nonce,
            addr: a.socket_addr(),
        }
    }
}

impl From<&AddrVec> for denc::EntityAddrvec {
    fn from(v: &AddrVec) -> Self {
        denc::EntityAddrvec(v.0.iter().map(denc::EntityAddr::from).collect())
    }
}

impl From<&denc::EntityAddrvec> for AddrVec {
    fn from(v: &denc::EntityAddrvec) -> Self {
        AddrVec(v.0.iter().map(EntityAddr::from).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use denc::{Decode, Encode};

    #[test]
    fn same_bytes_as_denc_and_lossless_conversion() {
        let addrs = [
            EntityAddr::msgr2("10.1.2.3:6800".parse().unwrap(), 1234),
            EntityAddr::msgr2("[fe80::1%2]:3300".parse().unwrap(), 0),
            EntityAddr {
                ty: ADDR_TYPE_LEGACY,
                nonce: 7,
                addr: Some("127.0.0.1:6789".parse().unwrap()),
            },
            EntityAddr::blank(),
        ];
        for a in addrs {
            let mut e = Encoder::default();
            a.encode_to(&mut e);
            let ours = e.into_bytes();
            let theirs = denc::EntityAddr::from(&a).to_bytes(denc::CEPH_FEATURES_ALL);
            assert_eq!(ours, theirs, "{a}");
            let back = EntityAddr::from(&denc::EntityAddr::decode_all(theirs).unwrap());
            assert_eq!(back, a);
        }
        let v = AddrVec(addrs.to_vec());
        let mut e = Encoder::default();
        v.encode_to(&mut e);
        assert_eq!(
            e.into_bytes(),
            denc::EntityAddrvec::from(&v).to_bytes(denc::CEPH_FEATURES_ALL)
        );
        assert_eq!(AddrVec::from(&denc::EntityAddrvec::from(&v)), v);
    }
}
