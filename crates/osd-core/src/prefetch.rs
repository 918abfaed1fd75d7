// SPDX-License-Identifier: LGPL-3.0-or-later
//! Asynchronous client reads: the data of a read op is fetched from the device before the op runs, so the core
//! never blocks on the device for it and the reads of different objects overlap.
//!
//! The op engine (`pg` crate) executes an op synchronously: a read calls `ferrostore::Store::read`, which would
//! wait for the device. Instead, before a read-only op whose byte ranges are known from the message (READ,
//! SYNC_READ, SPARSE_READ, CMPEXT, CHECKSUM; a length of 0 reads to the object's end) is handed to the engine,
//! the PG asks the store to `prefetch` those ranges and parks the op. When the store reports the reads done
//! (`ferrostore::Event::Prefetched`, fed in as [`crate::Input::Prefetched`]) the op runs; its `read` calls are
//! served from memory; then the prefetch is released. Ops that arrive for a parked object wait behind it in
//! arrival order (per-object order is Ceph's guarantee); ops on other objects go on. A snapshot read prefetches
//! from the clone that serves it (`pg::Pg::snap_read_object`; the ops still queue by the head's name, as Ceph
//! orders them). Anything else — writes, class calls (what they read is known only when they run), SNAPDIR
//! listings, ops whose reads need no device IO — runs at once as before.
//!
//! A new interval hands parked ops back to the PG's queue (they run again after peering); the end of a primary
//! term drops them (the clients resend). A change to a prefetched object by anyone (a write queued behind the
//! read cannot run before it, but recovery or a replicated write can) makes the store drop the prefetched data,
//! so an op never sees stale bytes: its read then simply goes to the device.

use std::collections::VecDeque;

use ceph_msgs::osd_op::{MOSDOp, op};
use denc::{HObject, SnapId, SpgId};
use ferrostore::hash::{FastMap, SeededMap};
use ferrostore::{Device, Store};

use crate::pgstate::Cx;
use crate::{ClientOp, OsdShard, glue};

/// The byte ranges `(offset, length)` (length 0: to the object's end) an op will read from its object's data (the
/// head, or for a snapshot read the clone that serves it), if it is a plain read whose reads are known before it
/// runs. `None`: run it at once.
pub(crate) fn plan(m: &MOSDOp) -> Option<Vec<(u64, u64)>> {
    if m.snapid == SnapId::SNAPDIR || m.ops.is_empty() {
        return None;
    }
    let mut ranges = Vec::new();
    for o in &m.ops {
        let code = o.op;
        if !op::is_read(code) || op::is_write(code) || op::is_pg_op(code) || code & op::TYPE == op::TYPE_EXEC
        {
            return None;
        }
        match code {
            op::READ | op::SYNC_READ => {
                let x = o.extent();
                ranges.push((x.offset, x.length));
            }
            op::SPARSE_READ | op::CMPEXT => {
                let x = o.extent();
                if x.length > 0 {
                    ranges.push((x.offset, x.length));
                }
            }
            op::CHECKSUM => {
                let a = o.checksum();
                if a.length > 0 || a.offset == 0 {
                    ranges.push((a.offset, a.length));
                }
            }
            _ => {}
        }
    }
    (!ranges.is_empty()).then_some(ranges)
}

/// Bound of `OsdShard::coll_pgs` (collections: a shard's PGs, far fewer).
const COLL_PGS_MAX: usize = 4096;

/// A parked object: the prefetch in flight (or done) for its first op, and the ops queued behind it.
#[derive(Debug)]
struct Obj {
    token: u64,
    ops: VecDeque<Box<ClientOp>>,
}

/// A PG's parked ops, by object.
#[derive(Debug, Default)]
pub(crate) struct Parked {
    objs: SeededMap<HObject, Obj>,
    /// token → object; tokens whose reads completed, in completion order.
    tokens: FastMap<u64, HObject>,
    ready: VecDeque<u64>,
}

impl Parked {
    /// Ops parked (for reports).
    pub fn len(&self) -> usize {
        self.objs.values().map(|o| o.ops.len()).sum()
    }

    /// Whether ops on `oid` are parked (a new op on it must wait behind them).
    pub fn holds(&self, oid: &HObject) -> bool {
        !self.objs.is_empty() && self.objs.contains_key(oid)
    }

    /// Queue `op` behind the parked ops of its object (`holds` was true).
    pub fn queue_behind(&mut self, oid: &HObject, op: Box<ClientOp>) {
        match self.objs.get_mut(oid) {
            Some(o) => o.ops.push_back(op),
            None => debug_assert!(false, "queue_behind without a parked object"),
        }
    }

    /// Start the device reads of `op` and park it, if it is a read worth prefetching; otherwise hand it back
    /// (run it now).
    pub fn park<D: Device>(
        &mut self,
        store: &mut Store<D>,
        spgid: &SpgId,
        pg: &mut pg::Pg,
        oid: &HObject,
        op: Box<ClientOp>,
    ) -> Result<(), Box<ClientOp>> {
        let Some(ranges) = plan(&op.msg) else {
            return Err(op);
        };
        let key = if op.msg.snapid == SnapId::NOSNAP {
            pg::keys::object_key(oid, spgid)
        } else {
            // the clone (or head) the snapshot read will read; unknown: the op answers for itself now
            match pg.snap_read_object(store, &op.msg) {
                Some(k) => k,
                None => return Err(op),
            }
        };
        // Errors (no such object, name too long) are the engine's to answer: run it now.
        let Ok(Some(token)) = store.prefetch(pg.collection(), &key, &ranges) else {
            return Err(op);
        };
        self.tokens.insert(token, oid.clone());
        self.objs.insert(
            oid.clone(),
            Obj {
                token,
                ops: VecDeque::from([op]),
            },
        );
        Ok(())
    }

    /// The reads of `token` completed; false if it is not one of this PG's.
    pub fn completed(&mut self, token: u64) -> bool {
        if !self.tokens.contains_key(&token) {
            return false;
        }
        self.ready.push_back(token);
        true
    }

    /// The next object whose reads completed: its prefetch token and its ops in order (the first is the one
    /// the reads are for). The object is no longer parked.
    pub fn pop_ready(&mut self) -> Option<(u64, VecDeque<Box<ClientOp>>)> {
        while let Some(t) = self.ready.pop_front() {
            let Some(oid) = self.tokens.remove(&t) else {
                continue;
            };
            if let Some(o) = self.objs.remove(&oid) {
                return Some((o.token, o.ops));
            }
        }
        None
    }

    /// Un-park everything (new interval, end of the primary term): the prefetches are released; the ops come
    /// back in order per object.
    #[allow(clippy::vec_box)] // ops move between the queues as boxes, without copying the op
    pub fn take_all<D: Device>(&mut self, store: &mut Store<D>) -> Vec<Box<ClientOp>> {
        let mut out = Vec::new();
        for (_, o) in self.objs.drain() {
            store.release_prefetch(o.token);
            out.extend(o.ops);
        }
        self.tokens.clear();
        self.ready.clear();
        out
    }
}

impl<D: Device> OsdShard<D> {
    /// Completed prefetches of the store: each goes to its PG (found by the collection it was for), which runs
    /// the parked op. Tokens nobody owns any more (the PG went away) are released.
    pub(crate) fn handle_prefetched(&mut self) {
        let mut done = std::mem::take(&mut self.prefetched);
        self.store.drain_prefetched(&mut done);
        for (token, cid) in done.drain(..) {
            let spgid = match self.coll_pgs.get(&cid) {
                Some(s) => *s,
                None => {
                    if self.coll_pgs.len() >= COLL_PGS_MAX {
                        self.coll_pgs.clear();
                    }
                    let s = glue::parse_collection(&cid);
                    self.coll_pgs.insert(cid, s);
                    s
                }
            };
            let epoch = self.map.as_ref().map_or(0, |m| m.epoch);
            let mut cx = Cx {
                cfg: &self.cfg,
                store: &mut self.store,
                out: &mut self.outputs,
                now: self.now,
                wall: self.wall,
                epoch,
                errors: &mut self.errors,
                repops_resent_overdue: &mut self.repops_resent_overdue,
                reserver: &mut self.reserver,
                granted: &mut self.granted,
            };
            let owned = match spgid.and_then(|s| self.pgs.get_mut(&s)) {
                Some(p) => p.prefetched(&mut cx, token),
                None => false,
            };
            if !owned {
                self.store.release_prefetch(token);
            }
        }
        self.prefetched = done;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ceph_msgs::osd_op::OSDOp;

    fn msg(ops: Vec<OSDOp>) -> MOSDOp {
        MOSDOp {
            snapid: SnapId::NOSNAP,
            ops,
            ..Default::default()
        }
    }

    #[test]
    fn plans_reads_only() {
        let r = msg(vec![OSDOp::new(op::READ).with_extent(4096, 8192)]);
        assert_eq!(plan(&r), Some(vec![(4096, 8192)]));
        let whole = msg(vec![OSDOp::new(op::READ).with_extent(0, 0), OSDOp::new(op::STAT)]);
        assert_eq!(plan(&whole), Some(vec![(0, 0)]));
        let sparse = msg(vec![OSDOp::new(op::SPARSE_READ).with_extent(0, 65536)]);
        assert_eq!(plan(&sparse), Some(vec![(0, 65536)]));
        // a write anywhere in the op, a stat only, a class call, a SNAPDIR listing: no prefetch
        let rw = msg(vec![
            OSDOp::new(op::READ).with_extent(0, 4096),
            OSDOp::new(op::WRITE).with_extent(0, 4096),
        ]);
        assert_eq!(plan(&rw), None);
        assert_eq!(plan(&msg(vec![OSDOp::new(op::STAT)])), None);
        assert_eq!(plan(&msg(vec![OSDOp::new(op::CALL)])), None);
        let mut snap = msg(vec![OSDOp::new(op::READ).with_extent(0, 4096)]);
        snap.snapid = SnapId(4);
        assert_eq!(plan(&snap), Some(vec![(0, 4096)]), "snapshot reads too");
        snap.snapid = SnapId::SNAPDIR;
        assert_eq!(plan(&snap), None);
        assert_eq!(
            plan(&msg(vec![OSDOp::new(op::SPARSE_READ).with_extent(0, 0)])),
            None
        );
    }
}
