// SPDX-License-Identifier: LGPL-3.0-or-later
//! Scripted peering scenarios on a tiny deterministic cluster of [`Pg`]s: a monitor that publishes maps (and
//! honours MOSDAlive and pg_temp requests), a message bus between OSDs, and a recovery/backfill "engine" that
//! reports objects recovered. Each scenario asserts the authoritative log chosen, missing sets and final states.
#![allow(clippy::unwrap_used)]

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::time::Duration;

use bytes::Bytes;
use denc::{Eversion, HObject, OsdReqId, PgId, ShardId, SnapId, SpgId};
use osd_types::past_intervals::PastIntervals;
use osd_types::pg_info::PgInfo;
use osd_types::pg_log::{PgLogEntry, log_op};
use osd_types::pg_log_t::PgLog;
use osd_types::pg_missing::PgMissing;
use peering::{Config, Event, MapView, Output, PeerMsg, Persist, Pg, PoolView, pg_state};

const PGID: PgId = PgId { pool: 1, seed: 0 };

fn spgid() -> SpgId {
    SpgId::new(PGID, ShardId::NO_SHARD)
}

fn obj(name: &str) -> HObject {
    HObject::new(
        Bytes::copy_from_slice(name.as_bytes()),
        Bytes::new(),
        SnapId::NOSNAP,
        0x1234,
        1,
        Bytes::new(),
    )
}

/// What survives a restart of one OSD: its persisted PG state.
#[derive(Clone)]
struct Disk {
    info: PgInfo,
    log: PgLog,
    missing: PgMissing,
    past: PastIntervals,
    map: Option<MapView>,
}

struct Sim {
    pool: PoolView,
    crush: Vec<i32>,
    out: BTreeSet<i32>,
    running: BTreeSet<i32>,
    pgs: BTreeMap<i32, Pg>,
    disks: BTreeMap<i32, Disk>,
    epoch: u32,
    up_thru: BTreeMap<i32, u32>,
    pg_temp: Option<Vec<i32>>,
    bus: VecDeque<(i32, i32, PeerMsg)>,
    map_wanted: bool,
    now: Duration,
    trace: Vec<String>,
    removed: BTreeMap<i32, Vec<HObject>>,
    recovered: usize,
    history: Vec<MapView>,
}

impl Sim {
    fn new(crush: Vec<i32>, size: u32, min_size: u32) -> Sim {
        let mut s = Sim {
            pool: PoolView { size, min_size },
            crush: crush.clone(),
            out: BTreeSet::new(),
            running: BTreeSet::new(),
            pgs: BTreeMap::new(),
            disks: BTreeMap::new(),
            epoch: 0,
            up_thru: BTreeMap::new(),
            pg_temp: None,
            bus: VecDeque::new(),
            map_wanted: false,
            now: Duration::from_secs(100),
            trace: Vec::new(),
            removed: BTreeMap::new(),
            recovered: 0,
            history: Vec::new(),
        };
        for o in crush {
            s.start(o);
        }
        s
    }

    fn start(&mut self, osd: i32) {
        let d = self.disks.get(&osd).cloned().unwrap_or(Disk {
            info: PgInfo {
                pgid: PGID,
                ..Default::default()
            },
            log: PgLog::default(),
            missing: PgMissing::default(),
            past: PastIntervals::new_compact(),
            map: None,
        });
        let mut pg = Pg::new(osd, spgid(), d.info, d.log, d.missing, d.past, Config::default());
        if let Some(m) = d.map {
            pg = pg.with_last_map(m);
        }
        self.pgs.insert(osd, pg);
        self.running.insert(osd);
    }

    fn kill(&mut self, osd: i32) {
        let pg = self.pgs.remove(&osd).unwrap();
        self.disks.insert(
            osd,
            Disk {
                info: pg.info().clone(),
                log: pg.log().clone(),
                missing: pg.missing().clone(),
                past: pg.past_intervals().clone(),
                map: pg.last_map().cloned(),
            },
        );
        self.running.remove(&osd);
    }

    fn map(&self) -> MapView {
        let up: Vec<i32> = self
            .crush
            .iter()
            .copied()
            .filter(|o| self.running.contains(o) && !self.out.contains(o))
            .take(self.pool.size as usize)
            .collect();
        // like the OSDMap, pg_temp members that are down do not act
        let acting = self
            .pg_temp
            .clone()
            .map(|t| {
                t.into_iter()
                    .filter(|o| self.running.contains(o))
                    .collect::<Vec<_>>()
            })
            .filter(|t| !t.is_empty())
            .unwrap_or_else(|| up.clone());
        MapView {
            epoch: self.epoch,
            pool: self.pool,
            up_primary: up.first().copied().unwrap_or(-1),
            acting_primary: acting.first().copied().unwrap_or(-1),
            up,
            acting,
            up_thru: self.up_thru.clone(),
            up_osds: self.running.clone(),
        }
    }

    /// Publish the next epoch and run until nothing more happens (maps requested by the PGs included).
    fn publish(&mut self) {
        for _ in 0..20 {
            self.epoch += 1;
            self.map_wanted = false;
            let m = self.map();
            self.trace
                .push(format!("e{} up {:?} acting {:?}", m.epoch, m.up, m.acting));
            for (_, pg) in self.pgs.iter_mut() {
                // a restarted OSD first replays the maps it missed, as ceph-osd does
                let last = pg.last_map().map_or(0, |l| l.epoch);
                for old in self.history.iter().filter(|h| h.epoch > last && last > 0) {
                    pg.handle(self.now, Event::AdvanceMap(old.clone()));
                }
                pg.handle(self.now, Event::AdvanceMap(m.clone()));
            }
            self.history.push(m);
            self.run();
            if !self.map_wanted {
                return;
            }
        }
        panic!("maps never settled: {:?}", self.trace);
    }

    fn run(&mut self) {
        for _ in 0..10_000 {
            let mut progressed = false;
            let osds: Vec<i32> = self.pgs.keys().copied().collect();
            for o in osds {
                while let Some(out) = self.pgs.get_mut(&o).unwrap().poll_output() {
                    progressed = true;
                    self.output(o, out);
                }
            }
            if let Some((from, to, msg)) = self.bus.pop_front() {
                progressed = true;
                if let Some(pg) = self.pgs.get_mut(&to) {
                    pg.handle(self.now, Event::Peer { from, msg });
                }
            }
            if !progressed {
                return;
            }
        }
        panic!("no quiescence");
    }

    fn output(&mut self, osd: i32, out: Output) {
        match out {
            Output::Send { to, msg } => {
                if self.running.contains(&to) {
                    // through the wire encoding, as a real driver would send it
                    let wire = msg.to_message(denc::CEPH_FEATURES_ALL);
                    let back = PeerMsg::from_message(&wire).unwrap().unwrap();
                    assert_eq!(back, msg);
                    assert_eq!(back.spgid(), spgid());
                    self.bus.push_back((osd, to, back));
                }
            }
            Output::NeedUpThru { epoch } => {
                if self.up_thru.get(&osd).copied().unwrap_or(0) < epoch {
                    self.up_thru.insert(osd, self.epoch);
                    self.map_wanted = true;
                }
            }
            Output::RequestPgTemp { acting, .. } => {
                self.pg_temp = (!acting.is_empty()).then_some(acting);
                self.map_wanted = true;
            }
            Output::StartRecovery { missing } => {
                self.trace.push(format!(
                    "osd.{osd} recovery {:?}",
                    missing.iter().map(|(o, m)| (*o, m.len())).collect::<Vec<_>>()
                ));
                for (target, m) in missing {
                    for (oid, item) in &m.missing {
                        self.recovered += 1;
                        let ev = Event::ObjectRecovered {
                            osd: target,
                            oid: oid.clone(),
                            version: item.need,
                        };
                        if target != osd {
                            // the replica applies the push; its own missing set shrinks too
                            self.pgs.get_mut(&target).unwrap().handle(self.now, ev.clone());
                        }
                        self.pgs.get_mut(&osd).unwrap().handle(self.now, ev);
                    }
                }
            }
            Output::StartBackfill { targets } => {
                self.trace.push(format!("osd.{osd} backfill {targets:?}"));
                for t in targets {
                    self.pgs
                        .get_mut(&t)
                        .unwrap()
                        .set_last_backfill(HObject::max_value());
                    self.pgs
                        .get_mut(&osd)
                        .unwrap()
                        .handle(self.now, Event::BackfillDone { osd: t });
                }
            }
            Output::Persist(Persist::RemoveObject(oid)) => self.removed.entry(osd).or_default().push(oid),
            Output::Persist(_) => {}
            Output::State(s) => self.trace.push(format!("osd.{osd} {}", s.name)),
            Output::NewRecoverySource { osd: src } => self.trace.push(format!("osd.{osd} source osd.{src}")),
        }
    }

    fn primary(&self) -> i32 {
        self.map().acting_primary
    }

    /// A client write through the current primary: one log entry on every acting shard.
    fn write(&mut self, name: &str, op: i32) -> Eversion {
        let acting = self.map().acting;
        self.write_on(&acting, name, op)
    }

    /// A write that reached only `osds` (e.g. a primary that died before its replicas persisted).
    fn write_on(&mut self, osds: &[i32], name: &str, op: i32) -> Eversion {
        let p = &self.pgs[&osds[0]];
        let oid = obj(name);
        let prior = p
            .log()
            .log
            .iter()
            .rev()
            .find(|e| e.soid == oid)
            .map(|e| e.version)
            .unwrap_or_default();
        let v = Eversion::new(self.epoch, p.info().last_update.version + 1);
        let e = PgLogEntry {
            op,
            soid: oid,
            version: v,
            prior_version: prior,
            user_version: v.version,
            reqid: OsdReqId::default(),
            ..Default::default()
        };
        for o in osds {
            self.pgs.get_mut(o).unwrap().append_log(std::slice::from_ref(&e));
        }
        v
    }

    fn state(&self, osd: i32) -> &'static str {
        self.pgs[&osd].state_name()
    }
}

fn assert_clean(sim: &Sim, osds: &[i32]) {
    let p = sim.primary();
    assert_eq!(sim.state(p), "Started/Primary/Active/Clean", "{:#?}", sim.trace);
    let flags = sim.pgs[&p].state_flags();
    assert_eq!(flags, pg_state::ACTIVE | pg_state::CLEAN, "{flags:#x}");
    for o in osds.iter().filter(|&&o| o != p) {
        assert_eq!(
            sim.state(*o),
            "Started/ReplicaActive",
            "osd.{o}: {:#?}",
            sim.trace
        );
    }
    let head = sim.pgs[&p].info().last_update;
    for o in osds {
        let pg = &sim.pgs[o];
        assert_eq!(pg.info().last_update, head, "osd.{o}: {}", sim.trace.join("\n"));
        assert_eq!(pg.log().head, head, "osd.{o}");
        assert!(
            pg.missing().is_empty(),
            "osd.{o} missing {:?}\nlog {:?}\ninfo lu {:?} lc {:?}\n{}",
            pg.missing()
                .missing
                .iter()
                .map(|(k, v)| (k.oid.to_string(), v.need, v.have))
                .collect::<Vec<_>>(),
            pg.log()
                .log
                .iter()
                .map(|e| (e.soid.oid.to_string(), e.version))
                .collect::<Vec<_>>(),
            pg.info().last_update,
            pg.info().last_complete,
            sim.trace.join("\n")
        );
        assert_eq!(pg.info().last_complete, head, "osd.{o}");
    }
}

#[test]
fn new_pg_peers_to_clean_and_asks_for_up_thru() {
    let mut sim = Sim::new(vec![0, 1, 2], 3, 2);
    sim.publish();
    assert_clean(&sim, &[0, 1, 2]);
    // activation waited for the monitor to record up_thru
    assert!(sim.up_thru[&0] >= 1);
    assert!(sim.trace.iter().any(|t| t.contains("WaitUpThru")));
    assert_eq!(
        sim.pgs[&0].info().history.last_epoch_started,
        sim.pgs[&0].info().last_epoch_started
    );
    // reads: leases acknowledged by both replicas
    assert!(sim.pgs[&0].is_readable(sim.now));
    assert!(!sim.pgs[&0].is_readable(sim.now + Duration::from_secs(60)));
}

#[test]
fn primary_change_keeps_the_log_and_degrades() {
    let mut sim = Sim::new(vec![0, 1, 2], 3, 2);
    sim.publish();
    for i in 0..5 {
        sim.write(&format!("o{i}"), log_op::MODIFY);
    }
    let head = sim.pgs[&0].info().last_update;
    sim.kill(0);
    sim.publish();
    // osd.1 leads, with the same log, undersized and degraded but active
    assert_eq!(sim.primary(), 1);
    assert_eq!(
        sim.state(1),
        "Started/Primary/Active/Recovered",
        "{:#?}",
        sim.trace
    );
    let f = sim.pgs[&1].state_flags();
    assert!(f & pg_state::ACTIVE != 0 && f & pg_state::UNDERSIZED != 0 && f & pg_state::DEGRADED != 0);
    assert_eq!(
        sim.pgs[&1].auth_osd(),
        Some(1),
        "equal logs: the primary keeps its own"
    );
    assert_eq!(sim.pgs[&1].info().last_update, head);
    // the interval where osd.0 led is remembered as having gone read-write
    let pi = sim.pgs[&1].past_intervals();
    assert!(
        pi.intervals().iter().any(|i| i.acting.iter().any(|s| s.osd == 0)),
        "{pi:?}"
    );
    // a write in the degraded interval, then osd.0 returns and catches up by log recovery
    let w = sim.write("late", log_op::MODIFY);
    sim.start(0);
    sim.publish();
    assert_eq!(sim.primary(), 0);
    assert_eq!(
        sim.pgs[&0].auth_osd(),
        Some(1),
        "osd.0 is behind: the log comes from osd.1"
    );
    assert_clean(&sim, &[0, 1, 2]);
    assert_eq!(sim.pgs[&0].info().last_update, w);
    assert!(sim.recovered >= 1);
    // min_size: with only one OSD left the PG is peered, not active
    sim.kill(1);
    sim.kill(2);
    sim.publish();
    let f = sim.pgs[&0].state_flags();
    assert!(
        f & pg_state::PEERED != 0 && f & pg_state::ACTIVE == 0,
        "{f:#x} {:#?}",
        sim.trace
    );
}

#[test]
fn replica_back_with_divergent_log_is_rewound() {
    // osd.2 leads first; it logs two writes its replicas never persisted, then dies
    let mut sim = Sim::new(vec![2, 0, 1], 3, 2);
    sim.publish();
    for name in ["a", "b", "c", "d", "e"] {
        sim.write(name, log_op::MODIFY);
    }
    let common = sim.pgs[&2].info().last_update;
    let d_before = sim.pgs[&2]
        .log()
        .log
        .iter()
        .find(|e| e.soid == obj("d"))
        .unwrap()
        .version;
    let div1 = sim.write_on(&[2], "d", log_op::MODIFY);
    let div2 = sim.write_on(&[2], "new-only-on-2", log_op::MODIFY);
    sim.kill(2);
    sim.publish();
    assert_eq!(sim.primary(), 0);
    let w1 = sim.write("d", log_op::MODIFY);
    let w2 = sim.write("a", log_op::MODIFY);
    assert_eq!(
        w1.version, div1.version,
        "the same version number in a newer epoch"
    );
    // osd.2 returns and is primary again
    sim.start(2);
    sim.publish();
    assert_eq!(sim.primary(), 2);
    let pg2 = &sim.pgs[&2];
    assert!(
        pg2.auth_osd() == Some(0) || pg2.auth_osd() == Some(1),
        "auth {:?}",
        pg2.auth_osd()
    );
    // the divergent entries are gone, the authoritative ones are in
    let versions: Vec<Eversion> = pg2.log().log.iter().map(|e| e.version).collect();
    assert!(
        !versions.contains(&div1) && !versions.contains(&div2),
        "{versions:?}"
    );
    assert!(versions.contains(&w1) && versions.contains(&w2) && versions.contains(&common));
    // the object only the divergent write created is deleted; d and a were recovered
    assert_eq!(sim.removed.get(&2), Some(&vec![obj("new-only-on-2")]));
    assert!(d_before < w1);
    assert_clean(&sim, &[2, 0, 1]);
    assert_eq!(sim.pgs[&2].info().last_update, w2);
    eprintln!("{}", sim.trace.join("\n"));
}

#[test]
fn divergent_missing_set_is_what_the_replica_needs() {
    // The reconciliation alone: a replica's log with a divergent tail against the authoritative log.
    let e = |ep: u32, v: u64, name: &str, prior: Eversion| PgLogEntry {
        op: log_op::MODIFY,
        soid: obj(name),
        version: Eversion::new(ep, v),
        prior_version: prior,
        ..Default::default()
    };
    let z = Eversion::default();
    let auth = PgLog {
        head: Eversion::new(3, 4),
        tail: z,
        log: vec![
            e(1, 1, "x", z),
            e(1, 2, "y", z),
            e(3, 3, "y", Eversion::new(1, 2)),
            e(3, 4, "w", z),
        ],
        ..Default::default()
    };
    let mine = PgLog {
        head: Eversion::new(2, 4),
        tail: z,
        log: vec![
            e(1, 1, "x", z),
            e(1, 2, "y", z),
            e(2, 3, "x", Eversion::new(1, 1)),
            e(2, 4, "q", z),
        ],
        ..Default::default()
    };
    let r = peering::pglog::reconcile(&auth, mine.head, Some(&mine), &PgMissing::default()).unwrap();
    assert_eq!(r.common, Eversion::new(1, 2));
    assert_eq!(r.divergent.len(), 2);
    assert_eq!(r.remove, vec![obj("q")]);
    let m = &r.missing.missing;
    assert_eq!(m.len(), 3, "{m:?}");
    assert_eq!(
        m[&obj("x")].need,
        Eversion::new(1, 1),
        "back to the version before the divergent write"
    );
    assert_eq!(m[&obj("y")].need, Eversion::new(3, 3));
    assert_eq!(m[&obj("y")].have, Eversion::new(1, 2));
    assert_eq!(m[&obj("w")].need, Eversion::new(3, 4));
    // a shard behind the trimmed tail cannot use the log
    let trimmed = PgLog {
        tail: Eversion::new(1, 2),
        log: auth.log[2..].to_vec(),
        ..auth.clone()
    };
    assert_eq!(
        peering::pglog::reconcile(&trimmed, Eversion::new(1, 1), None, &PgMissing::default()),
        Err(peering::pglog::NeedMore::Backfill)
    );
}

#[test]
fn empty_new_replica_is_backfilled_under_a_pg_temp() {
    let mut sim = Sim::new(vec![0, 1, 2, 3], 3, 2);
    // osd.3 exists but is not among the first three
    sim.publish();
    assert_clean(&sim, &[0, 1, 2]);
    for i in 0..10 {
        sim.write(&format!("o{i}"), log_op::MODIFY);
    }
    // the log was trimmed: an empty shard cannot recover from it
    let trim_to = sim.pgs[&0].log().log[3].version;
    for o in [0, 1, 2] {
        sim.pgs.get_mut(&o).unwrap().trim_log(trim_to);
    }
    // osd.2 is marked out: CRUSH now maps [0, 1, 3], and osd.3 has nothing
    sim.out.insert(2);
    sim.publish();
    let t = sim.trace.join("\n");
    // the primary asked for pg_temp [0,1,2] while osd.3 backfilled, then dropped it
    assert!(t.contains("up [0, 1, 3] acting [0, 1, 2]"), "{t}");
    assert!(t.contains("Backfilling"), "{t}");
    assert_eq!(sim.pg_temp, None);
    let m = sim.map();
    assert_eq!((m.up.clone(), m.acting.clone()), (vec![0, 1, 3], vec![0, 1, 3]));
    assert_clean(&sim, &[0, 1, 3]);
    assert!(sim.pgs[&3].info().last_backfill.is_max());
    assert_eq!(sim.state(2), "Started/Stray");
    eprintln!("{}", sim.trace.join("\n"));
}

/// A seeded random history: writes, kills (sometimes right after a write only the primary logged), restarts and
/// out/in of 4 OSDs with size 3 / min_size 2. Every write acknowledged by an active PG survives, and once every
/// OSD is back the PG ends active+clean with identical logs. `PEERING_SEEDS=a..b` widens the run; a failing seed
/// prints itself.
#[test]
fn random_histories_converge_and_keep_acknowledged_writes() {
    let range = std::env::var("PEERING_SEEDS")
        .ok()
        .and_then(|s| {
            let (a, b) = s.split_once("..")?;
            Some(a.parse::<u64>().ok()?..b.parse::<u64>().ok()?)
        })
        .unwrap_or(0..150);
    for seed in range {
        let r = std::panic::catch_unwind(|| random_history(seed));
        if let Err(e) = r {
            eprintln!(
                "failing seed: PEERING_SEEDS={seed}..{} cargo test -p peering random",
                seed + 1
            );
            std::panic::resume_unwind(e);
        }
    }
}

fn random_history(seed: u64) {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut rnd = move |n: u64| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x % n
    };
    let mut sim = Sim::new(vec![0, 1, 2, 3], 3, 2);
    sim.publish();
    let mut acked: Vec<Eversion> = Vec::new();
    for step in 0..25 {
        let p = sim.primary();
        let active = p >= 0 && sim.pgs.get(&p).is_some_and(|pg| pg.is_active());
        match rnd(10) {
            0..=4 if active => {
                let v = sim.write(&format!("o{}", rnd(6)), log_op::MODIFY);
                acked.push(v);
            }
            5 if active => {
                // the primary logs a write and dies before any replica has it
                sim.write_on(&[p], &format!("o{}", rnd(6)), log_op::MODIFY);
                sim.kill(p);
                sim.publish();
            }
            6 | 7 => {
                let alive: Vec<i32> = sim.running.iter().copied().collect();
                if alive.len() > 2 {
                    let o = alive[rnd(alive.len() as u64) as usize];
                    sim.kill(o);
                    sim.publish();
                }
            }
            8 => {
                let dead: Vec<i32> = (0..4).filter(|o| !sim.running.contains(o)).collect();
                if let Some(&o) = dead.get(rnd(dead.len().max(1) as u64) as usize) {
                    sim.start(o);
                    sim.publish();
                }
            }
            _ => {
                let o = rnd(4) as i32;
                if !sim.out.remove(&o) && sim.out.is_empty() {
                    sim.out.insert(o);
                }
                sim.publish();
            }
        }
        let _ = step;
    }
    for o in 0..4 {
        if !sim.running.contains(&o) {
            sim.start(o);
        }
    }
    sim.out.clear();
    sim.publish();
    let up = sim.map().up;
    assert_eq!(sim.map().acting, up, "seed {seed}: pg_temp left behind");
    assert_clean(&sim, &up);
    let log: BTreeSet<Eversion> = sim.pgs[&up[0]].log().log.iter().map(|e| e.version).collect();
    for v in &acked {
        assert!(
            log.contains(v),
            "seed {seed}: acknowledged write {v:?} lost; {:#?}",
            sim.trace
        );
    }
}
