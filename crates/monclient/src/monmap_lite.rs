// SPDX-License-Identifier: LGPL-3.0-or-later
//! The part of a MonMap a MonClient needs: fsid, epoch and each monitor's name and addresses, in rank order.
//! Decoded by the `monmap` crate (the whole map, every version Ceph still reads), then reduced to that.

use std::net::SocketAddr;

use bytes::Bytes;
use denc::{Decode, DecodeError, Decoder, EntityAddr, EntityAddrvec};

/// One monitor from the map.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MonInfo {
    pub name: String,
    pub addrs: EntityAddrvec,
}

impl MonInfo {
    /// The msgr2 address to connect to, if the monitor has one.
    pub fn msgr2_addr(&self) -> Option<SocketAddr> {
        self.addrs
            .0
            .iter()
            .find(|a| a.is_msgr2() || a.addr_type == EntityAddr::TYPE_ANY)
            .and_then(EntityAddr::socket_addr)
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

impl MonMapLite {
    /// Decode an encoded MonMap (the payload of MMonMap).
    pub fn decode(bytes: Bytes) -> Result<Self, DecodeError> {
        let mut map = monmap::MonMap::decode(&mut Decoder::new(bytes))?;
        let mut mons = Vec::with_capacity(map.mon_info.len());
        for r in &map.ranks {
            if let Some(m) = map.mon_info.remove(r) {
                mons.push(MonInfo {
                    name: m.name,
                    addrs: m.public_addrs,
                });
            }
        }
        // Monitors not in the rank list (should not happen) still get tried, after the ranked ones.
        mons.extend(map.mon_info.into_values().map(|m| MonInfo {
            name: m.name,
            addrs: m.public_addrs,
        }));
        Ok(MonMapLite {
            fsid: map.fsid.0,
            epoch: map.epoch,
            mons,
        })
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
