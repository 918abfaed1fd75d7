// SPDX-License-Identifier: LGPL-3.0-or-later
//! Redo log records. A record carries the metadata deltas (tree puts and deletes) of one or more transactions; data
//! is never in the log (it goes to fresh extents whose checksums are in the extent-map deltas).

use crate::error::{Result, StoreError};
use crate::format::{LOG_MAGIC, Reader, crc};

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

/// Bytes of a record whose deltas encode to `payload` bytes, padded to `align`.
pub fn record_len(payload: usize, align: usize) -> usize {
    (HEADER_LEN + payload).div_ceil(align) * align
}

/// Encode a record into `out` (exactly `record_len` bytes; its previous contents do not matter: the padding is
/// zeroed) from the deltas of `parts` in order, without building a `LogRecord` (the engine encodes each group
/// commit straight into a pooled aligned buffer).
pub fn encode_into<'a, P>(out: &mut [u8], epoch: u64, lsn: u64, durable_upto: u64, parts: P)
where
    P: IntoIterator<Item = &'a Delta>,
    P::IntoIter: Clone,
{
    let it = parts.into_iter();
    let (payload, n) = it.clone().fold((0, 0), |(p, n), d| (p + d.encoded_len(), n + 1));
    let total = out.len();
    assert!(
        total >= HEADER_LEN + payload && total <= u32::MAX as usize,
        "record buffer size"
    );
    let mut at = 0;
    let mut put = |b: &[u8]| {
        out[at..at + b.len()].copy_from_slice(b);
        at += b.len();
    };
    put(&LOG_MAGIC.to_le_bytes());
    put(&[0; 4]);
    put(&epoch.to_le_bytes());
    put(&lsn.to_le_bytes());
    put(&durable_upto.to_le_bytes());
    put(&(total as u32).to_le_bytes());
    put(&(payload as u32).to_le_bytes());
    put(&(n as u32).to_le_bytes());
    put(&[0; 4]);
    for d in it {
        match d {
            Delta::Put(k, v) => {
                put(&[1]);
                put(&(k.len() as u16).to_le_bytes());
                put(&(v.len() as u32).to_le_bytes());
                put(k);
                put(v);
            }
            Delta::Del(k) => {
                put(&[2]);
                put(&(k.len() as u16).to_le_bytes());
                put(k);
            }
        }
    }
    debug_assert_eq!(at, HEADER_LEN + payload);
    out[at..].fill(0);
    let c = crc(&out[8..]);
    out[4..8].copy_from_slice(&c.to_le_bytes());
}

impl LogRecord {
    pub fn encode(&self, align: usize) -> Vec<u8> {
        let payload: usize = self.deltas.iter().map(|d| d.encoded_len()).sum();
        let mut b = vec![0u8; record_len(payload, align)];
        encode_into(&mut b, self.epoch, self.lsn, self.durable_upto, &self.deltas);
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
        fn encode_into_a_dirty_buffer_equals_encode(
            kvs in proptest::collection::vec((proptest::collection::vec(any::<u8>(), 0..40),
                                              proptest::option::of(proptest::collection::vec(any::<u8>(), 0..100))), 0..20),
            split in any::<usize>(), junk in any::<u8>())
        {
            let deltas: Vec<Delta> = kvs.into_iter().map(|(k, v)| match v { Some(v) => Delta::Put(k, v), None => Delta::Del(k) }).collect();
            let rec = LogRecord { epoch: 5, lsn: 11, durable_upto: 10, deltas };
            let want = rec.encode(512);
            // A reused pool buffer holds old bytes; the deltas come from several transactions.
            let mut out = vec![junk; want.len()];
            let at = split % (rec.deltas.len() + 1);
            let (a, b) = rec.deltas.split_at(at);
            encode_into(&mut out, 5, 11, 10, a.iter().chain(b.iter()));
            prop_assert_eq!(out, want);
        }

        #[test]
        fn garbage_never_panics(b in proptest::collection::vec(any::<u8>(), 0..600)) {
            let _ = LogRecord::decode(&b);
            let _ = LogRecord::peek_header(&b, 1 << 20);
        }
    }
}
