// SPDX-License-Identifier: LGPL-3.0-or-later
//! The real OSDMap (crate `osdmap`) as the map a [`crate::MonClient`] keeps current.

use bytes::Bytes;
use denc::Decode;
use osdmap::{CrcCheck, Incremental, OsdMap};

use crate::core::OsdMapLike;

/// Why a map from the monitor was not taken.
#[derive(Debug, thiserror::Error)]
pub enum OsdMapUpdateError {
    #[error("undecodable map: {0}")]
    Decode(#[from] denc::DecodeError),
    #[error("incremental does not apply: {0}")]
    Apply(#[from] osdmap::ApplyError),
    /// Our re-encoding of the result differs from the monitor's: our copy cannot be trusted byte for byte, so
    /// the client fetches the full map instead (as an OSD does).
    #[error("full_crc mismatch after applying epoch {epoch}: expected {expected:#010x}, got {actual:#010x}")]
    CrcMismatch { epoch: u32, expected: u32, actual: u32 },
}

impl OsdMapLike for OsdMap {
    type Error = OsdMapUpdateError;

    fn decode_full(bytes: &Bytes) -> Result<Self, OsdMapUpdateError> {
        Ok(OsdMap::decode_all(bytes.clone())?)
    }

    fn epoch(&self) -> u32 {
        self.epoch
    }

    fn apply_incremental(&mut self, inc: &Bytes) -> Result<(), OsdMapUpdateError> {
        let inc = Incremental::decode_all(inc.clone())?;
        match OsdMap::apply_incremental(self, &inc)? {
            CrcCheck::Match | CrcCheck::NotChecked => Ok(()),
            CrcCheck::Mismatch { expected, actual } => Err(OsdMapUpdateError::CrcMismatch {
                epoch: inc.epoch,
                expected,
                actual,
            }),
        }
    }

    fn snapshot(&self) -> Option<Self> {
        Some(self.clone())
    }
}
