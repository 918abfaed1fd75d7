// SPDX-License-Identifier: LGPL-3.0-or-later
#![allow(clippy::unwrap_used)] // test harness
//! Seeded simulation of the MonClient core against three fake monitors that crash, hang, recover and publish
//! new OSDMap epochs while the client issues commands. After the faults stop, every command must have been
//! answered exactly once, the client must hold the newest map with the right contents (incrementals applied in
//! order), and it must never have had two sessions at once. A failing seed is printed; replay it with
//! `SIM_SEED=<seed> cargo test -p monclient --test sim`.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use bytes::Bytes;
use ceph_msgs::*;
use monclient::*;

mod common;
use common::{FakeMap, enc};

/// The cluster's map history: epoch e adds `delta(e)` to the state.
fn delta(e: u32) -> u64 {
    u64::from(e) * 7 + 1
}
fn state_at(e: u32) -> u64 {
    (1..=e).map(delta).sum()
}
const FSID: [u8; 16] = [3; 16];
/// Maps per MOSDMap (a mon caps how many it sends at once).
const MAX_PER_MSG: u32 = 3;
/// Incrementals older than this are trimmed: a client further behind gets a full map.
const KEEP_INCS: u32 = 10;

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn chance(&mut self, per_mille: u64) -> bool {
        self.next() % 1000 < per_mille
    }
}

#[derive(Clone, Copy, PartialEq)]
enum MonState {
    Up,
    Down,
    Hung,
}

struct Conn {
    mon: usize,
    established: bool,
    /// What the client sent while the mon was hung: TCP delivers it when the mon runs again.
    backlog: Vec<Option<Message>>,
    /// osdmap subscription: next epoch to send, if subscribed continuously.
    osd_next: Option<u32>,
}

struct Sim {
    rng: Rng,
    now: Instant,
    mons: Vec<MonState>,
    latest: u32,
    conns: BTreeMap<ConnId, Conn>,
    /// Connects that complete on the next step.
    pending_connects: Vec<ConnId>,
    issued: BTreeSet<u64>,
    done: BTreeMap<u64, u32>,
    /// Sessions established over the run (each failure forces a new one).
    sessions: usize,
    c: MonClient<FakeMap>,
}

impl Sim {
    fn maps_from(&self, start: u32) -> Option<Message> {
        if start > self.latest {
            return None;
        }
        let oldest_inc = self.latest.saturating_sub(KEEP_INCS).max(1);
        let mut m = MOSDMap {
            fsid: FSID,
            oldest_map: 1,
            newest_map: self.latest,
            ..Default::default()
        };
        if start == 0 || start < oldest_inc {
            m.maps
                .insert(self.latest, enc(self.latest, state_at(self.latest)));
        } else {
            let last = (start + MAX_PER_MSG - 1).min(self.latest);
            for e in start..=last {
                m.incremental_maps.insert(e, enc(e, delta(e)));
            }
        }
        Some(m.to_message(0))
    }

    /// A monitor handles a message from the client on `conn`; replies go straight back.
    fn mon_receive(&mut self, conn: ConnId, msg: &Message) {
        let mut replies = Vec::new();
        match msg.msg_type {
            msg_type::MON_SUBSCRIBE => {
                let s = MMonSubscribe::from_message(msg).unwrap();
                if let Some(item) = s.what.get("osdmap") {
                    let start = item.start as u32;
                    if let Some(r) = self.maps_from(start) {
                        let last = MOSDMap::from_message(&r).unwrap().last_epoch().unwrap();
                        replies.push(r);
                        let c = self.conns.get_mut(&conn).unwrap();
                        // A one-time subscription gets one message; a continuous one streams from there.
                        c.osd_next = (item.flags & SUBSCRIBE_ONETIME == 0).then_some(last + 1);
                    } else {
                        self.conns.get_mut(&conn).unwrap().osd_next =
                            (item.flags & SUBSCRIBE_ONETIME == 0).then_some(start.max(1));
                    }
                }
            }
            msg_type::MON_COMMAND => {
                let ack = MMonCommandAck {
                    paxos: PaxosHeader::default(),
                    r: 0,
                    rs: String::new(),
                    cmd: vec![],
                    outbl: Bytes::new(),
                };
                replies.push(ack.to_message(0).with_tid(msg.tid));
            }
            msg_type::MON_GET_VERSION => {
                let q = MMonGetVersion::from_message(msg).unwrap();
                let r = MMonGetVersionReply {
                    handle: q.handle,
                    version: u64::from(self.latest),
                    oldest_version: 1,
                };
                replies.push(r.to_message(0));
            }
            _ => {}
        }
        for r in replies {
            self.c.handle_message(conn, &r, self.now);
        }
    }

    fn step(&mut self, faults: bool) {
        self.now += Duration::from_millis(100);
        // Faults and cluster activity.
        if faults {
            for i in 0..self.mons.len() {
                let r = self.rng.next() % 1000;
                self.mons[i] = match (self.mons[i], r) {
                    (MonState::Up, 0..=9) => MonState::Down,
                    (MonState::Up, 10..=14) => MonState::Hung,
                    (MonState::Down | MonState::Hung, 0..=79) => MonState::Up,
                    (s, _) => s,
                };
            }
        }
        // A monitor that runs again works off what queued up on its open connections.
        let resumed: Vec<(ConnId, Vec<Option<Message>>)> = self
            .conns
            .iter_mut()
            .filter(|(_, c)| self.mons[c.mon] == MonState::Up && !c.backlog.is_empty())
            .map(|(id, c)| (*id, std::mem::take(&mut c.backlog)))
            .collect();
        for (id, backlog) in resumed {
            for m in backlog {
                if !self.conns.get(&id).is_some_and(|c| c.established) {
                    break;
                }
                match m {
                    Some(m) => self.mon_receive(id, &m),
                    None => self.c.handle_keepalive_ack(id, self.now),
                }
            }
        }
        self.drain();
        // A crashed monitor's connections die (the driver sees EOF).
        let dead: Vec<ConnId> = self
            .conns
            .iter()
            .filter(|(_, c)| self.mons[c.mon] == MonState::Down)
            .map(|(id, _)| *id)
            .collect();
        for id in dead {
            let c = self.conns.remove(&id).unwrap();
            self.pending_connects.retain(|p| *p != id);
            if c.established {
                self.c.handle_disconnected(id, self.now);
            } else {
                self.c.handle_connect_failed(id, self.now);
            }
        }
        if self.rng.chance(50) {
            self.latest += 1;
        }
        if self.rng.chance(30) {
            let tid = self
                .c
                .send_command(vec!["{}".into()], Bytes::new(), self.now)
                .unwrap();
            self.issued.insert(tid);
        }
        // Connects issued last step complete now (if the mon still answers).
        for id in std::mem::take(&mut self.pending_connects) {
            let Some(c) = self.conns.get_mut(&id) else {
                continue;
            };
            match self.mons[c.mon] {
                MonState::Up => {
                    c.established = true;
                    self.c.handle_connected(id, self.now);
                }
                MonState::Down => {
                    self.conns.remove(&id);
                    self.c.handle_connect_failed(id, self.now);
                }
                MonState::Hung => {} // hangs until the client gives up on it
            }
        }
        // Continuous subscriptions stream new epochs.
        let streaming: Vec<(ConnId, u32)> = self
            .conns
            .iter()
            .filter(|(_, c)| c.established && self.mons[c.mon] == MonState::Up)
            .filter_map(|(id, c)| c.osd_next.filter(|n| *n <= self.latest).map(|n| (*id, n)))
            .collect();
        for (id, next) in streaming {
            if let Some(m) = self.maps_from(next) {
                let last = MOSDMap::from_message(&m).unwrap().last_epoch().unwrap();
                self.conns.get_mut(&id).unwrap().osd_next = Some(last + 1);
                self.c.handle_message(id, &m, self.now);
            }
        }
        self.c.handle_timeout(self.now);
        self.drain();
    }

    fn drain(&mut self) {
        loop {
            let mut progressed = false;
            while let Some(o) = self.c.poll_output() {
                progressed = true;
                match o {
                    Output::Connect { conn, target } => {
                        let mon = target.name[1..].parse::<usize>().unwrap();
                        self.conns.insert(
                            conn,
                            Conn {
                                mon,
                                established: false,
                                backlog: Vec::new(),
                                osd_next: None,
                            },
                        );
                        match self.mons[mon] {
                            MonState::Down => {
                                self.conns.remove(&conn);
                                self.c.handle_connect_failed(conn, self.now);
                            }
                            _ => self.pending_connects.push(conn),
                        }
                    }
                    Output::Send { conn, msg } => match self.conns.get_mut(&conn) {
                        Some(c) if self.mons[c.mon] == MonState::Hung => c.backlog.push(Some(msg)),
                        Some(c) if c.established && self.mons[c.mon] == MonState::Up => {
                            self.mon_receive(conn, &msg)
                        }
                        _ => {}
                    },
                    Output::Keepalive { conn } => match self.conns.get_mut(&conn) {
                        Some(c) if self.mons[c.mon] == MonState::Hung => c.backlog.push(None),
                        Some(c) if self.mons[c.mon] == MonState::Up => {
                            self.c.handle_keepalive_ack(conn, self.now)
                        }
                        _ => {}
                    },
                    Output::Close { conn } => {
                        self.conns.remove(&conn);
                        self.pending_connects.retain(|p| *p != conn);
                    }
                }
            }
            while let Some(e) = self.c.poll_event() {
                progressed = true;
                match e {
                    Event::CommandDone { tid, reply } => {
                        assert_eq!(reply.rc, 0, "tid {tid}");
                        *self.done.entry(tid).or_default() += 1;
                    }
                    Event::SessionEstablished { .. } => self.sessions += 1,
                    _ => {}
                }
            }
            if !progressed {
                break;
            }
        }
        let sessions = self.conns.values().filter(|c| c.established).count();
        assert!(sessions <= 1, "{sessions} established sessions at once");
    }
}

fn run(seed: u64) -> (usize, usize, u32) {
    let targets: Vec<MonTarget> = (0..3)
        .map(|i| MonTarget {
            name: format!("m{i}"),
            addr: format!("10.0.0.{}:3300", i + 1).parse().unwrap(),
        })
        .collect();
    let cfg = Config {
        fsid: Some(FSID),
        ping_interval: Duration::from_secs(1),
        ping_timeout: Duration::from_secs(3),
        hunt_interval: Duration::from_secs(1),
        ..Config::default()
    };
    let mut sim = Sim {
        rng: Rng(seed),
        now: Instant::now(),
        mons: vec![MonState::Up; 3],
        latest: 5,
        conns: BTreeMap::new(),
        pending_connects: Vec::new(),
        issued: BTreeSet::new(),
        done: BTreeMap::new(),
        sessions: 0,
        c: MonClient::new(cfg, targets, seed),
    };
    sim.c.start(sim.now).unwrap();
    sim.drain();
    for _ in 0..1500 {
        sim.step(true);
    }
    // Heal everything and let the client catch up (hunt backoff is at most 10 × 1 s).
    sim.mons = vec![MonState::Up; 3];
    for _ in 0..400 {
        sim.step(false);
    }
    assert!(sim.c.is_connected(), "seed {seed}: no session after healing");
    let m = sim.c.osdmap().expect("an osdmap");
    assert_eq!(
        (m.epoch, m.state),
        (sim.latest, state_at(sim.latest)),
        "seed {seed}: map contents"
    );
    for tid in &sim.issued {
        assert_eq!(
            sim.done.get(tid),
            Some(&1),
            "seed {seed}: command {tid} answered {:?} times",
            sim.done.get(tid)
        );
    }
    (sim.sessions, sim.issued.len(), sim.latest)
}

#[test]
fn faults_never_lose_commands_or_maps() {
    if let Some(seed) = std::env::var("SIM_SEED").ok().and_then(|s| s.parse().ok()) {
        run(seed);
        return;
    }
    let (mut sessions, mut commands, mut epochs) = (0, 0, 0);
    for seed in 0..200 {
        match std::panic::catch_unwind(|| run(seed)) {
            Ok((s, c, e)) => {
                sessions += s;
                commands += c;
                epochs += e as usize;
            }
            Err(e) => {
                eprintln!("failing seed: SIM_SEED={seed} cargo test -p monclient --test sim");
                std::panic::resume_unwind(e);
            }
        }
    }
    eprintln!("200 seeds: {sessions} sessions, {commands} commands, {epochs} final epochs");
    // The faults must actually have forced re-hunting, or the test proves little.
    assert!(sessions > 200 * 5, "only {sessions} sessions");
}
