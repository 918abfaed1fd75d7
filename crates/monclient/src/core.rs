// SPDX-License-Identifier: LGPL-3.0-or-later
//! The MonClient state machine. It makes no syscalls: the driver feeds it connection events, messages and the
//! current time, and drains [`Output`]s (connect, send, keepalive, close) and [`Event`]s (maps, command results).
//!
//! Session life cycle (as `src/mon/MonClient.cc` does it):
//! 1. **Hunting**: connect to up to `hunt_parallel` monitors at once, picked in a seeded random order; the first
//!    connection whose msgr2 handshake and authentication complete wins and the others are closed. A hunt round
//!    that times out (hunt_interval × backoff) is abandoned and the next monitors are tried; each failed round
//!    grows the backoff (× 1.5, at most × 10), a success halves it.
//! 2. **Session**: on success, everything wanted is (re)subscribed with the right start epochs (`monmap` and
//!    `osdmap` from the epoch after the one we hold, `mgrmap` likewise, `config` from 0), and every pending
//!    command and version query is resent; the mon matches replies by tid / handle.
//! 3. **Liveness**: a keepalive every `ping_interval`; if nothing (message or keepalive ack) arrives within
//!    `ping_timeout`, or the driver reports the connection gone, the session is dropped and hunting restarts.
//!
//! OSDMaps: full maps replace the held map, incrementals are applied in order through [`OsdMapLike`]; a gap,
//! a failed incremental or `newest_map` beyond what arrived makes us ask again from the epoch after ours.

use std::collections::{BTreeMap, VecDeque};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use bytes::Bytes;
use ceph_msgs::{
    CephMessage, MConfig, MMgrMap, MMonCommand, MMonCommandAck, MMonGetVersion, MMonSubscribe, MOSDMap,
    Message, MonIncoming, PaxosHeader, SUBSCRIBE_ONETIME, SubscribeItem,
};

use crate::monmap_lite::MonMapLite;
use crate::rng::SplitMix64;

/// Ceph errno values used in results (negative, as Ceph returns them).
pub mod errno {
    pub const EAGAIN: i32 = -11;
    pub const EINVAL: i32 = -22;
    pub const ETIMEDOUT: i32 = -110;
    pub const ENOTCONN: i32 = -107;
    pub const ECANCELED: i32 = -125;
}

/// A monitor we may connect to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MonTarget {
    pub name: String,
    pub addr: SocketAddr,
}

/// An OSDMap representation the client can keep up to date.
pub trait OsdMapLike: Sized {
    type Error: std::fmt::Display;
    /// Decode a full map.
    fn decode_full(bytes: &Bytes) -> Result<Self, Self::Error>;
    fn epoch(&self) -> u32;
    /// Apply an encoded incremental for epoch `self.epoch() + 1`.
    fn apply_incremental(&mut self, inc: &Bytes) -> Result<(), Self::Error>;
    /// A copy of this epoch for [`MonClient::take_osdmap_epochs`] (types that cannot copy themselves keep the
    /// default: no per-epoch history).
    fn snapshot(&self) -> Option<Self> {
        None
    }
}

/// Tunables. Defaults are Pacific's (`mon_client_*`).
#[derive(Debug, Clone)]
pub struct Config {
    /// `mon_client_hunt_parallel`.
    pub hunt_parallel: usize,
    /// `mon_client_hunt_interval`.
    pub hunt_interval: Duration,
    /// `mon_client_hunt_interval_max_multiple`.
    pub hunt_backoff_max: f64,
    /// `mon_client_ping_interval`.
    pub ping_interval: Duration,
    /// `mon_client_ping_timeout`.
    pub ping_timeout: Duration,
    /// `rados_mon_op_timeout` (None = wait forever, as Ceph's default 0 does).
    pub command_timeout: Option<Duration>,
    /// Bound on outstanding commands plus version queries.
    pub max_pending: usize,
    /// Maps to subscribe to continuously: any of "monmap", "osdmap", "config", "mgrmap".
    pub subscribe: Vec<String>,
    /// Sent in MMonSubscribe (the mon records it for `ceph config` host masks).
    pub hostname: String,
    /// The cluster fsid if known (ceph.conf); maps for another fsid are ignored.
    pub fsid: Option<[u8; 16]>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            hunt_parallel: 3,
            hunt_interval: Duration::from_secs(3),
            hunt_backoff_max: 10.0,
            ping_interval: Duration::from_secs(10),
            ping_timeout: Duration::from_secs(30),
            command_timeout: None,
            max_pending: 1024,
            subscribe: vec!["monmap".into(), "osdmap".into(), "config".into(), "mgrmap".into()],
            hostname: String::new(),
            fsid: None,
        }
    }
}

/// A connection id chosen by the core; the driver echoes it back in every report.
pub type ConnId = u64;

/// What the driver must do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Output {
    /// Open a msgr2 session (handshake + auth) to `target`; answer with `handle_connected` or
    /// `handle_connect_failed`.
    Connect { conn: ConnId, target: MonTarget },
    /// Send a message on an established session.
    Send { conn: ConnId, msg: Message },
    /// Send a KEEPALIVE2 frame.
    Keepalive { conn: ConnId },
    /// Close the connection; later reports about it are ignored.
    Close { conn: ConnId },
}

/// The reply to a mon command: Ceph's `(rc, outs, outbl)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandReply {
    pub rc: i32,
    pub outs: String,
    pub outbl: Bytes,
}

/// What happened, for the user of the client.
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    SessionEstablished {
        target: MonTarget,
    },
    SessionLost {
        target: MonTarget,
    },
    MonMap {
        epoch: u32,
        map: MonMapLite,
    },
    /// The held OSDMap advanced to `epoch`.
    OsdMap {
        epoch: u32,
    },
    /// An OSDMap could not be decoded or applied (the client asks for maps again).
    OsdMapError {
        epoch: u32,
        error: String,
    },
    Config(BTreeMap<String, String>),
    MgrMap(MMgrMap),
    CommandDone {
        tid: u64,
        reply: CommandReply,
    },
    Version {
        handle: u64,
        what: String,
        version: u64,
        oldest: u64,
    },
    /// Any other message from the monitor (MAuthReply, MOSDPGCreate2, MLogAck, ...), for the owner to handle.
    Message(Message),
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MonClientError {
    #[error("too many outstanding requests (limit {0})")]
    Busy(usize),
    #[error("no monitors to connect to")]
    NoMonitors,
    #[error("too many messages waiting for a monitor session (limit {0})")]
    QueueFull(usize),
}

#[derive(Debug)]
struct PendingCommand {
    cmd: Vec<String>,
    inbl: Bytes,
    deadline: Option<Instant>,
    /// Sent on the current session (reset when a new session starts).
    sent: bool,
}

#[derive(Debug)]
enum State {
    Idle,
    Hunting {
        attempts: Vec<(ConnId, MonTarget)>,
        /// When the current attempts are abandoned (or, with none left, when the next round starts).
        deadline: Instant,
    },
    Connected {
        conn: ConnId,
        target: MonTarget,
        last_rx: Instant,
        next_ping: Instant,
    },
}

/// The MonClient core. `M` is the OSDMap type it keeps current.
pub struct MonClient<M: OsdMapLike> {
    cfg: Config,
    rng: SplitMix64,
    mons: Vec<MonTarget>,
    /// Shuffled indexes into `mons` still to try in this hunt round.
    hunt_queue: Vec<usize>,
    backoff: f64,
    state: State,
    next_conn: ConnId,
    /// Subscriptions wanted; those not yet sent on the current session are in `subs_unsent`.
    subs: BTreeMap<String, SubscribeItem>,
    subs_unsent: bool,
    monmap_epoch: u32,
    monmap: Option<MonMapLite>,
    osdmap: Option<M>,
    /// Every epoch the held map passed through, oldest first, when the owner asked for them
    /// ([`MonClient::keep_osdmap_epochs`]).
    osdmap_epochs: Option<VecDeque<M>>,
    commands: BTreeMap<u64, PendingCommand>,
    versions: BTreeMap<u64, String>,
    /// Messages waiting for a session ([`MonClient::send_message`]).
    outbox: VecDeque<Message>,
    next_tid: u64,
    outputs: VecDeque<Output>,
    events: VecDeque<Event>,
}

impl<M: OsdMapLike> MonClient<M> {
    /// A client that will hunt over `mons` (e.g. from ceph.conf's mon_host); `seed` drives the hunt order.
    pub fn new(cfg: Config, mons: Vec<MonTarget>, seed: u64) -> Self {
        let mut subs = BTreeMap::new();
        for what in &cfg.subscribe {
            subs.insert(what.clone(), SubscribeItem { start: 0, flags: 0 });
        }
        MonClient {
            cfg,
            rng: SplitMix64::new(seed),
            mons,
            hunt_queue: Vec::new(),
            backoff: 1.0,
            state: State::Idle,
            next_conn: 1,
            subs,
            subs_unsent: true,
            monmap_epoch: 0,
            monmap: None,
            osdmap: None,
            osdmap_epochs: None,
            commands: BTreeMap::new(),
            versions: BTreeMap::new(),
            outbox: VecDeque::new(),
            next_tid: 1,
            outputs: VecDeque::new(),
            events: VecDeque::new(),
        }
    }

    /// Start hunting for a monitor.
    pub fn start(&mut self, now: Instant) -> Result<(), MonClientError> {
        if self.mons.is_empty() {
            return Err(MonClientError::NoMonitors);
        }
        if matches!(self.state, State::Idle) {
            self.start_round(now);
        }
        Ok(())
    }

    pub fn is_connected(&self) -> bool {
        matches!(self.state, State::Connected { .. })
    }

    /// The monitor we have a session with.
    pub fn current_mon(&self) -> Option<&MonTarget> {
        match &self.state {
            State::Connected { target, .. } => Some(target),
            _ => None,
        }
    }

    pub fn osdmap(&self) -> Option<&M> {
        self.osdmap.as_ref()
    }

    /// Start from a map kept from before (an OSD's newest stored map, Ceph's superblock `newest_map`): the
    /// osdmap subscription then starts at the epoch after it, so the monitor sends every epoch since, as
    /// incrementals, instead of only the current full map.
    pub fn set_osdmap(&mut self, map: M) {
        let start = u64::from(map.epoch()) + 1;
        self.osdmap = Some(map);
        if let Some(item) = self.subs.get_mut("osdmap") {
            item.start = start;
            self.subs_unsent = true;
        }
    }

    /// Keep a copy of every epoch the held map moves through (an OSD advances its PGs through each one);
    /// collect them with [`MonClient::take_osdmap_epochs`] after each [`Event::OsdMap`].
    pub fn keep_osdmap_epochs(&mut self) {
        if self.osdmap_epochs.is_none() {
            self.osdmap_epochs = Some(VecDeque::new());
        }
    }

    /// The epochs the held map moved through since the last call, oldest first (empty unless
    /// [`MonClient::keep_osdmap_epochs`]). After a gap (the monitor trimmed the epochs we missed) the first is a
    /// full map more than one epoch newer than the one before.
    pub fn take_osdmap_epochs(&mut self) -> Vec<M> {
        self.osdmap_epochs
            .as_mut()
            .map_or_else(Vec::new, |q| q.drain(..).collect())
    }

    fn note_epoch(&mut self) {
        if let (Some(q), Some(m)) = (self.osdmap_epochs.as_mut(), self.osdmap.as_ref())
            && let Some(copy) = m.snapshot()
        {
            q.push_back(copy);
        }
    }

    pub fn monmap(&self) -> Option<&MonMapLite> {
        self.monmap.as_ref()
    }

    pub fn mons(&self) -> &[MonTarget] {
        &self.mons
    }

    /// Current subscriptions (what would be sent on a new session).
    pub fn subscriptions(&self) -> &BTreeMap<String, SubscribeItem> {
        &self.subs
    }

    pub fn poll_output(&mut self) -> Option<Output> {
        self.outputs.pop_front()
    }

    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    /// The next instant at which `handle_timeout` must be called.
    pub fn poll_timeout(&self) -> Option<Instant> {
        let state = match &self.state {
            State::Idle => None,
            State::Hunting { deadline, .. } => Some(*deadline),
            State::Connected {
                last_rx, next_ping, ..
            } => Some((*next_ping).min(*last_rx + self.cfg.ping_timeout)),
        };
        let cmd = self.commands.values().filter_map(|c| c.deadline).min();
        match (state, cmd) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Subscribe to `what` from epoch `start` (flags: [`SUBSCRIBE_ONETIME`] or 0).
    pub fn want(&mut self, what: &str, start: u64, flags: u8) {
        let item = SubscribeItem { start, flags };
        if self.subs.get(what) != Some(&item) {
            self.subs.insert(what.to_owned(), item);
            self.subs_unsent = true;
            self.flush_subs();
        }
    }

    /// Send a mon command (a vector of strings, normally one JSON object). The reply arrives as
    /// [`Event::CommandDone`] with the returned tid; it survives reconnections.
    pub fn send_command(
        &mut self,
        cmd: Vec<String>,
        inbl: Bytes,
        now: Instant,
    ) -> Result<u64, MonClientError> {
        if self.commands.len() + self.versions.len() >= self.cfg.max_pending {
            return Err(MonClientError::Busy(self.cfg.max_pending));
        }
        let tid = self.alloc_tid();
        let deadline = self.cfg.command_timeout.map(|t| now + t);
        self.commands.insert(
            tid,
            PendingCommand {
                cmd,
                inbl,
                deadline,
                sent: false,
            },
        );
        self.flush_commands();
        Ok(tid)
    }

    /// Ask for the newest and oldest version of a map ("osdmap", "monmap", ...): [`Event::Version`].
    pub fn get_version(&mut self, what: &str) -> Result<u64, MonClientError> {
        if self.commands.len() + self.versions.len() >= self.cfg.max_pending {
            return Err(MonClientError::Busy(self.cfg.max_pending));
        }
        let handle = self.alloc_tid();
        self.versions.insert(handle, what.to_owned());
        if let State::Connected { conn, .. } = self.state {
            self.send_version_msg(conn, handle);
        }
        Ok(handle)
    }

    /// The driver finished the handshake and auth on `conn`.
    pub fn handle_connected(&mut self, conn: ConnId, now: Instant) {
        let State::Hunting { attempts, .. } = &mut self.state else {
            self.outputs.push_back(Output::Close { conn });
            return;
        };
        let Some(pos) = attempts.iter().position(|(c, _)| *c == conn) else {
            self.outputs.push_back(Output::Close { conn });
            return;
        };
        let (_, target) = attempts.swap_remove(pos);
        for (other, _) in attempts.drain(..) {
            self.outputs.push_back(Output::Close { conn: other });
        }
        self.backoff = (self.backoff / 2.0).max(1.0);
        self.state = State::Connected {
            conn,
            target: target.clone(),
            last_rx: now,
            next_ping: now + self.cfg.ping_interval,
        };
        self.events.push_back(Event::SessionEstablished { target });
        // A new session knows nothing of our subscriptions or requests: send them all again.
        self.subs_unsent = true;
        self.flush_subs();
        for c in self.commands.values_mut() {
            c.sent = false;
        }
        self.flush_commands();
        let handles: Vec<u64> = self.versions.keys().copied().collect();
        for h in handles {
            self.send_version_msg(conn, h);
        }
        // Messages that waited for a session (MOSDBoot, MAuth, ...) go after the subscriptions, as Ceph's
        // MonClient sends its `waiting_for_session` queue.
        while let Some(msg) = self.outbox.pop_front() {
            self.outputs.push_back(Output::Send { conn, msg });
        }
    }

    /// Send an arbitrary message to the monitor: now if a session exists, else when the next one is established
    /// (at most `max_pending` wait). Messages sent on a session that then fails are not resent: mon sessions are
    /// lossy, as in Ceph; owners resend what they still need (e.g. a boot message) on `SessionEstablished`.
    pub fn send_message(&mut self, msg: Message) -> Result<(), MonClientError> {
        if let State::Connected { conn, .. } = self.state {
            self.outputs.push_back(Output::Send { conn, msg });
            return Ok(());
        }
        if self.outbox.len() >= self.cfg.max_pending {
            return Err(MonClientError::QueueFull(self.cfg.max_pending));
        }
        self.outbox.push_back(msg);
        Ok(())
    }

    /// The handshake or auth on `conn` failed.
    pub fn handle_connect_failed(&mut self, conn: ConnId, now: Instant) {
        let State::Hunting { attempts, deadline } = &mut self.state else {
            return;
        };
        let before = attempts.len();
        attempts.retain(|(c, _)| *c != conn);
        if attempts.len() == before || !attempts.is_empty() {
            return;
        }
        // Every attempt of this batch failed: try the rest of the round now, or wait out the round's deadline.
        if !self.hunt_queue.is_empty() {
            self.launch_batch(now);
        } else {
            let d = *deadline;
            self.state = State::Hunting {
                attempts: Vec::new(),
                deadline: d,
            };
        }
    }

    /// An established (or hunting) connection went away.
    pub fn handle_disconnected(&mut self, conn: ConnId, now: Instant) {
        match &self.state {
            State::Connected { conn: c, target, .. } if *c == conn => {
                let target = target.clone();
                self.lose_session(target, now);
            }
            State::Hunting { .. } => self.handle_connect_failed(conn, now),
            _ => {}
        }
    }

    /// A KEEPALIVE2_ACK arrived.
    pub fn handle_keepalive_ack(&mut self, conn: ConnId, now: Instant) {
        if let State::Connected { conn: c, last_rx, .. } = &mut self.state
            && *c == conn
        {
            *last_rx = now;
        }
    }

    /// Time passed: hunting rounds, keepalives, dead sessions, command timeouts.
    pub fn handle_timeout(&mut self, now: Instant) {
        match &mut self.state {
            State::Idle => {}
            State::Hunting { attempts, deadline } => {
                if now >= *deadline {
                    for (c, _) in attempts.drain(..) {
                        self.outputs.push_back(Output::Close { conn: c });
                    }
                    self.backoff = (self.backoff * 1.5).min(self.cfg.hunt_backoff_max);
                    if self.hunt_queue.is_empty() {
                        self.start_round(now);
                    } else {
                        self.launch_batch(now);
                    }
                }
            }
            State::Connected {
                conn,
                target,
                last_rx,
                next_ping,
            } => {
                if now >= *last_rx + self.cfg.ping_timeout {
                    let target = target.clone();
                    let conn = *conn;
                    self.outputs.push_back(Output::Close { conn });
                    self.lose_session(target, now);
                } else if now >= *next_ping {
                    *next_ping = now + self.cfg.ping_interval;
                    let conn = *conn;
                    self.outputs.push_back(Output::Keepalive { conn });
                }
            }
        }
        let expired: Vec<u64> = self
            .commands
            .iter()
            .filter(|(_, c)| c.deadline.is_some_and(|d| now >= d))
            .map(|(t, _)| *t)
            .collect();
        for tid in expired {
            self.commands.remove(&tid);
            self.events.push_back(Event::CommandDone {
                tid,
                reply: CommandReply {
                    rc: errno::ETIMEDOUT,
                    outs: "timed out waiting for the monitor".into(),
                    outbl: Bytes::new(),
                },
            });
        }
    }

    /// A message arrived on `conn`.
    pub fn handle_message(&mut self, conn: ConnId, msg: &Message, now: Instant) {
        match &mut self.state {
            State::Connected { conn: c, last_rx, .. } if *c == conn => *last_rx = now,
            _ => return, // a losing hunt attempt or a closed session
        }
        let incoming = match MonIncoming::decode(msg) {
            Ok(i) => i,
            Err(_) => return, // a malformed message from the mon is dropped; the session stays
        };
        match incoming {
            MonIncoming::MonMap(m) => self.handle_monmap(m.monmap),
            MonIncoming::OsdMap(m) => self.handle_osdmap(m),
            MonIncoming::Config(MConfig { config }) => {
                self.events.push_back(Event::Config(config));
            }
            MonIncoming::MgrMap(m) => {
                self.got("mgrmap", m.epoch);
                self.events.push_back(Event::MgrMap(m));
            }
            MonIncoming::CommandAck { tid, ack } => self.handle_command_ack(tid, ack),
            MonIncoming::GetVersionReply { reply, .. } => {
                if let Some(what) = self.versions.remove(&reply.handle) {
                    self.events.push_back(Event::Version {
                        handle: reply.handle,
                        what,
                        version: reply.version,
                        oldest: reply.oldest_version,
                    });
                }
            }
            MonIncoming::SubscribeAck(_) => {}
            MonIncoming::AuthReply(_) | MonIncoming::Other(_) => {
                self.events.push_back(Event::Message(msg.clone()))
            }
        }
    }

    fn handle_command_ack(&mut self, tid: u64, ack: MMonCommandAck) {
        if self.commands.remove(&tid).is_some() {
            self.events.push_back(Event::CommandDone {
                tid,
                reply: CommandReply {
                    rc: ack.r,
                    outs: ack.rs,
                    outbl: ack.outbl,
                },
            });
        }
    }

    fn handle_monmap(&mut self, bytes: Bytes) {
        let Ok(map) = MonMapLite::decode(bytes) else {
            return;
        };
        if self.cfg.fsid.is_some_and(|f| f != map.fsid) {
            return;
        }
        self.cfg.fsid = Some(map.fsid);
        self.monmap_epoch = map.epoch;
        // Commands held back for want of the fsid can go now.
        self.flush_commands();
        self.got("monmap", map.epoch);
        // Hunt over the monitors the map names from now on (those with a msgr2 address).
        let mons: Vec<MonTarget> = map
            .mons
            .iter()
            .filter_map(|m| {
                m.msgr2_addr().map(|addr| MonTarget {
                    name: m.name.clone(),
                    addr,
                })
            })
            .collect();
        if !mons.is_empty() {
            // Keep our current mon's name in sync with the map (ceph.conf only knows addresses).
            if let State::Connected { target, .. } = &mut self.state
                && let Some(m) = mons.iter().find(|m| m.addr == target.addr)
            {
                target.name = m.name.clone();
            }
            self.mons = mons;
        }
        self.monmap = Some(map.clone());
        self.events.push_back(Event::MonMap {
            epoch: map.epoch,
            map,
        });
    }

    fn handle_osdmap(&mut self, m: MOSDMap) {
        if self.cfg.fsid.is_some_and(|f| f != m.fsid) {
            return;
        }
        let Some(last) = m.last_epoch() else {
            return;
        };
        let mut have = self.osdmap.as_ref().map(|o| o.epoch()).unwrap_or(0);
        // What we held before this message: an event is due if we end up with a newer map.
        let start = have;
        if have == 0 {
            // Without a map only a full one helps: take the newest.
            if let Some((&e, bl)) = m.maps.iter().next_back() {
                match M::decode_full(bl) {
                    Ok(map) => {
                        self.osdmap = Some(map);
                        have = e;
                        self.note_epoch();
                    }
                    Err(err) => self.events.push_back(Event::OsdMapError {
                        epoch: e,
                        error: err.to_string(),
                    }),
                }
            }
        }
        let next = have + 1;
        if have > 0
            && last > have
            && !m.incremental_maps.contains_key(&next)
            && !m.maps.contains_key(&next)
            && m.oldest_map > next
        {
            // The monitor trimmed the epochs after ours (its oldest is newer): as ceph-osd does, continue from a
            // full map (the PGs' intervals in between are known only from their peers).
            match m.maps.range(next..).next() {
                Some((&e, _)) => {
                    if self.take_full(&m, e) {
                        have = e;
                        self.note_epoch();
                    }
                }
                None => {
                    // ask from just below its oldest: the monitor starts such a reply with a full map
                    let start = u64::from(m.oldest_map.saturating_sub(1).max(1));
                    self.subs.insert(
                        "osdmap".into(),
                        SubscribeItem {
                            start,
                            flags: SUBSCRIBE_ONETIME,
                        },
                    );
                    self.subs_unsent = true;
                    self.flush_subs();
                    return;
                }
            }
        }
        if have > 0 {
            let mut e = have + 1;
            while e <= last {
                let ok = if let Some(inc) = m.incremental_maps.get(&e) {
                    match self.osdmap.as_mut().map(|o| o.apply_incremental(inc)) {
                        Some(Ok(())) => true,
                        Some(Err(err)) => {
                            self.events.push_back(Event::OsdMapError {
                                epoch: e,
                                error: err.to_string(),
                            });
                            // Fall back to the full map of the same epoch if the message has it; otherwise the
                            // held map may be half-updated, so drop it and ask for the latest full map.
                            if !self.take_full(&m, e) {
                                self.osdmap = None;
                                have = 0;
                                break;
                            }
                            true
                        }
                        None => false,
                    }
                } else {
                    self.take_full(&m, e)
                };
                if !ok {
                    break;
                }
                have = e;
                self.note_epoch();
                e += 1;
            }
        }
        if have > start {
            self.events.push_back(Event::OsdMap { epoch: have });
        }
        if have == 0 || have < last || have < m.newest_map {
            // A gap, a failed map, or more maps exist: ask from the epoch after ours (0 = the latest full map).
            let start = if have == 0 { 0 } else { u64::from(have) + 1 };
            let flags = self
                .subs
                .get("osdmap")
                .map(|s| s.flags)
                .unwrap_or(SUBSCRIBE_ONETIME);
            self.subs.insert("osdmap".into(), SubscribeItem { start, flags });
            self.subs_unsent = true;
            self.flush_subs();
        } else {
            self.got("osdmap", have);
        }
    }

    fn take_full(&mut self, m: &MOSDMap, e: u32) -> bool {
        let Some(bl) = m.maps.get(&e) else {
            return false;
        };
        match M::decode_full(bl) {
            Ok(map) => {
                self.osdmap = Some(map);
                true
            }
            Err(err) => {
                self.events.push_back(Event::OsdMapError {
                    epoch: e,
                    error: err.to_string(),
                });
                false
            }
        }
    }

    /// We hold `what` at `epoch`: a one-time subscription is done, a continuous one moves past it.
    fn got(&mut self, what: &str, epoch: u32) {
        if let Some(item) = self.subs.get_mut(what)
            && item.start <= u64::from(epoch)
        {
            if item.flags & SUBSCRIBE_ONETIME != 0 {
                self.subs.remove(what);
            } else {
                // Not resent now: the mon already streams newer ones; this is the start for the next session.
                item.start = u64::from(epoch) + 1;
            }
        }
    }

    fn flush_subs(&mut self) {
        if !self.subs_unsent || self.subs.is_empty() {
            return;
        }
        let State::Connected { conn, .. } = self.state else {
            return;
        };
        let msg = MMonSubscribe {
            what: self.subs.clone(),
            hostname: self.cfg.hostname.clone(),
        };
        self.outputs.push_back(Output::Send {
            conn,
            msg: msg.to_message(u64::MAX),
        });
        self.subs_unsent = false;
    }

    /// Send every command not yet sent on the current session. Monitors refuse a command whose fsid is not
    /// theirs ("wrong fsid"), so without an fsid (none in the config, no monmap yet) commands wait.
    fn flush_commands(&mut self) {
        let State::Connected { conn, .. } = self.state else {
            return;
        };
        let Some(fsid) = self.cfg.fsid else {
            return;
        };
        for (tid, c) in self.commands.iter_mut().filter(|(_, c)| !c.sent) {
            c.sent = true;
            let m = MMonCommand {
                paxos: PaxosHeader::default(),
                fsid,
                cmd: c.cmd.clone(),
                inbl: c.inbl.clone(),
            };
            self.outputs.push_back(Output::Send {
                conn,
                msg: m.to_message(u64::MAX).with_tid(*tid),
            });
        }
    }

    fn send_version_msg(&mut self, conn: ConnId, handle: u64) {
        let Some(what) = self.versions.get(&handle) else {
            return;
        };
        let m = MMonGetVersion {
            handle,
            what: what.clone(),
        };
        self.outputs.push_back(Output::Send {
            conn,
            msg: m.to_message(u64::MAX),
        });
    }

    fn alloc_tid(&mut self) -> u64 {
        let t = self.next_tid;
        self.next_tid += 1;
        t
    }

    fn lose_session(&mut self, target: MonTarget, now: Instant) {
        self.events.push_back(Event::SessionLost { target });
        self.state = State::Idle;
        self.start_round(now);
    }

    /// A new hunt round: all monitors in a fresh random order.
    fn start_round(&mut self, now: Instant) {
        let mut order: Vec<usize> = (0..self.mons.len()).collect();
        // Fisher-Yates with the seeded generator, so a test seed reproduces the hunt.
        for i in (1..order.len()).rev() {
            let j = (self.rng.next_u64() % (i as u64 + 1)) as usize;
            order.swap(i, j);
        }
        self.hunt_queue = order;
        self.launch_batch(now);
    }

    fn launch_batch(&mut self, now: Instant) {
        let mut attempts = Vec::new();
        while attempts.len() < self.cfg.hunt_parallel.max(1) {
            let Some(i) = self.hunt_queue.pop() else {
                break;
            };
            let Some(target) = self.mons.get(i).cloned() else {
                continue;
            };
            let conn = self.next_conn;
            self.next_conn += 1;
            self.outputs.push_back(Output::Connect {
                conn,
                target: target.clone(),
            });
            attempts.push((conn, target));
        }
        let deadline = now + self.cfg.hunt_interval.mul_f64(self.backoff);
        self.state = State::Hunting { attempts, deadline };
    }
}
