// SPDX-License-Identifier: LGPL-3.0-or-later
//! [`EpochOnlyMap`]: an [`OsdMapLike`] that keeps only the epoch and the newest full map's bytes, for clients
//! that follow the OSDMap without interpreting it (and for tests of the session logic against real monitors).

use bytes::Bytes;
use denc::{DecodeError, Decoder};

use crate::core::OsdMapLike;

/// The epoch of an encoded full OSDMap or Incremental: both start with the 8/7 wrapper, then the client block
/// whose first fields are the fsid and the epoch.
pub fn peek_osdmap_epoch(bytes: &Bytes) -> Result<u32, DecodeError> {
    let mut d = Decoder::new(bytes.clone());
    let (_w, mut body) = d.start_struct("OSDMap wrapper", u8::MAX)?;
    let (_c, mut client) = body.start_struct("OSDMap client data", u8::MAX)?;
    client.skip(16)?;
    client.u32()
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EpochOnlyMap {
    pub epoch: u32,
}

impl OsdMapLike for EpochOnlyMap {
    type Error = DecodeError;
    fn decode_full(bytes: &Bytes) -> Result<Self, DecodeError> {
        Ok(EpochOnlyMap {
            epoch: peek_osdmap_epoch(bytes)?,
        })
    }
    fn epoch(&self) -> u32 {
        self.epoch
    }
    fn apply_incremental(&mut self, inc: &Bytes) -> Result<(), DecodeError> {
        let e = peek_osdmap_epoch(inc)?;
        if e != self.epoch + 1 {
            return Err(DecodeError::invalid(
                "OSDMap::Incremental",
                format!("epoch {e} after {}", self.epoch),
            ));
        }
        self.epoch = e;
        Ok(())
    }
    fn snapshot(&self) -> Option<Self> {
        Some(self.clone())
    }
}
