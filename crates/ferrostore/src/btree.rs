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
use std::rc::Rc;

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

#[derive(Clone, Debug, Default)]
pub struct Node {
    pub level: u8,
    pub keys: Vec<Vec<u8>>,
    /// Leaf values (empty for internal nodes).
    pub vals: Vec<Vec<u8>>,
    /// Children (empty for leaves); `keys[i]` is the lower bound of `kids[i]`, `keys[0]` is ignored.
    pub kids: Vec<Ptr>,
    bytes: usize,
}

impl Node {
    fn leaf() -> Self {
        Node {
            bytes: HEADER,
            ..Default::default()
        }
    }
    fn is_leaf(&self) -> bool {
        self.level == 0
    }
    fn entry_size(&self, i: usize) -> usize {
        if self.is_leaf() {
            4 + self.keys[i].len() + self.vals[i].len()
        } else {
            10 + self.keys[i].len()
        }
    }
    /// Heap bytes this node holds in memory (approximate: allocations rounded to 16 bytes plus malloc's header).
    pub fn heap_bytes(&self) -> usize {
        let alloc = |n: usize| if n == 0 { 0 } else { (n + 8).div_ceil(16) * 16 };
        std::mem::size_of::<Node>()
            + alloc(self.keys.capacity() * 24)
            + alloc(self.vals.capacity() * 24)
            + alloc(self.kids.capacity() * std::mem::size_of::<Ptr>())
            + self.keys.iter().map(|k| alloc(k.capacity())).sum::<usize>()
            + self.vals.iter().map(|v| alloc(v.capacity())).sum::<usize>()
    }
    fn recompute(&mut self) {
        self.bytes = HEADER + (0..self.keys.len()).map(|i| self.entry_size(i)).sum::<usize>();
    }
    fn child_index(&self, key: &[u8]) -> usize {
        if self.keys.len() <= 1 {
            return 0;
        }
        self.keys[1..].partition_point(|k| key_cmp(k, key).is_le())
    }
    /// The child holding the last entry `< key` (not `<=`): the first child whose lower bound is `>= key` is not.
    fn child_index_before(&self, key: &[u8]) -> usize {
        if self.keys.len() <= 1 {
            return 0;
        }
        self.keys[1..].partition_point(|k| key_cmp(k, key).is_lt())
    }

    /// Serialise a node whose children are all on disk.
    pub fn encode(&self, self_block: u64) -> Result<Vec<u8>> {
        let mut w = Writer::with_capacity(BLOCK);
        w.u32(NODE_MAGIC)
            .u32(0)
            .u64(self_block)
            .u8(self.level)
            .u8(0)
            .u16(self.keys.len() as u16)
            .u32(0);
        for i in 0..self.keys.len() {
            let k = &self.keys[i];
            if self.is_leaf() {
                w.u16(k.len() as u16)
                    .u16(self.vals[i].len() as u16)
                    .bytes(k)
                    .bytes(&self.vals[i]);
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
            ..Default::default()
        };
        for _ in 0..n {
            let kl = r.u16()? as usize;
            if level == 0 {
                let vl = r.u16()? as usize;
                node.keys.push(r.take(kl)?.to_vec());
                node.vals.push(r.take(vl)?.to_vec());
            } else {
                node.keys.push(r.take(kl)?.to_vec());
                node.kids.push(Ptr::Disk(r.u64()?));
            }
        }
        if level > 0 && n == 0 {
            return Err(bad("empty internal node"));
        }
        node.recompute();
        Ok(node)
    }
}

/// A node split: the separator key and the new right sibling.
type Split = (Vec<u8>, Ptr);
/// A serialised node to write: (block, bytes).
pub type NodeWrite = (u64, Vec<u8>);

/// Source of clean nodes (the store reads them from the device).
pub trait NodeIo {
    fn read_node(&mut self, block: u64) -> Result<Bytes>;
}

pub struct Tree {
    root: Ptr,
    dirty: Vec<Option<Rc<Node>>>,
    free_ids: Vec<u32>,
    /// Clean nodes: (node, referenced since the clock hand last passed, heap bytes).
    cache: HashMap<u64, (Rc<Node>, bool, usize)>,
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
            cache: HashMap::new(),
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

    pub fn dirty_nodes(&self) -> usize {
        self.dirty.len() - self.free_ids.len()
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

    /// Heap bytes held by cached and dirty nodes (walks them all: for reports, not the hot path).
    pub fn memory_bytes(&self) -> usize {
        self.cache.values().map(|(_, _, b)| *b).sum::<usize>()
            + self.dirty.iter().flatten().map(|n| n.heap_bytes()).sum::<usize>()
    }

    fn alloc_mem(&mut self, n: Node) -> u32 {
        let rc = Rc::new(n);
        if let Some(id) = self.free_ids.pop() {
            self.dirty[id as usize] = Some(rc);
            id
        } else {
            self.dirty.push(Some(rc));
            (self.dirty.len() - 1) as u32
        }
    }

    fn free_mem(&mut self, id: u32) {
        self.dirty[id as usize] = None;
        self.free_ids.push(id);
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
            Ptr::Mem(id) => Ok(id),
            Ptr::Disk(b) => {
                let n = self.node(io, p)?;
                if let Some((_, _, bytes)) = self.cache.remove(&b) {
                    self.cache_bytes -= bytes;
                }
                self.superseded.push(b);
                Ok(self.alloc_mem((*n).clone()))
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
                return Ok(n
                    .keys
                    .binary_search_by(|k| key_cmp(k, key))
                    .ok()
                    .map(|i| f(&n.vals[i])));
            }
            p = n.kids[n.child_index(key)];
        }
    }

    pub fn put(&mut self, io: &mut dyn NodeIo, key: &[u8], val: &[u8]) -> Result<()> {
        if key.len() > MAX_KEY || key.len() + val.len() > MAX_ENTRY {
            return Err(StoreError::TooLarge(
                "metadata key/value exceeds the node entry limit",
            ));
        }
        let (root, split) = self.put_rec(io, self.root, key, val)?;
        self.root = root;
        if let Some((sep, right)) = split {
            let level = self.node(io, root)?.level + 1;
            let mut n = Node {
                level,
                keys: vec![Vec::new(), sep],
                kids: vec![root, right],
                ..Default::default()
            };
            n.recompute();
            self.root = Ptr::Mem(self.alloc_mem(n));
        }
        Ok(())
    }

    fn put_rec(
        &mut self,
        io: &mut dyn NodeIo,
        p: Ptr,
        key: &[u8],
        val: &[u8],
    ) -> Result<(Ptr, Option<Split>)> {
        let id = self.make_mut(io, p)?;
        if self.mem(id).is_leaf() {
            let n = self.mem_mut(id);
            match n.keys.binary_search_by(|k| key_cmp(k, key)) {
                Ok(i) => {
                    n.bytes = n.bytes + val.len() - n.vals[i].len();
                    n.vals[i] = val.to_vec();
                }
                Err(i) => {
                    n.keys.insert(i, key.to_vec());
                    n.vals.insert(i, val.to_vec());
                    n.bytes += 4 + key.len() + val.len();
                }
            }
        } else {
            let (idx, kid) = {
                let n = self.mem(id);
                let i = n.child_index(key);
                (i, n.kids[i])
            };
            let (nk, split) = self.put_rec(io, kid, key, val)?;
            let n = self.mem_mut(id);
            n.kids[idx] = nk;
            if let Some((sep, right)) = split {
                n.bytes += 10 + sep.len();
                n.keys.insert(idx + 1, sep);
                n.kids.insert(idx + 1, right);
            }
        }
        if self.mem(id).bytes > BLOCK {
            let right = self.split(id);
            let sep = right.keys[0].clone();
            let rid = self.alloc_mem(right);
            return Ok((Ptr::Mem(id), Some((sep, Ptr::Mem(rid)))));
        }
        Ok((Ptr::Mem(id), None))
    }

    fn split(&mut self, id: u32) -> Node {
        let n = self.mem_mut(id);
        let total = n.bytes - HEADER;
        let mut acc = 0;
        let mut at = 1;
        for i in 0..n.keys.len() {
            acc += n.entry_size(i);
            if acc >= total / 2 {
                at = (i + 1).clamp(1, n.keys.len() - 1);
                break;
            }
        }
        let mut right = Node {
            level: n.level,
            ..Default::default()
        };
        right.keys = n.keys.split_off(at);
        if n.is_leaf() {
            right.vals = n.vals.split_off(at);
        } else {
            right.kids = n.kids.split_off(at);
        }
        n.recompute();
        right.recompute();
        debug_assert!(n.bytes <= BLOCK && right.bytes <= BLOCK);
        right
    }

    /// Remove `key`; returns whether it was present.
    pub fn delete(&mut self, io: &mut dyn NodeIo, key: &[u8]) -> Result<bool> {
        if self.get(io, key)?.is_none() {
            return Ok(false);
        }
        let (root, _) = self.del_rec(io, self.root, key)?;
        self.root = root;
        loop {
            let n = self.node(io, self.root)?;
            if n.is_leaf() {
                break;
            }
            if n.kids.is_empty() {
                if let Ptr::Mem(id) = self.root {
                    self.free_mem(id);
                }
                self.root = Ptr::Mem(self.alloc_mem(Node::leaf()));
                break;
            }
            if n.kids.len() > 1 {
                break;
            }
            if let Ptr::Mem(id) = self.root {
                self.free_mem(id);
            }
            self.root = n.kids[0];
        }
        Ok(true)
    }

    fn del_rec(&mut self, io: &mut dyn NodeIo, p: Ptr, key: &[u8]) -> Result<(Ptr, bool)> {
        let id = self.make_mut(io, p)?;
        if self.mem(id).is_leaf() {
            let n = self.mem_mut(id);
            if let Ok(i) = n.keys.binary_search_by(|k| key_cmp(k, key)) {
                n.bytes -= 4 + n.keys[i].len() + n.vals[i].len();
                n.keys.remove(i);
                n.vals.remove(i);
            }
            let empty = n.keys.is_empty();
            return Ok((Ptr::Mem(id), empty));
        }
        let (idx, kid) = {
            let n = self.mem(id);
            let i = n.child_index(key);
            (i, n.kids[i])
        };
        let (nk, empty) = self.del_rec(io, kid, key)?;
        if empty {
            if let Ptr::Mem(cid) = nk {
                self.free_mem(cid);
            }
            let n = self.mem_mut(id);
            n.keys.remove(idx);
            n.kids.remove(idx);
            n.recompute();
        } else {
            self.mem_mut(id).kids[idx] = nk;
        }
        let empty = self.mem(id).kids.is_empty();
        Ok((Ptr::Mem(id), empty))
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
            let from = n.keys.partition_point(|k| key_cmp(k, start).is_lt());
            for i in from..n.keys.len() {
                if end.is_some_and(|e| key_cmp(&n.keys[i], e).is_ge()) || !f(&n.keys[i], &n.vals[i]) {
                    return Ok(false);
                }
            }
            return Ok(true);
        }
        let from = n.child_index(start);
        for j in from..n.kids.len() {
            if j > from && end.is_some_and(|e| key_cmp(&n.keys[j], e).is_ge()) {
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
            let i = n.keys.partition_point(|k| {
                let o = key_cmp(k, key);
                if inclusive { o.is_le() } else { o.is_lt() }
            });
            return Ok(i.checked_sub(1).map(|i| (n.keys[i].clone(), n.vals[i].clone())));
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
        let mut writes = Vec::new();
        let root = self.flush_rec(self.root, alloc, &mut writes)?;
        self.root = Ptr::Disk(root);
        debug_assert_eq!(self.dirty_nodes(), 0);
        self.dirty.clear();
        self.free_ids.clear();
        Ok((writes, root))
    }

    fn flush_rec(
        &mut self,
        p: Ptr,
        alloc: &mut dyn FnMut() -> Result<u64>,
        writes: &mut Vec<(u64, Vec<u8>)>,
    ) -> Result<u64> {
        let id = match p {
            Ptr::Disk(b) => return Ok(b),
            Ptr::Mem(id) => id,
        };
        let kids = self.mem(id).kids.clone();
        let mut new_kids = Vec::with_capacity(kids.len());
        for k in kids {
            new_kids.push(Ptr::Disk(self.flush_rec(k, alloc, writes)?));
        }
        let b = alloc()?;
        let mut node = self.dirty[id as usize]
            .take()
            .map(Rc::unwrap_or_clone)
            .unwrap_or_default();
        self.free_ids.push(id);
        node.kids = new_kids;
        writes.push((b, node.encode(b)?));
        self.insert_clean(b, Rc::new(node));
        Ok(b)
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
                    0..=5 => {
                        let v = vec![rng.below(256) as u8; rng.below(300) as usize];
                        t.put(&mut io, &k, &v).unwrap();
                        model.insert(k, v);
                    }
                    6..=8 => {
                        assert_eq!(t.delete(&mut io, &k).unwrap(), model.remove(&k).is_some());
                    }
                    _ => {
                        let end = format!("k{:05}", rng.below(800)).into_bytes();
                        let got = t.scan(&mut io, &k, Some(&end), 50).unwrap();
                        let want: Vec<_> = if k < end {
                            model
                                .range(k.clone()..end.clone())
                                .take(50)
                                .map(|(a, b)| (a.clone(), b.clone()))
                                .collect()
                        } else {
                            vec![]
                        };
                        assert_eq!(got, want);
                        for inclusive in [true, false] {
                            let f = t.floor(&mut io, &end, inclusive).unwrap();
                            let w = if inclusive {
                                model.range(..=end.clone()).next_back()
                            } else {
                                model.range(..end.clone()).next_back()
                            };
                            assert_eq!(f, w.map(|(a, b)| (a.clone(), b.clone())), "floor {inclusive}");
                        }
                    }
                }
                if step % 97 == 0 {
                    checkpoint(&mut t, &mut io, &mut next);
                }
            }
            let all = t.scan(&mut io, b"", None, usize::MAX).unwrap();
            let want: Vec<_> = model.iter().map(|(a, b)| (a.clone(), b.clone())).collect();
            assert_eq!(all, want);
            checkpoint(&mut t, &mut io, &mut next);
            let root = match t.root() {
                Ptr::Disk(b) => b,
                Ptr::Mem(_) => panic!("root still dirty"),
            };
            let mut reopened = Tree::open(root, 8);
            assert_eq!(reopened.scan(&mut io, b"", None, usize::MAX).unwrap(), want);
        }
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
