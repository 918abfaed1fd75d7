// SPDX-License-Identifier: LGPL-3.0-or-later
//! Redo log records. A record carries the metadata deltas (tree puts and deletes) of one or more transactions; data
//! is never in the log (it goes to fresh extents whose checksums are in the extent-map deltas).

use crate::error::{Result, StoreError};
use crate::format::{LOG_MAGIC, Reader, Writer, crc};

pub const HEADER_LEN: usize = 48;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Delta {
    Put(Vec<u8>, Vec<u8>),
    Del(Vec<u8>),
}

impl Delta {
    pub fn encoded_len(&self) -> usize {
        match self {
            Delta::Put(k, v) => 7 + k.len() + v.len(),
            Delta::Del(k) => 3 + k.len(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogRecord {
    pub epoch: u64,
    pub lsn: u64,
    /// Every record with lsn <= durable_upto was durable when this one was written (replay skips verifying their
    /// data extents).
    pub durable_upto: u64,
    pub deltas: Vec<Delta>,
}

/// Header fields needed to know how much to read.
pub struct RecordHeader {
    pub epoch: u64,
    pub lsn: u64,
    pub total_len: usize,
}

impl LogRecord {
    pub fn encode(&self, align: usize) -> Vec<u8> {
        let payload: usize = self.deltas.iter().map(|d| d.encoded_len()).sum();
        let total = (HEADER_LEN + payload).div_ceil(align) * align;
        let mut w = Writer::with_capacity(total);
        w.u32(LOG_MAGIC)
            .u32(0)
            .u64(self.epoch)
            .u64(self.lsn)
            .u64(self.durable_upto);
        w.u32(total as u32)
            .u32(payload as u32)
            .u32(self.deltas.len() as u32)
            .u32(0);
        for d in &self.deltas {
            match d {
                Delta::Put(k, v) => {
                    w.u8(1).u16(k.len() as u16).u32(v.len() as u32).bytes(k).bytes(v);
                }
                Delta::Del(k) => {
                    w.u8(2).u16(k.len() as u16).bytes(k);
                }
            }
        }
        let mut b = w.buf;
        b.resize(total, 0);
        let c = crc(&b[8..]);
        b[4..8].copy_from_slice(&c.to_le_bytes());
        b
    }

    pub fn peek_header(b: &[u8], max_len: usize) -> Option<RecordHeader> {
        let mut r = Reader::new(b);
        if r.u32().ok()? != LOG_MAGIC {
            return None;
        }
        r.u32().ok()?;
        let epoch = r.u64().ok()?;
        let lsn = r.u64().ok()?;
        r.u64().ok()?;
        let total_len = r.u32().ok()? as usize;
        if !(HEADER_LEN..=max_len).contains(&total_len) {
            return None;
        }
        Some(RecordHeader {
            epoch,
            lsn,
            total_len,
        })
    }

    pub fn decode(b: &[u8]) -> Result<LogRecord> {
        let mut r = Reader::new(b);
        if r.u32()? != LOG_MAGIC {
            return Err(StoreError::Corrupt("log magic".into()));
        }
        let stored = r.u32()?;
        let epoch = r.u64()?;
        let lsn = r.u64()?;
        let durable_upto = r.u64()?;
        let total = r.u32()? as usize;
        let payload = r.u32()? as usize;
        let n = r.u32()? as usize;
        r.u32()?;
        if total != b.len() || HEADER_LEN + payload > total {
            return Err(StoreError::Corrupt("log record length".into()));
        }
        if stored != crc(&b[8..]) {
            return Err(StoreError::Corrupt("log record checksum".into()));
        }
        let mut deltas = Vec::with_capacity(n.min(payload / 3));
        for _ in 0..n {
            match r.u8()? {
                1 => {
                    let kl = r.u16()? as usize;
                    let vl = r.u32()? as usize;
                    let k = r.take(kl)?.to_vec();
                    deltas.push(Delta::Put(k, r.take(vl)?.to_vec()));
                }
                2 => {
                    let kl = r.u16()? as usize;
                    deltas.push(Delta::Del(r.take(kl)?.to_vec()));
                }
                _ => return Err(StoreError::Corrupt("log delta kind".into())),
            }
        }
        if r.pos() > HEADER_LEN + payload {
            return Err(StoreError::Corrupt("log payload overrun".into()));
        }
        Ok(LogRecord {
            epoch,
            lsn,
            durable_upto,
            deltas,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn round_trip_and_any_flip_detected(
            kvs in proptest::collection::vec((proptest::collection::vec(any::<u8>(), 0..40),
                                              proptest::option::of(proptest::collection::vec(any::<u8>(), 0..100))), 0..20),
            flip in any::<usize>(), bit in 0u8..8)
        {
            let deltas = kvs.into_iter().map(|(k, v)| match v { Some(v) => Delta::Put(k, v), None => Delta::Del(k) }).collect();
            let rec = LogRecord { epoch: 3, lsn: 9, durable_upto: 7, deltas };
            let b = rec.encode(512);
            prop_assert_eq!(b.len() % 512, 0);
            prop_assert!(LogRecord::peek_header(&b, 1 << 20).is_some());
            prop_assert_eq!(&LogRecord::decode(&b).unwrap(), &rec);
            let mut bad = b.clone();
            let i = flip % bad.len();
            bad[i] ^= 1 << bit;
            prop_assert!(LogRecord::decode(&bad).is_err());
        }

        #[test]
        fn garbage_never_panics(b in proptest::collection::vec(any::<u8>(), 0..600)) {
            let _ = LogRecord::decode(&b);
            let _ = LogRecord::peek_header(&b, 1 << 20);
        }
    }
}
