// SPDX-License-Identifier: LGPL-3.0-or-later
//! Copy-on-write B+tree of byte keys to byte values (metadata only).
//!
//! Nodes live on disk as checksummed 4 KiB blocks. A node that is modified is copied into memory ("dirty", `Ptr::Mem`)
//! together with its path to the root; the disk block it came from is remembered in `superseded` and freed only
//! after the next checkpoint made the new tree durable. Clean nodes are cached in a bounded LRU keyed by block number
//! and re-read (and re-verified) on a miss. Deletions remove empty nodes but never merge siblings: underfull nodes
//! are allowed (fewer rewrites, no compaction).

use crate::error::{Result, StoreError};
use crate::format::{BLOCK, NODE_MAGIC, Reader, Writer, crc};
use bytes::Bytes;
use std::collections::{HashMap, VecDeque};
use std::hash::{BuildHasherDefault, Hasher};
use std::rc::Rc;

/// Hasher of the node cache's block numbers: one multiply instead of SipHash (the cache is probed once per
/// level of every lookup; block numbers are not attacker-chosen, they come from our allocator).
#[derive(Default)]
pub struct BlockHasher(u64);

impl Hasher for BlockHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(*b)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        }
    }
    fn write_u64(&mut self, v: u64) {
        // Fibonacci hashing; the high bits (which hashbrown uses for its control bytes) depend on every bit.
        self.0 = (self.0 ^ v).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        self.0 ^= self.0 >> 29;
    }
}

/// `HashMap` keyed by block number.
pub type BlockMap<V> = HashMap<u64, V, BuildHasherDefault<BlockHasher>>;

const HEADER: usize = 24;

/// Byte-string order (`<[u8]>::cmp`), comparing 8 bytes at a time as big-endian integers first: keys in one node
/// share most of a short fixed-width prefix (namespace byte, object id, block number), so most compares end
/// inside the first two words without a `memcmp` call.
#[inline]
pub fn key_cmp(a: &[u8], b: &[u8]) -> std::cmp::Ordering {
    let n = a.len().min(b.len());
    let mut i = 0;
    while i + 8 <= n {
        let (Some(x), Some(y)) = (a.get(i..i + 8), b.get(i..i + 8)) else {
            break;
        };
        let (Ok(x), Ok(y)) = (<[u8; 8]>::try_from(x), <[u8; 8]>::try_from(y)) else {
            break;
        };
        let (x, y) = (u64::from_be_bytes(x), u64::from_be_bytes(y));
        if x != y {
            return x.cmp(&y);
        }
        i += 8;
    }
    a[i..].cmp(&b[i..])
}
/// Largest `key.len() + value.len()` accepted in a leaf: three such entries always fit in a node, so a split of an
/// overflowing node always yields two nodes that fit.
pub const MAX_ENTRY: usize = (BLOCK - HEADER) / 3 - 4;
pub const MAX_KEY: usize = 512;
const _: () = assert!(MAX_KEY + 10 < MAX_ENTRY);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ptr {
    Disk(u64),
    Mem(u32),
}

/// One entry of a node: where its key and value are in the node's byte buffer, and its search head.
#[derive(Clone, Copy, Debug, Default)]
struct Ent {
    /// The 16 key bytes after the node's common prefix as two big-endian words (zero-padded): a binary search
    /// compares these, held contiguously in `Node::ents`, and touches the key bytes only when two heads tie.
    head: [u64; 2],
    off: u32,
    klen: u16,
    vlen: u16,
}

/// A tree node in memory. Keys and values live in one byte buffer per node (each key followed by its value;
/// the buffer may hold dead bytes of replaced or removed entries until it is compacted), so copying a node is
/// three allocations instead of two per entry, and a decoded node is its block plus an entry table.
#[derive(Clone, Debug, Default)]
pub struct Node {
    pub level: u8,
    buf: Vec<u8>,
    ents: Vec<Ent>,
    /// Children (empty for leaves); key `i` is the lower bound of `kids[i]`, key 0 is ignored.
    kids: Vec<Ptr>,
    /// Every searchable key (leaf: all; internal node: from index 1) starts with the first `cpl` bytes of the
    /// first searchable key; the entries' heads are taken after them.
    cpl: u16,
    /// Encoded size of the node.
    bytes: usize,
}

/// Search head of `k` after a common prefix of `cpl` bytes. Zero padding keeps the order: when the heads of two
/// keys differ, the keys compare the same way; when they tie, the keys must be compared.
#[inline]
fn head_of(k: &[u8], cpl: usize) -> [u64; 2] {
    let s = k.get(cpl..).unwrap_or(&[]);
    let mut b = [0u8; 16];
    let n = s.len().min(16);
    b[..n].copy_from_slice(&s[..n]);
    let (x, y) = b.split_at(8);
    let w = |h: &[u8]| u64::from_be_bytes(h.try_into().unwrap_or([0; 8]));
    [w(x), w(y)]
}

/// Spare buffer bytes and entry slots a node gets when it is copied or rebuilt for changes: without them the
/// next insert reallocates (copies) what was just copied.
const BUF_ROOM: usize = 512;
const ENT_ROOM: usize = 8;

/// The live key and value bytes of `ents` (offsets into `buf`) packed in entry order into a new buffer with
/// capacity for `room` more bytes; the entries' offsets are rewritten to it.
fn pack(buf: &[u8], ents: &mut [Ent], room: usize) -> Vec<u8> {
    let live: usize = ents.iter().map(|e| e.klen as usize + e.vlen as usize).sum();
    let mut out = Vec::with_capacity(live + room);
    for e in ents {
        let (a, n) = (e.off as usize, e.klen as usize + e.vlen as usize);
        e.off = out.len() as u32;
        out.extend_from_slice(&buf[a..a + n]);
    }
    out
}

fn common_prefix(a: &[u8], b: &[u8]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

impl Node {
    fn leaf() -> Self {
        Node {
            bytes: HEADER,
            ..Default::default()
        }
    }
    /// A root over two children: `left` (everything below `sep`) and `right`.
    fn root(level: u8, left: Ptr, sep: &[u8], right: Ptr) -> Self {
        let mut n = Node {
            level,
            bytes: HEADER,
            ..Default::default()
        };
        n.insert_kid(0, b"", left);
        n.insert_kid(1, sep, right);
        n
    }
    fn is_leaf(&self) -> bool {
        self.level == 0
    }
    /// Number of entries (keys).
    pub fn len(&self) -> usize {
        self.ents.len()
    }
    pub fn is_empty(&self) -> bool {
        self.ents.is_empty()
    }
    pub fn key(&self, i: usize) -> &[u8] {
        let e = self.ents[i];
        &self.buf[e.off as usize..e.off as usize + e.klen as usize]
    }
    /// Value of leaf entry `i` (empty for internal nodes).
    pub fn val(&self, i: usize) -> &[u8] {
        let e = self.ents[i];
        let at = e.off as usize + e.klen as usize;
        &self.buf[at..at + e.vlen as usize]
    }
    pub fn kids(&self) -> &[Ptr] {
        &self.kids
    }
    fn first_searchable(&self) -> usize {
        usize::from(!self.is_leaf())
    }
    fn entry_size(&self, i: usize) -> usize {
        let e = self.ents[i];
        if self.is_leaf() {
            4 + e.klen as usize + e.vlen as usize
        } else {
            10 + e.klen as usize
        }
    }
    /// Heap bytes this node holds in memory (approximate: allocations rounded to 16 bytes plus malloc's header).
    pub fn heap_bytes(&self) -> usize {
        let alloc = |n: usize| if n == 0 { 0 } else { (n + 8).div_ceil(16) * 16 };
        std::mem::size_of::<Node>()
            + alloc(self.buf.capacity())
            + alloc(self.ents.capacity() * std::mem::size_of::<Ent>())
            + alloc(self.kids.capacity() * std::mem::size_of::<Ptr>())
    }
    fn recompute(&mut self) {
        self.bytes = HEADER + (0..self.ents.len()).map(|i| self.entry_size(i)).sum::<usize>();
    }
    /// Key and value bytes of the live entries.
    fn live_bytes(&self) -> usize {
        self.ents.iter().map(|e| e.klen as usize + e.vlen as usize).sum()
    }
    /// Rewrite the buffer with the live entries only, in entry order, with capacity for `room` more bytes.
    fn compact(&mut self, room: usize) {
        self.buf = pack(&self.buf, &mut self.ents, room);
    }
    /// Room for `add` more bytes at the end of the buffer: compacts when dead bytes would grow it past two
    /// blocks (a node's live bytes stay below a block plus one entry).
    fn reserve(&mut self, add: usize) {
        if self.buf.len() + add > 2 * BLOCK && self.buf.len() > self.live_bytes() {
            self.compact(add + BUF_ROOM);
        }
    }
    /// Recompute the common prefix and every head (after a decode, a split, or a key outside the prefix).
    fn reindex(&mut self) {
        let first = self.first_searchable();
        let cpl = if first < self.ents.len() {
            let k0 = self.key(first);
            (first + 1..self.ents.len()).fold(k0.len(), |c, i| c.min(common_prefix(k0, self.key(i))))
        } else {
            0
        };
        self.cpl = cpl as u16;
        for i in 0..self.ents.len() {
            let h = head_of(self.key(i), cpl);
            self.ents[i].head = h;
        }
    }
    /// Entry index of the first searchable key `> k` (`or_equal`) or `>= k`; keys before it are the ones below.
    fn rank(&self, k: &[u8], or_equal: bool) -> usize {
        let first = self.first_searchable();
        let Some(ents) = self.ents.get(first..).filter(|e| !e.is_empty()) else {
            return first;
        };
        let cpl = self.cpl as usize;
        let p = &self.key(first)[..cpl];
        match k[..cpl.min(k.len())].cmp(p) {
            std::cmp::Ordering::Less => return first,
            std::cmp::Ordering::Greater => return first + ents.len(),
            std::cmp::Ordering::Equal => {}
        }
        let kh = head_of(k, cpl);
        let rest = &k[cpl..];
        first
            + ents.partition_point(|e| {
                // Word by word (the array `cmp` goes through a generic slice compare).
                let o = if e.head[0] != kh[0] {
                    e.head[0].cmp(&kh[0])
                } else if e.head[1] != kh[1] {
                    e.head[1].cmp(&kh[1])
                } else {
                    let a = e.off as usize + cpl;
                    key_cmp(&self.buf[a..e.off as usize + e.klen as usize], rest)
                };
                if or_equal { o.is_le() } else { o.is_lt() }
            })
    }
    /// Leaf lookup: `Ok(index)` of `k`, or `Err(index)` where it would be inserted.
    fn find(&self, k: &[u8]) -> std::result::Result<usize, usize> {
        let i = self.rank(k, false);
        if i < self.ents.len() && self.key(i) == k {
            Ok(i)
        } else {
            Err(i)
        }
    }
    fn child_index(&self, key: &[u8]) -> usize {
        self.rank(key, true) - 1
    }
    /// The child holding the last entry `< key` (not `<=`): the first child whose lower bound is `>= key` is not.
    fn child_index_before(&self, key: &[u8]) -> usize {
        self.rank(key, false) - 1
    }
    /// Insert an entry at `i` (its sorted position), keeping the common prefix and heads valid.
    fn insert_ent(&mut self, i: usize, key: &[u8], val: &[u8]) {
        self.reserve(key.len() + val.len());
        let off = self.buf.len() as u32;
        self.buf.extend_from_slice(key);
        self.buf.extend_from_slice(val);
        self.ents.insert(
            i,
            Ent {
                head: [0; 2],
                off,
                klen: key.len() as u16,
                vlen: val.len() as u16,
            },
        );
        let first = self.first_searchable();
        if i < first {
            return;
        }
        let cpl = self.cpl as usize;
        let searchable = self.ents.len() - first;
        if searchable == 1 {
            self.cpl = key.len() as u16;
            self.ents[i].head = [0; 2];
            return;
        }
        // Any other searchable entry holds the prefix.
        let other = if i == first { first + 1 } else { first };
        let fits = key.len() >= cpl && key[..cpl] == self.key(other)[..cpl];
        if fits {
            self.ents[i].head = head_of(key, cpl);
        } else {
            self.reindex();
        }
    }
    fn insert_leaf(&mut self, i: usize, key: &[u8], val: &[u8]) {
        self.insert_ent(i, key, val);
        self.bytes += 4 + key.len() + val.len();
    }
    fn insert_kid(&mut self, i: usize, key: &[u8], kid: Ptr) {
        self.insert_ent(i, key, b"");
        self.kids.insert(i, kid);
        self.bytes += 10 + key.len();
    }
    fn set_val(&mut self, i: usize, val: &[u8]) {
        let e = self.ents[i];
        self.bytes = self.bytes + val.len() - e.vlen as usize;
        if val.len() == e.vlen as usize {
            let at = e.off as usize + e.klen as usize;
            self.buf[at..at + val.len()].copy_from_slice(val);
            return;
        }
        self.reserve(e.klen as usize + val.len());
        let e = self.ents[i];
        let off = self.buf.len();
        self.buf
            .extend_from_within(e.off as usize..e.off as usize + e.klen as usize);
        self.buf.extend_from_slice(val);
        self.ents[i].off = off as u32;
        self.ents[i].vlen = val.len() as u16;
    }
    /// Remove entry `i` (and its child).
    fn remove(&mut self, i: usize) {
        self.bytes -= self.entry_size(i);
        self.ents.remove(i);
        if !self.is_leaf() {
            self.kids.remove(i);
        }
    }
    /// Move the entries from `at` on into a new right sibling; both halves are compacted and reindexed.
    fn split_off(&mut self, at: usize) -> Node {
        let mut right = Node {
            level: self.level,
            ents: self.ents.split_off(at),
            buf: Vec::new(),
            kids: if self.is_leaf() {
                Vec::new()
            } else {
                self.kids.split_off(at)
            },
            cpl: 0,
            bytes: 0,
        };
        right.buf = pack(&self.buf, &mut right.ents, BUF_ROOM);
        self.compact(BUF_ROOM);
        for n in [&mut *self, &mut right] {
            n.recompute();
            n.reindex();
        }
        right
    }
    /// The copy a write makes of a clean or frozen node: live entries only, with room for the changes of the
    /// transaction that copies it. (The derived clone's exact capacities made the first insert into a copied
    /// node reallocate its buffer and its entry table: two more allocations and copies per copied node.)
    fn copy_for_write(&self) -> Node {
        let mut ents = Vec::with_capacity(self.ents.len() + ENT_ROOM);
        ents.extend_from_slice(&self.ents);
        let buf = pack(&self.buf, &mut ents, BUF_ROOM);
        let mut kids = Vec::new();
        if !self.is_leaf() {
            kids.reserve_exact(self.kids.len() + ENT_ROOM);
            kids.extend_from_slice(&self.kids);
        }
        Node {
            level: self.level,
            buf,
            ents,
            kids,
            cpl: self.cpl,
            bytes: self.bytes,
        }
    }
    /// A clean copy for the node cache: buffer without dead bytes.
    fn compacted(mut self) -> Node {
        if self.buf.len() > self.live_bytes() + 256 {
            self.compact(0);
        }
        self.buf.shrink_to_fit();
        self.ents.shrink_to_fit();
        self.kids.shrink_to_fit();
        self
    }

    /// Serialise a node whose children are all on disk.
    pub fn encode(&self, self_block: u64) -> Result<Vec<u8>> {
        let mut w = Writer::with_capacity(BLOCK);
        w.u32(NODE_MAGIC)
            .u32(0)
            .u64(self_block)
            .u8(self.level)
            .u8(0)
            .u16(self.ents.len() as u16)
            .u32(0);
        for i in 0..self.ents.len() {
            let k = self.key(i);
            if self.is_leaf() {
                let v = self.val(i);
                w.u16(k.len() as u16).u16(v.len() as u16).bytes(k).bytes(v);
            } else {
                let Ptr::Disk(b) = self.kids[i] else {
                    return Err(StoreError::Corrupt(
                        "encoding a node with an in-memory child".into(),
                    ));
                };
                w.u16(k.len() as u16).bytes(k).u64(b);
            }
        }
        let mut b = w.buf;
        assert!(b.len() <= BLOCK, "node overflow {}", b.len());
        b.resize(BLOCK, 0);
        let c = crc(&b[8..]);
        b[4..8].copy_from_slice(&c.to_le_bytes());
        Ok(b)
    }

    /// Decode a node block. The block itself becomes the node's buffer: entries point at their bytes in it.
    pub fn decode(b: &[u8], expect_block: u64) -> Result<Node> {
        let bad = |what: &str| StoreError::Corrupt(format!("tree node {expect_block}: {what}"));
        if b.len() != BLOCK {
            return Err(bad("wrong size"));
        }
        let mut r = Reader::new(b);
        if r.u32()? != NODE_MAGIC {
            return Err(bad("bad magic"));
        }
        if r.u32()? != crc(&b[8..]) {
            return Err(StoreError::Checksum {
                offset: expect_block * BLOCK as u64,
            });
        }
        if r.u64()? != expect_block {
            return Err(bad("misdirected (self address mismatch)"));
        }
        let level = r.u8()?;
        r.u8()?;
        let n = r.u16()? as usize;
        r.u32()?;
        let mut node = Node {
            level,
            buf: b.to_vec(),
            ents: Vec::with_capacity(n.min(BLOCK / 4)),
            ..Default::default()
        };
        for _ in 0..n {
            let kl = r.u16()?;
            let vl = if level == 0 { r.u16()? } else { 0 };
            let off = r.pos() as u32;
            r.take(kl as usize + vl as usize)?;
            node.ents.push(Ent {
                head: [0; 2],
                off,
                klen: kl,
                vlen: vl,
            });
            if level > 0 {
                node.kids.push(Ptr::Disk(r.u64()?));
            }
        }
        if level > 0 && n == 0 {
            return Err(bad("empty internal node"));
        }
        node.recompute();
        node.reindex();
        Ok(node)
    }
}

/// A node split: the separator key and the new right sibling.
type Split = (Vec<u8>, Ptr);
/// One change of [`Tree::apply_sorted`]: put `Some(value)` at the key, or delete it.
pub type Change<'a> = (&'a [u8], Option<&'a [u8]>);
/// An internal node during [`Tree::apply_sorted`]: as read, until one of its children changes; then its copy.
enum Cur {
    Clean(Rc<Node>),
    Copied(u32),
}
/// Most changes one descent of [`Tree::apply_sorted`] carries.
const APPLY_CHUNK: usize = 64;
/// A serialised node to write: (block, bytes).
pub type NodeWrite = (u64, Vec<u8>);
/// A node of a checkpoint snapshot, not yet serialised: (block, node).
pub type SnapNode = (u64, Rc<Node>);

/// Source of clean nodes (the store reads them from the device).
pub trait NodeIo {
    fn read_node(&mut self, block: u64) -> Result<Bytes>;
}

pub struct Tree {
    root: Ptr,
    dirty: Vec<Option<Rc<Node>>>,
    free_ids: Vec<u32>,
    /// Per `dirty` slot: `Some` while the slot belongs to a frozen snapshot (see [`Tree::freeze`]).
    frozen: Vec<Option<Frozen>>,
    /// Occupied frozen slots (not counted as dirty: they belong to the checkpoint being written).
    frozen_count: usize,
    /// The frozen snapshot being placed: its root, and its post-order walk, resumable over several calls of
    /// [`Tree::snapshot_step`] ((slot, index of the next child to visit)). `None` when there is none.
    walk: Option<(Ptr, Vec<(u32, usize)>)>,
    /// Clean nodes: (node, referenced since the clock hand last passed, heap bytes).
    cache: BlockMap<(Rc<Node>, bool, usize)>,
    /// CLOCK (second chance) order of the cached blocks: a hit only sets a bit, instead of reordering an LRU
    /// list on every node visited. May hold blocks no longer cached (skipped, and compacted when it grows).
    ring: VecDeque<u64>,
    cache_cap: usize,
    /// Byte budget of the clean cache (heap bytes of the decoded nodes) and what it holds now.
    cache_cap_bytes: usize,
    cache_bytes: usize,
    /// Disk nodes replaced since the last checkpoint: free once the next checkpoint is durable.
    pub superseded: Vec<u64>,
    pub stats: TreeStats,
}

/// A dirty node frozen by [`Tree::freeze`]: immutable until the snapshot walk has placed it and the slot is
/// released; the live tree copies it on write like a clean node.
#[derive(Debug, Clone, Copy, Default)]
struct Frozen {
    /// Block given by the snapshot walk (it is then also a clean cached node, unless superseded).
    block: Option<u64>,
    /// The live tree replaced it (copied it or dropped it): its block is free after the next checkpoint, and it
    /// is not put in the clean cache (nothing will look it up again).
    superseded: bool,
}

#[derive(Debug, Default, Clone, Copy)]
pub struct TreeStats {
    pub node_reads: u64,
    pub cache_hits: u64,
}

impl Tree {
    pub fn open(root_block: u64, cache_cap: usize) -> Tree {
        Tree {
            root: Ptr::Disk(root_block),
            dirty: Vec::new(),
            free_ids: Vec::new(),
            frozen: Vec::new(),
            frozen_count: 0,
            walk: None,
            cache: BlockMap::default(),
            ring: VecDeque::new(),
            cache_cap: cache_cap.max(8),
            cache_cap_bytes: usize::MAX,
            cache_bytes: 0,
            superseded: Vec::new(),
            stats: TreeStats::default(),
        }
    }

    /// A fresh, empty tree (root is an in-memory leaf until the first checkpoint).
    pub fn empty(cache_cap: usize) -> Tree {
        let mut t = Tree::open(0, cache_cap);
        let id = t.alloc_mem(Node::leaf());
        t.root = Ptr::Mem(id);
        t
    }

    pub fn root(&self) -> Ptr {
        self.root
    }

    /// Dirty nodes of the live tree (a frozen snapshot's nodes are not counted).
    pub fn dirty_nodes(&self) -> usize {
        self.dirty.len() - self.free_ids.len() - self.frozen_count
    }

    pub fn cached_nodes(&self) -> usize {
        self.cache.len()
    }

    /// Bound the clean cache by heap bytes too (whichever of the two limits is reached first evicts).
    pub fn set_cache_bytes(&mut self, bytes: usize) {
        self.cache_cap_bytes = bytes.max(8 * 2 * crate::format::BLOCK);
        self.evict();
    }

    /// Heap bytes held by clean cached nodes (maintained incrementally).
    pub fn cached_bytes(&self) -> usize {
        self.cache_bytes
    }

    /// Heap bytes held by cached and dirty nodes: the clean cache's count is maintained as nodes come and go,
    /// the dirty nodes are summed (at most a few thousand, each O(1)).
    pub fn memory_bytes(&self) -> usize {
        self.cache_bytes + self.dirty.iter().flatten().map(|n| n.heap_bytes()).sum::<usize>()
    }

    fn alloc_mem(&mut self, n: Node) -> u32 {
        let rc = Rc::new(n);
        if let Some(id) = self.free_ids.pop() {
            debug_assert!(self.frozen[id as usize].is_none());
            self.dirty[id as usize] = Some(rc);
            id
        } else {
            self.dirty.push(Some(rc));
            self.frozen.push(None);
            (self.dirty.len() - 1) as u32
        }
    }

    /// The live tree no longer references `id`. A frozen slot stays until the snapshot walk is done with it;
    /// its block (once it has one) is superseded like a clean node's.
    fn free_mem(&mut self, id: u32) {
        if self.frozen[id as usize].is_some() {
            self.supersede_frozen(id);
            return;
        }
        self.dirty[id as usize] = None;
        self.free_ids.push(id);
    }

    fn supersede_frozen(&mut self, id: u32) {
        let Some(f) = self.frozen[id as usize].as_mut() else {
            return;
        };
        debug_assert!(!f.superseded, "a frozen node has one live parent");
        f.superseded = true;
        if let Some(b) = f.block {
            if let Some((_, _, bytes)) = self.cache.remove(&b) {
                self.cache_bytes -= bytes;
            }
            self.superseded.push(b);
        }
    }

    fn mem(&self, id: u32) -> &Rc<Node> {
        self.dirty[id as usize]
            .as_ref()
            .expect("dangling in-memory node id")
    }

    fn mem_mut(&mut self, id: u32) -> &mut Node {
        Rc::make_mut(
            self.dirty[id as usize]
                .as_mut()
                .expect("dangling in-memory node id"),
        )
    }

    pub fn node(&mut self, io: &mut dyn NodeIo, p: Ptr) -> Result<Rc<Node>> {
        match p {
            Ptr::Mem(id) => Ok(self.mem(id).clone()),
            Ptr::Disk(b) => {
                if let Some((n, referenced, _)) = self.cache.get_mut(&b) {
                    self.stats.cache_hits += 1;
                    *referenced = true;
                    return Ok(n.clone());
                }
                self.stats.node_reads += 1;
                let bytes = io.read_node(b)?;
                let n = Rc::new(Node::decode(&bytes, b)?);
                self.insert_clean(b, n.clone());
                Ok(n)
            }
        }
    }

    fn insert_clean(&mut self, b: u64, n: Rc<Node>) {
        // Per-entry bookkeeping (map slot, ring slot) on top of the node's own allocations.
        let bytes = n.heap_bytes() + 64;
        self.cache_bytes += bytes;
        match self.cache.insert(b, (n, false, bytes)) {
            Some((_, _, old)) => self.cache_bytes -= old,
            None => self.ring.push_back(b),
        }
        self.evict();
        if self.ring.len() > 2 * self.cache.len() + 64 {
            let cache = &self.cache;
            self.ring.retain(|b| cache.contains_key(b));
        }
    }

    /// Drop clean nodes not used since the clock hand last passed them until both limits hold. Clean nodes are
    /// on disk, so eviction never affects correctness; a node in use by a caller stays alive through its `Rc`.
    fn evict(&mut self) {
        while self.cache.len() > self.cache_cap || self.cache_bytes > self.cache_cap_bytes {
            let Some(victim) = self.ring.pop_front() else {
                break;
            };
            match self.cache.get_mut(&victim) {
                Some((_, referenced, _)) if *referenced => {
                    *referenced = false;
                    self.ring.push_back(victim);
                }
                Some(_) => {
                    if let Some((_, _, b)) = self.cache.remove(&victim) {
                        self.cache_bytes -= b;
                    }
                }
                None => {}
            }
        }
    }

    fn make_mut(&mut self, io: &mut dyn NodeIo, p: Ptr) -> Result<u32> {
        match p {
            Ptr::Mem(id) if self.frozen[id as usize].is_some() => {
                // Part of the snapshot being written: copy on write, as for a clean node.
                let n = self.mem(id).copy_for_write();
                self.supersede_frozen(id);
                Ok(self.alloc_mem(n))
            }
            Ptr::Mem(id) => Ok(id),
            Ptr::Disk(b) => {
                let n = self.node(io, p)?;
                if let Some((_, _, bytes)) = self.cache.remove(&b) {
                    self.cache_bytes -= bytes;
                }
                self.superseded.push(b);
                Ok(self.alloc_mem(n.copy_for_write()))
            }
        }
    }

    pub fn get(&mut self, io: &mut dyn NodeIo, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.get_with(io, key, &mut |v| v.to_vec())
    }

    /// `f(value)` of the entry at `key`, without copying the value out of its node.
    pub fn get_with<R>(
        &mut self,
        io: &mut dyn NodeIo,
        key: &[u8],
        f: &mut dyn FnMut(&[u8]) -> R,
    ) -> Result<Option<R>> {
        let mut p = self.root;
        loop {
            let n = self.node(io, p)?;
            if n.is_leaf() {
                return Ok(n.find(key).ok().map(|i| f(n.val(i))));
            }
            p = n.kids[n.child_index(key)];
        }
    }

    pub fn put(&mut self, io: &mut dyn NodeIo, key: &[u8], val: &[u8]) -> Result<()> {
        self.put_with_old(io, key, val, &mut |_| ())
    }

    /// `put`, calling `old(value)` with the value it replaces (if any) before replacing it: the caller learns
    /// what was there without a separate lookup.
    pub fn put_with_old(
        &mut self,
        io: &mut dyn NodeIo,
        key: &[u8],
        val: &[u8],
        old: &mut dyn FnMut(&[u8]),
    ) -> Result<()> {
        self.apply_sorted(io, &[(key, Some(val))], &mut |_, v| old(v))
    }

    /// Move the upper half of node `id` (by bytes, at least one entry on each side) into a new right sibling.
    fn split_half(&mut self, id: u32) -> Node {
        let n = self.mem_mut(id);
        let total = n.bytes - HEADER;
        let mut acc = 0;
        let mut at = 1;
        for i in 0..n.len() {
            acc += n.entry_size(i);
            if acc >= total / 2 {
                at = (i + 1).clamp(1, n.len() - 1);
                break;
            }
        }
        n.split_off(at)
    }

    /// Split node `id` until every piece fits a block: the pieces right of it, in key order, with their lower
    /// bounds. Nothing when it fits already. (A batch can leave a node several blocks large.)
    fn split_all(&mut self, id: u32) -> Vec<Split> {
        if self.mem(id).bytes <= BLOCK {
            return Vec::new();
        }
        let right = self.split_half(id);
        let sep = right.key(0).to_vec();
        let rid = self.alloc_mem(right);
        let mut out = self.split_all(id);
        out.push((sep, Ptr::Mem(rid)));
        out.extend(self.split_all(rid));
        out
    }

    /// Remove `key`; returns whether it was present.
    pub fn delete(&mut self, io: &mut dyn NodeIo, key: &[u8]) -> Result<bool> {
        Ok(self.delete_sorted(io, &[key], &mut |_, _| ())? == 1)
    }

    /// Remove every key of `keys` (sorted ascending, no duplicates) that is present; returns how many were (one
    /// pass, as [`Tree::apply_sorted`]). `removed(key, value)` is called for each entry before it goes.
    pub fn delete_sorted(
        &mut self,
        io: &mut dyn NodeIo,
        keys: &[&[u8]],
        on_removed: &mut dyn FnMut(&[u8], &[u8]),
    ) -> Result<usize> {
        let changes: Vec<Change<'_>> = keys.iter().map(|k| (*k, None)).collect();
        let mut removed = 0;
        self.apply_sorted(io, &changes, &mut |k, v| {
            removed += 1;
            on_removed(k, v);
        })?;
        Ok(removed)
    }

    /// Apply a transaction's changes in one pass: `changes` sorted ascending by key without duplicates, each a
    /// put (`Some(value)`) or a delete (`None`). The keys under one node share its descent (one binary search per
    /// group per level, then one compare per key against the child's upper bound): a write's extent keys sit
    /// together, as do its attrs, and its pg log entry and pg info, so a dozen changes take a few leaf visits
    /// under shared upper levels instead of a dozen descents. A node whose keys change nothing (deletes of absent keys) is not copied. `old(key, value)`
    /// sees the value each put replaces or each delete removes, before it goes. Every put is checked against
    /// the entry limits before anything changes.
    pub fn apply_sorted(
        &mut self,
        io: &mut dyn NodeIo,
        changes: &[Change<'_>],
        old: &mut dyn FnMut(&[u8], &[u8]),
    ) -> Result<()> {
        debug_assert!(changes.windows(2).all(|w| key_cmp(w[0].0, w[1].0).is_lt()));
        if changes
            .iter()
            .any(|(k, v)| v.is_some_and(|v| k.len() > MAX_KEY || k.len() + v.len() > MAX_ENTRY))
        {
            return Err(StoreError::TooLarge(
                "metadata key/value exceeds the node entry limit",
            ));
        }
        // A bounded group per descent: a leaf takes at most this many changes before it is split, so a huge
        // batch (thousands of omap keys) never builds one oversized node whose inserts shift long arrays.
        for chunk in changes.chunks(APPLY_CHUNK) {
            let Some((root, _, mut pieces)) = self.apply_rec(io, self.root, chunk, old)? else {
                continue;
            };
            self.root = root;
            // Grown: a new root over the old one and its new right siblings (split again if they overflow it).
            while !pieces.is_empty() {
                let level = self.node(io, self.root)?.level + 1;
                let mut n = Node::root(level, self.root, &pieces[0].0, pieces[0].1);
                for (i, (sep, p)) in pieces.iter().enumerate().skip(1) {
                    n.insert_kid(i + 1, sep, *p);
                }
                let id = self.alloc_mem(n);
                self.root = Ptr::Mem(id);
                pieces = self.split_all(id);
            }
            self.collapse_root(io)?;
        }
        Ok(())
    }

    /// Changes (sorted) under `p`. `None`: nothing changed and nothing was copied; otherwise the node's new
    /// pointer, whether it is now empty, and the new nodes right of it (lower bound, pointer) when it split.
    fn apply_rec(
        &mut self,
        io: &mut dyn NodeIo,
        p: Ptr,
        changes: &[Change<'_>],
        old: &mut dyn FnMut(&[u8], &[u8]),
    ) -> Result<Option<(Ptr, bool, Vec<Split>)>> {
        let n = self.node(io, p)?;
        if n.is_leaf() {
            if changes.iter().all(|(k, v)| v.is_none() && n.find(k).is_err()) {
                return Ok(None);
            }
            // Release our handle first: a dirty node shared with it would be copied by `Rc::make_mut`.
            drop(n);
            let id = self.make_mut(io, p)?;
            let node = self.mem_mut(id);
            for &(k, v) in changes {
                match (node.find(k), v) {
                    (Ok(i), Some(v)) => {
                        old(k, node.val(i));
                        node.set_val(i, v);
                    }
                    (Err(i), Some(v)) => node.insert_leaf(i, k, v),
                    (Ok(i), None) => {
                        old(k, node.val(i));
                        node.remove(i);
                    }
                    (Err(_), None) => {}
                }
            }
            let empty = node.is_empty();
            let pieces = self.split_all(id);
            return Ok(Some((Ptr::Mem(id), empty, pieces)));
        }
        // Keys are sorted, so each child's changes are one contiguous group: the keys below the next child's
        // lower bound. The node is copied at the first child that changed; groups are found in the copy from
        // then on (a child's new siblings have bounds below the next group's keys, an emptied child's
        // successor takes over its range, so the next group's child is found the same way).
        let mut cur = Cur::Clean(n);
        let mut i = 0;
        while i < changes.len() {
            let (ci, j, kid) = {
                let node: &Node = match &cur {
                    Cur::Clean(n) => n,
                    Cur::Copied(id) => self.mem(*id),
                };
                let ci = node.child_index(changes[i].0);
                let j = match node.ents.get(ci + 1) {
                    Some(_) => {
                        let upper = node.key(ci + 1);
                        i + 1 + changes[i + 1..].partition_point(|c| key_cmp(c.0, upper).is_lt())
                    }
                    None => changes.len(),
                };
                (ci, j, node.kids[ci])
            };
            let group = &changes[i..j];
            i = j;
            let Some((np, empty, pieces)) = self.apply_rec(io, kid, group, old)? else {
                continue;
            };
            let pid = match cur {
                Cur::Copied(pid) => pid,
                Cur::Clean(n) => {
                    // Release our handle first: a dirty node shared with it would be copied by `Rc::make_mut`.
                    drop(n);
                    let pid = self.make_mut(io, p)?;
                    cur = Cur::Copied(pid);
                    pid
                }
            };
            if empty {
                if let Ptr::Mem(cid) = np {
                    self.free_mem(cid);
                }
                self.mem_mut(pid).remove(ci);
                continue;
            }
            let node = self.mem_mut(pid);
            node.kids[ci] = np;
            for (k, (sep, kid)) in pieces.into_iter().enumerate() {
                node.insert_kid(ci + 1 + k, &sep, kid);
            }
        }
        let Cur::Copied(id) = cur else {
            return Ok(None);
        };
        let empty = self.mem(id).kids.is_empty();
        let pieces = self.split_all(id);
        Ok(Some((Ptr::Mem(id), empty, pieces)))
    }

    /// After deletes: a root left without children becomes an empty leaf, and a root with one child gives way
    /// to it (repeatedly).
    fn collapse_root(&mut self, io: &mut dyn NodeIo) -> Result<()> {
        loop {
            let n = self.node(io, self.root)?;
            if n.is_leaf() || n.kids.len() > 1 {
                return Ok(());
            }
            if let Ptr::Mem(id) = self.root {
                self.free_mem(id);
            }
            self.root = match n.kids.first() {
                Some(&kid) => kid,
                None => Ptr::Mem(self.alloc_mem(Node::leaf())),
            };
        }
    }

    /// Entries with `start <= key < end` (no upper bound if `end` is None), in order, at most `limit`.
    pub fn scan(
        &mut self,
        io: &mut dyn NodeIo,
        start: &[u8],
        end: Option<&[u8]>,
        limit: usize,
    ) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        let mut out = Vec::new();
        if limit > 0 {
            self.scan_rec(io, self.root, start, end, limit, &mut out)?;
        }
        Ok(out)
    }

    fn scan_rec(
        &mut self,
        io: &mut dyn NodeIo,
        p: Ptr,
        start: &[u8],
        end: Option<&[u8]>,
        limit: usize,
        out: &mut Vec<(Vec<u8>, Vec<u8>)>,
    ) -> Result<()> {
        let mut left = limit.saturating_sub(out.len());
        self.visit_rec(io, p, start, end, &mut |k, v| {
            out.push((k.to_vec(), v.to_vec()));
            left = left.saturating_sub(1);
            left > 0
        })?;
        Ok(())
    }

    /// Call `f(key, value)` for the entries with `start <= key < end` in order, without copying them, until it
    /// returns false.
    pub fn visit(
        &mut self,
        io: &mut dyn NodeIo,
        start: &[u8],
        end: Option<&[u8]>,
        f: &mut dyn FnMut(&[u8], &[u8]) -> bool,
    ) -> Result<()> {
        self.visit_rec(io, self.root, start, end, f).map(|_| ())
    }

    /// Returns false once `f` asked to stop or the end was passed.
    fn visit_rec(
        &mut self,
        io: &mut dyn NodeIo,
        p: Ptr,
        start: &[u8],
        end: Option<&[u8]>,
        f: &mut dyn FnMut(&[u8], &[u8]) -> bool,
    ) -> Result<bool> {
        let n = self.node(io, p)?;
        if n.is_leaf() {
            let from = n.rank(start, false);
            for i in from..n.len() {
                if end.is_some_and(|e| key_cmp(n.key(i), e).is_ge()) || !f(n.key(i), n.val(i)) {
                    return Ok(false);
                }
            }
            return Ok(true);
        }
        let from = n.child_index(start);
        for j in from..n.kids.len() {
            if j > from && end.is_some_and(|e| key_cmp(n.key(j), e).is_ge()) {
                return Ok(false);
            }
            if !self.visit_rec(io, n.kids[j], start, end, f)? {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// The last entry with key `<= key` (`< key` if not `inclusive`): a point lookup ("the extent covering this
    /// block") without a range scan.
    pub fn floor(
        &mut self,
        io: &mut dyn NodeIo,
        key: &[u8],
        inclusive: bool,
    ) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        self.floor_rec(io, self.root, key, inclusive)
    }

    fn floor_rec(
        &mut self,
        io: &mut dyn NodeIo,
        p: Ptr,
        key: &[u8],
        inclusive: bool,
    ) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        let n = self.node(io, p)?;
        if n.is_leaf() {
            let i = n.rank(key, inclusive);
            return Ok(i.checked_sub(1).map(|i| (n.key(i).to_vec(), n.val(i).to_vec())));
        }
        let mut j = if inclusive {
            n.child_index(key)
        } else {
            n.child_index_before(key)
        };
        // A child's lower bound is not necessarily one of its keys (deletions): if it holds nothing below `key`,
        // the answer is the largest entry of a child to its left.
        loop {
            if let Some(r) = self.floor_rec(io, n.kids[j], key, inclusive)? {
                return Ok(Some(r));
            }
            if j == 0 {
                return Ok(None);
            }
            j -= 1;
        }
    }

    /// Visit every node (reading it from disk if needed): `f(block_if_on_disk, node)`.
    pub fn walk(&mut self, io: &mut dyn NodeIo, f: &mut dyn FnMut(Option<u64>, &Node)) -> Result<()> {
        let mut stack = vec![self.root];
        let mut visited = 0u64;
        while let Some(p) = stack.pop() {
            visited += 1;
            if visited > 1 << 32 || stack.len() > 1 << 24 {
                return Err(StoreError::Corrupt(
                    "tree walk does not terminate (cycle?)".into(),
                ));
            }
            let n = self.node(io, p)?;
            f(
                match p {
                    Ptr::Disk(b) => Some(b),
                    Ptr::Mem(_) => None,
                },
                &n,
            );
            stack.extend(n.kids.iter().rev().copied());
        }
        Ok(())
    }

    /// Checkpoint step: give every dirty node a block (from `alloc`), serialise it and turn it clean. Returns the
    /// blocks to write (children before parents) and the new root block.
    pub fn flush_dirty(&mut self, alloc: &mut dyn FnMut() -> Result<u64>) -> Result<(Vec<NodeWrite>, u64)> {
        let (nodes, root) = self.snapshot_dirty(alloc)?;
        let mut writes = Vec::with_capacity(nodes.len());
        for (b, n) in nodes {
            writes.push((b, n.encode(b)?));
        }
        Ok((writes, root))
    }

    /// Give every dirty node a block (children before parents) and make the tree clean, without serialising
    /// anything: the returned nodes (block order = write order) are immutable snapshots (clean nodes are never
    /// changed in place; a later change copies them), so a checkpoint can encode and write them over several
    /// loop turns. Until a node's block is written, the caller must serve reads of it (see `NodeIo`).
    /// [`Tree::freeze`] + [`Tree::snapshot_step`] do the same over several calls.
    pub fn snapshot_dirty(&mut self, alloc: &mut dyn FnMut() -> Result<u64>) -> Result<(Vec<SnapNode>, u64)> {
        self.freeze();
        let mut nodes = Vec::new();
        loop {
            if let Some(root) = self.snapshot_step(alloc, usize::MAX, &mut nodes)? {
                return Ok((nodes, root));
            }
        }
    }

    /// Freeze the dirty nodes as the snapshot a checkpoint writes, in O(1) per dirty slot and without touching
    /// the nodes: they become immutable (the live tree copies them on write, as clean nodes), and
    /// [`Tree::snapshot_step`] gives them blocks a slice at a time while the live tree goes on changing. A
    /// checkpoint start used to do the whole walk (block allocation, compaction, cache insert of ~2,000 nodes:
    /// 2.5–10 ms) in the loop turn that started it. The previous snapshot must be placed completely first.
    pub fn freeze(&mut self) {
        assert!(self.walk.is_none(), "freeze while a snapshot is being placed");
        debug_assert_eq!(self.frozen_count, 0);
        for (id, slot) in self.dirty.iter().enumerate() {
            if slot.is_some() {
                self.frozen[id] = Some(Frozen::default());
                self.frozen_count += 1;
            }
        }
        self.walk = Some(match self.root {
            Ptr::Mem(id) => (self.root, vec![(id, 0)]),
            Ptr::Disk(_) => (self.root, Vec::new()),
        });
    }

    /// A frozen snapshot is being placed ([`Tree::freeze`] called, [`Tree::snapshot_step`] not done yet).
    pub fn snapshot_in_progress(&self) -> bool {
        self.walk.is_some()
    }

    /// Place up to `budget` nodes of the frozen snapshot (children before parents), appending them to `out`;
    /// `Some(root block)` once the whole snapshot is placed. Then the live tree's pointers to frozen nodes are
    /// turned into block pointers and the frozen slots released.
    pub fn snapshot_step(
        &mut self,
        alloc: &mut dyn FnMut() -> Result<u64>,
        budget: usize,
        out: &mut Vec<SnapNode>,
    ) -> Result<Option<u64>> {
        let Some((snap_root, mut stack)) = self.walk.take() else {
            return Err(StoreError::Invalid("no snapshot to place"));
        };
        let mut placed = 0;
        while let Some(&(id, next)) = stack.last() {
            if placed >= budget {
                self.walk = Some((snap_root, stack));
                return Ok(None);
            }
            let kids = &self.mem(id).kids;
            if let Some(&k) = kids.get(next) {
                if let Some(top) = stack.last_mut() {
                    top.1 += 1;
                }
                if let Ptr::Mem(kid) = k {
                    stack.push((kid, 0));
                }
                continue;
            }
            stack.pop();
            if let Err(e) = self.place_frozen(id, alloc, out) {
                self.walk = Some((snap_root, stack));
                return Err(e);
            }
            placed += 1;
        }
        let root = match snap_root {
            Ptr::Disk(b) => Some(b),
            Ptr::Mem(id) => self.frozen[id as usize].and_then(|f| f.block),
        };
        let Some(root) = root else {
            return Err(StoreError::Invalid("snapshot root not placed"));
        };
        self.release_frozen();
        Ok(Some(root))
    }

    fn place_frozen(
        &mut self,
        id: u32,
        alloc: &mut dyn FnMut() -> Result<u64>,
        out: &mut Vec<SnapNode>,
    ) -> Result<()> {
        let b = alloc()?;
        let slot = self.dirty[id as usize].take().expect("frozen slot is occupied");
        let mut node = Rc::unwrap_or_clone(slot);
        for k in node.kids.iter_mut() {
            if let Ptr::Mem(kid) = *k {
                let block = self.frozen[kid as usize].and_then(|f| f.block);
                *k = Ptr::Disk(block.expect("children are placed before their parent"));
            }
        }
        let node = Rc::new(node.compacted());
        // The slot keeps the clean version (same content; children as blocks) for live pointers to it.
        self.dirty[id as usize] = Some(node.clone());
        let f = self.frozen[id as usize].get_or_insert_with(Frozen::default);
        f.block = Some(b);
        if f.superseded {
            self.superseded.push(b);
        } else {
            self.insert_clean(b, node.clone());
        }
        out.push((b, node));
        Ok(())
    }

    /// The snapshot is placed: point the live tree at blocks instead of frozen slots, and free the slots. Only
    /// the root and live internal nodes can point at frozen nodes (a frozen node's one live parent).
    fn release_frozen(&mut self) {
        let block_of = |frozen: &[Option<Frozen>], p: Ptr| match p {
            Ptr::Mem(id) => frozen[id as usize].and_then(|f| f.block).map_or(p, Ptr::Disk),
            Ptr::Disk(_) => p,
        };
        self.root = block_of(&self.frozen, self.root);
        for id in 0..self.dirty.len() {
            if self.frozen[id].is_some() {
                continue;
            }
            let Some(n) = self.dirty[id].as_ref() else {
                continue;
            };
            if n.is_leaf()
                || !n
                    .kids
                    .iter()
                    .any(|k| matches!(k, Ptr::Mem(c) if self.frozen[*c as usize].is_some()))
            {
                continue;
            }
            let frozen = &self.frozen;
            let n = Rc::make_mut(self.dirty[id].as_mut().expect("checked above"));
            for k in n.kids.iter_mut() {
                *k = block_of(frozen, *k);
            }
        }
        for id in 0..self.dirty.len() {
            if self.frozen[id].take().is_some() {
                self.dirty[id] = None;
                self.free_ids.push(id as u32);
            }
        }
        self.frozen_count = 0;
        if self.dirty_nodes() == 0 {
            self.dirty.clear();
            self.frozen.clear();
            self.free_ids.clear();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::Rng;
    use std::collections::BTreeMap;

    #[derive(Default)]
    struct MemIo(HashMap<u64, Bytes>);
    impl NodeIo for MemIo {
        fn read_node(&mut self, block: u64) -> Result<Bytes> {
            self.0
                .get(&block)
                .cloned()
                .ok_or(StoreError::Io("missing".into()))
        }
    }

    /// A bounded scan from `k` to `end` and both floors of `end` agree with the model.
    fn check_scan_and_floor(
        t: &mut Tree,
        io: &mut MemIo,
        model: &BTreeMap<Vec<u8>, Vec<u8>>,
        k: &[u8],
        end: &[u8],
        limit: usize,
    ) {
        let got = t.scan(io, k, Some(end), limit).unwrap();
        let want: Vec<_> = if k < end {
            model
                .range(k.to_vec()..end.to_vec())
                .take(limit)
                .map(|(a, b)| (a.clone(), b.clone()))
                .collect()
        } else {
            vec![]
        };
        assert_eq!(got, want);
        for inclusive in [true, false] {
            let f = t.floor(io, end, inclusive).unwrap();
            let w = if inclusive {
                model.range(..=end.to_vec()).next_back()
            } else {
                model.range(..end.to_vec()).next_back()
            };
            assert_eq!(f, w.map(|(a, b)| (a.clone(), b.clone())), "floor {inclusive}");
        }
    }

    fn checkpoint(t: &mut Tree, io: &mut MemIo, next: &mut u64) {
        let (w, _) = t
            .flush_dirty(&mut || {
                *next += 1;
                Ok(*next)
            })
            .unwrap();
        for (b, data) in w {
            io.0.insert(b, Bytes::from(data));
        }
    }

    proptest::proptest! {
        #[test]
        fn key_cmp_is_byte_order(
            p in proptest::collection::vec(0u8..3, 0..20),
            a in proptest::collection::vec(0u8..4, 0..20),
            b in proptest::collection::vec(0u8..4, 0..20),
        ) {
            let x = [p.clone(), a].concat();
            let y = [p, b].concat();
            proptest::prop_assert_eq!(key_cmp(&x, &y), x.cmp(&y));
            proptest::prop_assert_eq!(key_cmp(&y, &x), y.cmp(&x));
            proptest::prop_assert_eq!(key_cmp(&x, &x), std::cmp::Ordering::Equal);
        }
    }

    type Model = BTreeMap<Vec<u8>, Vec<u8>>;

    /// Put `k` with a random value of up to `max_len` bytes in the tree and the model.
    fn put_random(t: &mut Tree, io: &mut MemIo, model: &mut Model, rng: &mut Rng, k: Vec<u8>, max_len: u64) {
        let v = vec![rng.below(256) as u8; rng.below(max_len) as usize];
        t.put(io, &k, &v).unwrap();
        model.insert(k, v);
    }

    /// The whole tree equals the model.
    fn assert_tree_is(t: &mut Tree, io: &mut MemIo, model: &Model) {
        let all = t.scan(io, b"", None, usize::MAX).unwrap();
        let want: Vec<_> = model.iter().map(|(a, b)| (a.clone(), b.clone())).collect();
        assert_eq!(all, want);
    }

    /// Every block reachable from `root` (reading nodes through `io`).
    fn reachable(io: &mut MemIo, root: u64) -> std::collections::BTreeSet<u64> {
        let mut t = Tree::open(root, 1 << 20);
        let mut blocks = std::collections::BTreeSet::new();
        t.walk(io, &mut |b, _| {
            blocks.extend(b);
        })
        .unwrap();
        blocks
    }

    /// A snapshot placed a few nodes at a time while the live tree goes on changing (`freeze` +
    /// `snapshot_step`, as a background checkpoint does it): the snapshot holds exactly the state at the freeze,
    /// the live tree stays equal to the model, and the blocks the live tree superseded are neither in the
    /// snapshot they are freed after nor in the live tree. Freed blocks are reused at once, so a stale clean
    /// cache entry or a live pointer to a freed block shows up as wrong data.
    #[test]
    fn incremental_snapshot_is_the_frozen_state_while_the_tree_changes() {
        for seed in 0..8u64 {
            let mut rng = Rng::new(100 + seed);
            let mut io = MemIo::default();
            let mut t = Tree::empty(if seed % 2 == 0 { 8 } else { 4096 });
            let mut model: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
            let mut next = 0u64;
            let mut free: Vec<u64> = Vec::new();
            // (frozen model, blocks superseded before the freeze: free once this snapshot is placed)
            type Snap = (BTreeMap<Vec<u8>, Vec<u8>>, Vec<u64>);
            let mut snap: Option<Snap> = None;
            let mut snapshots = 0;
            for step in 0..4000 {
                let k = format!("k{:05}", rng.below(1500)).into_bytes();
                match rng.below(10) {
                    0..=6 => put_random(&mut t, &mut io, &mut model, &mut rng, k, 200),
                    7..=8 => {
                        let base = rng.below(1500);
                        let ks: Vec<Vec<u8>> = (0..rng.below(30))
                            .map(|i| format!("k{:05}", base + i).into_bytes())
                            .collect();
                        let want = ks.iter().filter(|k| model.remove(*k).is_some()).count();
                        let ks: Vec<&[u8]> = ks.iter().map(|k| k.as_slice()).collect();
                        assert_eq!(t.delete_sorted(&mut io, &ks, &mut |_, _| ()).unwrap(), want);
                    }
                    _ => {
                        assert_eq!(t.get(&mut io, &k).unwrap(), model.get(&k).cloned());
                    }
                }
                if snap.is_none() && step % 150 == 0 {
                    t.freeze();
                    snap = Some((model.clone(), std::mem::take(&mut t.superseded)));
                }
                if snap.is_some() && step % 3 == 0 {
                    let mut out = Vec::new();
                    let mut alloc = || {
                        Ok(free.pop().unwrap_or_else(|| {
                            next += 1;
                            next
                        }))
                    };
                    let done = t
                        .snapshot_step(&mut alloc, 1 + rng.below(6) as usize, &mut out)
                        .unwrap();
                    // Placed nodes are served to reads at once (the store's `nodes_queued`).
                    for (b, n) in out {
                        io.0.insert(b, Bytes::from(n.encode(b).unwrap()));
                    }
                    if let Some(root) = done {
                        snapshots += 1;
                        let (frozen, freed) = snap.take().unwrap();
                        let mut st = Tree::open(root, 8);
                        let got = st.scan(&mut io, b"", None, usize::MAX).unwrap();
                        let want: Vec<_> = frozen.into_iter().collect();
                        assert_eq!(
                            got, want,
                            "seed {seed} step {step}: snapshot is not the frozen state"
                        );
                        let in_snap = reachable(&mut io, root);
                        for b in &freed {
                            assert!(
                                !in_snap.contains(b),
                                "seed {seed}: freed block {b} in the snapshot"
                            );
                        }
                        // The blocks become reusable: drop their content so a stale pointer fails loudly.
                        for b in freed {
                            io.0.remove(&b);
                            free.push(b);
                        }
                    }
                }
                if step % 250 == 0 {
                    assert_tree_is(&mut t, &mut io, &model);
                }
            }
            assert!(snapshots >= 10, "seed {seed}: only {snapshots} snapshots");
            assert_tree_is(&mut t, &mut io, &model);
        }
    }

    #[test]
    fn matches_btreemap_under_random_ops_with_checkpoints_and_tiny_cache() {
        for seed in 0..6u64 {
            let mut rng = Rng::new(seed);
            let mut io = MemIo::default();
            let mut t = Tree::empty(8);
            let mut model = BTreeMap::new();
            let mut next = 0u64;
            for step in 0..3000 {
                let k = format!("k{:05}", rng.below(800)).into_bytes();
                match rng.below(10) {
                    0..=5 => put_random(&mut t, &mut io, &mut model, &mut rng, k, 300),
                    6..=7 => {
                        assert_eq!(t.delete(&mut io, &k).unwrap(), model.remove(&k).is_some());
                    }
                    8 => {
                        // A sorted batch: a run of neighbours (some absent) and a few far keys.
                        let mut ks = std::collections::BTreeSet::new();
                        let base = rng.below(800);
                        for i in 0..rng.below(40) {
                            ks.insert(format!("k{:05}", base + i).into_bytes());
                        }
                        for _ in 0..rng.below(4) {
                            ks.insert(format!("k{:05}", rng.below(800)).into_bytes());
                        }
                        let want = ks.iter().filter(|k| model.remove(*k).is_some()).count();
                        let ks: Vec<&[u8]> = ks.iter().map(|k| k.as_slice()).collect();
                        let mut seen = Vec::new();
                        let n = t
                            .delete_sorted(&mut io, &ks, &mut |k, _| seen.push(k.to_vec()))
                            .unwrap();
                        assert_eq!((n, seen.len()), (want, want));
                    }
                    _ => {
                        let end = format!("k{:05}", rng.below(800)).into_bytes();
                        check_scan_and_floor(&mut t, &mut io, &model, &k, &end, 50);
                    }
                }
                if step % 97 == 0 {
                    checkpoint(&mut t, &mut io, &mut next);
                }
            }
            assert_tree_is(&mut t, &mut io, &model);
            checkpoint(&mut t, &mut io, &mut next);
            let root = match t.root() {
                Ptr::Disk(b) => b,
                Ptr::Mem(_) => panic!("root still dirty"),
            };
            assert_tree_is(&mut Tree::open(root, 8), &mut io, &model);
        }
    }

    /// Sorted batches of puts and deletes (`apply_sorted`, as a transaction commits), from a few neighbours to
    /// hundreds of keys and values up to the entry limit (one leaf takes up to `APPLY_CHUNK` changes and splits
    /// into several nodes, the root grows by more than one child), against the model: the tree's contents,
    /// every `old` callback (the value replaced or removed, exactly once per present key), and the tree reopened
    /// from a checkpoint. A tiny node cache makes descents read clean nodes back.
    #[test]
    fn sorted_batches_match_btreemap() {
        for seed in 0..12u64 {
            let mut rng = Rng::new(500 + seed);
            let mut io = MemIo::default();
            let mut t = Tree::empty(if seed % 3 == 0 { 8 } else { 4096 });
            let mut model = Model::new();
            let mut next = 0u64;
            let space = [60, 600, 6000][(seed % 3) as usize];
            for step in 0..400 {
                let mut batch: BTreeMap<Vec<u8>, Option<Vec<u8>>> = BTreeMap::new();
                let base = rng.below(space);
                let n = [1, 4, 16, 70, 300][rng.below(5) as usize];
                for _ in 0..n {
                    let k = format!("k{:06}", base + rng.below(n * 2)).into_bytes();
                    let v = match rng.below(3) {
                        0 => None,
                        // Mostly small values; some near the entry limit (a handful fill a node).
                        _ if rng.below(8) == 0 => Some(vec![rng.below(256) as u8; MAX_ENTRY - 7]),
                        _ => Some(vec![rng.below(256) as u8; rng.below(120) as usize]),
                    };
                    batch.insert(k, v);
                }
                let changes: Vec<Change<'_>> =
                    batch.iter().map(|(k, v)| (k.as_slice(), v.as_deref())).collect();
                let mut seen = Vec::new();
                t.apply_sorted(&mut io, &changes, &mut |k, v| seen.push((k.to_vec(), v.to_vec())))
                    .unwrap();
                let mut want = Vec::new();
                for (k, v) in batch {
                    let before = match v {
                        Some(v) => model.insert(k.clone(), v),
                        None => model.remove(&k),
                    };
                    want.extend(before.map(|b| (k, b)));
                }
                assert_eq!(seen, want, "seed {seed} step {step}: old values");
                if step % 37 == 0 {
                    checkpoint(&mut t, &mut io, &mut next);
                }
                if step % 50 == 0 {
                    assert_tree_is(&mut t, &mut io, &model);
                }
            }
            assert_tree_is(&mut t, &mut io, &model);
            // Every node fits its block: the checkpoint serialises them all.
            checkpoint(&mut t, &mut io, &mut next);
            let Ptr::Disk(root) = t.root() else {
                panic!("root still dirty")
            };
            assert_tree_is(&mut Tree::open(root, 8), &mut io, &model);
        }
    }

    /// A batch that deletes every key empties the tree back to one leaf; puts after it work.
    #[test]
    fn a_batch_deleting_everything_leaves_an_empty_tree() {
        let mut io = MemIo::default();
        let mut t = Tree::empty(4096);
        let keys: Vec<Vec<u8>> = (0..2000u32).map(|i| format!("key{i:05}").into_bytes()).collect();
        let val = vec![7u8; 100];
        let puts: Vec<Change<'_>> = keys
            .iter()
            .map(|k| (k.as_slice(), Some(val.as_slice())))
            .collect();
        t.apply_sorted(&mut io, &puts, &mut |_, _| panic!("nothing to replace"))
            .unwrap();
        assert!(t.node(&mut io, t.root()).unwrap().level >= 1);
        let dels: Vec<Change<'_>> = keys.iter().map(|k| (k.as_slice(), None)).collect();
        let mut removed = 0;
        t.apply_sorted(&mut io, &dels, &mut |_, _| removed += 1).unwrap();
        assert_eq!(removed, keys.len());
        let root = t.node(&mut io, t.root()).unwrap();
        assert!(root.is_leaf() && root.is_empty());
        t.put(&mut io, b"again", b"1").unwrap();
        assert_tree_is(
            &mut t,
            &mut io,
            &Model::from([(b"again".to_vec(), b"1".to_vec())]),
        );
    }

    /// Keys built to stress the node's common prefix and 16-byte heads: families sharing 0, 1, 9 or 40 bytes,
    /// keys that are prefixes of each other, trailing zero bytes (zero padding must not make "ab" equal
    /// "ab\0"), the empty key, and values whose size changes (rewrites leave dead bytes, compaction).
    fn tricky_key(rng: &mut Rng) -> Vec<u8> {
        let family: &[u8] = match rng.below(4) {
            0 => b"",
            1 => b"\x03",
            2 => b"\x03\0\0\0\0\0\0\0\x07",
            _ => b"\x06\0\0\0\0\0\0\0\x09pglog.0000000007.000000000000",
        };
        let mut k = family.to_vec();
        for _ in 0..rng.below(24) {
            k.push([0u8, 1, 0x30, 0x31, 0xff][rng.below(5) as usize]);
        }
        k
    }

    #[test]
    fn matches_btreemap_with_prefix_heavy_keys() {
        for seed in 0..8u64 {
            let mut rng = Rng::new(100 + seed);
            let mut io = MemIo::default();
            let mut t = Tree::empty(8);
            let mut model = BTreeMap::new();
            let mut next = 0u64;
            for step in 0..4000 {
                let k = tricky_key(&mut rng);
                match rng.below(10) {
                    0..=5 => {
                        let v = vec![rng.below(256) as u8; rng.below(200) as usize];
                        t.put(&mut io, &k, &v).unwrap();
                        model.insert(k, v);
                    }
                    6..=7 => {
                        assert_eq!(t.delete(&mut io, &k).unwrap(), model.remove(&k).is_some());
                    }
                    _ => {
                        assert_eq!(t.get(&mut io, &k).unwrap(), model.get(&k).cloned());
                        let end = tricky_key(&mut rng);
                        check_scan_and_floor(&mut t, &mut io, &model, &k, &end, 30);
                    }
                }
                if step % 331 == 0 {
                    checkpoint(&mut t, &mut io, &mut next);
                }
            }
            let want: Vec<_> = model.iter().map(|(a, b)| (a.clone(), b.clone())).collect();
            assert_eq!(t.scan(&mut io, b"", None, usize::MAX).unwrap(), want);
            for (k, v) in &model {
                assert_eq!(t.get(&mut io, k).unwrap().as_ref(), Some(v));
            }
            checkpoint(&mut t, &mut io, &mut next);
            let Ptr::Disk(root) = t.root() else {
                panic!("root still dirty")
            };
            let mut reopened = Tree::open(root, 8);
            assert_eq!(reopened.scan(&mut io, b"", None, usize::MAX).unwrap(), want);
        }
    }

    #[test]
    fn a_node_copied_for_a_write_has_its_entries_and_room_for_an_insert() {
        let mut n = Node::leaf();
        for i in 0..40u32 {
            let k = format!("key.{i:05}");
            n.insert_leaf(i as usize, k.as_bytes(), &[i as u8; 24]);
        }
        // Dead bytes: a value replaced by a longer one is appended, its old bytes stay.
        for i in (0..40).step_by(3) {
            n.set_val(i, &[0xee; 40]);
        }
        assert!(n.buf.len() > n.live_bytes());
        let mut c = n.copy_for_write();
        assert_eq!(c.buf.len(), n.live_bytes(), "the copy holds live bytes only");
        assert_eq!(
            (c.len(), c.bytes, c.cpl, c.level),
            (n.len(), n.bytes, n.cpl, n.level)
        );
        for i in 0..n.len() {
            assert_eq!(
                (c.key(i), c.val(i), c.ents[i].head),
                (n.key(i), n.val(i), n.ents[i].head)
            );
        }
        let (buf, ents) = (c.buf.as_ptr(), c.ents.as_ptr());
        c.insert_leaf(40, b"key.00040", &[1; 100]);
        c.set_val(0, &[2; 60]);
        assert_eq!(
            (c.buf.as_ptr(), c.ents.as_ptr()),
            (buf, ents),
            "no reallocation for one transaction's changes"
        );
        assert_eq!(
            (c.key(40), c.val(40), c.val(0)),
            (&b"key.00040"[..], &[1; 100][..], &[2; 60][..])
        );
    }

    #[test]
    fn corrupt_node_is_an_error_not_data() {
        let mut io = MemIo::default();
        let mut t = Tree::empty(8);
        t.put(&mut io, b"a", b"1").unwrap();
        let mut next = 10;
        checkpoint(&mut t, &mut io, &mut next);
        let mut b = io.0[&11].to_vec();
        b[40] ^= 4;
        io.0.insert(11, Bytes::from(b));
        let mut t2 = Tree::open(11, 8);
        assert!(matches!(t2.get(&mut io, b"a"), Err(StoreError::Checksum { .. })));
    }

    #[test]
    fn oversized_entries_are_rejected() {
        let mut io = MemIo::default();
        let mut t = Tree::empty(8);
        assert!(t.put(&mut io, &[1u8; MAX_KEY + 1], b"").is_err());
        assert!(t.put(&mut io, b"k", &vec![0u8; MAX_ENTRY]).is_err());
        t.put(&mut io, b"k", &vec![0u8; MAX_ENTRY - 1]).unwrap();
    }
}
