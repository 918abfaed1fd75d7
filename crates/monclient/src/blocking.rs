// SPDX-License-Identifier: LGPL-3.0-or-later
//! A thin blocking driver: the [`MonClient`] core plus msgr2's sans-IO [`Connection`] over `std::net`.
//!
//! One thread owns the state machines and does every write; each TCP connection gets a small reader thread that
//! connects (with a timeout, so parallel hunting does not serialize) and forwards received bytes over a channel.
//! Closing a connection shuts its socket down, which ends its reader thread.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{Shutdown, TcpStream};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::thread;
use std::time::{Duration, Instant};

use bytes::Bytes;
use msgr2::auth::ClientAuth;
use msgr2::connection::{Config as MsgrConfig, Connection, Event as ConnEvent};
use msgr2::types::ENTITY_TYPE_MON;

use crate::core::{CommandReply, Config, ConnId, Event, MonClient, MonTarget, OsdMapLike, Output};

/// Makes the auth state for one connection attempt (each parallel hunt attempt authenticates on its own).
pub type AuthFactory = Box<dyn FnMut(&MonTarget) -> Box<dyn ClientAuth + Send> + Send>;

/// cephx for every connection attempt of one principal (`want_keys`: e.g. [`cephx::msgr2_auth::WANT_MON_OSD_MGR`];
/// `modes`: msgr2 connection modes in preference order, see [`cephx::msgr2_auth::parse_modes`]). Each attempt
/// authenticates on its own fork of the principal ([`cephx::msgr2_auth::CephxMonClientAuth::per_attempt`]); the
/// last one to succeed is kept, so later attempts reclaim its global id. Ticket expiries use the wall clock at
/// AUTH_DONE.
pub fn cephx_auth(
    name: cephx::EntityName,
    key: cephx::CryptoKey,
    want_keys: u32,
    modes: Vec<u32>,
) -> AuthFactory {
    let provider: std::sync::Arc<dyn cephx::CryptoProvider> = std::sync::Arc::new(cephx::AwsLcProvider);
    let shared = std::sync::Arc::new(std::sync::Mutex::new(cephx::MonAuthClient::new(
        provider, name, key, want_keys,
    )));
    Box::new(move |_: &MonTarget| {
        let auth = cephx::msgr2_auth::CephxMonClientAuth::per_attempt(&shared, wall_clock())
            .with_modes(modes.clone())
            .with_clock(std::sync::Arc::new(wall_clock));
        Box::new(auth) as Box<dyn ClientAuth + Send>
    })
}

fn wall_clock() -> cephx::UTime {
    let d = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    cephx::UTime::new(u32::try_from(d.as_secs()).unwrap_or(u32::MAX), d.subsec_nanos())
}

/// A message as msgr2 received it, in ceph-msgs' form.
pub fn to_ceph_message(m: msgr2::Message) -> ceph_msgs::Message {
    ceph_msgs::Message {
        msg_type: m.msg_type,
        version: m.version,
        compat_version: m.compat_version,
        priority: m.priority,
        tid: m.tid,
        front: m.front,
        middle: m.middle,
        data: m.data,
        ..Default::default()
    }
}

/// Why a blocking call failed.
#[derive(Debug, thiserror::Error)]
pub enum BlockingError {
    #[error("timed out after {0:?} {1}")]
    Timeout(Duration, &'static str),
    #[error(transparent)]
    Client(#[from] crate::core::MonClientError),
    #[error("the monitor rejected our credentials ({errno}): {detail}")]
    AuthRejected { errno: i32, detail: String },
}

enum Net {
    Connected(ConnId, TcpStream),
    ConnectFailed(ConnId, String),
    Data(ConnId, Vec<u8>),
    Eof(ConnId),
}

struct Slot {
    target: MonTarget,
    conn: Option<Connection>,
    stream: Option<TcpStream>,
    ready: bool,
}

/// Tunables of the driver itself.
#[derive(Clone)]
pub struct DriverConfig {
    /// The msgr2 connection settings (entity type/num, features, crypto). The driver turns msgr2's own
    /// keepalives and idle timeout off: the core decides when a mon is dead.
    pub msgr: MsgrConfig,
    pub connect_timeout: Duration,
}

/// Last message of each kind the driver saw, for callers that poll instead of handling events.
#[derive(Debug, Default, Clone)]
pub struct Seen {
    pub config: Option<BTreeMap<String, String>>,
    pub mgrmap: Option<ceph_msgs::MMgrMap>,
    pub last_error: Option<String>,
    /// Global id from the winning AUTH_DONE.
    pub global_id: u64,
    /// Set when a monitor rejected our credentials (the errno it gave).
    pub auth_rejected: Option<i32>,
    /// The connection mode of the current session (msgr2 `CON_MODE_*`: 1 crc, 2 secure).
    pub con_mode: u32,
}

/// A connected MonClient over TCP.
pub struct BlockingMonClient<M: OsdMapLike> {
    core: MonClient<M>,
    cfg: DriverConfig,
    auth: AuthFactory,
    slots: BTreeMap<ConnId, Slot>,
    tx: Sender<Net>,
    rx: Receiver<Net>,
    done: BTreeMap<u64, CommandReply>,
    versions: BTreeMap<u64, (u64, u64)>,
    /// Events the caller has not taken yet (bounded: oldest dropped).
    events: std::collections::VecDeque<Event>,
    /// Our messenger nonce (`entity_addr_t::nonce`), fixed for the life of this client.
    nonce: u32,
    pub seen: Seen,
}

const MAX_QUEUED_EVENTS: usize = 1024;

impl<M: OsdMapLike> BlockingMonClient<M> {
    /// Start hunting over `mons`. Returns at once; use [`BlockingMonClient::wait_connected`] or any blocking call.
    pub fn new(
        core_cfg: Config,
        mons: Vec<MonTarget>,
        seed: u64,
        mut cfg: DriverConfig,
        auth: AuthFactory,
    ) -> Result<Self, BlockingError> {
        cfg.msgr.keepalive_interval = None;
        cfg.msgr.idle_timeout = None;
        cfg.msgr.lossy = true; // clients' mon sessions are lossy: a fault means re-hunting, not replay
        let (tx, rx) = mpsc::channel();
        let mut me = BlockingMonClient {
            core: MonClient::new(core_cfg, mons, seed),
            cfg,
            auth,
            slots: BTreeMap::new(),
            tx,
            rx,
            done: BTreeMap::new(),
            versions: BTreeMap::new(),
            events: Default::default(),
            // Distinct per client instance, as Ceph's random nonce is; derived from the seed for reproducibility.
            nonce: (seed ^ (seed >> 32)) as u32 | 1,
            seen: Seen::default(),
        };
        me.core.start(Instant::now())?;
        me.process_outputs(Instant::now());
        Ok(me)
    }

    pub fn core(&self) -> &MonClient<M> {
        &self.core
    }

    pub fn osdmap(&self) -> Option<&M> {
        self.core.osdmap()
    }

    /// Take the next event the core produced (maps, session changes, ...).
    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    /// Run until a session with a monitor is established.
    /// Run until a session with a monitor is established. A monitor that rejects our credentials ends the wait
    /// at once (every monitor shares the same key database, so hunting on would not help), as Ceph's clients
    /// fail with EACCES.
    pub fn wait_connected(&mut self, timeout: Duration) -> Result<(), BlockingError> {
        self.run_until(timeout, "waiting for a monitor session", |c| {
            c.core.is_connected() || c.seen.auth_rejected.is_some()
        })?;
        match (self.core.is_connected(), self.seen.auth_rejected) {
            (false, Some(errno)) => Err(BlockingError::AuthRejected {
                errno,
                detail: self.seen.last_error.clone().unwrap_or_default(),
            }),
            _ => Ok(()),
        }
    }

    /// Run until we hold an OSDMap at least as new as `min_epoch` (0: any).
    pub fn wait_osdmap(&mut self, min_epoch: u32, timeout: Duration) -> Result<&M, BlockingError> {
        self.run_until(timeout, "waiting for the osdmap", |c| {
            c.core.osdmap().is_some_and(|m| m.epoch() >= min_epoch)
        })?;
        self.core
            .osdmap()
            .ok_or(BlockingError::Timeout(timeout, "waiting for the osdmap"))
    }

    /// Send a mon command and wait for its reply (it survives monitor failures: it is resent after re-hunting).
    pub fn mon_command(
        &mut self,
        cmd: Vec<String>,
        inbl: Bytes,
        timeout: Duration,
    ) -> Result<CommandReply, BlockingError> {
        let tid = self.core.send_command(cmd, inbl, Instant::now())?;
        self.process_outputs(Instant::now());
        self.run_until(timeout, "waiting for a mon command reply", |c| {
            c.done.contains_key(&tid)
        })?;
        self.done
            .remove(&tid)
            .ok_or(BlockingError::Timeout(timeout, "waiting for a mon command reply"))
    }

    /// The newest and oldest version the monitors have of a map ("osdmap", "monmap", ...).
    pub fn get_version(&mut self, what: &str, timeout: Duration) -> Result<(u64, u64), BlockingError> {
        let h = self.core.get_version(what)?;
        self.process_outputs(Instant::now());
        self.run_until(timeout, "waiting for a version reply", |c| {
            c.versions.contains_key(&h)
        })?;
        self.versions
            .remove(&h)
            .ok_or(BlockingError::Timeout(timeout, "waiting for a version reply"))
    }

    /// Send any message to the monitor (see [`MonClient::send_message`]); replies arrive as
    /// [`Event::Message`] through [`BlockingMonClient::poll_event`].
    pub fn send_message(&mut self, msg: ceph_msgs::Message) -> Result<(), BlockingError> {
        self.core.send_message(msg)?;
        self.process_outputs(Instant::now());
        Ok(())
    }

    /// Subscribe (see [`MonClient::want`]).
    pub fn want(&mut self, what: &str, start: u64, flags: u8) {
        self.core.want(what, start, flags);
        self.process_outputs(Instant::now());
    }

    /// Process network input and timers until `done` holds or `timeout` passes.
    pub fn run_until(
        &mut self,
        timeout: Duration,
        what: &'static str,
        mut done: impl FnMut(&Self) -> bool,
    ) -> Result<(), BlockingError> {
        let deadline = Instant::now() + timeout;
        loop {
            if done(self) {
                return Ok(());
            }
            let now = Instant::now();
            if now >= deadline {
                return Err(BlockingError::Timeout(timeout, what));
            }
            let mut wake = deadline;
            if let Some(t) = self.core.poll_timeout() {
                wake = wake.min(t);
            }
            for s in self.slots.values() {
                if let Some(t) = s.conn.as_ref().and_then(|c| c.poll_timeout()) {
                    wake = wake.min(t);
                }
            }
            match self.rx.recv_timeout(wake.saturating_duration_since(now)) {
                Ok(ev) => self.handle_net(ev),
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => unreachable!("we hold a sender ourselves"),
            }
            // Drain whatever else arrived without blocking, then run timers.
            while let Ok(ev) = self.rx.try_recv() {
                self.handle_net(ev);
            }
            let now = Instant::now();
            let ids: Vec<ConnId> = self.slots.keys().copied().collect();
            for id in ids {
                if let Some(c) = self.slots.get_mut(&id).and_then(|s| s.conn.as_mut()) {
                    c.handle_timeout(now);
                }
                self.pump_conn(id, now);
            }
            self.core.handle_timeout(now);
            self.process_outputs(now);
        }
    }

    fn handle_net(&mut self, ev: Net) {
        let now = Instant::now();
        match ev {
            Net::Connected(id, stream) => {
                let Some(slot) = self.slots.get_mut(&id) else {
                    let _ = stream.shutdown(Shutdown::Both);
                    return;
                };
                let auth = (self.auth)(&slot.target);
                let target = msgr2::EntityAddr::msgr2(slot.target.addr, 0);
                let mut msgr = self.cfg.msgr.clone();
                if msgr.my_addrs.0.is_empty() {
                    // Monitors refuse a CLIENT_IDENT without an address. Like Ceph clients, advertise our local IP
                    // with port 0 (we accept no connections) and type ANY, with a per-client nonce.
                    let ip = stream
                        .local_addr()
                        .map(|a| a.ip())
                        .unwrap_or(std::net::Ipv4Addr::UNSPECIFIED.into());
                    msgr.my_addrs = msgr2::AddrVec::one(msgr2::EntityAddr {
                        ty: msgr2::addr::ADDR_TYPE_ANY,
                        nonce: self.nonce,
                        addr: Some(std::net::SocketAddr::new(ip, 0)),
                    });
                }
                slot.conn = Some(Connection::connector(msgr, auth, target, ENTITY_TYPE_MON, now));
                slot.stream = Some(stream);
                self.pump_conn(id, now);
            }
            Net::ConnectFailed(id, err) => {
                if self.slots.remove(&id).is_some() {
                    self.seen.last_error = Some(err);
                    self.core.handle_connect_failed(id, now);
                }
            }
            Net::Data(id, data) => {
                let Some(c) = self.slots.get_mut(&id).and_then(|s| s.conn.as_mut()) else {
                    return;
                };
                if let Err(e) = c.handle_input(now, &data) {
                    self.seen.last_error = Some(e.to_string());
                }
                self.pump_conn(id, now);
            }
            Net::Eof(id) => {
                if let Some(c) = self.slots.get_mut(&id).and_then(|s| s.conn.as_mut()) {
                    c.handle_transport_closed();
                    self.pump_conn(id, now);
                } else if self.slots.remove(&id).is_some() {
                    self.core.handle_connect_failed(id, now);
                }
            }
        }
        self.process_outputs(now);
    }

    /// Move a connection's events into the core and its output onto the socket.
    fn pump_conn(&mut self, id: ConnId, now: Instant) {
        let mut gone = false;
        loop {
            let Some(slot) = self.slots.get_mut(&id) else {
                return;
            };
            let Some(conn) = slot.conn.as_mut() else {
                return;
            };
            // Write first: the handshake needs our frames out before the peer answers.
            let mut bufs = Vec::new();
            conn.drain_output(&mut bufs);
            if let Some(stream) = slot.stream.as_mut() {
                for b in &bufs {
                    if stream.write_all(b).is_err() {
                        conn.handle_transport_closed();
                        break;
                    }
                }
            }
            let Some(ev) = conn.poll_event() else {
                break;
            };
            match ev {
                ConnEvent::Connected(peer) => {
                    slot.ready = true;
                    self.seen.global_id = peer.global_id;
                    self.seen.con_mode = peer.con_mode;
                    self.core.handle_connected(id, now);
                }
                ConnEvent::Message(m) => {
                    self.core.handle_message(id, &to_ceph_message(m), now);
                }
                ConnEvent::KeepaliveAck { .. } => self.core.handle_keepalive_ack(id, now),
                ConnEvent::Faulted { error, .. }
                | ConnEvent::Reset { error }
                | ConnEvent::Closed { error } => {
                    if let msgr2::connection::ConnError::Auth(msgr2::auth::AuthError::Rejected {
                        errno,
                        ..
                    }) = &error
                    {
                        self.seen.auth_rejected = Some(*errno);
                    }
                    self.seen.last_error = Some(error.to_string());
                    gone = true;
                    break;
                }
                ConnEvent::MyAddr(_) | ConnEvent::AcceptRequest(_) | ConnEvent::Writable => {}
            }
        }
        if gone && let Some(slot) = self.slots.remove(&id) {
            if let Some(s) = &slot.stream {
                let _ = s.shutdown(Shutdown::Both);
            }
            if slot.ready {
                self.core.handle_disconnected(id, now);
            } else {
                self.core.handle_connect_failed(id, now);
            }
        }
    }

    /// Carry out what the core asked for, and collect its events.
    fn process_outputs(&mut self, now: Instant) {
        while let Some(o) = self.core.poll_output() {
            match o {
                Output::Connect { conn, target } => self.spawn_connect(conn, target),
                Output::Send { conn, msg } => {
                    if let Some(c) = self.slots.get_mut(&conn).and_then(|s| s.conn.as_mut()) {
                        let m = msgr2::Message {
                            msg_type: msg.msg_type,
                            version: msg.version,
                            compat_version: msg.compat_version,
                            priority: msg.priority,
                            tid: msg.tid,
                            front: msg.front,
                            middle: msg.middle,
                            data: msg.data,
                            ..Default::default()
                        };
                        // A full queue on a mon session means the mon is not reading: treat it as dead.
                        if c.send(m).is_err() {
                            c.close();
                        }
                    }
                    self.pump_conn(conn, now);
                }
                Output::Keepalive { conn } => {
                    if let Some(c) = self.slots.get_mut(&conn).and_then(|s| s.conn.as_mut()) {
                        c.send_keepalive(now);
                    }
                    self.pump_conn(conn, now);
                }
                Output::Close { conn } => {
                    if let Some(slot) = self.slots.remove(&conn)
                        && let Some(s) = slot.stream
                    {
                        let _ = s.shutdown(Shutdown::Both);
                    }
                }
            }
        }
        while let Some(e) = self.core.poll_event() {
            match &e {
                Event::CommandDone { tid, reply } => {
                    self.done.insert(*tid, reply.clone());
                }
                Event::Version {
                    handle,
                    version,
                    oldest,
                    ..
                } => {
                    self.versions.insert(*handle, (*version, *oldest));
                }
                Event::Config(c) => self.seen.config = Some(c.clone()),
                Event::MgrMap(m) => self.seen.mgrmap = Some(m.clone()),
                _ => {}
            }
            if self.events.len() >= MAX_QUEUED_EVENTS {
                self.events.pop_front();
            }
            self.events.push_back(e);
        }
    }

    fn spawn_connect(&mut self, id: ConnId, target: MonTarget) {
        self.slots.insert(
            id,
            Slot {
                target: target.clone(),
                conn: None,
                stream: None,
                ready: false,
            },
        );
        let tx = self.tx.clone();
        let timeout = self.cfg.connect_timeout;
        let spawned = thread::Builder::new()
            .name(format!("monc-conn-{id}"))
            .spawn(move || {
                let stream = match TcpStream::connect_timeout(&target.addr, timeout) {
                    Ok(s) => s,
                    Err(e) => {
                        let _ = tx.send(Net::ConnectFailed(id, format!("connect {}: {e}", target.addr)));
                        return;
                    }
                };
                let _ = stream.set_nodelay(true);
                // Writes happen on the driver thread: a monitor that stops reading must not block it forever
                // (a timed-out write counts as a dead connection).
                let _ = stream.set_write_timeout(Some(timeout.max(Duration::from_secs(1))));
                let Ok(mut reader) = stream.try_clone() else {
                    let _ = tx.send(Net::ConnectFailed(id, "socket clone failed".into()));
                    return;
                };
                if tx.send(Net::Connected(id, stream)).is_err() {
                    return;
                }
                let mut buf = vec![0u8; 64 << 10];
                loop {
                    match reader.read(&mut buf) {
                        Ok(0) | Err(_) => {
                            let _ = tx.send(Net::Eof(id));
                            return;
                        }
                        Ok(n) => {
                            if tx.send(Net::Data(id, buf[..n].to_vec())).is_err() {
                                return;
                            }
                        }
                    }
                }
            });
        if spawned.is_err() {
            self.slots.remove(&id);
            self.core.handle_connect_failed(id, Instant::now());
        }
    }
}

impl<M: OsdMapLike> Drop for BlockingMonClient<M> {
    fn drop(&mut self) {
        for slot in self.slots.values() {
            if let Some(s) = &slot.stream {
                let _ = s.shutdown(Shutdown::Both);
            }
        }
    }
}
