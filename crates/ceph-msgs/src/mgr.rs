// SPDX-License-Identifier: LGPL-3.0-or-later
//! `MMgrMap` (0x704): the MgrMap, kept raw; only the epoch is read (subscriptions resume from it).

use bytes::Bytes;
use denc::{DecodeError, Decoder, Encoder};

use crate::{CephMessage, msg_type, prio};

/// `MMgrMap`: the encoded MgrMap and its epoch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MMgrMap {
    pub epoch: u32,
    /// The whole encoded MgrMap (ENCODE_START envelope included), exactly as received.
    pub map: Bytes,
}

impl CephMessage for MMgrMap {
    const TYPE: u16 = msg_type::MGR_MAP;
    const HEAD_VERSION: u16 = 1;
    const COMPAT_VERSION: u16 = 1;
    const NAME: &'static str = "mgrmap";
    const PRIORITY: u16 = prio::HIGH;

    fn encode_front(&self, e: &mut Encoder) {
        e.raw(&self.map);
    }

    fn decode_front(_v: u16, d: &mut Decoder, _data: &Bytes) -> Result<Self, DecodeError> {
        let all = d.peek_rest().len();
        let mut whole = d.clone();
        let map = whole.take_bytes(all)?;
        // MgrMap is a versioned struct whose first field is the epoch; newer versions only append.
        let (_h, mut body) = d.start_struct("MgrMap", u8::MAX)?;
        let epoch = body.u32()?;
        *d = whole;
        Ok(MMgrMap { epoch, map })
    }
}
