// SPDX-License-Identifier: LGPL-3.0-or-later
//! The control and network thread.
//!
//! One thread owns every msgr2 connection state machine (mon session, mgr session, clients, heartbeat and
//! cluster peers) and the MonClient core; reader threads only move bytes from sockets into the event channel.
//! Client ops go to the shard worker owning their PG; durable replies come back through the same channel.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::io::{Read, Write};
use std::net::{IpAddr, Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, SyncSender};
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use ceph_msgs::osd::{
    MCommand, MCommandReply, MMgrConfigure, MMgrOpen, MMgrReport, MOSDAlive, MOSDBeacon, MOSDBoot,
    MOSDMarkMeDown, MOSDPGCreated, MOSDPing, MPGStats, SignedSpan, osd_msg, ping_op,
};
use ceph_msgs::osd_op::{MOSDOp, osd_msg_type};
use ceph_msgs::{CephMessage, MAuth, MAuthReply, PaxosHeader};
use cephx::msgr2_auth::{CephxAuthorizerClientAuth, CephxMonClientAuth, CephxServerAuth};
use cephx::{AwsLcProvider, CryptoKey, CryptoProvider, MonAuthClient, PeerAuth, ServiceKeys};
use denc::{Encode, Encoder, EntityAddr, EntityAddrvec, EntityNameT, PgId, SpgId, Utime, Uuid};
use monclient::{Event as MonEvent, MonClient, MonTarget, Output as MonOutput};
use msgr2::connection::{Config as MsgrConfig, Connection, Event as ConnEvent, PACIFIC_FEATURES};
use msgr2::types::{ENTITY_TYPE_MGR, ENTITY_TYPE_MON, ENTITY_TYPE_OSD};
use osdmap::OsdMap;
use pg::{ConnId, OsdCap, PoolInfo};

use crate::Ev;
use crate::args::OsdOptions;
use crate::mkfs::DataDir;
use crate::stats::{self, PgLife};
use crate::worker::{self, ClientOp, ShardStats, WorkerMsg};

/// Which listening socket accepted a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ListenerKind {
    Public,
    Cluster,
    HbFront,
    HbBack,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Mon(monclient::ConnId),
    Mgr,
    /// Accepted on a listener: clients (public) and peers.
    Peer(ListenerKind),
}

struct Slot {
    kind: Kind,
    conn: Option<Connection>,
    stream: Option<TcpStream>,
    ready: bool,
    features: u64,
    /// Acceptors: who authenticated (from the cephx service side).
    auth_peer: Option<Arc<Mutex<Option<PeerAuth>>>>,
    caps: Option<Arc<OsdCap>>,
    client: EntityNameT,
    client_addr: EntityAddr,
}

/// `CEPH_AUTH_CEPHX`.
const AUTH_PROTO_CEPHX: u32 = 2;
/// `CEPH_OSD_FLAG_*` is not needed here; MOSDOp type number.
const MSG_OSD_OP: u16 = osd_msg_type::OSD_OP;
/// `MSG_OSD_PG_CREATE2`: the mon's PG create requests (we create PGs from the map instead).
const OPS_PARKED_MAX: usize = 4096;

/// Set by SIGTERM/SIGINT.
pub static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_sig: libc::c_int) {
    STOP.store(true, Ordering::SeqCst);
}

/// Install SIGTERM/SIGINT handlers that request a clean shutdown (mark-me-down first).
pub fn install_signal_handlers() {
    let h = on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t;
    // SAFETY: the handler only stores to an atomic, which is async-signal-safe.
    unsafe {
        libc::signal(libc::SIGTERM, h);
        libc::signal(libc::SIGINT, h);
        libc::signal(libc::SIGPIPE, libc::SIG_IGN);
    }
}

fn now_utime() -> Utime {
    Utime::from_system_time(SystemTime::now())
}

fn cephx_now() -> cephx::UTime {
    let d = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
    cephx::UTime::new(d.as_secs() as u32, d.subsec_nanos())
}

/// Bind a listener on the first free port in [min, max].
fn bind_range(ip: IpAddr, min: u16, max: u16) -> std::io::Result<TcpListener> {
    let mut last = None;
    for p in min..=max {
        match TcpListener::bind(SocketAddr::new(ip, p)) {
            Ok(l) => return Ok(l),
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or_else(|| std::io::Error::other("empty port range")))
}

fn spawn_reader(id: u64, mut stream: TcpStream, tx: SyncSender<Ev>) {
    let _ = thread::Builder::new().name(format!("rd-{id}")).spawn(move || {
        let mut buf = vec![0u8; 256 << 10];
        loop {
            match stream.read(&mut buf) {
                Ok(0) | Err(_) => {
                    let _ = tx.send(Ev::Eof(id));
                    return;
                }
                Ok(n) => {
                    if tx.send(Ev::Data(id, buf[..n].to_vec())).is_err() {
                        return;
                    }
                }
            }
        }
    });
}

fn to_denc_addr(a: &msgr2::EntityAddr) -> EntityAddr {
    match a.addr {
        Some(sa) => EntityAddr::new(a.ty, sa, a.nonce),
        None => EntityAddr::default(),
    }
}

/// The daemon's state (control thread only).
pub struct Daemon {
    opts: OsdOptions,
    dd: DataDir,
    whoami: i32,
    nonce: u32,
    provider: Arc<dyn CryptoProvider>,
    auth: Arc<Mutex<MonAuthClient>>,
    keys: Arc<RwLock<ServiceKeys>>,
    have_keys: bool,
    monc: MonClient<OsdMap>,
    slots: HashMap<u64, Slot>,
    next_id: u64,
    mon_slots: HashMap<monclient::ConnId, u64>,
    tx: SyncSender<Ev>,
    rx: Receiver<Ev>,
    public_addr: SocketAddr,
    cluster_addr: SocketAddr,
    hb_front_addr: SocketAddr,
    hb_back_addr: SocketAddr,
    workers: Vec<SyncSender<WorkerMsg>>,
    worker_threads: Vec<thread::JoinHandle<()>>,
    // membership
    boot_sent: Option<Instant>,
    up_epoch: u32,
    alive_sent_for: u32,
    map_received_at: Option<Instant>,
    // PGs
    pgs: BTreeMap<SpgId, PgLife>,
    pg_pending: BTreeMap<SpgId, u32>,
    parked: Vec<(ConnId, MOSDOp)>,
    // mgr
    mgr_slot: Option<u64>,
    mgr_addr: Option<(SocketAddr, u32)>,
    mgr_retry_at: Instant,
    stats_period: Duration,
    next_report: Instant,
    next_pgstats: Instant,
    next_beacon: Instant,
    next_auth_check: Instant,
    report_seq: u64,
    crush_done: bool,
    metadata: BTreeMap<String, String>,
    ops_total: u64,
    /// Pools already logged as not served.
    warned_pools: std::collections::BTreeSet<i64>,
    /// Origin of our monotonic heartbeat stamps.
    mono_base: Instant,
}

impl Daemon {
    /// Bind the listeners, open the shards, start the workers and the mon session.
    pub fn new(opts: OsdOptions, dd: DataDir, key: CryptoKey) -> Result<Self, String> {
        let whoami = dd.whoami as i32;
        let provider: Arc<dyn CryptoProvider> = Arc::new(AwsLcProvider);
        let auth = Arc::new(Mutex::new(MonAuthClient::new(
            provider.clone(),
            cephx::entity_name(cephx::ENTITY_TYPE_OSD, whoami.to_string()),
            key,
            cephx::ENTITY_TYPE_MON | cephx::ENTITY_TYPE_OSD | cephx::ENTITY_TYPE_MGR,
        )));
        let (tx, rx) = mpsc::sync_channel(65536);
        let mut listeners = Vec::new();
        let mut addr_of = |kind: ListenerKind, ip: IpAddr| -> Result<SocketAddr, String> {
            let l = bind_range(ip, opts.bind_port_min, opts.bind_port_max)
                .map_err(|e| format!("binding {kind:?} on {ip}: {e}"))?;
            let a = l.local_addr().map_err(|e| e.to_string())?;
            listeners.push((kind, l));
            Ok(a)
        };
        let public_addr = addr_of(ListenerKind::Public, opts.public_ip)?;
        let cluster_addr = addr_of(ListenerKind::Cluster, opts.cluster_ip)?;
        let hb_back_addr = addr_of(ListenerKind::HbBack, opts.cluster_ip)?;
        let hb_front_addr = addr_of(ListenerKind::HbFront, opts.public_ip)?;
        for (kind, l) in listeners {
            let tx = tx.clone();
            thread::Builder::new()
                .name(format!("accept-{kind:?}"))
                .spawn(move || {
                    for s in l.incoming().flatten() {
                        if tx.send(Ev::Accepted(kind, s)).is_err() {
                            return;
                        }
                    }
                })
                .map_err(|e| e.to_string())?;
        }
        let mut workers = Vec::new();
        let mut worker_threads = Vec::new();
        for shard in 0..dd.shards {
            let (wtx, wrx) = mpsc::sync_channel(4096);
            let dev = dd.device.clone();
            let etx = tx.clone();
            let shards = dd.shards;
            let h = thread::Builder::new()
                .name(format!("shard-{shard}"))
                .spawn(move || {
                    if let Err(e) = worker::run(&dev, shard, shards, whoami, wrx, etx) {
                        eprintln!("ferro-osd: shard {shard} stopped: {e}");
                        STOP.store(true, Ordering::SeqCst);
                    }
                })
                .map_err(|e| e.to_string())?;
            workers.push(wtx);
            worker_threads.push(h);
        }
        let mons: Vec<MonTarget> = opts
            .mon_hosts
            .iter()
            .enumerate()
            .map(|(i, a)| MonTarget {
                name: format!("mon{i}"),
                addr: *a,
            })
            .collect();
        let mcfg = monclient::Config {
            hunt_parallel: 1,
            hostname: opts.hostname.clone(),
            fsid: Some(dd.cluster_fsid),
            ..monclient::Config::default()
        };
        let seed = u64::from(std::process::id()) ^ now_utime().as_nanos();
        let nonce = (seed as u32 ^ (seed >> 32) as u32) | 1;
        let now = Instant::now();
        let mut d = Daemon {
            whoami,
            nonce,
            provider,
            auth,
            keys: Arc::new(RwLock::new(ServiceKeys::default())),
            have_keys: false,
            monc: MonClient::new(mcfg, mons, seed),
            slots: HashMap::new(),
            next_id: 1,
            mon_slots: HashMap::new(),
            tx,
            rx,
            public_addr,
            cluster_addr,
            hb_front_addr,
            hb_back_addr,
            workers,
            worker_threads,
            boot_sent: None,
            up_epoch: 0,
            alive_sent_for: 0,
            map_received_at: None,
            pgs: BTreeMap::new(),
            pg_pending: BTreeMap::new(),
            parked: Vec::new(),
            mgr_slot: None,
            mgr_addr: None,
            mgr_retry_at: now,
            stats_period: Duration::from_secs(5),
            next_report: now,
            next_pgstats: now,
            next_beacon: now,
            next_auth_check: now,
            report_seq: 0,
            crush_done: false,
            metadata: BTreeMap::new(),
            ops_total: 0,
            mono_base: now,
            warned_pools: Default::default(),
            opts,
            dd,
        };
        d.metadata = d.build_metadata();
        if let Some(p) = d.opts.admin_socket.clone()
            && let Err(e) = crate::admin::start(&p, d.tx.clone())
        {
            eprintln!("ferro-osd: admin socket {}: {e}", p.display());
        }
        Ok(d)
    }

    fn log(&self, msg: &str) {
        eprintln!("{} osd.{} {msg}", now_utime(), self.whoami);
    }

    fn my_addrvec(&self, a: SocketAddr) -> EntityAddrvec {
        EntityAddrvec::new(vec![EntityAddr::new(msgr2::addr::ADDR_TYPE_MSGR2, a, self.nonce)])
    }

    fn msgr_cfg(&self, addr: SocketAddr) -> MsgrConfig {
        let mut c = MsgrConfig::new(ENTITY_TYPE_OSD, i64::from(self.whoami));
        c.my_addrs = msgr2::AddrVec::one(msgr2::EntityAddr::msgr2(addr, self.nonce));
        c.seed = u64::from(self.nonce) ^ self.next_id.wrapping_mul(0x9E37_79B9);
        c
    }

    /// Run until SIGTERM/SIGINT.
    pub fn run(mut self) -> Result<(), String> {
        self.log(&format!(
            "starting: public {} cluster {} hb {} / {}",
            self.public_addr, self.cluster_addr, self.hb_front_addr, self.hb_back_addr
        ));
        worker::pin_to_core(0);
        self.monc
            .start(Instant::now())
            .map_err(|e| format!("mon client: {e}"))?;
        self.pump_monc();
        let mut stopping_since: Option<Instant> = None;
        loop {
            if STOP.load(Ordering::SeqCst) && stopping_since.is_none() {
                self.log("shutting down: marking myself down");
                self.mark_me_down();
                stopping_since = Some(Instant::now());
            }
            if let Some(t) = stopping_since
                && t.elapsed() > Duration::from_millis(1500)
            {
                break;
            }
            let wait = self.next_wake().saturating_duration_since(Instant::now());
            match self.rx.recv_timeout(wait.min(Duration::from_millis(100))) {
                Ok(ev) => self.handle(ev),
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => break,
            }
            let mut n = 0;
            while n < 256 {
                match self.rx.try_recv() {
                    Ok(ev) => self.handle(ev),
                    Err(_) => break,
                }
                n += 1;
            }
            self.tick();
        }
        for w in &self.workers {
            let _ = w.send(WorkerMsg::Shutdown);
        }
        for h in self.worker_threads.drain(..) {
            let _ = h.join();
        }
        if let Some(p) = &self.opts.admin_socket {
            let _ = std::fs::remove_file(p);
        }
        Ok(())
    }

    fn next_wake(&self) -> Instant {
        let mut t = Instant::now() + Duration::from_millis(100);
        if let Some(m) = self.monc.poll_timeout() {
            t = t.min(m);
        }
        for s in self.slots.values() {
            if let Some(x) = s.conn.as_ref().and_then(|c| c.poll_timeout()) {
                t = t.min(x);
            }
        }
        t
    }

    fn tick(&mut self) {
        let now = Instant::now();
        let ids: Vec<u64> = self.slots.keys().copied().collect();
        for id in ids {
            if let Some(c) = self.slots.get_mut(&id).and_then(|s| s.conn.as_mut())
                && c.poll_timeout().is_some_and(|t| t <= now)
            {
                c.handle_timeout(now);
                self.pump(id);
            }
        }
        self.monc.handle_timeout(now);
        self.pump_monc();
        if now >= self.next_auth_check {
            self.next_auth_check = now + Duration::from_secs(5);
            self.send_auth_requests();
        }
        if self.is_up() {
            if now >= self.next_beacon {
                self.next_beacon = now + Duration::from_secs(self.opts.beacon_interval_s.max(1));
                self.send_beacon();
            }
            if self.mgr_slot.is_none()
                && now >= self.mgr_retry_at
                && let Some(a) = self.mgr_addr
            {
                self.mgr_retry_at = now + Duration::from_secs(2);
                self.connect_mgr(a);
            }
            if now >= self.next_pgstats {
                self.next_pgstats = now + Duration::from_secs(self.opts.mon_report_interval_s.clamp(1, 60));
                self.send_pg_stats();
            }
            if now >= self.next_report {
                self.next_report = now + self.stats_period;
                self.send_mgr_report();
            }
        }
    }

    fn is_up(&self) -> bool {
        self.up_epoch > 0
    }

    // ---- events ----

    fn handle(&mut self, ev: Ev) {
        match ev {
            Ev::Accepted(kind, stream) => self.accept(kind, stream),
            Ev::Data(id, data) => {
                let now = Instant::now();
                if let Some(c) = self.slots.get_mut(&id).and_then(|s| s.conn.as_mut()) {
                    let _ = c.handle_input(now, &data);
                }
                self.pump(id);
            }
            Ev::Eof(id) => {
                if let Some(c) = self.slots.get_mut(&id).and_then(|s| s.conn.as_mut()) {
                    c.handle_transport_closed();
                    self.pump(id);
                }
                self.drop_slot_if_closed(id);
            }
            Ev::Connected(id, stream) => self.outgoing_connected(id, stream),
            Ev::ConnectFailed(id, err) => {
                if let Some(s) = self.slots.remove(&id) {
                    self.log(&format!("connect failed: {err}"));
                    self.slot_gone(id, s);
                }
            }
            Ev::OpReply(conn, reply) => {
                let id = conn.0;
                if let Some(s) = self.slots.get(&id) {
                    let m = reply.encode_message(s.features);
                    self.send_raw(id, m);
                }
            }
            Ev::Notify(conn, n) => {
                let id = conn.0;
                if let Some(s) = self.slots.get(&id) {
                    let m = n.to_message(s.features);
                    self.send_raw(id, m);
                }
            }
            Ev::NoPg(conn, op) => {
                // Not (yet) a PG of ours: hold it if the PG is being opened, else drop (the client resends when
                // a newer map sends it elsewhere), as Ceph does with misdirected ops.
                if self.pg_pending.contains_key(&op.pgid) && self.parked.len() < OPS_PARKED_MAX {
                    self.parked.push((conn, *op));
                }
            }
            Ev::PgReady { spgid, created } => {
                let epoch = self.pg_pending.remove(&spgid).unwrap_or(self.map_epoch());
                self.pgs.insert(
                    spgid,
                    PgLife {
                        created_epoch: epoch,
                        active_since_epoch: self.up_epoch.max(epoch),
                        activated_at: now_utime(),
                    },
                );
                if created {
                    let m = MOSDPGCreated {
                        paxos: PaxosHeader::default(),
                        pgid: spgid.pgid,
                    };
                    self.send_mon(m.to_message(PACIFIC_FEATURES));
                }
                self.retry_parked();
            }
            Ev::Admin(cmd, reply) => {
                let r = self.admin(&cmd);
                let _ = reply.send(r);
            }
        }
    }

    fn retry_parked(&mut self) {
        let epoch = self.map_epoch();
        let parked = std::mem::take(&mut self.parked);
        for (conn, op) in parked {
            if op.osdmap_epoch > epoch || self.pg_pending.contains_key(&op.pgid) {
                self.parked.push((conn, op));
            } else {
                self.dispatch_op(conn, op);
            }
        }
    }

    fn accept(&mut self, kind: ListenerKind, stream: TcpStream) {
        let _ = stream.set_nodelay(true);
        let id = self.next_id;
        self.next_id += 1;
        let my = match kind {
            ListenerKind::Public => self.public_addr,
            ListenerKind::Cluster => self.cluster_addr,
            ListenerKind::HbFront => self.hb_front_addr,
            ListenerKind::HbBack => self.hb_back_addr,
        };
        let mut cfg = self.msgr_cfg(my);
        cfg.auto_accept = true;
        let mut sa = CephxServerAuth::new(self.provider.clone(), self.keys.clone());
        let peer = sa.peer.clone();
        sa.methods = vec![msgr2::auth::AUTH_METHOD_CEPHX];
        let mut conn = Connection::acceptor(cfg, Box::new(sa), Instant::now());
        if let Ok(p) = stream.peer_addr() {
            conn.set_peer_socket_addr(p);
        }
        let Ok(reader) = stream.try_clone() else {
            return;
        };
        self.slots.insert(
            id,
            Slot {
                kind: Kind::Peer(kind),
                conn: Some(conn),
                stream: Some(stream),
                ready: false,
                features: 0,
                auth_peer: Some(peer),
                caps: None,
                client: EntityNameT::default(),
                client_addr: EntityAddr::default(),
            },
        );
        spawn_reader(id, reader, self.tx.clone());
        self.pump(id);
    }

    fn connect_out(&mut self, kind: Kind, addr: SocketAddr) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        self.slots.insert(
            id,
            Slot {
                kind,
                conn: None,
                stream: None,
                ready: false,
                features: 0,
                auth_peer: None,
                caps: None,
                client: EntityNameT::default(),
                client_addr: EntityAddr::default(),
            },
        );
        let tx = self.tx.clone();
        let _ =
            thread::Builder::new().name(format!("conn-{id}")).spawn(
                move || match TcpStream::connect_timeout(&addr, Duration::from_secs(5)) {
                    Ok(s) => {
                        let _ = s.set_nodelay(true);
                        let _ = tx.send(Ev::Connected(id, s));
                    }
                    Err(e) => {
                        let _ = tx.send(Ev::ConnectFailed(id, format!("{addr}: {e}")));
                    }
                },
            );
        id
    }

    fn outgoing_connected(&mut self, id: u64, stream: TcpStream) {
        let Some(kind) = self.slots.get(&id).map(|s| s.kind) else {
            let _ = stream.shutdown(Shutdown::Both);
            return;
        };
        let Ok(peer) = stream.peer_addr() else {
            self.slots.remove(&id);
            return;
        };
        let now = Instant::now();
        let mut cfg = self.msgr_cfg(self.public_addr);
        cfg.lossy = true;
        let conn = match kind {
            Kind::Mon(_) => {
                cfg.keepalive_interval = None;
                cfg.idle_timeout = None;
                let a = CephxMonClientAuth::new(self.auth.clone(), cephx_now());
                Connection::connector(
                    cfg,
                    Box::new(a),
                    msgr2::EntityAddr::msgr2(peer, 0),
                    ENTITY_TYPE_MON,
                    now,
                )
            }
            Kind::Mgr => {
                let authz = self
                    .auth
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .build_authorizer(cephx::ENTITY_TYPE_MGR);
                let Ok(authz) = authz else {
                    self.log("no mgr ticket yet");
                    self.slots.remove(&id);
                    self.mgr_slot = None;
                    return;
                };
                // The acceptor checks that we address it exactly (nonce included).
                let nonce = self.mgr_addr.map_or(0, |a| a.1);
                Connection::connector(
                    cfg,
                    Box::new(CephxAuthorizerClientAuth::new(authz)),
                    msgr2::EntityAddr::msgr2(peer, nonce),
                    ENTITY_TYPE_MGR,
                    now,
                )
            }
            Kind::Peer(_) => return,
        };
        let Ok(reader) = stream.try_clone() else {
            return;
        };
        if let Some(s) = self.slots.get_mut(&id) {
            s.conn = Some(conn);
            s.stream = Some(stream);
        }
        spawn_reader(id, reader, self.tx.clone());
        self.pump(id);
    }

    /// Write what a connection has to send and process what it has to say.
    fn pump(&mut self, id: u64) {
        loop {
            let Some(slot) = self.slots.get_mut(&id) else {
                return;
            };
            let Some(conn) = slot.conn.as_mut() else {
                return;
            };
            let mut bufs = Vec::new();
            conn.drain_output(&mut bufs);
            if let Some(st) = slot.stream.as_mut() {
                for b in &bufs {
                    if st.write_all(b).is_err() {
                        conn.handle_transport_closed();
                        break;
                    }
                }
            }
            let Some(ev) = conn.poll_event() else {
                break;
            };
            let kind = slot.kind;
            match ev {
                ConnEvent::Connected(peer) => {
                    slot.ready = true;
                    slot.features = peer.features;
                    slot.client = EntityNameT {
                        ty: peer.peer_type,
                        num: peer.peer_num,
                    };
                    slot.client_addr = peer.peer_addrs.0.first().map(to_denc_addr).unwrap_or_default();
                    if let Some(p) = &slot.auth_peer {
                        let pa = p.lock().unwrap_or_else(PoisonError::into_inner).clone();
                        let text = pa.and_then(|a| a.caps.caps_text().ok()).unwrap_or_default();
                        let caps = OsdCap::parse(&text).unwrap_or_default();
                        slot.caps = Some(Arc::new(caps));
                    }
                    match kind {
                        Kind::Mon(mid) => self.monc.handle_connected(mid, Instant::now()),
                        Kind::Mgr => self.mgr_connected(),
                        Kind::Peer(_) => {}
                    }
                    self.pump_monc();
                }
                ConnEvent::Message(m) => {
                    let msg = ceph_msgs::Message {
                        msg_type: m.msg_type,
                        version: m.version,
                        compat_version: m.compat_version,
                        priority: m.priority,
                        tid: m.tid,
                        front: m.front,
                        middle: m.middle,
                        data: m.data,
                    };
                    match kind {
                        Kind::Mon(mid) => {
                            self.monc.handle_message(mid, &msg, Instant::now());
                            self.pump_monc();
                        }
                        Kind::Mgr => self.mgr_message(&msg),
                        Kind::Peer(_) => self.peer_message(id, msg),
                    }
                }
                ConnEvent::KeepaliveAck { .. } => {
                    if let Kind::Mon(mid) = kind {
                        self.monc.handle_keepalive_ack(mid, Instant::now());
                    }
                }
                ConnEvent::Faulted { error, .. }
                | ConnEvent::Reset { error }
                | ConnEvent::Closed { error } => {
                    if !matches!(kind, Kind::Peer(ListenerKind::Public)) || !slot.ready {
                        let what = match kind {
                            Kind::Mon(_) => "mon",
                            Kind::Mgr => "mgr",
                            Kind::Peer(_) => "peer",
                        };
                        self.log(&format!("{what} connection {id} closed: {error}"));
                    }
                    if let Some(s) = self.slots.remove(&id) {
                        self.slot_gone(id, s);
                    }
                    return;
                }
                ConnEvent::MyAddr(_) | ConnEvent::AcceptRequest(_) | ConnEvent::Writable => {}
            }
        }
    }

    fn drop_slot_if_closed(&mut self, id: u64) {
        let closed = self
            .slots
            .get(&id)
            .is_some_and(|s| s.conn.as_ref().is_none_or(|c| c.is_closed() || c.is_standby()));
        if closed && let Some(s) = self.slots.remove(&id) {
            self.slot_gone(id, s);
        }
    }

    fn slot_gone(&mut self, id: u64, s: Slot) {
        if let Some(st) = &s.stream {
            let _ = st.shutdown(Shutdown::Both);
        }
        let now = Instant::now();
        match s.kind {
            Kind::Mon(mid) => {
                self.mon_slots.remove(&mid);
                if s.ready {
                    self.monc.handle_disconnected(mid, now);
                } else {
                    self.monc.handle_connect_failed(mid, now);
                }
                self.pump_monc();
            }
            Kind::Mgr => {
                if self.mgr_slot == Some(id) {
                    self.mgr_slot = None;
                    self.mgr_retry_at = now + Duration::from_secs(1);
                }
            }
            Kind::Peer(_) => {
                for w in &self.workers {
                    let _ = w.try_send(WorkerMsg::Disconnect(ConnId(id)));
                }
            }
        }
    }

    fn send_raw(&mut self, id: u64, m: ceph_msgs::Message) {
        if let Some(c) = self.slots.get_mut(&id).and_then(|s| s.conn.as_mut()) {
            let msg = msgr2::Message {
                msg_type: m.msg_type,
                version: m.version,
                compat_version: m.compat_version,
                priority: m.priority,
                tid: m.tid,
                front: m.front,
                middle: m.middle,
                data: m.data,
                ..Default::default()
            };
            if c.send(msg).is_err() {
                c.close();
            }
        }
        self.pump(id);
    }

    // ---- mon session ----

    fn send_mon(&mut self, m: ceph_msgs::Message) {
        let _ = self.monc.send_message(m);
        self.pump_monc();
    }

    fn map_epoch(&self) -> u32 {
        self.monc.osdmap().map_or(0, |m| m.epoch)
    }

    fn pump_monc(&mut self) {
        while let Some(o) = self.monc.poll_output() {
            match o {
                MonOutput::Connect { conn, target } => {
                    let id = self.connect_out(Kind::Mon(conn), target.addr);
                    self.mon_slots.insert(conn, id);
                }
                MonOutput::Send { conn, msg } => {
                    if let Some(&id) = self.mon_slots.get(&conn) {
                        self.send_raw(id, msg);
                    }
                }
                MonOutput::Keepalive { conn } => {
                    if let Some(&id) = self.mon_slots.get(&conn) {
                        if let Some(c) = self.slots.get_mut(&id).and_then(|s| s.conn.as_mut()) {
                            c.send_keepalive(Instant::now());
                        }
                        self.pump(id);
                    }
                }
                MonOutput::Close { conn } => {
                    if let Some(id) = self.mon_slots.remove(&conn)
                        && let Some(s) = self.slots.remove(&id)
                        && let Some(st) = s.stream
                    {
                        let _ = st.shutdown(Shutdown::Both);
                    }
                }
            }
        }
        while let Some(e) = self.monc.poll_event() {
            self.mon_event(e);
        }
    }

    fn mon_event(&mut self, e: MonEvent) {
        match e {
            MonEvent::SessionEstablished { target } => {
                self.log(&format!("mon session with {}", target.addr));
                self.send_auth_requests();
                // Boot messages are not resent by the lossy mon session: send again on a new session.
                if !self.is_up() {
                    self.boot_sent = None;
                    self.maybe_boot();
                }
            }
            MonEvent::SessionLost { .. } => {}
            MonEvent::OsdMap { epoch } => {
                if self.map_received_at.is_none() {
                    self.map_received_at = Some(Instant::now());
                }
                self.handle_osdmap(epoch);
            }
            MonEvent::OsdMapError { epoch, error } => {
                self.log(&format!("osdmap {epoch}: {error}"));
            }
            MonEvent::MgrMap(m) => {
                if let Some(a) = mgr_active_addr(&m.map) {
                    if self.mgr_addr != Some(a) {
                        self.log(&format!("active mgr at {}/{}", a.0, a.1));
                        if let Some(id) = self.mgr_slot.take()
                            && let Some(s) = self.slots.remove(&id)
                            && let Some(st) = s.stream
                        {
                            let _ = st.shutdown(Shutdown::Both);
                        }
                        self.mgr_retry_at = Instant::now();
                    }
                    self.mgr_addr = Some(a);
                }
            }
            MonEvent::Message(m) => {
                if m.msg_type == ceph_msgs::msg_type::AUTH_REPLY
                    && let Ok(r) = MAuthReply::from_message(&m)
                {
                    let res = self
                        .auth
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .handle_response(r.result, &r.result_bl, cephx_now());
                    match res {
                        Ok(_) => self.refresh_keys(),
                        Err(e) => self.log(&format!("cephx: {e}")),
                    }
                }
            }
            MonEvent::CommandDone { reply, .. } if reply.rc != 0 => {
                self.log(&format!("mon command failed: {} {}", reply.rc, reply.outs));
            }
            _ => {}
        }
    }

    fn refresh_keys(&mut self) {
        let k = self
            .auth
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .service_keys();
        if let Some(k) = k {
            *self.keys.write().unwrap_or_else(PoisonError::into_inner) = k;
            if !self.have_keys {
                self.log("have rotating service keys");
            }
            self.have_keys = true;
            self.maybe_boot();
        }
    }

    fn send_auth_requests(&mut self) {
        if !self.monc.is_connected() {
            return;
        }
        let reqs = self
            .auth
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .due_requests(cephx_now());
        let Ok(reqs) = reqs else { return };
        let mm = self.monc.monmap().map_or(0, |m| m.epoch);
        for r in reqs {
            let m = MAuth {
                paxos: PaxosHeader::default(),
                protocol: AUTH_PROTO_CEPHX,
                auth_payload: r,
                monmap_epoch: mm,
            };
            self.send_mon(m.to_message(PACIFIC_FEATURES));
        }
    }

    fn superblock(&self) -> Bytes {
        let epoch = self.map_epoch();
        let sb = osd_types::superblock::OsdSuperblock {
            cluster_fsid: Uuid(self.dd.cluster_fsid),
            whoami: self.whoami,
            current_epoch: epoch,
            oldest_map: epoch,
            newest_map: epoch,
            weight: 0.0,
            compat_features: osd_types::superblock::osd_compat_set(),
            osd_fsid: Uuid(self.dd.osd_fsid),
            cluster_osdmap_trim_lower_bound: epoch,
            ..Default::default()
        };
        let mut e = Encoder::new(PACIFIC_FEATURES);
        sb.encode(&mut e);
        e.into_bytes()
    }

    fn maybe_boot(&mut self) {
        if self.is_up() || !self.have_keys || !self.monc.is_connected() || STOP.load(Ordering::SeqCst) {
            return;
        }
        let Some(map) = self.monc.osdmap() else { return };
        if self
            .boot_sent
            .is_some_and(|t| t.elapsed() < Duration::from_secs(10))
        {
            return;
        }
        let _ = map;
        self.crush_on_start();
        let boot_epoch = 0;
        let m = MOSDBoot {
            paxos: PaxosHeader {
                version: u64::from(self.map_epoch()),
                ..PaxosHeader::default()
            },
            sb: self.superblock(),
            hb_back_addrs: self.my_addrvec(self.hb_back_addr),
            cluster_addrs: self.my_addrvec(self.cluster_addr),
            boot_epoch,
            hb_front_addrs: self.my_addrvec(self.hb_front_addr),
            metadata: self.metadata.clone(),
            osd_features: PACIFIC_FEATURES,
        };
        self.log(&format!("sending boot at epoch {}", self.map_epoch()));
        self.boot_sent = Some(Instant::now());
        self.send_mon(m.to_message(PACIFIC_FEATURES));
    }

    /// `osd crush update on start`: place this OSD under host=<hostname> with a weight from its size, and set
    /// its device class if it has none (as ceph-osd does).
    fn crush_on_start(&mut self) {
        if self.crush_done || !self.opts.crush_update_on_start {
            return;
        }
        self.crush_done = true;
        let total = self.dd_size();
        let weight = self
            .opts
            .initial_weight
            .unwrap_or((total as f64 / (1u64 << 40) as f64).max(0.00001));
        let weight = format!("{weight:.4}");
        let mut loc: Vec<String> = match &self.opts.crush_location {
            Some(l) => l.split_whitespace().map(str::to_string).collect(),
            None => vec![format!("host={}", self.opts.hostname), "root=default".into()],
        };
        loc.retain(|s| s.contains('='));
        let args: Vec<String> = loc.iter().map(|s| format!("\"{s}\"")).collect();
        let cmd = format!(
            "{{\"prefix\": \"osd crush create-or-move\", \"id\": {}, \"weight\": {weight}, \"args\": [{}]}}",
            self.whoami,
            args.join(", ")
        );
        let _ = self.monc.send_command(vec![cmd], Bytes::new(), Instant::now());
        let cls = format!(
            "{{\"prefix\": \"osd crush set-device-class\", \"class\": \"{}\", \"ids\": [\"{}\"]}}",
            self.opts.device_class, self.whoami
        );
        let _ = self.monc.send_command(vec![cls], Bytes::new(), Instant::now());
        self.pump_monc();
    }

    fn dd_size(&self) -> u64 {
        std::fs::metadata(&self.dd.device)
            .map(|m| m.len())
            .unwrap_or(self.opts.device_size)
    }

    fn handle_osdmap(&mut self, epoch: u32) {
        let Some(map) = self.monc.osdmap() else { return };
        let me = self.whoami;
        let up = map.is_up(me)
            && map.client_addrs.get(me as usize).is_some_and(|a| {
                a.0.iter()
                    .any(|x| x.socket_addr() == Some(self.public_addr) && x.nonce == self.nonce)
            });
        if up && !self.is_up() {
            let up_from = map.osd_info.get(me as usize).map_or(epoch, |i| i.up_from);
            self.up_epoch = up_from.max(1);
            self.log(&format!("marked up at epoch {up_from}"));
            self.next_beacon = Instant::now();
            self.next_pgstats = Instant::now();
        } else if !up && self.is_up() && !STOP.load(Ordering::SeqCst) {
            self.log(&format!("marked down in epoch {epoch}; booting again"));
            self.up_epoch = 0;
            self.boot_sent = None;
        }
        if !self.is_up() {
            self.maybe_boot();
            return;
        }
        // up_thru: the monitors want it at least at the interval start before PGs go active.
        let up_thru = map.osd_info.get(me as usize).map_or(0, |i| i.up_thru);
        if up_thru < self.up_epoch && self.alive_sent_for < epoch {
            self.alive_sent_for = epoch;
            let m = MOSDAlive {
                paxos: PaxosHeader {
                    version: u64::from(epoch),
                    ..PaxosHeader::default()
                },
                want: epoch,
            };
            self.send_mon(m.to_message(PACIFIC_FEATURES));
        }
        self.place_pgs();
        self.retry_parked();
    }

    /// Open every PG of every pool whose acting primary we are (size-1 pools).
    fn place_pgs(&mut self) {
        let Some(map) = self.monc.osdmap() else { return };
        let epoch = map.epoch;
        let mut want = Vec::new();
        for (pid, pool) in &map.pools {
            if !pool_is_ferro_only(map, pool.crush_rule, &self.opts.device_class) {
                // Its PGs may hold data on other OSDs that we cannot backfill: never claim them (an empty PG
                // reported active+clean would hide that data). Pools belong here through a device-class rule.
                if self.warned_pools.insert(*pid) {
                    self.log(&format!(
                        "pool {pid} is not served: its CRUSH rule {} also maps to OSDs without device class {}",
                        pool.crush_rule, self.opts.device_class
                    ));
                }
                continue;
            }
            let info = PoolInfo {
                id: *pid,
                name: map.pool_name.get(pid).cloned().unwrap_or_default(),
                pg_num: pool.pg_num,
                erasure: pool.is_erasure(),
                applications: pool.application_metadata.keys().cloned().collect(),
            };
            for seed in 0..pool.pg_num {
                let pgid = PgId::new(*pid as u64, seed);
                let Ok(ua) = map.pg_to_up_acting_osds(pgid) else {
                    continue;
                };
                if ua.acting_primary != self.whoami {
                    continue;
                }
                if pool.size != 1 || ua.acting.len() != 1 {
                    // Replication is not implemented yet. Serving such a PG alone would report it active+clean
                    // with one copy where the pool asks for more: it stays inactive instead (clients wait, as
                    // they do on any inactive PG) and the operator is told once per pool.
                    if self.warned_pools.insert(*pid) {
                        self.log(&format!(
                            "pool {pid} is not served: size {} needs replication, which ferro-osd does not do yet",
                            pool.size
                        ));
                    }
                    continue;
                }
                want.push((SpgId::new(pgid, denc::ShardId::NO_SHARD), info.clone()));
            }
        }
        // PGs we serve that the new map no longer lets us serve alone (pool resized, deleted, remapped).
        let keep: BTreeSet<SpgId> = want.iter().map(|(s, _)| *s).collect();
        let gone: Vec<SpgId> = self.pgs.keys().filter(|s| !keep.contains(s)).copied().collect();
        for spgid in gone {
            self.log(&format!("pg {spgid}: no longer served at epoch {epoch}"));
            self.pgs.remove(&spgid);
            let w = worker::shard_of(&spgid, self.dd.shards);
            let _ = self.workers[w].send(WorkerMsg::ClosePg { spgid });
        }
        for (spgid, info) in want {
            let w = worker::shard_of(&spgid, self.dd.shards);
            if self.pgs.contains_key(&spgid) {
                let _ = self.workers[w].try_send(WorkerMsg::SetPool { spgid, pool: info });
                continue;
            }
            if self.pg_pending.contains_key(&spgid) {
                continue;
            }
            self.pg_pending.insert(spgid, epoch);
            let _ = self.workers[w].send(WorkerMsg::OpenPg {
                spgid,
                pool: info,
                epoch,
            });
        }
    }

    fn send_beacon(&mut self) {
        let pgs: Vec<PgId> = self.pgs.keys().map(|s| s.pgid).collect();
        let m = MOSDBeacon {
            paxos: PaxosHeader {
                version: u64::from(self.map_epoch()),
                ..PaxosHeader::default()
            },
            pgs,
            min_last_epoch_clean: self.map_epoch(),
            last_purged_snaps_scrub: now_utime(),
            osd_beacon_report_interval: self.opts.beacon_interval_s as i32,
        };
        self.send_mon(m.to_message(PACIFIC_FEATURES));
    }

    fn mark_me_down(&mut self) {
        if !self.is_up() || !self.monc.is_connected() {
            return;
        }
        let m = MOSDMarkMeDown {
            paxos: PaxosHeader {
                version: u64::from(self.map_epoch()),
                ..PaxosHeader::default()
            },
            fsid: Uuid(self.dd.cluster_fsid),
            target_osd: self.whoami,
            target_addrs: self.my_addrvec(self.public_addr),
            epoch: self.map_epoch(),
            request_ack: false,
            down_and_dead: false,
        };
        self.send_mon(m.to_message(PACIFIC_FEATURES));
    }

    // ---- mgr session ----

    fn connect_mgr(&mut self, a: (SocketAddr, u32)) {
        let id = self.connect_out(Kind::Mgr, a.0);
        self.mgr_slot = Some(id);
    }

    fn mgr_connected(&mut self) {
        self.log("mgr session open");
        let m = MMgrOpen {
            daemon_name: self.whoami.to_string(),
            service_name: String::new(),
            service_daemon: false,
            // Empty: the mgr then keeps no config for us (a non-empty one must hold two maps).
            config_bl: Bytes::new(),
            config_defaults_bl: Bytes::new(),
            ..Default::default()
        };
        if let Some(id) = self.mgr_slot {
            self.send_raw(id, m.to_message(PACIFIC_FEATURES));
        }
        self.next_report = Instant::now();
        self.next_pgstats = Instant::now();
    }

    fn mgr_message(&mut self, m: &ceph_msgs::Message) {
        if m.msg_type == osd_msg::MGR_CONFIGURE
            && let Ok(c) = MMgrConfigure::from_message(m)
        {
            self.stats_period = Duration::from_secs(u64::from(c.stats_period.max(1)));
        }
    }

    fn send_mgr_report(&mut self) {
        let Some(id) = self.mgr_slot else { return };
        if !self.slots.get(&id).is_some_and(|s| s.ready) {
            return;
        }
        let mut packed = Encoder::new(0);
        packed.versioned(1, 1, |_| {});
        let m = MMgrReport {
            daemon_name: self.whoami.to_string(),
            packed: packed.into_bytes(),
            daemon_health_metrics: Bytes::from_static(&[0, 0, 0, 0]),
            rest: Bytes::from_static(&ceph_msgs::osd::MGR_REPORT_EMPTY_REST),
            ..Default::default()
        };
        self.send_raw(id, m.to_message(PACIFIC_FEATURES));
    }

    fn shard_stats(&self) -> Vec<ShardStats> {
        let mut rxs = Vec::new();
        for w in &self.workers {
            let (tx, rx) = mpsc::channel();
            if w.send(WorkerMsg::Stats(tx)).is_ok() {
                rxs.push(rx);
            }
        }
        rxs.into_iter()
            .filter_map(|r| r.recv_timeout(Duration::from_secs(5)).ok())
            .collect()
    }

    fn send_pg_stats(&mut self) {
        let Some(id) = self.mgr_slot else { return };
        if !self.slots.get(&id).is_some_and(|s| s.ready) {
            return;
        }
        let shards = self.shard_stats();
        let epoch = self.map_epoch();
        let now = now_utime();
        self.report_seq += 1;
        let seq = (u64::from(self.up_epoch) << 32) | self.report_seq;
        let mut pg_stat = BTreeMap::new();
        let mut pool_stat: BTreeMap<i64, osd_types::statfs::StoreStatfs> = BTreeMap::new();
        let (mut total, mut free, mut stored, mut lat) = (0u64, 0u64, 0u64, 0u64);
        for sh in &shards {
            total += sh.total_bytes;
            free += sh.free_bytes;
            lat = lat.max(sh.commit_latency_ns);
            for (spgid, s) in &sh.pgs {
                // PGs of deleted pools are not reported (their data stays until PG removal exists).
                if !self
                    .monc
                    .osdmap()
                    .is_some_and(|m| m.pools.contains_key(&(spgid.pgid.pool as i64)))
                {
                    continue;
                }
                let life = self.pgs.get(spgid).copied().unwrap_or_default();
                let ps = stats::pg_stat(self.whoami, epoch, seq, s, &life, now);
                let mut e = Encoder::new(PACIFIC_FEATURES);
                ps.encode(&mut e);
                pg_stat.insert(spgid.pgid, e.into_bytes());
                stored += s.num_bytes;
                let p = pool_stat.entry(spgid.pgid.pool as i64).or_default();
                p.data_stored += s.num_bytes;
                p.allocated += s.num_bytes.div_ceil(4096) * 4096;
            }
        }
        let os = stats::osd_stat(total, free, stored, self.up_epoch, seq, pg_stat.len() as u32, lat);
        let mut e = Encoder::new(PACIFIC_FEATURES);
        os.encode(&mut e);
        let had = self.map_received_at.map_or(Duration::ZERO, |t| t.elapsed());
        let m = MPGStats {
            paxos: PaxosHeader::default(),
            fsid: Uuid(self.dd.cluster_fsid),
            pg_stat,
            osd_stat: e.into_bytes(),
            epoch,
            had_map_for: Utime::new(had.as_secs() as u32, had.subsec_nanos()),
            pool_stat: pool_stat
                .into_iter()
                .map(|(k, v)| {
                    let mut e = Encoder::new(PACIFIC_FEATURES);
                    v.encode(&mut e);
                    (k, e.into_bytes())
                })
                .collect(),
        };
        self.send_raw(id, m.to_message(PACIFIC_FEATURES));
    }

    // ---- clients and peers ----

    fn peer_message(&mut self, id: u64, m: ceph_msgs::Message) {
        if m.msg_type == MSG_OSD_OP {
            match MOSDOp::decode_message(&m) {
                Ok(op) => {
                    self.ops_total += 1;
                    let epoch = self.map_epoch();
                    if op.osdmap_epoch > epoch {
                        // The client has a newer map: wait for it (Ceph's wait_for_map).
                        if self.parked.len() < OPS_PARKED_MAX {
                            self.parked.push((ConnId(id), op));
                        }
                        return;
                    }
                    self.dispatch_op(ConnId(id), op);
                }
                Err(e) => self.log(&format!("undecodable MOSDOp: {e}")),
            }
        }
        if m.msg_type == osd_msg::COMMAND
            && let Ok(c) = MCommand::from_message(&m)
        {
            // `ceph tell osd.N ...`: the same (read-only) commands as the admin socket.
            let (r, out) = self.admin(&c.cmd.join(""));
            let reply = MCommandReply {
                r,
                rs: String::new(),
                data: Bytes::from(out),
            };
            let features = self.slots.get(&id).map_or(PACIFIC_FEATURES, |s| s.features);
            self.send_raw(id, reply.to_message(features).with_tid(m.tid));
            return;
        }
        if m.msg_type == osd_msg::OSD_PING
            && let Ok(p) = MOSDPing::from_message(&m)
            && p.op == ping_op::PING
        {
            // Answer as ceph-osd does: echo the sender's stamps, add our monotonic send time and up_from.
            let reply = MOSDPing {
                fsid: Uuid(self.dd.cluster_fsid),
                map_epoch: self.map_epoch(),
                op: ping_op::PING_REPLY,
                ping_stamp: p.ping_stamp,
                up_from: self.up_epoch,
                mono_ping_stamp: p.mono_ping_stamp,
                mono_send_stamp: SignedSpan::from_nanos(self.mono_base.elapsed().as_nanos() as i64),
                delta_ub: None,
                padding: 0,
            };
            let features = self.slots.get(&id).map_or(PACIFIC_FEATURES, |s| s.features);
            self.send_raw(id, reply.to_message(features));
        }
        // Other peer traffic (replication, peering) is not served: size-1 pools only.
    }

    fn dispatch_op(&mut self, conn: ConnId, op: MOSDOp) {
        let Some(s) = self.slots.get(&conn.0) else { return };
        let Some(caps) = s.caps.clone() else { return };
        let w = worker::shard_of(&op.pgid, self.dd.shards);
        let cop = ClientOp {
            conn,
            client: s.client,
            client_addr: s.client_addr,
            caps,
            features: s.features,
            epoch: self.map_epoch(),
            msg: op,
        };
        let _ = self.workers[w].send(WorkerMsg::Op(Box::new(cop)));
    }

    // ---- metadata and admin ----

    fn build_metadata(&self) -> BTreeMap<String, String> {
        let mut m = BTreeMap::new();
        let read = |p: &str| std::fs::read_to_string(p).unwrap_or_default();
        let os_release = read("/etc/os-release");
        let osr = |k: &str| {
            os_release
                .lines()
                .find_map(|l| l.strip_prefix(&format!("{k}=")))
                .map(|v| v.trim_matches('"').to_string())
                .unwrap_or_default()
        };
        let meminfo = read("/proc/meminfo");
        let mem = |k: &str| {
            meminfo
                .lines()
                .find_map(|l| l.strip_prefix(k))
                .map(|v| v.trim().trim_end_matches("kB").trim().to_string())
                .unwrap_or_else(|| "0".into())
        };
        let cpu = read("/proc/cpuinfo")
            .lines()
            .find_map(|l| {
                l.strip_prefix("model name")
                    .map(|v| v.trim_start_matches([' ', '\t', ':']).to_string())
            })
            .unwrap_or_default();
        let uname = {
            // SAFETY: utsname is plain data; uname fills it.
            let mut u: libc::utsname = unsafe { std::mem::zeroed() };
            unsafe { libc::uname(&mut u) };
            let f = |a: &[libc::c_char]| {
                let b: Vec<u8> = a.iter().take_while(|&&c| c != 0).map(|&c| c as u8).collect();
                String::from_utf8_lossy(&b).to_string()
            };
            (f(&u.sysname), f(&u.release), f(&u.version), f(&u.machine))
        };
        let version = format!(
            "ceph version 16.2.15-ferro ({}) pacific (stable; ferro-osd {})",
            env!("CARGO_PKG_VERSION"),
            env!("CARGO_PKG_VERSION")
        );
        let addr = |a: SocketAddr| format!("[v2:{a}/{}]", self.nonce);
        let dev = self.dd.device.display().to_string();
        let disk = underlying_disk(&self.dd.device).unwrap_or_else(|| {
            self.dd
                .device
                .file_name()
                .map(|f| f.to_string_lossy().to_string())
                .unwrap_or_default()
        });
        let created_at = std::fs::metadata(self.opts.osd_data.join("ready"))
            .and_then(|m| m.modified())
            .map(|t| {
                let u = Utime::from_system_time(t);
                // Ceph's form: 2026-11-30T10:55:59.531646Z
                let s = u.to_string();
                s.split('+').next().map(|x| format!("{x}Z")).unwrap_or(s)
            })
            .unwrap_or_default();
        let kv: Vec<(&str, String)> = vec![
            ("arch", uname.3),
            ("back_addr", addr(self.cluster_addr)),
            ("back_iface", String::new()),
            ("ceph_release", "pacific".into()),
            ("ceph_version", version.clone()),
            ("ceph_version_short", "16.2.15-ferro".into()),
            ("ceph_version_when_created", version),
            ("container_name", String::new()),
            ("cpu", cpu),
            ("created_at", created_at),
            ("default_device_class", self.opts.device_class.clone()),
            ("device_ids", String::new()),
            ("device_paths", String::new()),
            ("devices", disk.clone()),
            ("distro", osr("ID")),
            ("distro_description", osr("PRETTY_NAME")),
            ("distro_version", osr("VERSION_ID")),
            ("front_addr", addr(self.public_addr)),
            ("front_iface", String::new()),
            ("hb_back_addr", addr(self.hb_back_addr)),
            ("hb_front_addr", addr(self.hb_front_addr)),
            ("hostname", self.opts.hostname.clone()),
            ("journal_rotational", "0".into()),
            ("kernel_description", uname.2),
            ("kernel_version", uname.1),
            ("mem_swap_kb", mem("SwapTotal:")),
            ("mem_total_kb", mem("MemTotal:")),
            ("network_numa_unknown_ifaces", "back_iface,front_iface".into()),
            ("os", uname.0),
            ("osd_data", self.opts.osd_data.display().to_string()),
            ("osd_objectstore", "ferrostore".into()),
            ("osdspec_affinity", String::new()),
            ("rotational", "0".into()),
            ("ferrostore_bdev_path", dev),
            ("ferrostore_bdev_size", self.dd_size().to_string()),
            ("ferrostore_bdev_block_size", "4096".into()),
            ("ferrostore_bdev_rotational", "0".into()),
            ("ferrostore_bdev_type", "ssd".into()),
            ("ferrostore_bdev_driver", "io_uring".into()),
            ("ferrostore_bdev_access_mode", "O_DIRECT".into()),
            ("ferrostore_shards", self.dd.shards.to_string()),
            ("objectstore_numa_unknown_devices", disk),
        ];
        for (k, v) in kv {
            m.insert(k.to_string(), v);
        }
        m
    }

    fn admin(&mut self, cmd: &str) -> (i32, String) {
        let v: serde_json::Value =
            serde_json::from_str(cmd).unwrap_or_else(|_| serde_json::json!({"prefix": cmd}));
        let prefix = v["prefix"].as_str().unwrap_or("").to_string();
        let j = match prefix.as_str() {
            "get_command_descriptions" => return (0, crate::admin::command_descriptions()),
            "status" => serde_json::json!({
                "cluster_fsid": Uuid(self.dd.cluster_fsid).to_string(),
                "osd_fsid": Uuid(self.dd.osd_fsid).to_string(),
                "whoami": self.whoami,
                "state": if self.is_up() { "active" } else { "booting" },
                "oldest_map": self.map_epoch(),
                "newest_map": self.map_epoch(),
                "num_pgs": self.pgs.len(),
                "objectstore": "ferrostore",
            }),
            "version" | "git_version" => serde_json::json!({
                "version": "16.2.15-ferro",
                "release": "pacific",
                "release_type": "stable",
                "ferro_osd": env!("CARGO_PKG_VERSION"),
            }),
            "help" => {
                let mut o = serde_json::Map::new();
                for (s, h) in crate::admin::COMMANDS {
                    o.insert((*s).to_string(), (*h).into());
                }
                serde_json::Value::Object(o)
            }
            "perf dump" => {
                let sh = self.shard_stats();
                let pgs: usize = sh.iter().map(|s| s.pgs.len()).sum();
                let ops: u64 = sh.iter().map(|s| s.ops).sum();
                let (mut objs, mut bytes, mut rd, mut wr) = (0u64, 0u64, 0u64, 0u64);
                for s in sh.iter().flat_map(|s| s.pgs.values()) {
                    objs += s.num_objects;
                    bytes += s.num_bytes;
                    rd += s.num_rd;
                    wr += s.num_wr;
                }
                let total: u64 = sh.iter().map(|s| s.total_bytes).sum();
                let free: u64 = sh.iter().map(|s| s.free_bytes).sum();
                let lat = sh.iter().map(|s| s.commit_latency_ns).max().unwrap_or(0);
                serde_json::json!({
                    "osd": {
                        "op": ops, "op_r": rd, "op_w": wr, "numpg": pgs, "numpg_primary": pgs,
                        "stat_bytes": total, "stat_bytes_used": total.saturating_sub(free),
                        "stat_bytes_avail": free, "messages_received": self.ops_total,
                    },
                    "ferrostore": {
                        "shards": self.dd.shards, "objects": objs, "bytes": bytes,
                        "commit_latency_ns": lat,
                    },
                })
            }
            "perf schema" => serde_json::json!({"osd": {}, "ferrostore": {}}),
            "config show" => {
                let mut o = serde_json::Map::new();
                for (k, val) in &self.opts.all {
                    o.insert(k.clone(), val.clone().into());
                }
                o.insert("name".into(), format!("osd.{}", self.whoami).into());
                o.insert("cluster".into(), self.opts.cluster.clone().into());
                o.insert("osd_objectstore".into(), "ferrostore".into());
                o.insert("ferro_osd_shards".into(), self.dd.shards.to_string().into());
                serde_json::Value::Object(o)
            }
            "config get" => {
                let var = ceph_config::normalize_option_name(v["var"].as_str().unwrap_or(""));
                match self.opts.all.get(&var) {
                    Some(val) => serde_json::json!({ var: val }),
                    None => return (-2, format!("{{\"error\": \"unrecognized option {var}\"}}")),
                }
            }
            "dump_ops_in_flight" | "ops" => serde_json::json!({"ops": [], "num_ops": 0}),
            "dump_historic_ops" => serde_json::json!({"size": 0, "duration": 0, "ops": []}),
            other => {
                return (-22, format!("{{\"error\": \"unknown command {other}\"}}"));
            }
        };
        (0, serde_json::to_string_pretty(&j).unwrap_or_default())
    }
}

/// Whether every device CRUSH rule `rule` can choose from has device class `class`: only then do all the PGs of
/// its pools live on ferro-osd OSDs (with a classic OSD in reach, a PG could move here from it and we cannot
/// backfill). Unknown rules or maps count as not ours.
pub fn pool_is_ferro_only(map: &OsdMap, rule: u8, class: &str) -> bool {
    let Some(cm) = map.crush_map.as_deref() else {
        return false;
    };
    let Some(Some(r)) = cm.rules.get(usize::from(rule)) else {
        return false;
    };
    let Some(class_id) = cm
        .class_names
        .iter()
        .find(|(_, n)| n.as_str() == class)
        .map(|(id, _)| *id)
    else {
        return false;
    };
    let mut devices = Vec::new();
    let mut stack: Vec<(i32, u32)> = r
        .steps
        .iter()
        .filter(|s| s.op == crush::op::TAKE)
        .map(|s| (s.arg1, 0))
        .collect();
    while let Some((id, depth)) = stack.pop() {
        if depth > 64 || devices.len() > 1 << 16 {
            return false;
        }
        if id >= 0 {
            devices.push(id);
            continue;
        }
        let idx = (-1 - i64::from(id)) as usize;
        if let Some(Some(b)) = cm.buckets.get(idx) {
            stack.extend(b.items.iter().map(|&i| (i, depth + 1)));
        }
    }
    !devices.is_empty() && devices.iter().all(|d| cm.class_map.get(d) == Some(&class_id))
}

/// The disk holding `path` (a block device itself, or the device of the file system a block file lives on), as
/// its kernel name (`vda`, `nvme0n1`): what ceph-osd reports as `devices`.
fn underlying_disk(path: &std::path::Path) -> Option<String> {
    use std::os::unix::fs::{FileTypeExt, MetadataExt};
    let md = std::fs::metadata(path).ok()?;
    let dev = if md.file_type().is_block_device() {
        md.rdev()
    } else {
        md.dev()
    };
    let (major, minor) = (libc::major(dev), libc::minor(dev));
    let link = std::fs::read_link(format!("/sys/dev/block/{major}:{minor}")).ok()?;
    let name = link.file_name()?.to_string_lossy().to_string();
    // A partition's sysfs directory sits inside its disk's.
    let parent = std::path::Path::new("/sys/dev/block").join(&link);
    if parent.join("partition").exists() {
        return parent
            .parent()
            .and_then(|p| p.file_name())
            .map(|n| n.to_string_lossy().to_string());
    }
    Some(name)
}

/// The active mgr's msgr2 address from an encoded MgrMap (epoch, then `active_addrs`).
pub fn mgr_active_addr(map: &Bytes) -> Option<(SocketAddr, u32)> {
    let mut d = denc::Decoder::new(map.clone());
    let (_h, mut body) = d.start_struct("MgrMap", u8::MAX).ok()?;
    let _epoch = body.u32().ok()?;
    let av: EntityAddrvec = body.decode().ok()?;
    av.0.iter()
        .find(|a| a.is_msgr2())
        .or_else(|| av.0.first())
        .and_then(|a| a.socket_addr().map(|s| (s, a.nonce)))
        .filter(|(a, _)| a.port() != 0)
}
