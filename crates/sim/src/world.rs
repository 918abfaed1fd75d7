// SPDX-License-Identifier: LGPL-3.0-or-later
//! The simulated cluster: one event queue on a simulated clock, OSDs made of `osd_core::OsdShard`s on
//! simulated devices, the model monitor, the network and the clients. Everything is driven by one seeded PRNG
//! in one thread, so a seed replays a run exactly.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use ceph_msgs::CephMessage;
use ceph_msgs::MOSDMap;
use ceph_msgs::osd::MOSDAlive;
use ceph_msgs::osd_op::{MOSDOp, MOSDOpReply};
use ceph_msgs::osd_rep::{CEPH_OSD_FLAG_ONDISK, MOSDRepOp, MOSDRepOpReply, rep_msg};
use denc::Decode as _;
use denc::{EntityAddr, EntityNameT, ObjectLocator, ObjectName, PgShard, ShardId, SnapId, SpgId, Utime};
use ferrostore::rng::Rng;
use ferrostore::{Store, StoreConfig};
use osd_core::{ClientOp, Input, OsdShard, Output, PgRouter, ShardConfig};
use osdmap::build::{FailureDomain, MapBuilder, PoolSpec};
use osdmap::{Incremental, OsdMap, PgId};

use crate::client::{OpKind, osd_ops, parse_read, random_op};
use crate::disk::{Disk, ShardDev};
use crate::mon::{Mon, MonReq, map_nonce};
use crate::oracle::{ObjKey, OpId, Oracle};
use crate::wire;
use crate::{Bug, Config, Failure, Report};

const FEATURES: u64 = osd_core::PEER_FEATURES;
const WALL_BASE_SEC: u32 = 1_700_000_000;
/// How long (simulated) the cluster may take to converge once faults stop.
const QUIET_SIM_TIME: Duration = Duration::from_secs(120);

/// A participant on the network.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Node {
    Mon,
    Osd(i32),
    Client(u32),
}

impl std::fmt::Display for Node {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Node::Mon => write!(f, "mon"),
            Node::Osd(o) => write!(f, "osd.{o}"),
            Node::Client(c) => write!(f, "client.{c}"),
        }
    }
}

#[derive(Debug)]
enum Ev {
    /// A frame arrives on the connection `from -> to` of generation `generation`.
    Deliver {
        from: Node,
        to: Node,
        generation: u64,
        frame: Bytes,
    },
    /// A request reaches the monitor.
    MonReq(MonReq),
    MonPropose,
    ShardTick {
        osd: i32,
        shard: u32,
        inc: u32,
    },
    DevicePoll {
        osd: i32,
        inc: u32,
    },
    ClientIssue {
        client: u32,
    },
    Chaos,
    /// A pending crash happens now if it has not yet.
    CrashDeadline {
        osd: i32,
        inc: u32,
    },
    /// A crashed OSD process starts again (remount, replay).
    Restart {
        osd: i32,
    },
    /// A running OSD instance asks the monitor to mark it up.
    Boot {
        osd: i32,
        inc: u32,
    },
    /// The heartbeat grace of a partition ran out: the monitor hears about it.
    PartitionReport {
        a: i32,
        b: i32,
        id: u64,
    },
    Heal {
        a: Node,
        b: Node,
        id: u64,
    },
    /// `me` notices that its session to `other` broke (see [`World::reset`]).
    ResetNotice {
        me: i32,
        other: i32,
    },
    SlowEnd {
        osd: i32,
    },
    QuietCheck,
}

/// Per direction of a connection.
#[derive(Debug, Default, Clone)]
struct Link {
    generation: u64,
    /// In-order delivery: nothing on this link arrives before this.
    last_arrival: Duration,
    seq: u64,
    /// The sender has not noticed its session broke: what it sends is lost.
    dead: bool,
}

struct Osd {
    disk: Disk,
    shards: Vec<OsdShard<ShardDev>>,
    /// Which shard holds each PG (built from the stores at start, advanced with every map, given to every shard
    /// before the map), as ferro-osd's core 0 does.
    router: PgRouter,
    /// Messages about a PG the table does not know yet, from an epoch newer than the table: routed again after
    /// the next map (routing them now could pick the wrong shard for good).
    unrouted: Vec<(Node, ceph_msgs::Message)>,
    running: bool,
    /// Instance number (the nonce in its addresses); bumped at every start.
    inc: u32,
    map: Option<OsdMap>,
    poll_scheduled: bool,
    next_tick: Vec<Option<Duration>>,
    slow: bool,
    /// A boot request is on its way or scheduled.
    booting: bool,
    /// A crash is due: it happens at the next device poll with IO in flight (the interesting crash points), or
    /// at the deadline.
    crash_pending: bool,
}

/// Where an op goes: (primary, folded pg, acting, up, the object's full hash).
type Target = (i32, PgId, Vec<i32>, Vec<i32>, u32);

/// What an op was last sent under: (primary, pg, acting, up, the pool's (pg_num, size, min_size)). Any change
/// is a new interval for the op's PG (Objecter's `is_new_interval`, which includes splits): resend.
type SentUnder = (i32, PgId, Vec<i32>, Vec<i32>, (u32, u8, u8));

struct InflightOp {
    tid: u64,
    obj: ObjKey,
    kind: OpKind,
    oracle: Option<OpId>,
    /// Logical time of the first send (reads are recorded with it).
    sent_at: u64,
    attempts: i32,
    /// Where and under which mapping it was last sent: (osd, pg, acting, up).
    target: Option<SentUnder>,
}

struct Client {
    id: u32,
    map: Option<OsdMap>,
    next_tid: u64,
    inflight: BTreeMap<u64, InflightOp>,
    issuing: bool,
}

pub(crate) struct World {
    cfg: Config,
    rng: Rng,
    now: Duration,
    seq: u64,
    /// Logical clock of the oracle (one tick per client-visible event).
    lclock: u64,
    queue: BTreeMap<(Duration, u64), Ev>,
    links: BTreeMap<(Node, Node), Link>,
    partitions: BTreeMap<(Node, Node), u64>,
    next_partition: u64,
    mon: Mon,
    osds: Vec<Osd>,
    clients: Vec<Client>,
    objects: Vec<ObjKey>,
    oracle: Oracle,
    trace: VecDeque<String>,
    faults_on: bool,
    events: u64,
    report: Report,
    /// Set by the final sweep once every object has been read back.
    sweep_started: bool,
    sweep_pending: usize,
    quiet_since: Duration,
    last_status: String,
}

fn us(n: u64) -> Duration {
    Duration::from_micros(n)
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

impl World {
    pub(crate) fn new(cfg: Config) -> Result<World, String> {
        let mut rng = Rng::new(cfg.seed);
        let osds = cfg.osds.max(1);
        let per_host = if osds >= 4 && rng.chance(50) { 2 } else { 1 };
        let hosts = osds.div_ceil(per_host);
        let size = cfg.pool_size.min(osds as u8).max(1);
        // Spreading over hosts needs at least `size` of them, or every PG stays undersized.
        let domain = if per_host == 1 || hosts < u32::from(size) || rng.chance(30) {
            FailureDomain::Osd
        } else {
            FailureDomain::Host
        };
        let min_size = size.div_ceil(2).max(1).min(size);
        let pg_num = cfg.pg_num.max(1);
        let mut map = MapBuilder::new(hosts, per_host)
            .failure_domain(domain)
            .pool(PoolSpec::replicated("sim", size, min_size, pg_num))
            .build();
        // Hosts may hold more OSD slots than asked for: those never existed.
        let total = (hosts * per_host) as i32;
        if total > osds as i32 {
            let mut b = osdmap::build::IncBuilder::new(&map);
            for o in osds as i32..total {
                b.mark_down(o).map_err(|e| e.to_string())?;
                b.mark_out(o).map_err(|e| e.to_string())?;
            }
            let inc = b.finish().map_err(|e| e.to_string())?;
            osdmap::build::advance(&mut map, &inc).map_err(|e| e.to_string())?;
        }
        let shards = if cfg.shards == 0 {
            1 + rng.below(2) as u32
        } else {
            cfg.shards
        };
        let mut w = World {
            rng,
            now: Duration::ZERO,
            seq: 0,
            lclock: 0,
            queue: BTreeMap::new(),
            links: BTreeMap::new(),
            partitions: BTreeMap::new(),
            next_partition: 1,
            mon: Mon::new(map),
            osds: Vec::new(),
            clients: Vec::new(),
            objects: (0..cfg.objects.max(1))
                .map(|i| ObjKey {
                    pool: 1,
                    name: format!("obj-{i}"),
                })
                .collect(),
            oracle: Oracle::default(),
            trace: VecDeque::new(),
            faults_on: true,
            events: 0,
            report: Report {
                seed: cfg.seed,
                osds,
                shards,
                pool_size: size,
                ..Report::default()
            },
            sweep_started: false,
            sweep_pending: 0,
            quiet_since: Duration::ZERO,
            last_status: String::new(),
            cfg,
        };
        w.trace(format!(
            "cluster: {osds} osds ({hosts} hosts x {per_host}, failure domain {domain:?}), {shards} shards each, \
             pool 1 size {size} min_size {min_size} pg_num {pg_num}"
        ));
        let disk_bug = match w.cfg.bug {
            Bug::LyingFlush => crate::disk::DiskBug::LyingFlush,
            _ => crate::disk::DiskBug::None,
        };
        for o in 0..osds as i32 {
            let seed = w.rng.next_u64();
            let disk = Disk::mkfs((w.cfg.device_mib as usize) << 20, shards, seed, disk_bug)?;
            w.osds.push(Osd {
                disk,
                shards: Vec::new(),
                router: PgRouter::new(o, shards),
                unrouted: Vec::new(),
                running: false,
                inc: o as u32 + 1,
                map: None,
                poll_scheduled: false,
                next_tick: Vec::new(),
                slow: false,
                booting: false,
                crash_pending: false,
            });
            // The built map shows every OSD up with nonce id+1: start that instance.
            w.start_osd(o, false)?;
        }
        for c in 0..w.cfg.clients.max(1) {
            w.clients.push(Client {
                id: c,
                map: Some(w.mon.map.clone()),
                next_tid: 1,
                inflight: BTreeMap::new(),
                issuing: true,
            });
            let d = us(w.rng.below(2000));
            w.schedule(d, Ev::ClientIssue { client: c });
        }
        let d = ms(20 + w.rng.below(200));
        w.schedule(d, Ev::Chaos);
        w.schedule(ms(5), Ev::MonPropose);
        Ok(w)
    }

    // ------------------------------------------------------------------ plumbing

    fn schedule(&mut self, after: Duration, ev: Ev) {
        self.seq += 1;
        self.queue.insert((self.now + after, self.seq), ev);
    }

    fn trace(&mut self, line: String) {
        let t = self.now.as_micros();
        self.trace
            .push_back(format!("{:>6}.{:03}ms {line}", t / 1000, t % 1000));
        while self.trace.len() > self.cfg.trace_len.max(1) {
            self.trace.pop_front();
        }
    }

    fn wall(&self) -> Utime {
        let n = self.now;
        Utime::new(WALL_BASE_SEC + n.as_secs() as u32, n.subsec_nanos())
    }

    fn tick(&mut self) -> u64 {
        self.lclock += 1;
        self.lclock
    }

    fn fail(&self, reason: String) -> Failure {
        Failure {
            reason,
            repro: self.cfg.repro(),
            trace: self.trace.iter().cloned().collect(),
            report: self.report.clone(),
        }
    }

    fn key(a: Node, b: Node) -> (Node, Node) {
        if a <= b { (a, b) } else { (b, a) }
    }

    fn partitioned(&self, a: Node, b: Node) -> bool {
        self.partitions.contains_key(&Self::key(a, b))
    }

    fn latency(&mut self, from: Node, to: Node) -> Duration {
        let mut l = 30 + self.rng.below(250);
        if self.rng.chance(3) {
            l += self.rng.below(3000);
        }
        for n in [from, to] {
            if let Node::Osd(o) = n
                && self.osds.get(o as usize).is_some_and(|x| x.slow)
            {
                l += 2000 + self.rng.below(20_000);
            }
        }
        us(l)
    }

    /// Put a message on the wire from `from` to `to` (in order per connection; dropped across a partition).
    fn send(&mut self, from: Node, to: Node, msg: &ceph_msgs::Message) -> Result<(), String> {
        if self.partitioned(from, to) {
            return Ok(());
        }
        let lat = self.latency(from, to);
        let now = self.now;
        let link = self.links.entry((from, to)).or_default();
        if link.dead {
            self.report.messages_lost += 1;
            return Ok(());
        }
        link.seq += 1;
        let frame = wire::to_wire(msg, link.seq)?;
        let at = (now + lat).max(link.last_arrival + Duration::from_nanos(1));
        link.last_arrival = at;
        let generation = link.generation;
        self.report.messages += 1;
        self.seq += 1;
        self.queue.insert(
            (at, self.seq),
            Ev::Deliver {
                from,
                to,
                generation,
                frame,
            },
        );
        Ok(())
    }

    /// Break the connection between `a` and `b`: frames in flight are lost, both ends are told. Between two OSDs
    /// (with [`Config::late_notice`]), one time in two the end that closed it (`a`) knows at once and `b` only some milliseconds later, as over
    /// TCP: what `b` sends to `a` until then goes out on the dead session and is lost. Noticing, `b` opens a new
    /// session, and `a` seeing it is told of a reset again (ferro-osd's rule: our resends after that are
    /// answered on the new session).
    fn reset(&mut self, a: Node, b: Node) -> Result<(), String> {
        for k in [(a, b), (b, a)] {
            let l = self.links.entry(k).or_default();
            l.generation += 1;
            l.seq = 0;
        }
        self.report.resets += 1;
        if let (Node::Osd(x), Node::Osd(y)) = (a, b)
            && self.cfg.late_notice
            && self.rng.below(2) == 0
        {
            self.trace(format!("reset {a} <-> {b} ({b} notices late)"));
            self.links.entry((b, a)).or_default().dead = true;
            self.on_reset(a, b)?;
            let d = ms(1 + self.rng.below(50));
            self.schedule(d, Ev::ResetNotice { me: y, other: x });
            return Ok(());
        }
        self.trace(format!("reset {a} <-> {b}"));
        for (me, other) in [(a, b), (b, a)] {
            self.on_reset(me, other)?;
        }
        Ok(())
    }

    /// `me` notices its session to `other` broke ([`World::reset`]), opens a new one, and `other` sees it.
    fn reset_noticed(&mut self, me: i32, other: i32) -> Result<(), String> {
        let (m, o) = (Node::Osd(me), Node::Osd(other));
        self.links.entry((m, o)).or_default().dead = false;
        self.trace(format!("{m} notices the reset, reconnects to {o}"));
        self.on_reset(m, o)?;
        if self.cfg.bug != Bug::NoReconnectReset {
            self.on_reset(o, m)?;
        }
        Ok(())
    }

    fn on_reset(&mut self, me: Node, other: Node) -> Result<(), String> {
        match (me, other) {
            (Node::Osd(o), Node::Osd(p)) if self.osd_running(o) => {
                for s in 0..self.osds[o as usize].shards.len() {
                    self.osd_input(o, s, Input::PeerReset(p))?;
                }
            }
            (Node::Osd(o), Node::Client(c)) if self.osd_running(o) => {
                let conn = self.conn_id(c, o);
                // The old connection id: generation before the bump.
                let old = pg::ConnId(conn.0.wrapping_sub(1));
                for s in 0..self.osds[o as usize].shards.len() {
                    self.osd_input(o, s, Input::ClientReset(old))?;
                }
            }
            (Node::Client(c), Node::Osd(o)) => {
                let tids: Vec<u64> = self.clients[c as usize]
                    .inflight
                    .values()
                    .filter(|op| op.target.as_ref().is_some_and(|t| t.0 == o))
                    .map(|op| op.tid)
                    .collect();
                for t in tids {
                    self.client_send(c, t, true)?;
                }
            }
            _ => {}
        }
        Ok(())
    }

    /// The connection id an OSD sees for client `c`: client and connection generation.
    fn conn_id(&self, c: u32, o: i32) -> pg::ConnId {
        let generation = self
            .links
            .get(&(Node::Client(c), Node::Osd(o)))
            .map_or(0, |l| l.generation);
        pg::ConnId((u64::from(c) << 32) | (generation & 0xffff_ffff))
    }

    fn osd_running(&self, o: i32) -> bool {
        self.osds.get(o as usize).is_some_and(|x| x.running)
    }

    // ------------------------------------------------------------------ OSDs

    /// Mount the shards of osd `o` and start a new instance. `boot`: ask the monitor to mark it up.
    fn start_osd(&mut self, o: i32, boot: bool) -> Result<(), String> {
        let osd = &mut self.osds[o as usize];
        let nshards = self.report.shards;
        let mut shards = Vec::new();
        let mut router = PgRouter::new(o, nshards);
        // The oldest of the shards' newest stored maps (Ceph's superblock newest_map): the OSD replays every
        // epoch after it.
        let mut stored_map: Option<OsdMap> = None;
        for s in 0..nshards {
            let store_cfg = StoreConfig {
                fault_replay_order: self.cfg.bug == Bug::ReplayOrder,
                ..StoreConfig::default()
            };
            let mut store = Store::mount(osd.disk.shard(s), s, store_cfg)
                .map_err(|e| format!("osd.{o} shard {s}: mount after restart failed: {e}"))?;
            let stored = osd_core::stored_pgs(&mut store)
                .map_err(|e| format!("osd.{o} shard {s}: listing PGs: {e}"))?;
            match osd_core::load_newest_map(&mut store) {
                Ok(Some(m)) => {
                    if stored_map.as_ref().is_none_or(|x| m.epoch < x.epoch) {
                        stored_map = Some(m);
                    }
                }
                Ok(None) => {}
                Err(e) => return Err(format!("osd.{o} shard {s}: loading its newest map: {e}")),
            }
            let conflicts = router.add_stored(s, stored.iter().map(|(p, bits)| (p.pgid, *bits)));
            if let Some(c) = conflicts.first() {
                return Err(format!(
                    "osd.{o}: pg {} stored on shards {} and {}",
                    c.pgid, c.kept, c.ignored
                ));
            }
            let mut cfg = ShardConfig::new(o, s, nshards);
            cfg.pg.fault_ack_before_replicas = self.cfg.bug == Bug::AckBeforeReplicas;
            cfg.peering.fault_pick_worst_log = self.cfg.bug == Bug::WorstLog;
            shards.push(OsdShard::new(cfg, store));
        }
        if boot {
            osd.inc += 100;
        }
        osd.shards = shards;
        osd.router = router;
        osd.unrouted.clear();
        osd.running = true;
        osd.next_tick = vec![None; nshards as usize];
        osd.poll_scheduled = false;
        osd.map = None;
        osd.booting = false;
        osd.crash_pending = false;
        let inc = osd.inc;
        self.trace(format!("osd.{o} started (instance {inc})"));
        // A restarted OSD asks the monitor for every epoch after the newest it stored and advances through each
        // (Ceph's MMonSubscribe osdmap start = newest_map + 1); a new one (or, as a seeded bug, any) takes the
        // current map.
        let newest = self.mon.map.epoch;
        match stored_map {
            Some(m) if self.cfg.bug != Bug::NoMapReplay && m.epoch <= newest => {
                let from = m.epoch;
                self.trace(format!(
                    "osd.{o} replays epochs {}..={newest} from its stored map",
                    from + 1
                ));
                for s in 0..nshards as usize {
                    self.osd_input(o, s, Input::MapsPending(newest))?;
                }
                let mut cur = m;
                self.osd_new_map(o, cur.clone())?;
                for e in from + 1..=newest {
                    let bytes = self.mon_inc(e)?;
                    apply_inc(&mut cur, bytes, &format!("osd.{o}"))?;
                    self.osd_new_map(o, cur.clone())?;
                }
            }
            _ => {
                let map = self.mon.map.clone();
                self.osd_new_map(o, map)?;
            }
        }
        for s in 0..nshards as usize {
            self.drain(o, s)?;
        }
        if boot {
            // Every peer sees a new instance: old sessions are gone.
            for p in 0..self.osds.len() as i32 {
                if p != o {
                    self.reset(Node::Osd(o), Node::Osd(p))?;
                }
            }
            self.request_boot(o);
        }
        Ok(())
    }

    fn request_boot(&mut self, o: i32) {
        let osd = &mut self.osds[o as usize];
        if osd.booting {
            return;
        }
        osd.booting = true;
        let inc = osd.inc;
        let d = ms(5 + self.rng.below(50));
        self.schedule(d, Ev::Boot { osd: o, inc });
    }

    fn crash_osd(&mut self, o: i32) -> Result<(), String> {
        let seed = self.rng.next_u64();
        let mut rng = Rng::new(self.rng.next_u64());
        let osd = &mut self.osds[o as usize];
        if !osd.running {
            return Ok(());
        }
        let inc = osd.inc;
        osd.crash_pending = false;
        // Drop the shards (and with them the stores' handles) before imaging the device.
        let shards = std::mem::take(&mut osd.shards);
        drop(shards);
        let (disk, counts) = osd.disk.crash(&mut rng, seed);
        osd.disk = disk;
        osd.running = false;
        osd.map = None;
        osd.booting = false;
        self.report.crashes += 1;
        self.trace(format!(
            "CRASH osd.{o} instance {inc}: unflushed writes dropped {} kept {} torn {}",
            counts[0], counts[1], counts[2]
        ));
        for n in self.all_nodes() {
            if n != Node::Osd(o) && n != Node::Mon {
                self.reset(Node::Osd(o), n)?;
            }
        }
        // Peers notice through heartbeats after a grace period.
        let d = ms(200 + self.rng.below(1500));
        self.schedule_mon_req(d, MonReq::Down { osd: o, nonce: inc });
        let d = ms(50 + self.rng.below(1000));
        self.schedule(d, Ev::Restart { osd: o });
        Ok(())
    }

    fn all_nodes(&self) -> Vec<Node> {
        let mut v: Vec<Node> = (0..self.osds.len() as i32).map(Node::Osd).collect();
        v.extend((0..self.clients.len() as u32).map(Node::Client));
        v
    }

    fn schedule_mon_req(&mut self, after: Duration, r: MonReq) {
        self.schedule(after, Ev::MonReq(r));
    }

    /// Feed one input to a shard, catching panics (an assertion in the code under test is a failure).
    fn osd_input(&mut self, o: i32, s: usize, input: Input) -> Result<(), String> {
        let (now, wall) = (self.now, self.wall());
        let osd = &mut self.osds[o as usize];
        let Some(shard) = osd.shards.get_mut(s) else {
            return Ok(());
        };
        let what = format!("{input:?}");
        let r = catch_unwind(AssertUnwindSafe(|| shard.handle(now, wall, input)));
        if let Err(p) = r {
            return Err(format!(
                "PANIC in osd.{o} shard {s} handling {}: {}",
                truncate(&what, 200),
                panic_message(&p)
            ));
        }
        self.drain(o, s as u32 as usize)
    }

    /// Take a shard's outputs and act on them; schedule its timer and device polling.
    fn drain(&mut self, o: i32, s: usize) -> Result<(), String> {
        let mut outs = Vec::new();
        {
            let osd = &mut self.osds[o as usize];
            let Some(shard) = osd.shards.get_mut(s) else {
                return Ok(());
            };
            while let Some(out) = shard.poll_output() {
                outs.push(out);
            }
        }
        for out in outs {
            self.on_output(o, out)?;
        }
        // Timer.
        let inc = self.osds[o as usize].inc;
        if let Some(t) = self.osds[o as usize].shards.get(s).and_then(|x| x.poll_timeout()) {
            let due = t.max(self.now);
            let cur = self.osds[o as usize].next_tick.get(s).copied().flatten();
            if cur.is_none_or(|c| due < c || c < self.now) {
                if let Some(slot) = self.osds[o as usize].next_tick.get_mut(s) {
                    *slot = Some(due);
                }
                let after = due - self.now;
                self.schedule(
                    after,
                    Ev::ShardTick {
                        osd: o,
                        shard: s as u32,
                        inc,
                    },
                );
            }
        }
        self.schedule_poll(o);
        Ok(())
    }

    fn schedule_poll(&mut self, o: i32) {
        let osd = &mut self.osds[o as usize];
        if osd.poll_scheduled || !osd.running {
            return;
        }
        // a shard's completions wait in its inbox of the shared disk until that shard polls: keep polling while
        // any shard has writes unacknowledged or reads (client read prefetches) in flight
        let busy = osd.disk.in_flight() > 0
            || osd
                .shards
                .iter_mut()
                .any(|s| s.store_mut().unacked() > 0 || s.store_mut().reads_in_flight() > 0);
        if !busy {
            return;
        }
        let inc = osd.inc;
        let slow = osd.slow;
        let mut d = 20 + self.rng.below(200);
        if slow {
            d += 500 + self.rng.below(5000);
        }
        self.osds[o as usize].poll_scheduled = true;
        self.schedule(us(d), Ev::DevicePoll { osd: o, inc });
    }

    fn device_poll(&mut self, o: i32) -> Result<(), String> {
        self.osds[o as usize].poll_scheduled = false;
        if self.osds[o as usize].crash_pending
            && self.osds[o as usize].disk.in_flight() > 0
            && self.rng.chance(40)
        {
            return self.crash_osd(o);
        }
        for s in 0..self.osds[o as usize].shards.len() {
            let mut evs = Vec::new();
            let r = {
                let shard = &mut self.osds[o as usize].shards[s];
                shard.store_mut().poll(&mut evs)
            };
            if let Err(e) = r {
                return Err(format!("osd.{o} shard {s}: store failed: {e}"));
            }
            for ev in evs {
                match ev {
                    ferrostore::Event::Durable(seq) => self.osd_input(o, s, Input::Durable(seq))?,
                    ferrostore::Event::Prefetched(t) => self.osd_input(o, s, Input::Prefetched(t))?,
                    _ => {}
                }
            }
        }
        self.schedule_poll(o);
        Ok(())
    }

    fn on_output(&mut self, o: i32, out: Output) -> Result<(), String> {
        match out {
            Output::ClientReply { conn, reply } => {
                let c = (conn.0 >> 32) as u32;
                if c as usize >= self.clients.len() {
                    return Err(format!("osd.{o} replied on unknown connection {conn:?}"));
                }
                // A reply for a connection that was reset since is lost with it.
                if self.conn_id(c, o) != conn {
                    return Ok(());
                }
                let m = reply.encode_message(FEATURES);
                self.send(Node::Osd(o), Node::Client(c), &m)?;
            }
            Output::ClientNotify { .. } => {}
            Output::ToOsd { osd, msg } => {
                if self.cfg.bug == Bug::AckWithoutReplica && msg.msg_type == rep_msg::REPOP {
                    return self.fake_repop_ack(o, osd, &msg);
                }
                self.send(Node::Osd(o), Node::Osd(osd), &msg)?;
            }
            Output::NeedUpThru { epoch } => {
                let m = MOSDAlive {
                    paxos: Default::default(),
                    want: epoch,
                }
                .to_message(FEATURES);
                self.send(Node::Osd(o), Node::Mon, &m)?;
            }
            Output::PgTemp { pgid, acting } => {
                let d = self.latency(Node::Osd(o), Node::Mon);
                self.schedule_mon_req(
                    d,
                    MonReq::PgTemp {
                        from: o,
                        pgid,
                        acting,
                    },
                );
            }
            Output::PgCreated { .. } => {}
            Output::Misdirected { msg, .. } => {
                self.report.misdirected += 1;
                self.trace(format!(
                    "osd.{o} misdirected op tid {} for {}",
                    msg.tid, msg.pgid.pgid
                ));
            }
            Output::Log(line) => {
                if self.cfg.verbose {
                    self.trace(format!("osd.{o}: {line}"));
                }
            }
        }
        Ok(())
    }

    /// Seeded bug (a): the replica's ONDISK answer is forged at once and the replica never gets the write, so
    /// the primary acknowledges writes only it holds.
    fn fake_repop_ack(&mut self, from: i32, to: i32, msg: &ceph_msgs::Message) -> Result<(), String> {
        let rep = MOSDRepOp::from_message(msg).map_err(|e| format!("MOSDRepOp from osd.{from}: {e}"))?;
        let ack = MOSDRepOpReply {
            map_epoch: rep.map_epoch,
            min_epoch: rep.min_epoch,
            trace: Default::default(),
            reqid: rep.reqid,
            pgid: rep.pgid,
            ack_type: CEPH_OSD_FLAG_ONDISK,
            result: 0,
            last_complete_ondisk: rep.version,
            from: PgShard::new(to, ShardId::NO_SHARD),
        }
        .to_message(FEATURES);
        self.send(Node::Osd(to), Node::Osd(from), &ack)
    }

    /// A new map reaches osd `o` (its own copy moves forward; every shard gets the epoch).
    fn osd_new_map(&mut self, o: i32, map: OsdMap) -> Result<(), String> {
        let arc = Arc::new(map.clone());
        let me_up_nonce = map.is_up(o).then(|| map_nonce(&map, o));
        let osd = &mut self.osds[o as usize];
        osd.router.advance(&map);
        let routes = Arc::new(osd.router.clone());
        osd.map = Some(map);
        for s in 0..self.osds[o as usize].shards.len() {
            self.osd_input(o, s, Input::Routes(routes.clone()))?;
            self.osd_input(o, s, Input::Map(arc.clone()))?;
        }
        for (from, msg) in std::mem::take(&mut self.osds[o as usize].unrouted) {
            self.osd_route(o, from, msg)?;
        }
        // "Wrongly marked me down": a running instance that the map shows down (or as an older instance)
        // boots again.
        let inc = self.osds[o as usize].inc;
        if self.osds[o as usize].running && me_up_nonce != Some(inc) && !self.osds[o as usize].booting {
            self.request_boot(o);
        }
        Ok(())
    }

    /// The monitor's incremental for `epoch` (it keeps every one).
    fn mon_inc(&self, epoch: u32) -> Result<Bytes, String> {
        self.mon
            .incs
            .binary_search_by_key(&epoch, |(e, _)| *e)
            .ok()
            .and_then(|i| self.mon.incs.get(i))
            .map(|(_, b)| b.clone())
            .ok_or_else(|| format!("monitor has no incremental for epoch {epoch}"))
    }

    fn osd_receive(&mut self, o: i32, from: Node, msg: ceph_msgs::Message) -> Result<(), String> {
        match from {
            Node::Mon => {
                let mm = MOSDMap::from_message(&msg).map_err(|e| format!("MOSDMap to osd.{o}: {e}"))?;
                for (epoch, bytes) in mm.incremental_maps {
                    let have = self.osds[o as usize].map.as_ref().map_or(0, |m| m.epoch);
                    if epoch <= have {
                        continue;
                    }
                    if epoch == have + 1 {
                        let mut m = self.osds[o as usize].map.clone().ok_or("no map")?;
                        apply_inc(&mut m, bytes, &format!("osd.{o}"))?;
                        self.osd_new_map(o, m)?;
                    } else if let Some(mut m) = self.osds[o as usize].map.clone() {
                        // A gap: ask for the epochs after ours (the monitor keeps every incremental).
                        for s in 0..self.osds[o as usize].shards.len() {
                            self.osd_input(o, s, Input::MapsPending(epoch))?;
                        }
                        for e in have + 1..=epoch {
                            let b = self.mon_inc(e)?;
                            apply_inc(&mut m, b, &format!("osd.{o}"))?;
                            self.osd_new_map(o, m.clone())?;
                        }
                    } else {
                        self.osd_new_map(o, self.mon.map.clone())?;
                    }
                }
            }
            Node::Osd(_) | Node::Client(_) => self.osd_route(o, from, msg)?,
        }
        Ok(())
    }

    /// Bounded like osd-core's waiting_for_map: past it the oldest is dropped (clients and peers resend).
    fn hold_unrouted(&mut self, o: i32, from: Node, msg: ceph_msgs::Message) {
        let q = &mut self.osds[o as usize].unrouted;
        if q.len() >= osd_core::MAX_WAITING_FOR_MAP {
            q.remove(0);
        }
        q.push((from, msg));
    }

    /// Deliver a peer message or client op to the shard of its PG, or hold it until the route table knows the PG.
    fn osd_route(&mut self, o: i32, from: Node, msg: ceph_msgs::Message) -> Result<(), String> {
        match from {
            Node::Mon => {}
            Node::Osd(p) => {
                let Some(spgid) = osd_core::route_peer_message(&msg) else {
                    self.report.unroutable += 1;
                    self.trace(format!(
                        "osd.{o}: unroutable message type {} from osd.{p}",
                        msg.msg_type
                    ));
                    return Ok(());
                };
                let epoch = osd_core::peer_message_epoch(&msg).unwrap_or(0);
                let Some(s) = self.osds[o as usize].router.route_at(&spgid, epoch) else {
                    self.hold_unrouted(o, from, msg);
                    return Ok(());
                };
                self.osd_input(o, s as usize, Input::Peer { from: p, msg })?;
            }
            Node::Client(c) => {
                let op = MOSDOp::decode_message(&msg).map_err(|e| format!("MOSDOp at osd.{o}: {e}"))?;
                let Some(s) = self.osds[o as usize].router.route_at(&op.pgid, op.osdmap_epoch) else {
                    self.hold_unrouted(o, from, msg);
                    return Ok(());
                };
                let s = s as usize;
                let cop = ClientOp {
                    conn: self.conn_id(c, o),
                    msg: op,
                    client: EntityNameT::client(i64::from(c) + 4100),
                    client_addr: EntityAddr::default(),
                    caps: Arc::new(pg::OsdCap::allow_all()),
                    features: FEATURES,
                };
                self.osd_input(o, s, Input::ClientOp(Box::new(cop)))?;
            }
        }
        Ok(())
    }

    // ------------------------------------------------------------------ clients

    fn client_issue(&mut self, c: u32) -> Result<(), String> {
        let d = us(200 + self.rng.below(3000));
        if !self.clients[c as usize].issuing {
            return Ok(());
        }
        self.schedule(d, Ev::ClientIssue { client: c });
        if self.clients[c as usize].inflight.len() >= self.cfg.max_inflight.max(1) as usize {
            return Ok(());
        }
        let obj = self.objects[self.rng.below(self.objects.len() as u64) as usize].clone();
        let kind = random_op(&mut self.rng);
        self.start_op(c, obj, kind)
    }

    fn start_op(&mut self, c: u32, obj: ObjKey, kind: OpKind) -> Result<(), String> {
        let now = self.tick();
        let oracle = match &kind {
            OpKind::Write(ms) => {
                Some(
                    self.oracle
                        .write_sent(&obj, ms.clone(), now, format!("c{c}:{}", kind.describe())),
                )
            }
            OpKind::Read => None,
        };
        let cl = &mut self.clients[c as usize];
        let tid = cl.next_tid;
        cl.next_tid += 1;
        cl.inflight.insert(
            tid,
            InflightOp {
                tid,
                obj,
                kind,
                oracle,
                sent_at: now,
                attempts: -1,
                target: None,
            },
        );
        self.report.ops += 1;
        self.client_send(c, tid, false)
    }

    /// Where an op goes under the client's map: (primary, folded pg, acting, up, raw hash).
    fn target(map: &OsdMap, obj: &ObjKey) -> Option<Target> {
        let loc = ObjectLocator::new(obj.pool);
        let raw = map.object_locator_to_pg(obj.name.as_bytes(), &loc).ok()?;
        let pg = map.raw_pg_to_pg(raw).ok()?;
        let ua = map.pg_to_up_acting_osds(pg).ok()?;
        (ua.acting_primary >= 0).then_some((ua.acting_primary, pg, ua.acting, ua.up, raw.seed))
    }

    /// (Re)send op `tid` of client `c` to its target under the client's map. `force`: resend even if the
    /// target did not change (connection reset).
    fn client_send(&mut self, c: u32, tid: u64, force: bool) -> Result<(), String> {
        let cl = &self.clients[c as usize];
        let Some(map) = cl.map.as_ref() else { return Ok(()) };
        let Some(op) = cl.inflight.get(&tid) else {
            return Ok(());
        };
        let Some((primary, pg, acting, up, hash)) = Self::target(map, &op.obj) else {
            // No OSD serves the PG under this map: wait for a newer one (and send again whatever it maps to,
            // even if that is the OSD it went to before: a new interval).
            if let Some(op) = self.clients[c as usize].inflight.get_mut(&tid) {
                op.target = None;
            }
            return Ok(());
        };
        let shape = map
            .pools
            .get(&op.obj.pool)
            .map_or((0, 0, 0), |p| (p.pg_num, p.size, p.min_size));
        let now_under: SentUnder = (primary, pg, acting, up, shape);
        let same = op.target.as_ref() == Some(&now_under);
        if same && !force {
            return Ok(());
        }
        let (ops, flags) = osd_ops(&op.kind);
        let epoch = map.epoch;
        let attempts = op.attempts + 1;
        let msg = MOSDOp {
            tid,
            pgid: SpgId::new(pg, ShardId::NO_SHARD),
            hash,
            osdmap_epoch: epoch,
            flags,
            client_inc: 0,
            mtime: self.wall(),
            oloc: ObjectLocator::new(op.obj.pool),
            oid: ObjectName::new(op.obj.name.clone().into_bytes()),
            ops,
            snapid: SnapId::NOSNAP,
            retry_attempt: attempts,
            features: FEATURES,
            ..Default::default()
        };
        let obj = op.obj.clone();
        let desc = op.kind.describe();
        if let Some(op) = self.clients[c as usize].inflight.get_mut(&tid) {
            op.attempts = attempts;
            op.target = Some(now_under);
        }
        if attempts > 0 {
            self.report.resends += 1;
        }
        self.trace(format!(
            "client.{c} -> osd.{primary} tid {tid} {obj} pg {pg} e{epoch} {desc}{}",
            if attempts > 0 {
                format!(" (resend {attempts})")
            } else {
                String::new()
            }
        ));
        let m = msg.encode_message(FEATURES);
        self.send(Node::Client(c), Node::Osd(primary), &m)
    }

    fn client_receive(&mut self, c: u32, from: Node, msg: ceph_msgs::Message) -> Result<(), String> {
        match from {
            Node::Mon => {
                let mm = MOSDMap::from_message(&msg).map_err(|e| format!("MOSDMap to client.{c}: {e}"))?;
                for (epoch, bytes) in mm.incremental_maps {
                    let cl = &mut self.clients[c as usize];
                    let have = cl.map.as_ref().map_or(0, |m| m.epoch);
                    if epoch <= have {
                        continue;
                    }
                    if epoch == have + 1 {
                        let m = cl.map.as_mut().ok_or("no map")?;
                        apply_inc(m, bytes, &format!("client.{c}"))?;
                    } else {
                        cl.map = Some(self.mon.map.clone());
                    }
                }
                // Objecter: resend what now maps elsewhere (or to a new interval).
                let tids: Vec<u64> = self.clients[c as usize].inflight.keys().copied().collect();
                for t in tids {
                    self.client_send(c, t, false)?;
                }
            }
            Node::Osd(o) => {
                let reply = MOSDOpReply::decode_message(&msg)
                    .map_err(|e| format!("MOSDOpReply from osd.{o}: {e}"))?;
                let Some(op) = self.clients[c as usize].inflight.remove(&reply.tid) else {
                    return Ok(()); // a duplicate answer to a resent op
                };
                let now = self.tick();
                self.trace(format!(
                    "client.{c} <- osd.{o} tid {} {} result {} uv {}",
                    reply.tid, op.obj, reply.result, reply.user_version
                ));
                match op.oracle {
                    Some(id) => {
                        self.oracle
                            .write_acked(id, reply.result, reply.user_version, now)?;
                        self.report.writes_acked += 1;
                    }
                    None => {
                        let got = parse_read(&reply)
                            .map_err(|e| format!("read of {} from osd.{o}: {e}", op.obj))?;
                        self.oracle.read_done(
                            &op.obj,
                            op.sent_at,
                            now,
                            got,
                            format!("c{c}:tid{}", op.tid),
                        )?;
                        self.report.reads += 1;
                        if self.sweep_started {
                            self.sweep_pending = self.sweep_pending.saturating_sub(1);
                        }
                    }
                }
                self.oracle.check_ready()?;
            }
            Node::Client(_) => {}
        }
        Ok(())
    }

    // ------------------------------------------------------------------ monitor

    fn mon_propose(&mut self) -> Result<(), String> {
        let d = ms(20 + self.rng.below(60));
        self.schedule(d, Ev::MonPropose);
        let stamp = self.wall();
        let Some((epoch, bytes)) = self.mon.propose(stamp)? else {
            return Ok(());
        };
        self.report.epochs = epoch;
        self.trace(format!("mon: epoch {epoch} {}", describe_epoch(&self.mon)));
        let mut mm = MOSDMap {
            fsid: self.mon.map.fsid.0,
            oldest_map: 1,
            newest_map: epoch,
            ..Default::default()
        };
        mm.incremental_maps.insert(epoch, bytes);
        let m = mm.to_message(FEATURES);
        for n in self.all_nodes() {
            if let Node::Osd(o) = n
                && !self.osd_running(o)
            {
                continue;
            }
            self.send(Node::Mon, n, &m)?;
        }
        Ok(())
    }

    fn mon_receive(&mut self, from: Node, msg: ceph_msgs::Message) -> Result<(), String> {
        if let Node::Osd(o) = from
            && msg.msg_type == MOSDAlive::TYPE
        {
            let a = MOSDAlive::from_message(&msg).map_err(|e| format!("MOSDAlive: {e}"))?;
            self.mon.request(MonReq::UpThru {
                osd: o,
                epoch: a.want,
            });
        }
        Ok(())
    }

    // ------------------------------------------------------------------ chaos

    fn chaos(&mut self) -> Result<(), String> {
        if !self.faults_on {
            return Ok(());
        }
        let d = ms(10 + self.rng.below(self.cfg.chaos_interval_ms.max(1)));
        self.schedule(d, Ev::Chaos);
        let f = self.cfg.faults;
        let n = self.osds.len() as i32;
        let o = self.rng.below(n as u64) as i32;
        match self.rng.below(10) {
            0 | 1 if f.crash => {
                // Keep enough OSDs alive for the pool to stay writable most of the time.
                let running = self.osds.iter().filter(|x| x.running).count() as i32;
                let x = &mut self.osds[o as usize];
                if (running > 1 || n == 1) && x.running && !x.crash_pending {
                    x.crash_pending = true;
                    let inc = x.inc;
                    let d = ms(1 + self.rng.below(30));
                    self.schedule(d, Ev::CrashDeadline { osd: o, inc });
                }
            }
            2 | 3 if f.net_reset => {
                let a = self.random_node();
                let b = self.random_node();
                if a != b {
                    self.reset(a, b)?;
                }
            }
            4 if f.partition && n > 1 => {
                let mut p = self.rng.below(n as u64) as i32;
                if p == o {
                    p = (p + 1) % n;
                }
                self.partition(Node::Osd(o), Node::Osd(p))?;
            }
            5 if f.partition => {
                let c = self.rng.below(self.clients.len() as u64) as u32;
                self.partition(Node::Client(c), Node::Osd(o))?;
            }
            6 if f.slow && !self.osds[o as usize].slow => {
                self.osds[o as usize].slow = true;
                self.trace(format!("osd.{o} slow"));
                let d = ms(50 + self.rng.below(800));
                self.schedule(d, Ev::SlowEnd { osd: o });
            }
            7 if f.out_in && n > 1 => {
                if self.mon.map.is_in(o) {
                    self.trace(format!("chaos: mark osd.{o} out"));
                    self.mon.request(MonReq::Out(o));
                } else {
                    self.trace(format!("chaos: mark osd.{o} in"));
                    self.mon.request(MonReq::In(o));
                }
            }
            8 if f.pool_changes => {
                let scratch = self.mon.map.pool_by_name("scratch");
                match scratch {
                    Some(id) => self.mon.request(MonReq::DeletePool(id)),
                    None => self.mon.request(MonReq::CreatePool(PoolSpec::replicated(
                        "scratch",
                        self.report.pool_size,
                        1,
                        4,
                    ))),
                }
            }
            9 if f.pg_split => {
                if let Some(p) = self.mon.map.pools.get(&1)
                    && p.pg_num < 64
                {
                    // Uneven steps as well as doublings (Ceph's mgr walks pg_num up towards its target).
                    let n = p.pg_num + 1 + self.rng.below(u64::from(p.pg_num)) as u32;
                    self.trace(format!("chaos: pool 1 pg_num -> {n}"));
                    self.mon.request(MonReq::PgNum { pool: 1, pg_num: n });
                }
            }
            _ => {}
        }
        Ok(())
    }

    fn random_node(&mut self) -> Node {
        let n = self.osds.len() as u64 + self.clients.len() as u64;
        let i = self.rng.below(n);
        if i < self.osds.len() as u64 {
            Node::Osd(i as i32)
        } else {
            Node::Client((i - self.osds.len() as u64) as u32)
        }
    }

    fn partition(&mut self, a: Node, b: Node) -> Result<(), String> {
        let k = Self::key(a, b);
        if self.partitions.contains_key(&k) {
            return Ok(());
        }
        let id = self.next_partition;
        self.next_partition += 1;
        self.partitions.insert(k, id);
        self.report.partitions += 1;
        self.trace(format!("partition {a} | {b}"));
        self.reset(a, b)?;
        let d = ms(20 + self.rng.below(3000));
        self.schedule(d, Ev::Heal { a, b, id });
        if let (Node::Osd(x), Node::Osd(y)) = (a, b) {
            // Heartbeats fail after the grace: one side is reported down.
            let d = ms(300 + self.rng.below(500));
            self.schedule(d, Ev::PartitionReport { a: x, b: y, id });
            if self.cfg.partition_crash {
                let victim = if self.rng.below(2) == 0 { x } else { y };
                let v = &mut self.osds[victim as usize];
                if v.running && !v.crash_pending {
                    v.crash_pending = true;
                    let inc = v.inc;
                    let d = ms(50 + self.rng.below(200));
                    self.schedule(d, Ev::CrashDeadline { osd: victim, inc });
                }
            }
        }
        Ok(())
    }

    fn heal(&mut self, a: Node, b: Node, id: u64) -> Result<(), String> {
        let k = Self::key(a, b);
        if self.partitions.get(&k) == Some(&id) {
            self.partitions.remove(&k);
            self.trace(format!("heal {a} | {b}"));
            self.reset(a, b)?;
        }
        Ok(())
    }

    /// Faults stop: heal, speed up, restart, mark everything in. What remains must converge.
    fn stop_faults(&mut self) -> Result<(), String> {
        self.faults_on = false;
        self.quiet_since = self.now;
        self.trace("faults stop; quiet phase".into());
        let parts: Vec<((Node, Node), u64)> = self.partitions.iter().map(|(k, v)| (*k, *v)).collect();
        for ((a, b), id) in parts {
            self.heal(a, b, id)?;
        }
        for o in 0..self.osds.len() as i32 {
            self.osds[o as usize].slow = false;
            if self.mon.map.exists(o) && self.mon.map.is_out(o) && (o as u32) < self.cfg.osds {
                self.mon.request(MonReq::In(o));
            }
        }
        if let Some(id) = self.mon.map.pool_by_name("scratch") {
            self.mon.request(MonReq::DeletePool(id));
        }
        self.schedule(ms(100), Ev::QuietCheck);
        Ok(())
    }

    // ------------------------------------------------------------------ the loop

    pub(crate) fn run(mut self) -> Result<Report, Box<Failure>> {
        let r = catch_unwind(AssertUnwindSafe(|| self.run_inner()));
        match r {
            Ok(Ok(())) => {
                let mut rep = self.report.clone();
                rep.events = self.events;
                rep.sim_time = self.now;
                rep.reads_checked = self.oracle.reads_checked;
                rep.repops_resent_overdue = self
                    .osds
                    .iter()
                    .flat_map(|o| o.shards.iter())
                    .map(|s| s.status().repops_resent_overdue)
                    .sum();
                Ok(rep)
            }
            Ok(Err(reason)) => {
                self.report.events = self.events;
                self.report.sim_time = self.now;
                Err(Box::new(self.fail(reason)))
            }
            Err(p) => Err(Box::new(
                self.fail(format!("PANIC in the simulator: {}", panic_message(&p))),
            )),
        }
    }

    fn run_inner(&mut self) -> Result<(), String> {
        let quiet_budget = self.cfg.quiet_events.max(1000);
        let mut quiet_events = 0u64;
        loop {
            let Some(((at, _), ev)) = self.queue.pop_first() else {
                return Err("event queue ran dry".into());
            };
            self.now = self.now.max(at);
            self.events += 1;
            if self.faults_on && self.events >= self.cfg.steps {
                self.stop_faults()?;
            }
            if !self.faults_on {
                quiet_events += 1;
                if quiet_events > quiet_budget || self.now > self.quiet_since + QUIET_SIM_TIME {
                    return Err(format!(
                        "no convergence within {quiet_events} events ({:?} simulated) after faults stopped: {}",
                        self.now - self.quiet_since,
                        self.convergence_status().err().unwrap_or_default()
                    ));
                }
            }
            if self.handle(ev)? {
                return Ok(());
            }
        }
    }

    /// Returns true when the run is complete.
    fn handle(&mut self, ev: Ev) -> Result<bool, String> {
        match ev {
            Ev::Deliver {
                from,
                to,
                generation,
                frame,
            } => {
                let cur = self.links.get(&(from, to)).map_or(0, |l| l.generation);
                if cur != generation || self.partitioned(from, to) {
                    return Ok(false);
                }
                let (msg, _seq) = wire::from_wire(frame).map_err(|e| format!("{from} -> {to}: {e}"))?;
                match to {
                    Node::Mon => self.mon_receive(from, msg)?,
                    Node::Osd(o) => {
                        if self.osd_running(o) {
                            self.osd_receive(o, from, msg)?;
                        }
                    }
                    Node::Client(c) => self.client_receive(c, from, msg)?,
                }
            }
            Ev::MonReq(r) => self.mon.request(r),
            Ev::MonPropose => self.mon_propose()?,
            Ev::ShardTick { osd, shard, inc } => {
                if self.osd_running(osd) && self.osds[osd as usize].inc == inc {
                    if let Some(slot) = self.osds[osd as usize].next_tick.get_mut(shard as usize) {
                        *slot = None;
                    }
                    self.osd_input(osd, shard as usize, Input::Tick)?;
                }
            }
            Ev::DevicePoll { osd, inc } => {
                if self.osd_running(osd) && self.osds[osd as usize].inc == inc {
                    self.device_poll(osd)?;
                }
            }
            Ev::ClientIssue { client } => self.client_issue(client)?,
            Ev::Chaos => self.chaos()?,
            Ev::CrashDeadline { osd, inc } => {
                let x = &self.osds[osd as usize];
                if x.running && x.inc == inc && x.crash_pending {
                    self.crash_osd(osd)?;
                }
            }
            Ev::Restart { osd } => {
                if !self.osd_running(osd) {
                    self.start_osd(osd, true)?;
                }
            }
            Ev::Boot { osd, inc } => {
                let x = &mut self.osds[osd as usize];
                if x.running && x.inc == inc {
                    x.booting = false;
                    self.trace(format!("osd.{osd} boot (instance {inc})"));
                    self.mon.request(MonReq::Boot { osd, nonce: inc });
                }
            }
            Ev::PartitionReport { a, b, id } => {
                if self.partitions.get(&Self::key(Node::Osd(a), Node::Osd(b))) == Some(&id) {
                    let victim = if self.rng.chance(50) { a } else { b };
                    let nonce = self.osds[victim as usize].inc;
                    self.trace(format!("failure report: osd.{victim} (partition {a} | {b})"));
                    self.mon.request(MonReq::Down { osd: victim, nonce });
                }
            }
            Ev::Heal { a, b, id } => self.heal(a, b, id)?,
            Ev::ResetNotice { me, other } => self.reset_noticed(me, other)?,
            Ev::SlowEnd { osd } => {
                self.osds[osd as usize].slow = false;
            }
            Ev::QuietCheck => return self.quiet_check(),
        }
        Ok(false)
    }

    /// Whether everything settled: every OSD up and running with the current map, every PG active+clean on its
    /// primary, every op answered, every read checked. `Err` says what is not there yet.
    fn convergence_status(&mut self) -> Result<(), String> {
        let map = self.mon.map.clone();
        let epoch = map.epoch;
        for o in 0..self.cfg.osds.max(1) as i32 {
            let x = &self.osds[o as usize];
            if !x.running {
                return Err(format!("osd.{o} not running"));
            }
            if !map.is_up(o) {
                return Err(format!("osd.{o} down in e{epoch}"));
            }
            if x.map.as_ref().map(|m| m.epoch) != Some(epoch) {
                return Err(format!(
                    "osd.{o} at e{:?}, mon at e{epoch}",
                    x.map.as_ref().map(|m| m.epoch)
                ));
            }
        }
        if self.mon.has_pending() {
            return Err("monitor has pending changes".into());
        }
        for (&pool, p) in &map.pools {
            for seed in 0..p.pg_num {
                let pg = PgId::new(pool as u64, seed);
                let ua = map.pg_to_up_acting_osds(pg).map_err(|e| e.to_string())?;
                let spgid = SpgId::new(pg, ShardId::NO_SHARD);
                let Some(x) = self.osds.get(ua.acting_primary.max(0) as usize) else {
                    return Err(format!("pg {pg} has no primary"));
                };
                let Some(shard) = x.router.shard_of(pg) else {
                    return Err(format!(
                        "pg {pg}: primary osd.{} does not route it",
                        ua.acting_primary
                    ));
                };
                let shard = shard as usize;
                let rep = x
                    .shards
                    .get(shard)
                    .and_then(|s| s.pg_stats().into_iter().find(|r| r.spgid == spgid));
                match rep {
                    None => {
                        return Err(format!(
                            "pg {pg}: primary osd.{} does not hold it",
                            ua.acting_primary
                        ));
                    }
                    Some(r) => {
                        let st = osd_core::state_string(r.state);
                        let clean =
                            r.state & peering_state::ACTIVE != 0 && r.state & peering_state::CLEAN != 0;
                        if !clean {
                            return Err(format!(
                                "pg {pg} on osd.{}: {st} ({}), up {:?} acting {:?}, last_update {}, up_thru of the \
                                 primary {}",
                                ua.acting_primary,
                                r.state_name,
                                r.up,
                                r.acting,
                                r.last_update,
                                map.osd_info
                                    .get(ua.acting_primary as usize)
                                    .map_or(0, |i| i.up_thru)
                            ));
                        }
                    }
                }
            }
        }
        for c in &self.clients {
            if let Some(op) = c.inflight.values().next() {
                return Err(format!(
                    "client.{} op tid {} on {} ({}) unanswered after {} sends",
                    c.id,
                    op.tid,
                    op.obj,
                    op.kind.describe(),
                    op.attempts + 1
                ));
            }
        }
        if self.oracle.unchecked_reads() > 0 {
            return Err(format!("{} reads not checked", self.oracle.unchecked_reads()));
        }
        Ok(())
    }

    fn quiet_check(&mut self) -> Result<bool, String> {
        for c in &mut self.clients {
            c.issuing = false;
        }
        self.schedule(ms(100), Ev::QuietCheck);
        if let Err(why) = self.convergence_status() {
            // Say what is still missing now and then (the trace of a run that does not converge).
            if why != self.last_status {
                self.trace(format!("not converged: {why}"));
                self.last_status = why;
            }
            return Ok(false);
        }
        if !self.sweep_started {
            // Read every object back once: each must show its newest acknowledged state.
            self.sweep_started = true;
            self.trace("converged; final read sweep".into());
            let objs = self.objects.clone();
            self.sweep_pending = objs.len();
            for (i, o) in objs.into_iter().enumerate() {
                let c = (i % self.clients.len()) as u32;
                self.start_op(c, o, OpKind::Read)?;
            }
            return Ok(false);
        }
        if self.sweep_pending > 0 {
            return Ok(false);
        }
        self.check_replicas()?;
        Ok(true)
    }

    /// Replicas converge: every acting OSD of every PG holds the same objects with the same bytes (data, xattrs,
    /// omap), read directly from the stores.
    fn check_replicas(&mut self) -> Result<(), String> {
        let map = self.mon.map.clone();
        for (&pool, p) in &map.pools {
            for seed in 0..p.pg_num {
                let pg = PgId::new(pool as u64, seed);
                let ua = map.pg_to_up_acting_osds(pg).map_err(|e| e.to_string())?;
                let spgid = SpgId::new(pg, ShardId::NO_SHARD);
                let cid = ferrostore::CollectionId(Bytes::from(format!("{pg}_head")));
                let mut first: Option<(i32, BTreeMap<Bytes, ObjDump>)> = None;
                for &o in &ua.acting {
                    let Some(x) = self.osds.get_mut(o as usize) else {
                        continue;
                    };
                    let shard = x.router.route(&spgid) as usize;
                    let Some(s) = x.shards.get_mut(shard) else {
                        continue;
                    };
                    let dump = dump_collection(s.store_mut(), &cid)
                        .map_err(|e| format!("reading pg {pg} on osd.{o}: {e}"))?;
                    self.report.objects_compared += dump.len() as u64;
                    match &first {
                        None => first = Some((o, dump)),
                        Some((f, d0)) => {
                            if *d0 != dump {
                                let a: BTreeSet<&Bytes> = d0.keys().collect();
                                let b: BTreeSet<&Bytes> = dump.keys().collect();
                                let diff: Vec<String> = a
                                    .symmetric_difference(&b)
                                    .map(|k| String::from_utf8_lossy(k).into_owned())
                                    .chain(
                                        a.intersection(&b)
                                            .filter(|k| d0.get(**k) != dump.get(**k))
                                            .map(|k| format!("{} (content)", String::from_utf8_lossy(k))),
                                    )
                                    .take(5)
                                    .collect();
                                return Err(format!(
                                    "replicas of pg {pg} differ after recovery: osd.{f} vs osd.{o}: {diff:?}"
                                ));
                            }
                        }
                    }
                }
            }
        }
        Ok(())
    }
}

mod peering_state {
    pub const ACTIVE: u64 = 1 << 1;
    pub const CLEAN: u64 = 1 << 2;
}

/// An object as stored: size, data, attrs, omap.
#[derive(Debug, PartialEq, Eq)]
struct ObjDump {
    data: Bytes,
    attrs: Vec<(Bytes, Bytes)>,
    omap: Vec<(Bytes, Bytes)>,
}

fn dump_collection(
    store: &mut Store<ShardDev>,
    cid: &ferrostore::CollectionId,
) -> Result<BTreeMap<Bytes, ObjDump>, String> {
    let mut out = BTreeMap::new();
    if !store.collection_exists(cid).map_err(|e| e.to_string())? {
        return Ok(out);
    }
    let objs = store
        .list_objects(cid, b"", None, 1 << 20)
        .map_err(|e| e.to_string())?;
    for k in objs {
        let attrs = store.getattrs(cid, &k).map_err(|e| e.to_string())?;
        // PG metadata objects (no object_info `_` attr) legitimately differ between replicas.
        if !attrs.iter().any(|(n, _)| n.as_ref() == b"_") {
            continue;
        }
        let size = store.stat(cid, &k).map_err(|e| e.to_string())?.size;
        let data = store.read(cid, &k, 0, size).map_err(|e| e.to_string())?;
        let omap = store
            .omap_iterate(cid, &k, b"", 1 << 20)
            .map_err(|e| e.to_string())?;
        out.insert(k.name.clone(), ObjDump { data, attrs, omap });
    }
    Ok(out)
}

fn apply_inc(m: &mut OsdMap, bytes: Bytes, who: &str) -> Result<(), String> {
    let inc = Incremental::decode_all(bytes).map_err(|e| format!("{who}: decoding incremental: {e}"))?;
    match m.apply_incremental(&inc) {
        Ok(osdmap::CrcCheck::Match) => Ok(()),
        Ok(other) => Err(format!("{who}: epoch {}: full map crc {other:?}", inc.epoch)),
        Err(e) => Err(format!("{who}: applying epoch {}: {e}", inc.epoch)),
    }
}

fn describe_epoch(mon: &Mon) -> String {
    let m = &mon.map;
    let down: Vec<i32> = (0..m.max_osd).filter(|o| m.exists(*o) && m.is_down(*o)).collect();
    let out: Vec<i32> = (0..m.max_osd).filter(|o| m.exists(*o) && m.is_out(*o)).collect();
    format!(
        "down {down:?} out {out:?} pg_temp {} pools {:?}",
        m.pg_temp.len(),
        m.pools.iter().map(|(id, p)| (*id, p.pg_num)).collect::<Vec<_>>()
    )
}

fn truncate(s: &str, n: usize) -> String {
    if s.len() <= n {
        s.to_string()
    } else {
        let mut end = n;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        format!("{}...", &s[..end])
    }
}

pub(crate) fn panic_message(p: &Box<dyn std::any::Any + Send>) -> String {
    if let Some(s) = p.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = p.downcast_ref::<String>() {
        s.clone()
    } else {
        "(non-string panic)".into()
    }
}
