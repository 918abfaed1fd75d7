// SPDX-License-Identifier: LGPL-3.0-or-later
//! The shard's input handlers: maps (PG placement and life cycle), client ops, peer messages, store events,
//! timers.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use denc::{SpgId, Utime};
use ferrostore::Device;
use osdmap::OsdMap;
use peering::{MapView, PoolView};

use crate::history::Placed;
use crate::pgstate::{Cx, PgState};
use crate::{ClientOp, MAX_WAITING_FOR_MAP, OsdShard, Output, PgRouter, glue, repl};

/// The map-wide part of every PG's [`MapView`] (computed once per epoch).
struct Base {
    up_thru: BTreeMap<i32, u32>,
    up_osds: BTreeSet<i32>,
}

fn base(m: &OsdMap) -> Base {
    let mut up_thru = BTreeMap::new();
    let mut up_osds = BTreeSet::new();
    for o in 0..m.max_osd.max(0) {
        if !m.exists(o) {
            continue;
        }
        if let Some(i) = m.osd_info.get(o as usize) {
            up_thru.insert(o, i.up_thru);
        }
        if m.is_up(o) {
            up_osds.insert(o);
        }
    }
    Base { up_thru, up_osds }
}

macro_rules! cx {
    ($s:ident) => {
        Cx {
            cfg: &$s.cfg,
            store: &mut $s.store,
            out: &mut $s.outputs,
            now: $s.now,
            wall: $s.wall,
            epoch: $s.map.as_ref().map_or(0, |m| m.epoch),
            errors: &mut $s.errors,
            repops_resent_overdue: &mut $s.repops_resent_overdue,
            reserver: &mut $s.reserver,
            granted: &mut $s.granted,
        }
    };
}

/// A PG's mapping as remembered for a later creation here: only what its interval needs (the acting set's
/// up_thru and up state), not the whole map's.
#[allow(clippy::too_many_arguments)]
fn placed_view(
    m: &OsdMap,
    pool: &osdmap::PgPool,
    up: &[i32],
    acting: &[i32],
    b: &Base,
    up_primary: i32,
    acting_primary: i32,
) -> MapView {
    MapView {
        epoch: m.epoch,
        pool: PoolView {
            size: u32::from(pool.size),
            min_size: u32::from(pool.min_size),
        },
        up: up.to_vec(),
        up_primary,
        acting: acting.to_vec(),
        acting_primary,
        up_thru: b
            .up_thru
            .iter()
            .filter(|(o, _)| acting.contains(o))
            .map(|(o, t)| (*o, *t))
            .collect(),
        up_osds: b.up_osds.iter().filter(|o| acting.contains(o)).copied().collect(),
    }
}

/// `pg_t::get_ancestor`: the seed that `seed` split off from when the pool had `old_pg_num` PGs.
fn ancestor(seed: u32, old_pg_num: u32) -> u32 {
    // the mask covers old_pg_num's bits (a 0 from a malformed map must not overflow the shift)
    let mask = u32::MAX.checked_shr(old_pg_num.leading_zeros()).unwrap_or(0);
    denc::ceph_stable_mod(seed, old_pg_num, mask)
}

/// The stand-in for a PG's unknown history: an interval just before `m` in which every up OSD acted.
fn unknown_history_view(m: &OsdMap, pool: &osdmap::PgPool, b: &Base) -> MapView {
    let acting: Vec<i32> = b.up_osds.iter().copied().collect();
    let primary = acting.first().copied().unwrap_or(-1);
    MapView {
        epoch: m.epoch.saturating_sub(1),
        pool: PoolView {
            size: u32::from(pool.size),
            min_size: u32::from(pool.min_size),
        },
        up: acting.clone(),
        up_primary: primary,
        acting,
        acting_primary: primary,
        up_thru: b.up_thru.clone(),
        up_osds: b.up_osds.clone(),
    }
}

impl<D: Device> OsdShard<D> {
    /// The driver's route table for the next map (every shard of the OSD gets the same one).
    pub(crate) fn handle_routes(&mut self, r: Arc<PgRouter>) {
        if r.shards() != self.cfg.shards {
            self.error(format!(
                "route table for {} shards given to shard {} of {}: ignored",
                r.shards(),
                self.cfg.shard,
                self.cfg.shards
            ));
            return;
        }
        self.routes = r;
        self.own_routes = false;
    }

    /// Whether this shard holds (or is to hold) `spgid`.
    fn owns(&self, spgid: &SpgId) -> bool {
        self.routes.shard_of(spgid.pgid) == Some(self.cfg.shard)
    }

    pub(crate) fn handle_map(&mut self, m: Arc<OsdMap>) {
        if m.epoch <= self.epoch() || m.epoch < self.stored_epoch {
            return; // a duplicate, an older epoch, or one handled before a restart
        }
        // Epochs before the one the driver has in hand only record intervals (Input::MapsPending).
        let catching_up = m.epoch < self.catch_up_to;
        // A gap (the first map, or maps skipped because the monitor trimmed them): PGs this OSD has no record of
        // get the unknown-history stand-in below.
        let prev_epoch = self.epoch();
        if self.own_routes {
            Arc::make_mut(&mut self.routes).advance(&m);
        } else if self.routes.epoch() < m.epoch {
            // The driver feeds the table before its map; PGs new in this epoch are placed with the next table.
            self.error(format!(
                "map epoch {} arrived before its route table (table at epoch {})",
                m.epoch,
                self.routes.epoch()
            ));
        }
        let prev_map = self.map.replace(m.clone());
        let first_map = prev_map.is_none();
        let jumped = first_map || m.epoch > prev_epoch + 1;
        let b = base(&m);
        let forgotten: Vec<SpgId> = self
            .last_placed
            .keys()
            .filter(|s| !m.pools.contains_key(&(s.pgid.pool as i64)))
            .copied()
            .collect();
        for s in &forgotten {
            self.last_placed.remove(s);
        }
        // placements that changed in this map, persisted below (src/history.rs)
        let mut placed_changed: Vec<(SpgId, Placed)> = Vec::new();
        let me = self.cfg.whoami;
        // PGs of deleted pools stop (their data stays on the store until PG removal exists)
        let gone: Vec<SpgId> = self
            .pgs
            .keys()
            .filter(|s| !m.pools.contains_key(&(s.pgid.pool as i64)))
            .copied()
            .collect();
        for s in gone {
            if let Some(p) = self.pgs.remove(&s) {
                let more = self.reserver.release(s);
                self.granted.extend(more);
                self.remove_pg(p.pg, m.epoch);
            }
        }
        // PGs left on the store by pools deleted while this OSD was down
        let orphans: Vec<SpgId> = self
            .on_disk
            .iter()
            .filter(|s| {
                !m.pools.contains_key(&(s.pgid.pool as i64)) && s.pgid.pool as i64 <= i64::from(m.pool_max)
            })
            .copied()
            .collect();
        for s in orphans {
            self.on_disk.remove(&s);
            let info = pg::PoolInfo {
                id: s.pgid.pool as i64,
                name: String::new(),
                pg_num: 0,
                erasure: false,
                applications: Vec::new(),
            };
            match pg::Pg::open(&mut self.store, s, info, self.cfg.pg.clone()) {
                Ok(p) => self.remove_pg(p, m.epoch),
                Err(e) => self.error(format!("pg {s}: opening to remove: {e}")),
            }
        }
        for (&pid, pool) in &m.pools {
            if !pool.is_replicated() {
                continue; // erasure-coded pools are not served (no EC backend)
            }
            let info = glue::pool_info(&m, pid, pool);
            // PGs found on the store are loaded first: after a restart that jumped over a pg_num change they
            // still have the old split, and must split before any child is created (empty) below.
            let stored: Vec<SpgId> = self
                .on_disk
                .iter()
                .filter(|s| s.pgid.pool as i64 == pid && s.pgid.seed < pool.pg_num && self.owns(s))
                .copied()
                .collect();
            for s in stored {
                self.load_stored(s, &info, m.epoch);
            }
            // pg_num grew: every OSD splits its own copies at this epoch (children start a new interval)
            let parents: Vec<SpgId> = self
                .pgs
                .iter()
                .filter(|(s, p)| s.pgid.pool as i64 == pid && p.pg.pool().pg_num < pool.pg_num)
                .map(|(s, _)| *s)
                .collect();
            for parent in parents {
                self.split_pg(parent, pool.pg_num, m.epoch);
            }
            let old_pg_num = prev_map
                .as_ref()
                .and_then(|p| p.pools.get(&pid))
                .map_or(pool.pg_num, |p| p.pg_num);
            for seed in 0..pool.pg_num {
                let spgid = glue::spgid(pid, seed);
                // Another shard's PG. A PG without an entry is not on this OSD yet: every shard remembers its
                // placement (`last_placed`), for whichever shard the table gives it when a map places it here.
                if self
                    .routes
                    .shard_of(spgid.pgid)
                    .is_some_and(|s| s != self.cfg.shard)
                {
                    continue;
                }
                let held = self.pgs.contains_key(&spgid);
                let on_disk = self.on_disk.contains(&spgid);
                let Ok(ua) = m.pg_to_up_acting_osds(spgid.pgid) else {
                    continue;
                };
                if old_pg_num > 0 && seed >= old_pg_num && !self.last_placed.contains_key(&spgid) {
                    // A child split off in this map: its history up to here is its parent's (Ceph's split copies
                    // the parent's history and past intervals), even while it maps nowhere, so that the OSD it
                    // lands on later probes the parent's copies instead of activating empty.
                    let parent = glue::spgid(pid, ancestor(seed, old_pg_num));
                    if let Some(r) = self.last_placed.get(&parent).cloned() {
                        placed_changed.push((spgid, r.clone()));
                        self.last_placed.insert(spgid, r);
                    }
                }
                let mut last = self.last_placed.get(&spgid).cloned();
                if jumped && last.is_none() && pool.last_change < m.epoch {
                    // No earlier map here and no placement persisted before a restart (the pool was created
                    // while this OSD was down and the monitor trimmed the maps since): the PG's history is
                    // unknown, so peering probes every up OSD (those without it answer empty) rather than
                    // activating as if the PG were new.
                    last = Some(Placed::new(unknown_history_view(&m, pool, &b)));
                }
                if ua.acting.iter().any(|&o| o >= 0) {
                    let v = placed_view(&m, pool, &ua.up, &ua.acting, &b, ua.up_primary, ua.acting_primary);
                    // (the unknown-history stand-in above is for this creation only, not remembered)
                    let mut rec = match self.last_placed.get(&spgid) {
                        Some(r) => {
                            let mut r = r.clone();
                            r.advance(v);
                            r
                        }
                        None => Placed::new(v),
                    };
                    // what a copy held here saw clean needs no probing (Ceph trims past intervals then too)
                    if let Some(p) = self.pgs.get(&spgid) {
                        rec.past.trim_before(p.peering.info().history.last_epoch_clean);
                    }
                    if !self.last_placed.get(&spgid).is_some_and(|old| old.same(&rec)) {
                        placed_changed.push((spgid, rec.clone()));
                    }
                    self.last_placed.insert(spgid, rec);
                }
                if !self.owns(&spgid) {
                    continue;
                }
                let placed = ua.up.contains(&me) || ua.acting.contains(&me);
                // a PG on disk is loaded even if the map does not place it here (a stray that may hold the only
                // copy of some writes answers the primary's queries)
                if !held && !placed && !on_disk {
                    continue;
                }
                if !held && !self.open_pg(spgid, &info, m.epoch, ua.acting_primary == me, last) {
                    continue;
                }
                let view = MapView {
                    epoch: m.epoch,
                    pool: PoolView {
                        size: u32::from(pool.size),
                        min_size: u32::from(pool.min_size),
                    },
                    up: ua.up.clone(),
                    up_primary: ua.up_primary,
                    acting: ua.acting.clone(),
                    acting_primary: ua.acting_primary,
                    up_thru: b.up_thru.clone(),
                    up_osds: b.up_osds.clone(),
                };
                let mut cx = cx!(self);
                if let Some(p) = self.pgs.get_mut(&spgid) {
                    p.peering.set_catching_up(catching_up);
                    p.advance(&mut cx, view, info.clone(), pool.last_force_op_resend);
                }
            }
        }
        match crate::history::save(
            &mut self.store,
            &mut self.history_created,
            &placed_changed,
            &forgotten,
        ) {
            Ok(_) => {}
            Err(e) => self.error(format!("persisting the placement history: {e}")),
        }
        if !catching_up {
            // a PG this map did not advance must not stay in catch-up mode (it peers on its next map)
            for p in self.pgs.values_mut() {
                p.peering.set_catching_up(false);
            }
        }
        // the newest map handled, after the PGs' writes for it (src/mapstore.rs)
        if m.epoch > self.stored_epoch
            && let Err(e) = crate::mapstore::save(&mut self.store, &mut self.superblock_created, &m)
        {
            self.error(format!("persisting map epoch {}: {e}", m.epoch));
        }
        // ops that waited for this map
        let n = self.waiting_for_map.len();
        for _ in 0..n {
            let Some(op) = self.waiting_for_map.pop_front() else {
                break;
            };
            self.handle_client_op(op);
        }
        // peer messages that waited for this map
        let n = self.peer_waiting_for_map.len();
        for _ in 0..n {
            let Some((from, msg)) = self.peer_waiting_for_map.pop_front() else {
                break;
            };
            self.handle_peer(from, msg);
        }
    }

    /// Load a PG found on the store at start. Its collection's split bits say which `pg_num` it was last split
    /// for: older than the map's (the OSD was down across a split), the PG is marked with the smallest
    /// `pg_num` of those bits (`2^bits`: its children at the new `pg_num` are exactly the seeds that match its
    /// bits), and the split below makes its children before anything else touches them.
    fn load_stored(&mut self, spgid: SpgId, info: &pg::PoolInfo, epoch: u32) {
        // the placement persisted before the restart: the first map closes the interval the PG was in then
        let last = self.last_placed.get(&spgid).cloned();
        if self.pgs.contains_key(&spgid) || !self.open_pg(spgid, info, epoch, false, last) {
            return;
        }
        let want = spgid.pgid.get_split_bits(info.pg_num);
        let Some(p) = self.pgs.get_mut(&spgid) else {
            return;
        };
        let bits = match self.store.collection_bits(p.pg.collection()) {
            Ok(b) => b,
            Err(e) => {
                self.error(format!("pg {spgid}: reading its split bits: {e}"));
                return;
            }
        };
        if bits < want && bits < 32 {
            let mut old = info.clone();
            old.pg_num = 1 << bits;
            p.pg.set_pool(old);
            self.log(format!(
                "pg {spgid}: stored with {bits} split bits, pg_num is now {}: splitting at epoch {epoch}",
                info.pg_num
            ));
        }
    }

    /// Load (found on the store) or create a PG. Returns whether it is now held.
    ///
    /// A PG created here for a pool that already existed (the map moved it to us) gets `last`, its mapping in
    /// the previous map, as peering's last map: the first map then closes an interval whose acting set held
    /// the PG, so peering probes those OSDs (and stays down if none is up) instead of activating empty and
    /// serving without the acknowledged writes they hold (Ceph builds the same from past maps or from the
    /// strays' notifies).
    fn open_pg(
        &mut self,
        spgid: SpgId,
        info: &pg::PoolInfo,
        epoch: u32,
        primary: bool,
        last: Option<Placed>,
    ) -> bool {
        let mut p = pg::Pg::new(spgid, info.clone(), self.cfg.pg.clone());
        let exists =
            self.on_disk.contains(&spgid) || self.store.collection_exists(p.collection()).unwrap_or(false);
        if exists {
            if let Err(e) = p.load(&mut self.store) {
                self.error(format!("pg {spgid}: loading: {e}"));
                return false;
            }
            let d = glue::peering_state(&p);
            let mut peering = peering::Pg::new(
                self.cfg.whoami,
                spgid,
                d.info,
                d.log,
                d.missing,
                d.past_intervals,
                self.cfg.peering,
            );
            // Its last placement before the restart: the first map then closes the interval the PG was in when
            // this OSD stopped (Ceph replays the maps in between), so peering probes that interval's OSDs. Its
            // earlier intervals are in its own stored past intervals.
            if let Some(l) = last {
                peering = peering.with_last_map(l.last);
            }
            self.on_disk.remove(&spgid);
            self.pgs
                .insert(spgid, PgState::new(spgid, p, peering, epoch, false));
        } else {
            match p.create(&mut self.store, epoch) {
                Ok(seq) => {
                    let mut d = glue::peering_state(&p);
                    // the PG's history from the maps (`build_initial_pg_history`): every interval that may
                    // have gone read-write is probed, not only the last placement's
                    if let Some(l) = &last {
                        d.info.history.same_interval_since = l.since;
                        d.past_intervals = l.past.clone();
                    }
                    let mut peering = peering::Pg::new(
                        self.cfg.whoami,
                        spgid,
                        d.info,
                        d.log,
                        d.missing,
                        d.past_intervals,
                        self.cfg.peering,
                    );
                    if let Some(l) = last {
                        peering = peering.with_last_map(l.last);
                    }
                    let mut st = PgState::new(spgid, p, peering, epoch, primary);
                    st.note_seq(seq);
                    self.pgs.insert(spgid, st);
                }
                Err(e) => {
                    self.error(format!("pg {spgid}: creating: {e}"));
                    return false;
                }
            }
        }
        true
    }

    /// Start the backfills of PGs that were just granted a slot (a slot freed by another PG).
    pub(crate) fn start_granted_backfills(&mut self) {
        for _ in 0..64 {
            self.max_backfills_seen = self.max_backfills_seen.max(self.reserver.granted());
            let granted = std::mem::take(&mut self.granted);
            if granted.is_empty() {
                return;
            }
            for g in granted {
                let mut cx = cx!(self);
                match self.pgs.get_mut(&g) {
                    Some(p) => p.start_pending_backfill(&mut cx),
                    None => {
                        let more = self.reserver.release(g);
                        self.granted.extend(more);
                    }
                }
            }
        }
    }

    /// Delete a PG's objects, pgmeta and collection (its pool is gone).
    fn remove_pg(&mut self, p: pg::Pg, epoch: u32) {
        let s = p.spgid();
        match p.remove(&mut self.store, 1024) {
            Ok(_) => self.log(format!("pg {s}: pool deleted (epoch {epoch}); PG removed")),
            Err(e) => self.error(format!("pg {s}: removing: {e}")),
        }
    }

    /// Split a held PG for its pool's new `pg_num`. Always on this shard: the route table puts split children
    /// with their parent.
    fn split_pg(&mut self, parent: SpgId, new_pg_num: u32, epoch: u32) {
        let Some(p) = self.pgs.get(&parent) else {
            return;
        };
        let children = pg::split_children(parent.pgid, p.pg.pool().pg_num, new_pg_num);
        let elsewhere: Vec<String> = children
            .iter()
            .filter(|c| self.routes.shard_of(**c) != Some(self.cfg.shard))
            .map(|c| c.to_string())
            .collect();
        if !elsewhere.is_empty() {
            // Cannot happen with a consistent table. The split still happens here (the objects stay on this
            // shard); the children are only reachable once the table agrees.
            self.error(format!(
                "pg {parent}: split children {} are not routed to shard {}",
                elsewhere.join(","),
                self.cfg.shard
            ));
        }
        let Some(p) = self.pgs.get_mut(&parent) else {
            return;
        };
        // the parent's mapping before the split: the children's interval until now was the parent's
        let last = p.peering.last_map().cloned();
        match p.pg.split(&mut self.store, new_pg_num, epoch) {
            Ok((kids, seq)) => {
                if let Some(seq) = seq {
                    p.note_seq(seq);
                }
                p.restart_peering(&self.cfg, epoch);
                for kid in kids {
                    let spgid = kid.spgid();
                    let d = glue::peering_state(&kid);
                    let mut peering = peering::Pg::new(
                        self.cfg.whoami,
                        spgid,
                        d.info,
                        d.log,
                        d.missing,
                        d.past_intervals,
                        self.cfg.peering,
                    );
                    if let Some(l) = &last {
                        peering.close_interval_for_split(l, epoch);
                    }
                    let mut st = PgState::new(spgid, kid, peering, epoch, false);
                    if let Some(seq) = seq {
                        st.note_seq(seq);
                    }
                    self.pgs.insert(spgid, st);
                }
                let n = self.pgs.len();
                self.log(format!(
                    "pg {parent}: split for pg_num {new_pg_num} at epoch {epoch} ({n} PGs held)"
                ));
            }
            Err(e) => self.error(format!("pg {parent}: split: {e}")),
        }
    }

    pub(crate) fn handle_client_op(&mut self, op: Box<ClientOp>) {
        if op.msg.osdmap_epoch > self.epoch() {
            // the client has a newer map: wait for it (Ceph's waiting_for_map)
            if self.waiting_for_map.len() >= MAX_WAITING_FOR_MAP {
                self.waiting_for_map.pop_front();
            }
            self.waiting_for_map.push_back(op);
            return;
        }
        let spgid = op.msg.pgid;
        let mut cx = cx!(self);
        match self.pgs.get_mut(&spgid) {
            Some(p) => p.client_op(&mut cx, op),
            None => {
                // not a PG of ours at an epoch the client shares with us: Ceph drops it (the client resends
                // when its map sends it elsewhere)
                self.outputs.push_back(Output::Misdirected {
                    conn: op.conn,
                    msg: Box::new(op.msg),
                });
            }
        }
    }

    pub(crate) fn handle_client_reset(&mut self, conn: pg::ConnId) {
        let mut cx = cx!(self);
        for p in self.pgs.values_mut() {
            p.client_reset(&mut cx, conn);
        }
    }

    pub(crate) fn handle_peer(&mut self, from: i32, msg: ceph_msgs::Message) {
        let Some(spgid) = repl::route(&msg) else {
            self.peer_msgs_dropped += 1;
            self.log(format!(
                "dropping message type {} from osd.{from}: not about a PG or malformed",
                msg.msg_type
            ));
            return;
        };
        // a replicated write or a peering message from a newer epoch waits for our map (its interval may not
        // have started here; Ceph waits for the map the same way)
        let peering_msg = if repl::kind(msg.msg_type) == repl::Kind::Peering {
            match peering::PeerMsg::from_message(&msg) {
                Ok(Some(p)) => Some(p),
                _ => {
                    self.peer_msgs_dropped += 1;
                    self.log(format!(
                        "dropping malformed peering message type {} from osd.{from}",
                        msg.msg_type
                    ));
                    return;
                }
            }
        } else {
            None
        };
        let newer = match &peering_msg {
            Some(p) => repl::peer_msg_epoch(p) > self.epoch(),
            None => {
                msg.msg_type == ceph_msgs::osd_rep::rep_msg::REPOP
                    && repl::epoch_prefix(&msg).is_some_and(|e| e > self.epoch())
            }
        };
        if newer {
            if self.peer_waiting_for_map.len() >= MAX_WAITING_FOR_MAP {
                self.peer_waiting_for_map.pop_front();
            }
            self.peer_waiting_for_map.push_back((from, msg));
            return;
        }
        let mut cx = cx!(self);
        let Some(p) = self.pgs.get_mut(&spgid) else {
            if let Some(peering::PeerMsg::Query(q)) = &peering_msg {
                // Ceph's handle_pg_query_nopg: tell the primary we have nothing, so its GetInfo/GetLog does not
                // wait for us forever
                let reply = repl::empty_notify(spgid, q, self.epoch(), self.cfg.peer_features);
                self.outputs.push_back(Output::ToOsd {
                    osd: from,
                    msg: reply,
                });
                return;
            }
            self.peer_msgs_dropped += 1;
            self.log(format!(
                "dropping message type {} from osd.{from} for pg {spgid}: not held here",
                msg.msg_type
            ));
            return;
        };
        let t = msg.msg_type;
        if let Err(e) = p.peer(&mut cx, from, msg) {
            self.peer_msgs_dropped += 1;
            self.log(format!(
                "pg {spgid}: dropping message type {t} from osd.{from}: {e}"
            ));
        }
    }

    pub(crate) fn handle_peer_reset(&mut self, osd: i32) {
        let mut cx = cx!(self);
        for p in self.pgs.values_mut() {
            p.peer_reset(&mut cx, osd);
        }
    }

    pub(crate) fn handle_durable(&mut self, seq: u64) {
        let mut cx = cx!(self);
        for p in self.pgs.values_mut() {
            p.on_durable(&mut cx, seq);
        }
    }

    pub(crate) fn handle_tick(&mut self) {
        let mut cx = cx!(self);
        for p in self.pgs.values_mut() {
            p.tick(&mut cx);
        }
    }

    /// The wall clock as last given (for tests and reports).
    pub fn wall(&self) -> Utime {
        self.wall
    }
}

#[cfg(test)]
mod tests {
    use super::ancestor;

    #[test]
    fn a_child_seed_finds_the_parent_it_split_from() {
        // 8 → 16: seed 13 split from 5; 8 → 32: 25 from 1; 13 (not a power of two) → 16: 14 from 6
        assert_eq!(ancestor(13, 8), 5);
        assert_eq!(ancestor(25, 8), 1);
        assert_eq!(ancestor(14, 13), 6);
        assert_eq!(ancestor(3, 1), 0);
        // a pg_num of 0 (malformed map) does not overflow
        let _ = ancestor(7, 0);
    }
}
