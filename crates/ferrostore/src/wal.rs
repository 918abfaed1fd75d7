// SPDX-License-Identifier: LGPL-3.0-or-later
//! Redo log records. A record carries the metadata deltas (tree puts and deletes) of one or more transactions and,
//! since format version 3, the data of their small writes (journaled runs): after the metadata region, whole
//! blocks, each named by a journal entry (its physical block and crc). Replay writes them to their blocks again,
//! so the ordinary data write of a journaled run need not be durable before the acknowledgement. Larger writes'
//! data is never in the log (it goes to fresh extents whose checksums are in the extent-map deltas).

use crate::error::{Result, StoreError};
use crate::format::{BLOCK, LOG_MAGIC, Reader, SECTOR_SIZE, crc};

pub const HEADER_LEN: usize = 48;

/// Blocks of data a record carries at most (bounds what a hostile header can make replay allocate).
pub const MAX_JOURNAL_BLOCKS: usize = 1 << 16;

/// A run of whole data blocks carried in a record: replay writes them at `pblock` (crc per block).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JournalRun {
    pub pblock: u64,
    pub crcs: Vec<u32>,
}

impl JournalRun {
    pub fn encoded_len(&self) -> usize {
        13 + 4 * self.crcs.len()
    }
    /// Bytes of data it carries.
    pub fn data_len(&self) -> usize {
        self.crcs.len() * BLOCK
    }
}

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
    /// Journaled runs, in the order of their data in `data`.
    pub journal: Vec<JournalRun>,
    /// The journaled runs' blocks, back to back (empty without journal entries).
    pub data: Vec<u8>,
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

/// Encode a record's metadata region into `out` (exactly `record_len` bytes of the deltas and journal entries;
/// its previous contents do not matter: the padding is zeroed) from the deltas of `parts` in order, without
/// building a `LogRecord` (the engine encodes each group commit straight into a pooled aligned buffer).
/// `data_len` bytes of journaled blocks follow it on the device (the engine writes them from the transactions'
/// own buffers, gathered with the region): the header then says where the region ends, and its crc covers only
/// the region (the data is covered by the journal entries' block crcs).
pub fn encode_into<'a, P, J>(
    out: &mut [u8],
    epoch: u64,
    lsn: u64,
    durable_upto: u64,
    parts: P,
    journal: J,
    data_len: usize,
) where
    P: IntoIterator<Item = &'a Delta>,
    P::IntoIter: Clone,
    J: IntoIterator<Item = &'a JournalRun>,
    J::IntoIter: Clone,
{
    let it = parts.into_iter();
    let jt = journal.into_iter();
    let (payload, n) = it.clone().fold((0, 0), |(p, n), d| (p + d.encoded_len(), n + 1));
    let (payload, n) = jt
        .clone()
        .fold((payload, n), |(p, n), j| (p + j.encoded_len(), n + 1));
    let meta = out.len();
    let total = meta + data_len;
    assert!(
        meta >= HEADER_LEN + payload && total <= u32::MAX as usize,
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
    // 0: no data region (format version 2 records; the crc covers the whole record).
    put(&(if data_len > 0 { meta as u32 } else { 0 }).to_le_bytes());
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
    for j in jt {
        put(&[3]);
        put(&j.pblock.to_le_bytes());
        put(&(j.crcs.len() as u32).to_le_bytes());
        for c in &j.crcs {
            put(&c.to_le_bytes());
        }
    }
    debug_assert_eq!(at, HEADER_LEN + payload);
    out[at..].fill(0);
    let c = crc(&out[8..]);
    out[4..8].copy_from_slice(&c.to_le_bytes());
}

impl LogRecord {
    /// The record as written: metadata region padded to `align`, then `data` (a whole number of blocks).
    pub fn encode(&self, align: usize) -> Vec<u8> {
        let payload: usize = self.deltas.iter().map(|d| d.encoded_len()).sum::<usize>()
            + self.journal.iter().map(|j| j.encoded_len()).sum::<usize>();
        let meta = record_len(payload, align);
        let mut b = vec![0u8; meta];
        encode_into(
            &mut b,
            self.epoch,
            self.lsn,
            self.durable_upto,
            &self.deltas,
            &self.journal,
            self.data.len(),
        );
        b.extend_from_slice(&self.data);
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

    /// Decode and verify a whole record: the metadata region's crc and, when it carries data, every journaled
    /// block's crc (a record torn inside its data region is as invalid as one torn in its metadata).
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
        let meta_len = match r.u32()? as usize {
            0 => total,
            m => m,
        };
        if total != b.len()
            || meta_len > total
            || HEADER_LEN + payload > meta_len
            || (meta_len != total && !(meta_len as u64).is_multiple_of(SECTOR_SIZE))
        {
            return Err(StoreError::Corrupt("log record length".into()));
        }
        if stored != crc(&b[8..meta_len]) {
            return Err(StoreError::Corrupt("log record checksum".into()));
        }
        let mut deltas = Vec::with_capacity(n.min(payload / 3));
        let mut journal = Vec::new();
        let mut jblocks = 0usize;
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
                3 => {
                    let pblock = r.u64()?;
                    let nb = r.u32()? as usize;
                    jblocks = jblocks.saturating_add(nb);
                    if nb == 0 || jblocks > MAX_JOURNAL_BLOCKS {
                        return Err(StoreError::Corrupt("log journal entry size".into()));
                    }
                    let raw = r.take(4 * nb)?;
                    let crcs = raw
                        .chunks_exact(4)
                        .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                        .collect();
                    journal.push(JournalRun { pblock, crcs });
                }
                _ => return Err(StoreError::Corrupt("log delta kind".into())),
            }
        }
        if r.pos() > HEADER_LEN + payload {
            return Err(StoreError::Corrupt("log payload overrun".into()));
        }
        let data = &b[meta_len..];
        if data.len() != jblocks * BLOCK {
            return Err(StoreError::Corrupt("log record data length".into()));
        }
        for (blk, c) in data
            .chunks_exact(BLOCK)
            .zip(journal.iter().flat_map(|j| j.crcs.iter()))
        {
            if crc(blk) != *c {
                return Err(StoreError::Corrupt("log record data checksum".into()));
            }
        }
        Ok(LogRecord {
            epoch,
            lsn,
            durable_upto,
            deltas,
            journal,
            data: data.to_vec(),
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
            let rec = LogRecord { epoch: 3, lsn: 9, durable_upto: 7, deltas, journal: vec![], data: vec![] };
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
            let rec = LogRecord { epoch: 5, lsn: 11, durable_upto: 10, deltas, journal: vec![], data: vec![] };
            let want = rec.encode(512);
            // A reused pool buffer holds old bytes; the deltas come from several transactions.
            let mut out = vec![junk; want.len()];
            let at = split % (rec.deltas.len() + 1);
            let (a, b) = rec.deltas.split_at(at);
            encode_into(&mut out, 5, 11, 10, a.iter().chain(b.iter()), &[], 0);
            prop_assert_eq!(out, want);
        }

        #[test]
        fn journaled_data_round_trips_and_any_flip_is_detected(
            kvs in proptest::collection::vec((proptest::collection::vec(any::<u8>(), 1..40),
                                              proptest::collection::vec(any::<u8>(), 0..100)), 0..6),
            runs in proptest::collection::vec((any::<u64>(), 1usize..4, any::<u8>()), 1..4),
            align in prop_oneof![Just(512usize), Just(4096)],
            flip in any::<usize>(), bit in 0u8..8)
        {
            let deltas = kvs.into_iter().map(|(k, v)| Delta::Put(k, v)).collect();
            let mut journal = Vec::new();
            let mut data = Vec::new();
            for (pblock, n, fill) in runs {
                let mut crcs = Vec::new();
                for i in 0..n {
                    let blk: Vec<u8> = (0..BLOCK).map(|j| fill.wrapping_add((i * 7 + j) as u8)).collect();
                    crcs.push(crc(&blk));
                    data.extend_from_slice(&blk);
                }
                journal.push(JournalRun { pblock, crcs });
            }
            let rec = LogRecord { epoch: 2, lsn: 4, durable_upto: 3, deltas, journal, data };
            let b = rec.encode(align);
            prop_assert_eq!((b.len() - rec.data.len()) % align, 0);
            let h = LogRecord::peek_header(&b, 1 << 24).unwrap();
            prop_assert_eq!(h.total_len, b.len());
            prop_assert_eq!(&LogRecord::decode(&b).unwrap(), &rec);
            // A flip anywhere — header, metadata, padding or a data block — invalidates the record.
            let mut bad = b.clone();
            let i = flip % bad.len();
            bad[i] ^= 1 << bit;
            prop_assert!(LogRecord::decode(&bad).is_err());
            // So does a record cut short inside its data (a torn write).
            prop_assert!(LogRecord::decode(&b[..b.len() - BLOCK]).is_err());
        }

        #[test]
        fn garbage_never_panics(b in proptest::collection::vec(any::<u8>(), 0..600)) {
            let _ = LogRecord::decode(&b);
            let _ = LogRecord::peek_header(&b, 1 << 20);
        }
    }
}
