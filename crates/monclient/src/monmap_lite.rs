// SPDX-License-Identifier: LGPL-3.0-or-later
//! The part of a MonMap a MonClient needs: fsid, epoch and each monitor's name and addresses, in rank order.
//!
//! Layout (`src/mon/MonMap.cc`, v9/6 in Pacific, checked against a captured MMonMap): ENCODE_START header, raw
//! fsid, u32 epoch, [v<7: legacy `map<string, entity_addr_t>`], utime last_changed, utime created,
//! mon_feature_t persistent, mon_feature_t optional, `map<string, mon_info_t>`, `vector<string>` ranks, ...
//! mon_info_t is ENCODE_START(5,1){ name, entity_addrvec_t public_addrs, u16 priority, u16 weight, crush_loc }.

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use bytes::Bytes;
use denc::{DecodeError, Decoder};

/// `entity_addr_t` type values.
pub const ADDR_TYPE_NONE: u32 = 0;
pub const ADDR_TYPE_LEGACY: u32 = 1;
pub const ADDR_TYPE_MSGR2: u32 = 2;
pub const ADDR_TYPE_ANY: u32 = 3;

/// One `entity_addr_t`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EntityAddr {
    pub kind: u32,
    pub nonce: u32,
    /// None for a blank address (elen 0 / family 0).
    pub addr: Option<SocketAddr>,
}

/// One monitor from the map.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MonInfo {
    pub name: String,
    pub addrs: Vec<EntityAddr>,
}

impl MonInfo {
    /// The msgr2 address to connect to, if the monitor has one.
    pub fn msgr2_addr(&self) -> Option<SocketAddr> {
        self.addrs
            .iter()
            .find(|a| a.kind == ADDR_TYPE_MSGR2 || a.kind == ADDR_TYPE_ANY)
            .and_then(|a| a.addr)
    }
}

/// The decoded essentials of a MonMap.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MonMapLite {
    pub fsid: [u8; 16],
    pub epoch: u32,
    /// Monitors in rank order.
    pub mons: Vec<MonInfo>,
}

fn sockaddr(family: u16, rest: &[u8]) -> Option<SocketAddr> {
    // Port is big-endian in both families; the family field itself was already decoded by the caller.
    match family {
        2 if rest.len() >= 6 => {
            let port = u16::from_be_bytes([rest[0], rest[1]]);
            let ip = Ipv4Addr::new(rest[2], rest[3], rest[4], rest[5]);
            Some(SocketAddr::new(IpAddr::V4(ip), port))
        }
        10 if rest.len() >= 22 => {
            let port = u16::from_be_bytes([rest[0], rest[1]]);
            let mut ip = [0u8; 16];
            ip.copy_from_slice(&rest[6..22]);
            Some(SocketAddr::new(IpAddr::V6(Ipv6Addr::from(ip)), port))
        }
        _ => None,
    }
}

/// Decode one `entity_addr_t` whose marker byte (0 = legacy, 1 = new) has not been consumed.
pub fn decode_entity_addr(d: &mut Decoder) -> Result<EntityAddr, DecodeError> {
    let marker = d.u8()?;
    match marker {
        0 => {
            // Legacy: the rest of le32 type (zero), nonce, 128-byte sockaddr_storage with a big-endian family.
            d.skip(3)?;
            let nonce = d.u32()?;
            let ss = d.take_slice(128)?;
            let family = u16::from_be_bytes([ss[0], ss[1]]);
            Ok(EntityAddr {
                kind: ADDR_TYPE_LEGACY,
                nonce,
                addr: sockaddr(family, &ss[2..]),
            })
        }
        1 => {
            let (_h, mut b) = d.start_struct("entity_addr_t", 1)?;
            let kind = b.u32()?;
            let nonce = b.u32()?;
            let elen = b.length("entity_addr_t sockaddr", 1)?;
            let sa = b.take_slice(elen)?;
            let addr = if sa.len() >= 2 {
                sockaddr(u16::from_le_bytes([sa[0], sa[1]]), &sa[2..])
            } else {
                None
            };
            Ok(EntityAddr { kind, nonce, addr })
        }
        m => Err(DecodeError::invalid(
            "entity_addr_t",
            format!("unknown marker {m}"),
        )),
    }
}

/// Decode an `entity_addrvec_t` (marker 2 = vector; 0/1 = a single address).
pub fn decode_addrvec(d: &mut Decoder) -> Result<Vec<EntityAddr>, DecodeError> {
    let marker = *d.peek_rest().first().ok_or(DecodeError::Truncated {
        offset: d.offset(),
        needed: 1,
        remaining: 0,
    })?;
    if marker == 2 {
        d.skip(1)?;
        // An entity_addr_t takes at least 7 bytes (marker, struct header, type...).
        let n = d.length("entity_addrvec_t", 7)?;
        let mut v = Vec::with_capacity(n);
        for _ in 0..n {
            v.push(decode_entity_addr(d)?);
        }
        Ok(v)
    } else {
        Ok(vec![decode_entity_addr(d)?])
    }
}

impl MonMapLite {
    /// Decode an encoded MonMap (the payload of MMonMap).
    pub fn decode(bytes: Bytes) -> Result<Self, DecodeError> {
        let mut outer = Decoder::new(bytes);
        let (h, mut d) = outer.start_struct("MonMap", 9)?;
        if h.version < 7 {
            return Err(DecodeError::TooOld {
                type_name: "MonMap",
                version: h.version,
                oldest: 7,
            });
        }
        let fsid = d.take_array()?;
        let epoch = d.u32()?;
        d.skip(16)?; // last_changed, created
        for _ in 0..2 {
            d.start_struct("mon_feature_t", 1)?; // persistent and optional features
        }
        let n = d.length("mon_info map", 5)?;
        let mut info = BTreeMap::new();
        for _ in 0..n {
            let key = d.string()?;
            let (_h, mut m) = d.start_struct("mon_info_t", 5)?;
            let name = m.string()?;
            let addrs = decode_addrvec(&mut m)?;
            info.insert(key, MonInfo { name, addrs });
        }
        let ranks: Vec<String> = d.decode()?;
        let mut mons = Vec::with_capacity(ranks.len());
        for r in &ranks {
            if let Some(m) = info.remove(r) {
                mons.push(m);
            }
        }
        // Monitors not in the rank list (should not happen) still get tried, after the ranked ones.
        mons.extend(info.into_values());
        Ok(MonMapLite { fsid, epoch, mons })
    }

    /// Only the epoch (for subscriptions), without decoding the rest.
    pub fn peek_epoch(bytes: &Bytes) -> Result<u32, DecodeError> {
        let mut outer = Decoder::new(bytes.clone());
        let (_h, mut d) = outer.start_struct("MonMap", u8::MAX)?;
        d.skip(16)?;
        d.u32()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The monmap of the captured crc-mode cluster (one mon "a" at v2:127.0.0.1:3700), from its MMonMap.
    const CAPTURED: &str = "0906a0000000d298bafcf5464b028ab9022c21a1a86c01000000f8400d6b20360c1ef8400d6b20360c1e010108000000ff000000000000000101080000000000000000000000010000000100000061050135000000010000006102010000000101011c00000002000000000000001000000002000e747f0000010000000000000000000000000000000001000000010000006110000000000100000000000000000000000000";

    fn hex(s: &str) -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    #[test]
    fn captured_monmap() {
        let b = Bytes::from(hex(CAPTURED));
        let m = MonMapLite::decode(b.clone()).unwrap();
        assert_eq!(m.epoch, 1);
        assert_eq!(MonMapLite::peek_epoch(&b).unwrap(), 1);
        assert_eq!(m.mons.len(), 1);
        assert_eq!(m.mons[0].name, "a");
        assert_eq!(m.mons[0].msgr2_addr(), Some("127.0.0.1:3700".parse().unwrap()));
        assert_eq!(m.fsid[0], 0xd2);
    }

    proptest::proptest! {
        /// Random bytes and random corruptions of a real monmap never panic the decoder.
        #[test]
        fn hostile_monmaps_never_panic(raw in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..200),
                                       flips in proptest::collection::vec((0usize..170, proptest::prelude::any::<u8>()), 1..8)) {
            let _ = MonMapLite::decode(Bytes::from(raw.clone()));
            let _ = MonMapLite::peek_epoch(&Bytes::from(raw));
            let mut b = hex(CAPTURED);
            for (at, v) in flips {
                let n = b.len();
                b[at % n] = v;
            }
            let _ = MonMapLite::decode(Bytes::from(b));
        }
    }

    #[test]
    fn truncations_fail_cleanly() {
        let b = hex(CAPTURED);
        for cut in 0..b.len() {
            // Cuts inside the trailing fields we do not read are fine; nothing may panic.
            let _ = MonMapLite::decode(Bytes::from(b[..cut].to_vec()));
        }
        assert!(MonMapLite::decode(Bytes::from(b[..60].to_vec())).is_err());
    }
}
