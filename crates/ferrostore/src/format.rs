// SPDX-License-Identifier: LGPL-3.0-or-later
//! On-disk constants, bounds-checked little-endian codecs and the two superblocks. Byte layouts are documented
//! in docs/on-disk-format.md; keep both in sync.

use crate::error::{Result, StoreError};

pub const BLOCK_SIZE: u64 = 4096;
pub const BLOCK: usize = BLOCK_SIZE as usize;
pub const SECTOR_SIZE: u64 = 512;
/// 2: attr / omap / omap-header values carry a one-byte form prefix (inline or spilled to data blocks).
/// 3: log records may carry the data of small writes after their metadata (journaled writes, docs/on-disk-format.md).
/// mkfs writes the newest; mount reads [`MIN_FORMAT_VERSION`] to [`FORMAT_VERSION`] and a shard keeps its version
/// (a version 2 shard never journals data, so an older build can still mount it).
pub const FORMAT_VERSION: u32 = 3;
/// Oldest format version mount accepts.
pub const MIN_FORMAT_VERSION: u32 = 2;
/// First format version whose log records may carry data.
pub const JOURNAL_FORMAT_VERSION: u32 = 3;
pub const DEVICE_MAGIC: &[u8; 8] = b"FERROSTO";
pub const SHARD_MAGIC: u32 = u32::from_le_bytes(*b"FSSB");
pub const NODE_MAGIC: u32 = u32::from_le_bytes(*b"FSTN");
pub const LOG_MAGIC: u32 = u32::from_le_bytes(*b"FSWL");
pub const MAX_SHARDS: u32 = 64;
/// Longest run of blocks described by one extent-map entry (bounds the entry size, see EXTENT_VALUE_MAX).
pub const MAX_EXTENT_BLOCKS: u64 = 16;

const _: () = assert!(BLOCK_SIZE.is_multiple_of(SECTOR_SIZE));
const _: () = assert!(MAX_EXTENT_BLOCKS <= u8::MAX as u64);

/// Mount refuses any other format version (EOPNOTSUPP) with a message that says what to do.
fn version_error(found: u32) -> StoreError {
    StoreError::Unsupported(match found {
        1 => {
            "on-disk format version 1 (written before large attr/omap values): this build reads versions 2 and 3 only; re-create the store with mkfs"
        }
        v if v > FORMAT_VERSION => {
            "on-disk format version newer than this build supports (3): upgrade ferrostore"
        }
        _ => "unknown on-disk format version (this build reads versions 2 and 3)",
    })
}

pub fn crc(data: &[u8]) -> u32 {
    crc32c::crc32c(data)
}

/// Append-only little-endian encoder.
#[derive(Default)]
pub struct Writer {
    pub buf: Vec<u8>,
}

impl Writer {
    pub fn with_capacity(n: usize) -> Self {
        Writer {
            buf: Vec::with_capacity(n),
        }
    }
    pub fn u8(&mut self, v: u8) -> &mut Self {
        self.buf.push(v);
        self
    }
    pub fn u16(&mut self, v: u16) -> &mut Self {
        self.buf.extend_from_slice(&v.to_le_bytes());
        self
    }
    pub fn u32(&mut self, v: u32) -> &mut Self {
        self.buf.extend_from_slice(&v.to_le_bytes());
        self
    }
    pub fn u64(&mut self, v: u64) -> &mut Self {
        self.buf.extend_from_slice(&v.to_le_bytes());
        self
    }
    pub fn bytes(&mut self, v: &[u8]) -> &mut Self {
        self.buf.extend_from_slice(v);
        self
    }
}

/// Bounds-checked decoder over bytes read from the media: every accessor returns `Corrupt` instead of panicking.
pub struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    pub fn new(buf: &'a [u8]) -> Self {
        Reader { buf, pos: 0 }
    }
    pub fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }
    pub fn pos(&self) -> usize {
        self.pos
    }
    pub fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        if n > self.remaining() {
            return Err(StoreError::Corrupt(format!(
                "short record: need {n} have {}",
                self.remaining()
            )));
        }
        let s = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }
    fn arr<const N: usize>(&mut self) -> Result<[u8; N]> {
        let s = self.take(N)?;
        let mut a = [0u8; N];
        a.copy_from_slice(s);
        Ok(a)
    }
    pub fn u8(&mut self) -> Result<u8> {
        Ok(self.arr::<1>()?[0])
    }
    pub fn u16(&mut self) -> Result<u16> {
        Ok(u16::from_le_bytes(self.arr()?))
    }
    pub fn u32(&mut self) -> Result<u32> {
        Ok(u32::from_le_bytes(self.arr()?))
    }
    pub fn u64(&mut self) -> Result<u64> {
        Ok(u64::from_le_bytes(self.arr()?))
    }
}

/// Block 0 of the device: static layout written once by mkfs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceHeader {
    pub version: u32,
    pub device_size: u64,
    pub uuid: u64,
    /// (offset, length) in bytes of each shard's region.
    pub shards: Vec<(u64, u64)>,
}

impl DeviceHeader {
    pub fn encode(&self) -> Vec<u8> {
        let mut w = Writer::with_capacity(BLOCK);
        w.bytes(DEVICE_MAGIC).u32(self.version).u32(0);
        w.u32(BLOCK_SIZE as u32)
            .u32(self.shards.len() as u32)
            .u64(self.device_size)
            .u64(self.uuid);
        for (o, l) in &self.shards {
            w.u64(*o).u64(*l);
        }
        let mut b = w.buf;
        b.resize(BLOCK, 0);
        let c = crc(&b[16..]);
        b[12..16].copy_from_slice(&c.to_le_bytes());
        b
    }

    pub fn decode(b: &[u8]) -> Result<Self> {
        if b.len() < BLOCK || &b[..8] != DEVICE_MAGIC {
            return Err(StoreError::Corrupt(
                "no ferrostore device header (bad magic)".into(),
            ));
        }
        let mut r = Reader::new(&b[8..BLOCK]);
        let version = r.u32()?;
        let stored = r.u32()?;
        if stored != crc(&b[16..BLOCK]) {
            return Err(StoreError::Corrupt("device header checksum mismatch".into()));
        }
        if !(MIN_FORMAT_VERSION..=FORMAT_VERSION).contains(&version) {
            return Err(version_error(version));
        }
        if r.u32()? as u64 != BLOCK_SIZE {
            return Err(StoreError::Unsupported("block size"));
        }
        let n = r.u32()?;
        if n == 0 || n > MAX_SHARDS {
            return Err(StoreError::Corrupt(format!("shard count {n}")));
        }
        let device_size = r.u64()?;
        let uuid = r.u64()?;
        let mut shards = Vec::with_capacity(n as usize);
        for _ in 0..n {
            shards.push((r.u64()?, r.u64()?));
        }
        Ok(DeviceHeader {
            version,
            device_size,
            uuid,
            shards,
        })
    }
}

/// One of the two alternating superblock slots at the start of a shard region. The valid slot with the highest
/// generation wins at mount.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShardSuper {
    /// On-disk format version of this shard ([`MIN_FORMAT_VERSION`]..=[`FORMAT_VERSION`]), kept across checkpoints.
    pub version: u32,
    pub shard: u32,
    pub generation: u64,
    pub uuid: u64,
    pub region_off: u64,
    pub region_len: u64,
    pub log_off: u64,
    pub log_len: u64,
    /// First block and block count of the space managed by the allocator (tree nodes and data).
    pub data_first_block: u64,
    pub data_blocks: u64,
    /// Block number of the tree root node.
    pub root_block: u64,
    /// Log records with lsn < next_lsn are contained in the tree.
    pub next_lsn: u64,
    /// Only records of this epoch are valid (bumped at every mount so stale records never replay).
    pub log_epoch: u64,
    /// Byte offset inside the log where replay starts.
    pub log_tail: u64,
}

impl ShardSuper {
    pub fn encode(&self) -> Vec<u8> {
        let mut w = Writer::with_capacity(BLOCK);
        w.u32(SHARD_MAGIC).u32(0).u32(self.version).u32(self.shard);
        w.u64(self.generation)
            .u64(self.uuid)
            .u64(self.region_off)
            .u64(self.region_len);
        w.u64(self.log_off)
            .u64(self.log_len)
            .u64(self.data_first_block)
            .u64(self.data_blocks);
        w.u64(self.root_block)
            .u64(self.next_lsn)
            .u64(self.log_epoch)
            .u64(self.log_tail);
        let mut b = w.buf;
        b.resize(BLOCK, 0);
        let c = crc(&b[8..]);
        b[4..8].copy_from_slice(&c.to_le_bytes());
        b
    }

    pub fn decode(b: &[u8]) -> Result<Self> {
        let mut r = Reader::new(b);
        if r.u32()? != SHARD_MAGIC {
            return Err(StoreError::Corrupt("shard superblock magic".into()));
        }
        let stored = r.u32()?;
        if b.len() < BLOCK || stored != crc(&b[8..BLOCK]) {
            return Err(StoreError::Corrupt("shard superblock checksum".into()));
        }
        let version = r.u32()?;
        if !(MIN_FORMAT_VERSION..=FORMAT_VERSION).contains(&version) {
            return Err(version_error(version));
        }
        Ok(ShardSuper {
            version,
            shard: r.u32()?,
            generation: r.u64()?,
            uuid: r.u64()?,
            region_off: r.u64()?,
            region_len: r.u64()?,
            log_off: r.u64()?,
            log_len: r.u64()?,
            data_first_block: r.u64()?,
            data_blocks: r.u64()?,
            root_block: r.u64()?,
            next_lsn: r.u64()?,
            log_epoch: r.u64()?,
            log_tail: r.u64()?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn superblocks_round_trip_and_detect_flips() {
        let h = DeviceHeader {
            version: FORMAT_VERSION,
            device_size: 1 << 30,
            uuid: 7,
            shards: vec![(4096, 1 << 20)],
        };
        let b = h.encode();
        assert_eq!(DeviceHeader::decode(&b).unwrap(), h);
        let mut bad = b.clone();
        bad[40] ^= 1;
        assert!(DeviceHeader::decode(&bad).is_err());
        let s = ShardSuper {
            version: FORMAT_VERSION,
            shard: 1,
            generation: 9,
            uuid: 7,
            region_off: 4096,
            region_len: 1 << 20,
            log_off: 12288,
            log_len: 65536,
            data_first_block: 20,
            data_blocks: 200,
            root_block: 21,
            next_lsn: 5,
            log_epoch: 3,
            log_tail: 512,
        };
        let b = s.encode();
        assert_eq!(ShardSuper::decode(&b).unwrap(), s);
        for i in [0usize, 5, 30, 100, 4095] {
            let mut bad = b.clone();
            bad[i] ^= 0x10;
            assert!(ShardSuper::decode(&bad).is_err(), "flip at {i} undetected");
        }
        assert!(ShardSuper::decode(&b[..100]).is_err());
    }
}
