// SPDX-License-Identifier: LGPL-3.0-or-later
//! The daemon on crates/reactor: one core per ferrostore shard, thread per core.
//!
//! Every core ([`Core`], a reactor `Service`) owns its ferrostore shard and the PGs placed on it
//! ([`crate::worker::Shard`]), and the client and peer connections it was given: core 0 accepts on the four
//! listeners (public, cluster, hb back/front; bound exclusively before the cores start) and hands each fresh socket
//! to a core round robin, keeping its share. A core decodes the MOSDOps of its connections and executes them if the
//! op's PG is its own; otherwise the op crosses to the owning core over the SPSC mesh (`ctx.post`) and the reply
//! comes back the same way, to be written on the connection's core. Core 0 also runs control ([`Control`]): the
//! mon session (monclient's sans-IO core), cephx rotating keys, boot, beacons, up_thru, the mgr session (reports,
//! PG stats) and admin commands (the admin socket thread posts them in with `Runtime::post`). Every osdmap epoch
//! goes from core 0 to every core, which places its own PGs from it.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::net::{IpAddr, SocketAddr, TcpListener};
use std::os::fd::{IntoRawFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use ceph_msgs::osd::{
    MCommand, MCommandReply, MMgrConfigure, MMgrOpen, MMgrReport, MOSDAlive, MOSDBeacon, MOSDBoot,
    MOSDFailure, MOSDMarkMeDown, MOSDPGCreated, MOSDPGTemp, MOSDPing, MPGStats, SignedSpan, failure_flags,
    osd_msg, ping_op,
};
use ceph_msgs::osd_op::{MOSDOp, MOSDOpReply, MWatchNotify, osd_msg_type};
use ceph_msgs::{CephMessage, MAuth, MAuthReply, PaxosHeader};
use cephx::msgr2_auth::{CephxAuthorizerClientAuth, CephxMonClientAuth, CephxServerAuth};
use cephx::{AwsLcProvider, CryptoKey, CryptoProvider, MonAuthClient, PeerAuth, ServiceKeys};
use denc::{Encode, Encoder, EntityAddr, EntityAddrvec, EntityNameT, PgId, SpgId, Utime, Uuid};
use ferrostore::hash::FastMap;
use ferrostore::uring::{UringDevice, UringOptions};
use ferrostore::{Store, StoreConfig};
use monclient::{Event as MonEvent, MonClient, MonTarget, Output as MonOutput};
use msgr2::connection::{Config as MsgrConfig, Connection, PACIFIC_FEATURES};
use msgr2::types::{ENTITY_TYPE_MGR, ENTITY_TYPE_MON, ENTITY_TYPE_OSD};
use osd_core::PgRouter;
use osdmap::OsdMap;
use pg::{ConnId, OsdCap};
use reactor::{
    CloseReason, ConnId as RConn, ConnectProto, CoreCtx, CoreId, ListenProto, ListenerId, Runtime,
    RuntimeConfig, SendError, Service, TimerId, TurnInfo,
};

use crate::args::OsdOptions;
use crate::heartbeat::{HbAction, HbConfig, Heartbeats};
use crate::mkfs::DataDir;
use crate::stats;
use crate::turns::{TurnBoard, TurnLog, TurnReport, add_since};
use crate::worker::{self, ClientOp, Delivery, OpsList, Shard, ShardStats};

/// Which listening socket accepted a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ListenerKind {
    Public,
    Cluster,
    HbFront,
    HbBack,
}

/// `CEPH_AUTH_CEPHX`.
const AUTH_PROTO_CEPHX: u32 = 2;
const MSG_OSD_OP: u16 = osd_msg_type::OSD_OP;
/// Replies waiting for a connection that pushes back (msgr2 queue full), at most, before it is closed.
const PENDING_MAX: usize = 65536;
/// Timer tokens.
const T_CORE: u64 = 1;
const T_CONTROL: u64 = 2;
const CORE_TICK: Duration = Duration::from_millis(100);
const CONTROL_TICK: Duration = Duration::from_millis(50);
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

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

/// Bind a listener on the first free port in [min, max]. Exclusive (no SO_REUSEPORT): another OSD on the host
/// probing the same range must not share it.
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

fn to_denc_addr(a: &msgr2::EntityAddr) -> EntityAddr {
    match a.addr {
        Some(sa) => EntityAddr::new(a.ty, sa, a.nonce),
        None => EntityAddr::default(),
    }
}

fn to_m2(m: ceph_msgs::Message) -> msgr2::Message {
    msgr2::Message {
        msg_type: m.msg_type,
        version: m.version,
        compat_version: m.compat_version,
        priority: m.priority,
        tid: m.tid,
        front: m.front,
        middle: m.middle,
        data: m.data,
        // a rep op's transaction goes out as a rope, its payload the client's received buffer (no copy)
        data_tail: m.data_tail,
        data_off: m.data_off,
        ..Default::default()
    }
}

fn from_m2(m: msgr2::Message) -> ceph_msgs::Message {
    ceph_msgs::Message {
        msg_type: m.msg_type,
        version: m.version,
        compat_version: m.compat_version,
        priority: m.priority,
        tid: m.tid,
        front: m.front,
        middle: m.middle,
        data: m.data,
        data_tail: m.data_tail,
        data_off: m.data_off,
    }
}

/// What cores say to each other (and what outside threads post to core 0).
pub enum Msg {
    /// Core 0 → every core: a new osdmap epoch (pools ferro-osd does not serve removed), our up_from (0: not
    /// up) and the PG → core table at that epoch (on the same ring as the map, so both arrive in order).
    Map {
        map: Arc<OsdMap>,
        up_epoch: u32,
        routes: Arc<PgRouter>,
        /// The newest epoch core 0 has in hand: epochs before it follow at once (a catch-up after a restart, or
        /// a monitor message with several epochs), so PGs record their intervals and peer on the newest.
        pending: u32,
    },
    /// Connection core → PG core: a message from `osd.<from>` about a PG of that core.
    Peer {
        from: i32,
        msg: ceph_msgs::Message,
    },
    /// Any core → the core owning our connection to `osd`.
    SendOsd {
        osd: i32,
        msg: ceph_msgs::Message,
    },
    /// Connection owner → every core: the cluster connection to `osd` broke.
    PeerReset(i32),
    /// PG core → core 0: requests for the monitor.
    Mon(Vec<worker::MonReq>),
    /// Core 0 → PG core: `ferro object-digest` for the admin socket; the PG core posts it to itself for each
    /// next slice.
    Digest(Box<worker::DigestJob>, mpsc::Sender<(i32, String)>),
    /// Connection core → PG core.
    Op(Box<ClientOp>),
    /// PG core → connection core.
    Reply(ConnId, Box<MOSDOpReply>),
    Notify(ConnId, Box<MWatchNotify>),
    /// Connection core → every core: the client is gone.
    ClientReset(ConnId),
    /// Every core → core 0, every second.
    Stats(Box<ShardStats>),
    /// Every core → core 0, every second: loop turn statistics and the long turns since the last report.
    Turns(Box<TurnReport>),
    /// `ceph tell`: connection core → core 0, and the answer back.
    Tell {
        conn: ConnId,
        tid: u64,
        cmd: String,
        features: u64,
    },
    TellReply {
        conn: ConnId,
        msg: ceph_msgs::Message,
    },
    /// The admin socket thread → core 0.
    Admin(String, mpsc::Sender<(i32, String)>),
    /// Core 0 → every core: list your client ops of list `list` for gather `id`.
    DumpOps {
        id: u64,
        list: OpsList,
    },
    /// Every core → core 0: its part of gather `id`.
    OpsPart {
        id: u64,
        ops: Vec<serde_json::Value>,
    },
}

/// Where an admin command's answer goes.
enum AdminReply {
    Socket(mpsc::Sender<(i32, String)>),
    Tell { conn: ConnId, tid: u64, features: u64 },
}

/// A `dump_ops_in_flight` / `dump_historic_ops[_by_duration]` being gathered from every core (core 0).
struct OpsGather {
    list: OpsList,
    ops: Vec<serde_json::Value>,
    left: usize,
    reply: AdminReply,
}

/// The op list an admin command asks for, if it is one of the op dumps.
fn ops_request(cmd: &str) -> Option<OpsList> {
    let v: serde_json::Value =
        serde_json::from_str(cmd).unwrap_or_else(|_| serde_json::json!({"prefix": cmd}));
    match v["prefix"].as_str()? {
        "dump_ops_in_flight" | "ops" => Some(OpsList::InFlight),
        "dump_historic_ops" => Some(OpsList::Historic),
        "dump_historic_ops_by_duration" => Some(OpsList::ByDuration),
        _ => None,
    }
}

/// The OSD's answer to an op dump from every core's entries: in flight and historic oldest first (ceph-osd's
/// order), by duration slowest first; the historic lists are kept per core, and the OSD's are the newest /
/// slowest `osd_op_history_size` of all.
fn merge_ops(list: OpsList, mut ops: Vec<serde_json::Value>) -> serde_json::Value {
    match list {
        OpsList::ByDuration => {
            let d = |v: &serde_json::Value| v["duration"].as_f64().unwrap_or(0.0);
            ops.sort_by(|a, b| d(b).total_cmp(&d(a)));
            ops.truncate(worker::OP_HISTORY_SIZE);
        }
        OpsList::InFlight | OpsList::Historic => {
            ops.sort_by(|a, b| {
                let k = |v: &serde_json::Value| v["initiated_at"].as_str().unwrap_or("").to_string();
                k(a).cmp(&k(b))
            });
            if list == OpsList::Historic {
                let extra = ops.len().saturating_sub(worker::OP_HISTORY_SIZE);
                ops.drain(..extra);
            }
        }
    }
    if list == OpsList::InFlight {
        serde_json::json!({ "num_ops": ops.len(), "ops": ops })
    } else {
        serde_json::json!({
            "size": worker::OP_HISTORY_SIZE,
            "duration": worker::OP_HISTORY_DURATION_S,
            "ops": ops,
        })
    }
}

/// A shard's PGs on its store and their collections' split bits.
type StoredPgs = Vec<(PgId, u32)>;

/// What every core knows and never changes (rotating keys change behind their lock, read only at handshakes).
pub struct Common {
    pub whoami: i32,
    pub nonce: u32,
    pub cluster_fsid: [u8; 16],
    pub shards: u32,
    pub public_addr: SocketAddr,
    pub cluster_addr: SocketAddr,
    pub hb_front_addr: SocketAddr,
    pub hb_back_addr: SocketAddr,
    /// Kind of core 0's listener `ListenerId(i)`.
    listener_kinds: Vec<ListenerKind>,
    provider: Arc<dyn CryptoProvider>,
    keys: Arc<RwLock<ServiceKeys>>,
    /// Our cephx client (tickets): every core builds authorizers from it for its OSD connections.
    auth: Arc<Mutex<MonAuthClient>>,
    /// Origin of our monotonic heartbeat stamps.
    mono_base: Instant,
    /// `ferro_osd_busy_poll`: spin on the device ring while IO is in flight instead of sleeping on its fd.
    busy_poll: bool,
    /// `ferro_osd_long_turn_us`: loop turns at least this long are recorded ([`crate::turns`]).
    long_turn_us: u64,
    /// `ferro_osd_turn_cpu_time`: read the thread's CPU clock every turn, for the long turns' `cpu_us`.
    turn_cpu_time: bool,
    /// `ferro_osd_inject_peer_resets`: break one in N peer OSD connections' messages (0: never; tests only).
    inject_peer_resets: u64,
    /// The PGs each core found on its ferrostore shard at mount, with their split bits (set by the core factory
    /// before the core serves; core 0 builds the route table once every core has reported).
    stored_pgs: Mutex<Vec<Option<StoredPgs>>>,
    /// The newest OSDMap each core's shard handled before the OSD stopped (osd-core's map store, Ceph's
    /// superblock `newest_map`), set by the core factory: core 0 subscribes to the osdmap from the epoch after
    /// the oldest of them and hands every epoch since to the cores.
    stored_maps: Mutex<Vec<Option<Option<OsdMap>>>>,
}

impl Common {
    fn addr_of(&self, k: ListenerKind) -> SocketAddr {
        match k {
            ListenerKind::Public => self.public_addr,
            ListenerKind::Cluster => self.cluster_addr,
            ListenerKind::HbFront => self.hb_front_addr,
            ListenerKind::HbBack => self.hb_back_addr,
        }
    }

    fn msgr_cfg(&self, addr: SocketAddr, seed: u64) -> MsgrConfig {
        let mut c = MsgrConfig::new(ENTITY_TYPE_OSD, i64::from(self.whoami));
        c.my_addrs = msgr2::AddrVec::one(msgr2::EntityAddr::msgr2(addr, self.nonce));
        c.seed = u64::from(self.nonce) ^ seed.wrapping_mul(0x9E37_79B9);
        // A/B switch for benchmarks: the acknowledgement policy before session 6 (a standalone ACK as soon as
        // nothing else is queued, lossy sessions included). docs/msgr2.md, "Acknowledgements".
        if std::env::var_os("FERRO_MSGR_ACKS").is_some_and(|v| v == "immediate") {
            c.ack_delay = None;
            c.ack_lossy = true;
        }
        c
    }
}

/// A connection accepted on a listener (clients and peers), on the core that serves it.
struct Slot {
    kind: ListenerKind,
    ready: bool,
    features: u64,
    auth_peer: Arc<Mutex<Option<PeerAuth>>>,
    caps: Option<Arc<OsdCap>>,
    client: EntityNameT,
    client_addr: EntityAddr,
    gid: ConnId,
    /// Messages refused by backpressure, sent in order on `on_writable`.
    pending: VecDeque<msgr2::Message>,
    /// The newest map epoch shared with this client (Ceph's `Session::last_sent_epoch`).
    map_sent: u32,
}

/// One core: its shard, its connections, and on core 0 the control plane.
pub struct Core {
    id: CoreId,
    common: Arc<Common>,
    shard: Option<Shard>,
    control: Option<Box<Control>>,
    /// Core 0: the listeners to accept on (taken in `on_start`).
    listeners: Option<Vec<RawFd>>,
    conns: FastMap<RConn, Slot>,
    by_gid: FastMap<ConnId, RConn>,
    next_gid: u64,
    next_handoff: usize,
    /// The acceptor `msgr2_acceptor` just built: its listener kind and cephx peer handle.
    fresh: Option<(ListenerKind, Arc<Mutex<Option<PeerAuth>>>)>,
    map: Option<Arc<OsdMap>>,
    up_epoch: u32,
    ticks: u64,
    messages_received: u64,
    out: Delivery,
    /// The ferrostore device ring's fd, watched on this core's ring: the core sleeps until it has completions.
    device_watch: Option<reactor::WatchId>,
    /// Core 0: op dumps being gathered from the cores, by id.
    ops_gathers: FastMap<u64, OpsGather>,
    next_gather: u64,
    /// Our cluster connections to other OSDs owned by this core ([`osd_conn_core`]).
    osds: HashMap<i32, OsdConn>,
    osd_by_conn: FastMap<RConn, i32>,
    /// The PG → core table as of the newest map this core got from core 0 ([`Msg::Map`]).
    routes: Arc<PgRouter>,
    /// Ops and peer messages about a PG that table does not know, from a newer epoch: routed again with the
    /// next table (a guess could send them to the wrong core for good).
    unrouted: VecDeque<Unrouted>,
    /// What the current loop turn did, and this core's long turns ([`crate::turns`]).
    turns: TurnLog,
    /// State of [`Core::inject_peer_reset`]'s random stream (never 0).
    rng: u64,
}

/// A message waiting for a newer route table.
enum Unrouted {
    Op(Box<ClientOp>),
    Peer(i32, ceph_msgs::Message),
}

/// A cluster connection to another OSD (lossless in Ceph's OSD policy: a broken one is reopened and osd-core
/// resends what was not acknowledged).
struct OsdConn {
    conn: Option<RConn>,
    addr: (SocketAddr, u32),
    ready: bool,
    queue: VecDeque<msgr2::Message>,
    /// No new connection before this (after a failure).
    retry_at: Instant,
    /// Attempts that failed before a session was established, since the last one that was (for the log).
    failed_attempts: u32,
}

/// How long to wait before connecting to a peer OSD again after `failed` attempts in a row failed: Ceph's
/// messenger backoff (`ms_initial_backoff` 0.2 s, doubling up to `ms_max_backoff` 15 s).
fn osd_backoff(failed: u32) -> Duration {
    let ms = 200u64.saturating_mul(1 << failed.saturating_sub(1).min(7));
    Duration::from_millis(ms.min(15_000))
}

/// Messages queued per peer OSD while its connection is (re)opening.
const OSD_QUEUE_MAX: usize = 65536;

/// `ferro_osd_inject_peer_resets = n`: whether this message to or from a peer OSD breaks its connection instead
/// (one in n, at random; never for 0), to test that nothing waits for what such a failure loses.
fn inject_peer_reset(n: u64, rng: &mut u64) -> bool {
    if n == 0 {
        return false;
    }
    // xorshift64: no dependency; the stream need not be good, only not constant
    let mut x = *rng;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    *rng = x;
    x.is_multiple_of(n)
}

/// The core that owns our connection to `osd` (one connection per peer and daemon).
fn osd_conn_core(osd: i32, ncores: usize) -> usize {
    (osd.unsigned_abs() as usize) % ncores.max(1)
}

impl Core {
    fn log(&self, msg: &str) {
        eprintln!(
            "{} osd.{} core {} {msg}",
            now_utime(),
            self.common.whoami,
            self.id
        );
    }

    fn map_epoch(&self) -> u32 {
        self.map.as_ref().map_or(0, |m| m.epoch)
    }

    fn new_slot(&mut self, conn: RConn) {
        let Some((kind, auth_peer)) = self.fresh.take() else {
            return;
        };
        self.next_gid += 1;
        let gid = worker::global_conn(self.id, self.next_gid);
        self.by_gid.insert(gid, conn);
        self.conns.insert(
            conn,
            Slot {
                kind,
                ready: false,
                features: 0,
                auth_peer,
                caps: None,
                client: EntityNameT::default(),
                client_addr: EntityAddr::default(),
                gid,
                pending: VecDeque::new(),
                map_sent: 0,
            },
        );
    }

    /// Send on an accepted connection of this core, queueing behind earlier refusals.
    fn send_local(&mut self, ctx: &mut CoreCtx<Msg>, conn: RConn, m: msgr2::Message) {
        let Some(s) = self.conns.get_mut(&conn) else {
            return;
        };
        if !s.pending.is_empty() {
            if s.pending.len() >= PENDING_MAX {
                ctx.close(conn);
                self.conn_gone(ctx, conn, CloseReason::Io(libc::ENOBUFS));
                return;
            }
            s.pending.push_back(m);
            return;
        }
        match ctx.send_message(conn, m) {
            Ok(()) => {}
            Err(SendError::Backpressure(m)) => s.pending.push_back(*m),
            Err(_) => {}
        }
    }

    fn send_to_gid(
        &mut self,
        ctx: &mut CoreCtx<Msg>,
        gid: ConnId,
        make: impl FnOnce(u64) -> ceph_msgs::Message,
    ) {
        let Some(&conn) = self.by_gid.get(&gid) else {
            return;
        };
        let Some(s) = self.conns.get(&conn) else { return };
        let m = make(s.features);
        self.send_local(ctx, conn, to_m2(m));
    }

    /// Hand the shard's outputs to their connections (here or on their core) and to control.
    fn flush(&mut self, ctx: &mut CoreCtx<Msg>) {
        if self.out.is_empty() {
            return;
        }
        let mut out = std::mem::take(&mut self.out);
        for (gid, r) in out.replies.drain(..) {
            let home = worker::home_core(gid);
            if home == self.id {
                self.send_to_gid(ctx, gid, |f| r.encode_message(f));
            } else {
                let _ = ctx.post(home, Msg::Reply(gid, Box::new(r)));
            }
        }
        // The reply vector comes back empty with its capacity: no allocation and growth per op.
        let replies = std::mem::take(&mut out.replies);
        for (gid, n) in out.notifies {
            let home = worker::home_core(gid);
            if home == self.id {
                self.send_to_gid(ctx, gid, |f| n.to_message(f));
            } else {
                let _ = ctx.post(home, Msg::Notify(gid, Box::new(n)));
            }
        }
        for (osd, msg) in out.to_osd {
            self.send_osd(ctx, osd, msg);
        }
        if !out.mon.is_empty() {
            let _ = ctx.post(0, Msg::Mon(out.mon));
        }
        if self.out.replies.is_empty() {
            self.out.replies = replies;
        }
    }

    /// Send a message to `osd` on the cluster network (through the core owning our connection to it).
    fn send_osd(&mut self, ctx: &mut CoreCtx<Msg>, osd: i32, msg: ceph_msgs::Message) {
        let owner = osd_conn_core(osd, ctx.num_cores());
        if owner != self.id {
            let _ = ctx.post(owner, Msg::SendOsd { osd, msg });
            return;
        }
        let Some(addr) = self.map.as_ref().and_then(|m| {
            if !m.is_up(osd) {
                return None;
            }
            let av = m.cluster_addrs.get(osd as usize)?;
            let a = av.0.iter().find(|a| a.is_msgr2()).or_else(|| av.0.first())?;
            Some((a.socket_addr()?, a.nonce))
        }) else {
            // Down or unknown: osd-core sends again what matters in the next interval.
            return;
        };
        let now = Instant::now();
        let oc = self.osds.entry(osd).or_insert_with(|| OsdConn {
            conn: None,
            addr,
            ready: false,
            queue: VecDeque::new(),
            retry_at: now,
            failed_attempts: 0,
        });
        if oc.addr != addr {
            // The peer restarted: the old session is gone.
            if let Some(c) = oc.conn.take() {
                self.osd_by_conn.remove(&c);
                ctx.close(c);
            }
            oc.addr = addr;
            oc.ready = false;
            oc.queue.clear();
            oc.failed_attempts = 0;
            oc.retry_at = now;
        }
        let m = to_m2(msg);
        if oc.ready && oc.queue.is_empty() {
            if let Some(c) = oc.conn {
                if inject_peer_reset(self.common.inject_peer_resets, &mut self.rng) {
                    // the message is lost with the connection, as it could be in a real failure
                    ctx.close(c);
                    self.osd_conn_reset(ctx, c, CloseReason::Io(libc::ECONNRESET));
                    return;
                }
                match ctx.send_message(c, m) {
                    Ok(()) => {}
                    Err(SendError::Backpressure(m)) => oc.queue.push_back(*m),
                    Err(_) => {}
                }
            }
            return;
        }
        if oc.queue.len() < OSD_QUEUE_MAX {
            oc.queue.push_back(m);
        }
        if oc.conn.is_none() && now >= oc.retry_at {
            self.connect_osd(ctx, osd);
        }
    }

    fn connect_osd(&mut self, ctx: &mut CoreCtx<Msg>, osd: i32) {
        let Some(oc) = self.osds.get_mut(&osd) else { return };
        let authz = self
            .common
            .auth
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .build_authorizer(cephx::ENTITY_TYPE_OSD);
        let Ok(authz) = authz else {
            oc.retry_at = Instant::now() + Duration::from_secs(1);
            return;
        };
        self.next_gid += 1;
        let mut cfg = self
            .common
            .msgr_cfg(self.common.cluster_addr, self.next_gid ^ ((self.id as u64) << 40));
        cfg.lossy = false;
        let (sa, nonce) = oc.addr;
        let c = Connection::connector(
            cfg,
            Box::new(CephxAuthorizerClientAuth::new(authz)),
            msgr2::EntityAddr::msgr2(sa, nonce),
            ENTITY_TYPE_OSD,
            Instant::now(),
        );
        match ctx.connect(sa, ConnectProto::Msgr2Conn(Box::new(c)), CONNECT_TIMEOUT) {
            Ok(id) => {
                oc.conn = Some(id);
                oc.ready = false;
                self.osd_by_conn.insert(id, osd);
            }
            Err(_) => {
                oc.failed_attempts += 1;
                oc.retry_at = Instant::now() + osd_backoff(oc.failed_attempts);
            }
        }
    }

    fn osd_conn_ready(&mut self, ctx: &mut CoreCtx<Msg>, conn: RConn) {
        let Some(&osd) = self.osd_by_conn.get(&conn) else {
            return;
        };
        let Some(oc) = self.osds.get_mut(&osd) else { return };
        oc.ready = true;
        oc.failed_attempts = 0;
        while let Some(m) = oc.queue.pop_front() {
            match ctx.send_message(conn, m) {
                Ok(()) => {}
                Err(SendError::Backpressure(m)) => {
                    oc.queue.push_front(*m);
                    return;
                }
                Err(_) => return,
            }
        }
    }

    fn osd_conn_reset(&mut self, ctx: &mut CoreCtx<Msg>, conn: RConn, reason: CloseReason) {
        let Some(osd) = self.osd_by_conn.remove(&conn) else {
            return;
        };
        let Some(oc) = self.osds.get_mut(&osd).filter(|oc| oc.conn == Some(conn)) else {
            return;
        };
        oc.conn = None;
        if !oc.ready {
            // No session was established, so nothing went out on it: the queue is still all there is to send
            // (a replica's commit replies among it, which nothing would send again) and the tick retries.
            oc.failed_attempts += 1;
            let n = oc.failed_attempts;
            oc.retry_at = Instant::now() + osd_backoff(n);
            if n.is_power_of_two() {
                self.log(&format!(
                    "connecting to osd.{osd} failed ({reason:?}; {n} attempt(s)), retrying"
                ));
            }
            return;
        }
        oc.ready = false;
        oc.queue.clear();
        oc.retry_at = Instant::now();
        self.log(&format!("connection to osd.{osd} reset ({reason:?})"));
        // What went out on it may be lost: osd-core resends what osd.N did not acknowledge.
        for core in 0..ctx.num_cores() {
            let _ = ctx.post(core, Msg::PeerReset(osd));
        }
        // A session that worked is reopened at once, with or without something to send (Ceph's lossless peer
        // reconnects the same way): osd.N resends what it has not had answered when it sees the new session
        // (our commit replies lost on the old one among it), so the resend cannot race a reply still going
        // out on the dead session, as one triggered by N seeing the old session close can.
        self.connect_osd(ctx, osd);
    }

    /// Park a message until the route table reaches its epoch (bounded like osd-core's waiting_for_map: the
    /// oldest goes, its sender resends).
    fn hold_unrouted(&mut self, u: Unrouted) {
        if self.unrouted.len() >= osd_core::MAX_WAITING_FOR_MAP {
            self.unrouted.pop_front();
        }
        self.unrouted.push_back(u);
    }

    fn route_peer(&mut self, ctx: &mut CoreCtx<Msg>, from: i32, m: ceph_msgs::Message) {
        let Some(spgid) = osd_core::route_peer_message(&m) else {
            return;
        };
        let epoch = osd_core::peer_message_epoch(&m).unwrap_or(0);
        let Some(owner) = self.routes.route_at(&spgid, epoch) else {
            self.hold_unrouted(Unrouted::Peer(from, m));
            return;
        };
        let owner = owner as usize;
        if owner == self.id {
            self.turns.notes.peer_msgs += 1;
            if let Some(sh) = self.shard.as_mut() {
                sh.peer(from, m, &mut self.out);
            }
            self.flush(ctx);
        } else {
            let _ = ctx.post(owner, Msg::Peer { from, msg: m });
        }
    }

    fn route_op(&mut self, ctx: &mut CoreCtx<Msg>, op: ClientOp) {
        let Some(owner) = self.routes.route_at(&op.msg.pgid, op.msg.osdmap_epoch) else {
            self.hold_unrouted(Unrouted::Op(Box::new(op)));
            return;
        };
        let owner = owner as usize;
        if owner == self.id {
            self.turns.notes.client_ops += 1;
            if let Some(sh) = self.shard.as_mut() {
                sh.client_op(op, &mut self.out);
            }
            self.flush(ctx);
        } else {
            let _ = ctx.post(owner, Msg::Op(Box::new(op)));
        }
    }

    /// Ceph's `maybe_share_map`: a client op from an older epoch gets our map first, so the client resends
    /// ops this OSD drops (misdirected, or from before the PG's primary changed) without waiting for its own
    /// map request (librados asks the monitor only when it sees laggy ops, ~10 s later).
    fn maybe_share_map(&mut self, ctx: &mut CoreCtx<Msg>, conn: RConn, op_epoch: u32) {
        let Some(map) = self.map.clone() else { return };
        let Some(s) = self.conns.get_mut(&conn) else {
            return;
        };
        if op_epoch >= map.epoch || s.map_sent >= map.epoch {
            return;
        }
        s.map_sent = map.epoch;
        let f = s.features;
        let mut maps = BTreeMap::new();
        maps.insert(map.epoch, map.encoded(f));
        let m = ceph_msgs::MOSDMap {
            fsid: map.fsid.0,
            incremental_maps: BTreeMap::new(),
            maps,
            oldest_map: map.epoch,
            newest_map: map.epoch,
            gap_removed_snaps: BTreeMap::new(),
        };
        self.send_local(ctx, conn, to_m2(m.to_message(f)));
    }

    fn conn_gone(&mut self, ctx: &mut CoreCtx<Msg>, conn: RConn, reason: CloseReason) {
        let Some(s) = self.conns.remove(&conn) else { return };
        self.by_gid.remove(&s.gid);
        if s.kind == ListenerKind::Public {
            for core in 0..ctx.num_cores() {
                let _ = ctx.post(core, Msg::ClientReset(s.gid));
            }
        } else if s.ready && s.client.ty == ENTITY_TYPE_OSD {
            // A peer's session to us broke: what it sent on it may be lost, and it resends nothing that
            // answers us (a replica's commit replies, recovery replies). Our side resends what that peer has
            // not acknowledged, as for a reset of our own connection to it.
            let osd = s.client.num as i32;
            self.log(&format!("session from osd.{osd} closed ({reason:?})"));
            for core in 0..ctx.num_cores() {
                let _ = ctx.post(core, Msg::PeerReset(osd));
            }
        }
    }

    fn peer_message(&mut self, ctx: &mut CoreCtx<Msg>, conn: RConn, m: msgr2::Message) {
        self.messages_received += 1;
        let Some(s) = self.conns.get(&conn) else { return };
        match m.msg_type {
            MSG_OSD_OP => {
                let m = from_m2(m);
                match MOSDOp::decode_message(&m) {
                    Ok(op) => {
                        self.maybe_share_map(ctx, conn, op.osdmap_epoch);
                        let Some(s) = self.conns.get(&conn) else { return };
                        let Some(caps) = s.caps.clone() else { return };
                        let cop = ClientOp {
                            conn: s.gid,
                            client: s.client,
                            client_addr: s.client_addr,
                            caps,
                            features: s.features,
                            msg: op,
                        };
                        self.route_op(ctx, cop);
                    }
                    Err(e) => self.log(&format!("undecodable MOSDOp: {e}")),
                }
            }
            osd_msg::COMMAND => {
                let m = from_m2(m);
                if let Ok(c) = MCommand::from_message(&m) {
                    // `ceph tell osd.N ...`: the same (read-only) commands as the admin socket, run by control.
                    let _ = ctx.post(
                        0,
                        Msg::Tell {
                            conn: s.gid,
                            tid: m.tid,
                            cmd: c.cmd.join(""),
                            features: s.features,
                        },
                    );
                }
            }
            osd_msg::OSD_PING => {
                let m = from_m2(m);
                if let Ok(p) = MOSDPing::from_message(&m)
                    && p.op == ping_op::PING
                {
                    self.turns.notes.pings += 1;
                    // Answer as ceph-osd does: echo the sender's stamps, add our monotonic send time and up_from.
                    let reply = MOSDPing {
                        fsid: Uuid(self.common.cluster_fsid),
                        map_epoch: self.map_epoch(),
                        op: ping_op::PING_REPLY,
                        ping_stamp: p.ping_stamp,
                        up_from: self.up_epoch,
                        mono_ping_stamp: p.mono_ping_stamp,
                        mono_send_stamp: SignedSpan::from_nanos(
                            self.common.mono_base.elapsed().as_nanos() as i64
                        ),
                        delta_ub: None,
                        padding: 0,
                    };
                    let f = s.features;
                    self.send_local(ctx, conn, to_m2(reply.to_message(f)));
                }
            }
            // Replication, peering, recovery: to the core of the PG the message is about.
            _ => {
                if s.client.ty == ENTITY_TYPE_OSD {
                    let from = s.client.num as i32;
                    if inject_peer_reset(self.common.inject_peer_resets, &mut self.rng) {
                        ctx.close(conn);
                        self.conn_gone(ctx, conn, CloseReason::Io(libc::ECONNRESET));
                        return;
                    }
                    self.route_peer(ctx, from, from_m2(m));
                }
            }
        }
    }
}

impl Service for Core {
    type Msg = Msg;

    fn on_start(&mut self, ctx: &mut CoreCtx<Msg>) {
        if let Some(fds) = self.listeners.take() {
            for fd in fds {
                ctx.listen_fd(fd, ListenProto::Msgr2ByService);
            }
        }
        ctx.set_timer(CORE_TICK, T_CORE);
        if let Some(sh) = self.shard.as_mut() {
            // The device submits on this core's ring (or, FERRO_OSD_DEVICE_RING=own, a multishot poll on its own
            // ring): every completion wakes this core, and on_poll reaps it in the same turn.
            self.device_watch = sh.attach_to_core(ctx);
        }
        if let Some(c) = self.control.as_mut() {
            c.start(ctx);
            ctx.set_timer(CONTROL_TICK, T_CONTROL);
        }
    }

    fn msgr2_acceptor(&mut self, listener: ListenerId, peer: SocketAddr) -> Option<Connection> {
        let kind = *self.common.listener_kinds.get(listener.0 as usize)?;
        let mut cfg = self.common.msgr_cfg(
            self.common.addr_of(kind),
            self.next_gid ^ ((self.id as u64) << 40),
        );
        cfg.auto_accept = true;
        let mut sa = CephxServerAuth::new(self.common.provider.clone(), self.common.keys.clone());
        sa.methods = vec![msgr2::auth::AUTH_METHOD_CEPHX];
        self.fresh = Some((kind, sa.peer.clone()));
        let mut conn = Connection::acceptor(cfg, Box::new(sa), Instant::now());
        conn.set_peer_socket_addr(peer);
        Some(conn)
    }

    fn on_accept(&mut self, ctx: &mut CoreCtx<Msg>, _l: ListenerId, conn: RConn, _peer: SocketAddr) {
        // Spread connections over the cores; the op of a PG owned elsewhere crosses the mesh.
        let n = ctx.num_cores();
        let to = self.next_handoff % n;
        self.next_handoff = self.next_handoff.wrapping_add(1);
        if to != self.id && ctx.hand_off(conn, to).is_ok() {
            self.fresh = None;
            return;
        }
        self.new_slot(conn);
    }

    fn on_handoff(&mut self, _ctx: &mut CoreCtx<Msg>, conn: RConn, _peer: SocketAddr, _from: CoreId) {
        self.new_slot(conn);
    }

    fn on_connected(&mut self, ctx: &mut CoreCtx<Msg>, conn: RConn, peer: Option<&msgr2::PeerInfo>) {
        if let Some(c) = self.control.as_mut()
            && c.owns(conn)
        {
            c.on_connected(ctx, conn);
            return;
        }
        if self.osd_by_conn.contains_key(&conn) {
            self.osd_conn_ready(ctx, conn);
            return;
        }
        let (Some(s), Some(p)) = (self.conns.get_mut(&conn), peer) else {
            return;
        };
        s.ready = true;
        s.features = p.features;
        s.client = EntityNameT {
            ty: p.peer_type,
            num: p.peer_num,
        };
        s.client_addr = p.peer_addrs.0.first().map(to_denc_addr).unwrap_or_default();
        let pa = s.auth_peer.lock().unwrap_or_else(PoisonError::into_inner).clone();
        let text = pa.and_then(|a| a.caps.caps_text().ok()).unwrap_or_default();
        s.caps = Some(Arc::new(OsdCap::parse(&text).unwrap_or_default()));
        if s.kind == ListenerKind::Cluster && p.peer_type == ENTITY_TYPE_OSD {
            // A new session from osd.N: it opens one when its last broke, and what it sent on that one may be
            // lost — its commit replies to our writes, which it does not send again. Our resends (after this
            // in every core's queue) are answered on this session, which N is now the only one to use.
            let osd = p.peer_num as i32;
            for core in 0..ctx.num_cores() {
                let _ = ctx.post(core, Msg::PeerReset(osd));
            }
        }
    }

    fn on_message(&mut self, ctx: &mut CoreCtx<Msg>, conn: RConn, msg: msgr2::Message) {
        if let Some(c) = self.control.as_mut()
            && c.owns(conn)
        {
            let t0 = Instant::now();
            c.on_message(ctx, conn, from_m2(msg));
            self.after_control(ctx);
            self.turns.notes.control_msgs += 1;
            add_since(&mut self.turns.notes.control_msgs_us, t0);
            return;
        }
        if let Some(&osd) = self.osd_by_conn.get(&conn) {
            self.messages_received += 1;
            if inject_peer_reset(self.common.inject_peer_resets, &mut self.rng) {
                ctx.close(conn);
                self.osd_conn_reset(ctx, conn, CloseReason::Io(libc::ECONNRESET));
                return;
            }
            self.route_peer(ctx, osd, from_m2(msg));
            return;
        }
        self.peer_message(ctx, conn, msg);
    }

    fn on_msgr2_event(&mut self, ctx: &mut CoreCtx<Msg>, conn: RConn, ev: msgr2::Event) {
        if let Some(c) = self.control.as_mut()
            && c.owns(conn)
        {
            c.on_msgr2_event(ctx, conn, ev);
            self.after_control(ctx);
        }
    }

    fn on_writable(&mut self, ctx: &mut CoreCtx<Msg>, conn: RConn) {
        if self.osd_by_conn.contains_key(&conn) {
            self.osd_conn_ready(ctx, conn);
            return;
        }
        let Some(s) = self.conns.get_mut(&conn) else {
            return;
        };
        while let Some(m) = s.pending.pop_front() {
            match ctx.send_message(conn, m) {
                Ok(()) => {}
                Err(SendError::Backpressure(m)) => {
                    s.pending.push_front(*m);
                    return;
                }
                Err(_) => {
                    s.pending.clear();
                    return;
                }
            }
        }
    }

    fn on_reset(&mut self, ctx: &mut CoreCtx<Msg>, conn: RConn, reason: CloseReason) {
        if let Some(c) = self.control.as_mut()
            && c.owns(conn)
        {
            c.on_reset(ctx, conn, reason);
            self.after_control(ctx);
            return;
        }
        if self.osd_by_conn.contains_key(&conn) {
            self.osd_conn_reset(ctx, conn, reason);
            return;
        }
        self.conn_gone(ctx, conn, reason);
    }

    fn on_timer(&mut self, ctx: &mut CoreCtx<Msg>, _t: TimerId, token: u64) {
        match token {
            T_CORE => {
                ctx.set_timer(CORE_TICK, T_CORE);
                self.ticks += 1;
                let now = Instant::now();
                if self.ticks.is_multiple_of(10) {
                    let r = self.turns.report(&ctx.stats());
                    let _ = ctx.post(0, Msg::Turns(Box::new(r)));
                }
                let retry: Vec<i32> = self
                    .osds
                    .iter()
                    .filter(|(_, o)| o.conn.is_none() && !o.queue.is_empty() && now >= o.retry_at)
                    .map(|(k, _)| *k)
                    .collect();
                for osd in retry {
                    self.connect_osd(ctx, osd);
                }
                if let Some(sh) = self.shard.as_mut() {
                    sh.tick(&mut self.out);
                    if self.ticks.is_multiple_of(10) {
                        let mut st = sh.snapshot();
                        st.messages_received = self.messages_received;
                        let _ = ctx.post(0, Msg::Stats(Box::new(st)));
                    }
                }
                self.flush(ctx);
                add_since(&mut self.turns.notes.core_tick_us, now);
            }
            T_CONTROL => {
                let t0 = Instant::now();
                ctx.set_timer(CONTROL_TICK, T_CONTROL);
                if let Some(c) = self.control.as_mut() {
                    c.tick(ctx);
                }
                self.after_control(ctx);
                add_since(&mut self.turns.notes.control_tick_us, t0);
            }
            _ => {}
        }
    }

    fn on_cross_core(&mut self, ctx: &mut CoreCtx<Msg>, from: CoreId, msg: Msg) {
        match msg {
            Msg::Map {
                map,
                up_epoch,
                routes,
                pending,
            } => {
                let t0 = Instant::now();
                // Peers that went down: drop their connections (a restarted one gets a new address).
                let down: Vec<i32> = self.osds.keys().filter(|&&o| !map.is_up(o)).copied().collect();
                for o in down {
                    if let Some(oc) = self.osds.remove(&o)
                        && let Some(c) = oc.conn
                    {
                        self.osd_by_conn.remove(&c);
                        ctx.close(c);
                    }
                }
                self.map = Some(map.clone());
                self.up_epoch = up_epoch;
                self.routes = routes.clone();
                if let Some(sh) = self.shard.as_mut() {
                    if pending > map.epoch {
                        sh.maps_pending(pending, &mut self.out);
                    }
                    sh.set_map(map, routes, &mut self.out);
                }
                self.flush(ctx);
                for u in std::mem::take(&mut self.unrouted) {
                    match u {
                        Unrouted::Op(op) => self.route_op(ctx, *op),
                        Unrouted::Peer(from, m) => self.route_peer(ctx, from, m),
                    }
                }
                add_since(&mut self.turns.notes.map_us, t0);
            }
            Msg::Peer { from, msg } => {
                self.turns.notes.peer_msgs += 1;
                if let Some(sh) = self.shard.as_mut() {
                    sh.peer(from, msg, &mut self.out);
                }
                self.flush(ctx);
            }
            Msg::SendOsd { osd, msg } => self.send_osd(ctx, osd, msg),
            Msg::PeerReset(osd) => {
                if let Some(sh) = self.shard.as_mut() {
                    sh.peer_reset(osd, &mut self.out);
                }
                self.flush(ctx);
            }
            Msg::Mon(reqs) => {
                if let Some(c) = self.control.as_mut() {
                    c.mon_requests(ctx, reqs);
                }
            }
            Msg::Digest(mut job, tx) => {
                let t0 = Instant::now();
                let r = match self.shard.as_mut().map(|sh| sh.object_digest_step(&mut job)) {
                    Some(Ok(Some(j))) => Some((0, serde_json::to_string_pretty(&j).unwrap_or_default())),
                    Some(Ok(None)) => None,
                    Some(Err(e)) => Some((-5, serde_json::json!({ "error": e }).to_string())),
                    None => Some((-5, "{\"error\": \"no shard\"}".into())),
                };
                match r {
                    Some(r) => {
                        let _ = tx.send(r);
                    }
                    // the next slice in a later turn, after what arrived meanwhile (heartbeats, ops)
                    None => {
                        let _ = ctx.post(self.id, Msg::Digest(job, tx));
                    }
                }
                add_since(&mut self.turns.notes.admin_us, t0);
            }

            Msg::Op(op) => {
                self.turns.notes.client_ops += 1;
                if let Some(sh) = self.shard.as_mut() {
                    sh.client_op(*op, &mut self.out);
                }
                self.flush(ctx);
            }
            Msg::Reply(gid, r) => self.send_to_gid(ctx, gid, |f| r.encode_message(f)),
            Msg::Notify(gid, n) => self.send_to_gid(ctx, gid, |f| n.to_message(f)),
            Msg::ClientReset(gid) => {
                if let Some(sh) = self.shard.as_mut() {
                    sh.client_reset(gid, &mut self.out);
                }
                self.flush(ctx);
            }
            Msg::TellReply { conn, msg } => {
                if let Some(&c) = self.by_gid.get(&conn) {
                    self.send_local(ctx, c, to_m2(msg));
                }
            }
            Msg::Stats(st) => {
                if let Some(c) = self.control.as_mut() {
                    c.set_stats(from, *st);
                }
            }
            Msg::Turns(r) => {
                if let Some(c) = self.control.as_mut() {
                    c.turn_board.set(from, *r);
                }
            }
            Msg::Tell {
                conn,
                tid,
                cmd,
                features,
            } => {
                let t0 = Instant::now();
                let reply = AdminReply::Tell { conn, tid, features };
                if let Some(list) = ops_request(&cmd) {
                    self.gather_ops(ctx, list, reply);
                } else if let Some(c) = self.control.as_mut() {
                    let answer = c.admin(&cmd, 0);
                    self.admin_reply(ctx, reply, answer);
                }
                add_since(&mut self.turns.notes.admin_us, t0);
            }
            Msg::DumpOps { id, list } => {
                let t0 = Instant::now();
                let ops = self.shard.as_ref().map(|s| s.dump_ops(list)).unwrap_or_default();
                let _ = ctx.post(0, Msg::OpsPart { id, ops });
                add_since(&mut self.turns.notes.admin_us, t0);
            }
            Msg::OpsPart { id, ops } => self.ops_part(ctx, id, ops),
            Msg::Admin(cmd, tx) => {
                let t0 = Instant::now();
                // `ferro object-digest <pgid>` runs on the PG's core; everything else here.
                if let Some(spgid) = digest_request(&cmd) {
                    let owner = self.routes.route(&spgid) as usize;
                    let _ = ctx.post(owner, Msg::Digest(Box::new(worker::DigestJob::new(spgid)), tx));
                } else if let Some(list) = ops_request(&cmd) {
                    self.gather_ops(ctx, list, AdminReply::Socket(tx));
                } else if let Some(c) = self.control.as_mut() {
                    let _ = tx.send(c.admin(&cmd, 0));
                }
                add_since(&mut self.turns.notes.admin_us, t0);
            }
        }
    }

    fn on_poll(&mut self, ctx: &mut CoreCtx<Msg>) {
        let Some(sh) = self.shard.as_mut() else { return };
        match sh.poll(&mut self.out) {
            Ok(_) => {
                sh.submit_pending();
                // IO in flight completes on the device ring, whose fd this core watches: the core sleeps until
                // then (a spinning core on a shared machine takes the CPU from whoever would complete the IO).
                // Busy polling only when asked (dedicated CPUs), or when the store has work in progress without
                // IO in flight (a background checkpoint step that the next poll submits).
                if sh.busy() && (self.common.busy_poll || !sh.device_wakes() || sh.device_in_flight() == 0) {
                    ctx.keep_polling();
                }
            }
            Err(e) => {
                self.log(&e);
                STOP.store(true, Ordering::SeqCst);
            }
        }
        self.flush(ctx);
    }

    fn on_stop(&mut self, _ctx: &mut CoreCtx<Msg>) {
        if let Some(sh) = self.shard.take() {
            sh.shutdown();
        }
    }

    fn on_turn_end(&mut self, ctx: &mut CoreCtx<Msg>, turn: &TurnInfo) {
        if self.turns.notes.client_ops > 0 || self.turns.notes.peer_msgs > 0 {
            // holds off malloc_trim while ops run (memory.rs)
            crate::memory::note_ops(ctx.now());
        }
        let node_bytes = self.shard.as_mut().map(|s| s.store_stats().node_bytes);
        self.turns.end(turn, node_bytes);
    }
}

impl Core {
    /// Core 0: ask every core for its ops of `list`; [`Core::ops_part`] answers once all did.
    fn gather_ops(&mut self, ctx: &mut CoreCtx<Msg>, list: OpsList, reply: AdminReply) {
        self.next_gather += 1;
        let id = self.next_gather;
        let n = ctx.num_cores();
        self.ops_gathers.insert(
            id,
            OpsGather {
                list,
                ops: Vec::new(),
                left: n,
                reply,
            },
        );
        for core in 0..n {
            if core == self.id {
                let ops = self.shard.as_ref().map(|s| s.dump_ops(list)).unwrap_or_default();
                self.ops_part(ctx, id, ops);
            } else if ctx.post(core, Msg::DumpOps { id, list }).is_err() {
                self.ops_part(ctx, id, Vec::new());
            }
        }
    }

    fn ops_part(&mut self, ctx: &mut CoreCtx<Msg>, id: u64, ops: Vec<serde_json::Value>) {
        let Some(g) = self.ops_gathers.get_mut(&id) else {
            return;
        };
        g.ops.extend(ops);
        g.left = g.left.saturating_sub(1);
        if g.left > 0 {
            return;
        }
        let Some(g) = self.ops_gathers.remove(&id) else {
            return;
        };
        let j = merge_ops(g.list, g.ops);
        let answer = (0, serde_json::to_string_pretty(&j).unwrap_or_default());
        self.admin_reply(ctx, g.reply, answer);
    }

    /// Deliver an admin command's answer (admin socket, or MCommandReply for `ceph tell`).
    fn admin_reply(&mut self, ctx: &mut CoreCtx<Msg>, reply: AdminReply, (r, out): (i32, String)) {
        match reply {
            AdminReply::Socket(tx) => {
                let _ = tx.send((r, out));
            }
            AdminReply::Tell { conn, tid, features } => {
                let reply = MCommandReply {
                    r,
                    rs: String::new(),
                    data: Bytes::from(out),
                };
                let msg = reply.to_message(features).with_tid(tid);
                let home = worker::home_core(conn);
                if home == self.id {
                    if let Some(&c) = self.by_gid.get(&conn) {
                        self.send_local(ctx, c, to_m2(msg));
                    }
                } else {
                    let _ = ctx.post(home, Msg::TellReply { conn, msg });
                }
            }
        }
    }

    /// Control queued a new map for the cores: nothing else to do here (maps travel as messages).
    fn after_control(&mut self, _ctx: &mut CoreCtx<Msg>) {}
}

/// Core 0's control plane.
pub struct Control {
    common: Arc<Common>,
    opts: OsdOptions,
    dd: DataDir,
    whoami: i32,
    nonce: u32,
    auth: Arc<Mutex<MonAuthClient>>,
    have_keys: bool,
    monc: MonClient<OsdMap>,
    /// Our mon and mgr connections.
    mon_conns: HashMap<monclient::ConnId, RConn>,
    ctl_conns: HashMap<RConn, CtlKind>,
    seed_counter: u64,
    // membership
    boot_sent: Option<Instant>,
    up_epoch: u32,
    alive_sent_for: u32,
    map_received_at: Option<Instant>,
    /// Last epoch sent to the cores.
    map_sent: u32,
    /// Whether the mon session was started (after every core read its stored map).
    monc_started: bool,
    /// Epochs from the mon client not yet handed to the cores (they wait for the route table), oldest first.
    maps_to_send: VecDeque<OsdMap>,
    /// The stored epoch the OSD started from (0: none), for the catch-up log lines.
    catch_up_from: u32,
    /// The PG → core table (built once every core listed its stored PGs; advanced with every map sent).
    router: Option<PgRouter>,
    // mgr
    mgr_conn: Option<RConn>,
    mgr_ready: bool,
    /// The perf counter schema went to this mgr session.
    mgr_declared: bool,
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
    /// Latest statistics of every core.
    shard_stats: Vec<Option<ShardStats>>,
    /// Every core's loop turn statistics and the newest long turns.
    turn_board: TurnBoard,
    stopping_since: Option<Instant>,
    hb: Heartbeats<RConn>,
    next_hb_tick: Instant,
    warned_pools: std::collections::BTreeSet<i64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Role {
    Mon(monclient::ConnId),
    Mgr,
    /// A heartbeat connection to osd.N (front: public side).
    Hb {
        osd: i32,
        front: bool,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct CtlKind {
    role: Role,
    ready: bool,
}

impl Control {
    fn log(&self, msg: &str) {
        eprintln!("{} osd.{} {msg}", now_utime(), self.whoami);
    }

    fn owns(&self, conn: RConn) -> bool {
        self.ctl_conns.contains_key(&conn)
    }

    fn is_up(&self) -> bool {
        self.up_epoch > 0
    }

    fn my_addrvec(&self, a: SocketAddr) -> EntityAddrvec {
        EntityAddrvec::new(vec![EntityAddr::new(msgr2::addr::ADDR_TYPE_MSGR2, a, self.nonce)])
    }

    fn start(&mut self, ctx: &mut CoreCtx<Msg>) {
        self.log(&format!(
            "starting: public {} cluster {} hb {} / {}, {} cores on the reactor ({})",
            self.common.public_addr,
            self.common.cluster_addr,
            self.common.hb_front_addr,
            self.common.hb_back_addr,
            ctx.num_cores(),
            ctx.ring_setup()
        ));
        self.maybe_start_monc(ctx);
    }

    /// Start the mon session once every core has read its stored map: the osdmap subscription starts after the
    /// oldest of them (Ceph's `osdmap_subscribe(superblock.newest_map + 1)`), so every epoch missed while down
    /// arrives and is handed to the cores in order.
    fn maybe_start_monc(&mut self, ctx: &mut CoreCtx<Msg>) {
        if self.monc_started {
            return;
        }
        let oldest = {
            let stored = self
                .common
                .stored_maps
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            if !stored.iter().all(Option::is_some) {
                return;
            }
            stored.iter().flatten().flatten().min_by_key(|m| m.epoch).cloned()
        };
        self.monc_started = true;
        self.monc.keep_osdmap_epochs();
        if let Some(m) = oldest {
            self.log(&format!(
                "stored osdmap epoch {}: subscribing to osdmap from epoch {}",
                m.epoch,
                m.epoch + 1
            ));
            self.catch_up_from = m.epoch;
            self.monc.set_osdmap(m.clone());
            // the cores start from the stored epoch itself (PGs load with that epoch's placement)
            self.maps_to_send.push_back(m);
            self.send_map_to_cores(ctx);
        }
        if let Err(e) = self.monc.start(Instant::now()) {
            self.log(&format!("mon client: {e}"));
            STOP.store(true, Ordering::SeqCst);
        }
        self.pump_monc(ctx);
    }

    fn tick(&mut self, ctx: &mut CoreCtx<Msg>) {
        let now = Instant::now();
        self.maybe_start_monc(ctx);
        if STOP.load(Ordering::SeqCst) && self.stopping_since.is_none() {
            self.log("shutting down: marking myself down");
            self.mark_me_down(ctx);
            self.stopping_since = Some(now);
        }
        if let Some(t) = self.stopping_since
            && t.elapsed() > Duration::from_millis(1500)
        {
            ctx.stop_all();
            return;
        }
        self.monc.handle_timeout(now);
        self.pump_monc(ctx);
        if self.router.is_none() {
            // a map that came before every core listed its stored PGs
            self.send_map_to_cores(ctx);
        }
        if now >= self.next_auth_check {
            self.next_auth_check = now + Duration::from_secs(5);
            self.send_auth_requests(ctx);
        }
        if self.is_up() {
            if now >= self.next_beacon {
                self.next_beacon = now + Duration::from_secs(self.opts.beacon_interval_s.max(1));
                self.send_beacon(ctx);
            }
            if self.mgr_conn.is_none()
                && now >= self.mgr_retry_at
                && let Some(a) = self.mgr_addr
            {
                self.mgr_retry_at = now + Duration::from_secs(2);
                self.connect_mgr(ctx, a);
            }
            if now >= self.next_pgstats {
                self.next_pgstats = now + Duration::from_secs(self.opts.mon_report_interval_s.clamp(1, 60));
                self.send_pg_stats(ctx);
            }
            if now >= self.next_report {
                self.next_report = now + self.stats_period;
                self.send_mgr_report(ctx);
            }
            if now >= self.next_hb_tick && self.stopping_since.is_none() {
                self.next_hb_tick = now + Duration::from_millis(500);
                let mut acts = Vec::new();
                self.hb.tick(now, &mut acts);
                self.hb_apply(ctx, acts);
            }
        }
    }

    // ---- heartbeats ----

    fn hb_apply(&mut self, ctx: &mut CoreCtx<Msg>, acts: Vec<HbAction<RConn>>) {
        for a in acts {
            match a {
                HbAction::Connect { osd, front, addr } => {
                    let Some(sa) = addr.socket_addr() else { continue };
                    let authz = self
                        .auth
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .build_authorizer(cephx::ENTITY_TYPE_OSD);
                    let Ok(authz) = authz else { continue };
                    self.seed_counter += 1;
                    let mine = if front {
                        self.common.hb_front_addr
                    } else {
                        self.common.hb_back_addr
                    };
                    let mut cfg = self.common.msgr_cfg(mine, self.seed_counter);
                    // Heartbeat sessions are lossy clients in ceph-osd: a broken one is simply reopened.
                    cfg.lossy = true;
                    let c = Connection::connector(
                        cfg,
                        Box::new(CephxAuthorizerClientAuth::new(authz)),
                        msgr2::EntityAddr::msgr2(sa, addr.nonce),
                        ENTITY_TYPE_OSD,
                        Instant::now(),
                    );
                    if let Ok(id) = ctx.connect(sa, ConnectProto::Msgr2Conn(Box::new(c)), CONNECT_TIMEOUT) {
                        self.hb.connecting(osd, front, id);
                        self.ctl_conns.insert(
                            id,
                            CtlKind {
                                role: Role::Hb { osd, front },
                                ready: false,
                            },
                        );
                    }
                }
                HbAction::Close(c) => {
                    self.ctl_conns.remove(&c);
                    ctx.close(c);
                }
                HbAction::Ping(c) => {
                    if !self.ctl_conns.get(&c).is_some_and(|k| k.ready) {
                        continue;
                    }
                    let mono = SignedSpan::from_nanos(self.common.mono_base.elapsed().as_nanos() as i64);
                    let mut p = MOSDPing {
                        fsid: Uuid(self.dd.cluster_fsid),
                        map_epoch: self.map_epoch(),
                        op: ping_op::PING,
                        ping_stamp: now_utime(),
                        up_from: self.up_epoch,
                        mono_ping_stamp: mono,
                        mono_send_stamp: mono,
                        delta_ub: None,
                        padding: 0,
                    };
                    // Padded to osd_heartbeat_min_size, as ceph-osd pads its pings.
                    let base = p.to_message(PACIFIC_FEATURES).front.len() as u32;
                    p.padding = self.hb.cfg.min_size.saturating_sub(base);
                    self.send(ctx, c, p.to_message(PACIFIC_FEATURES));
                }
                HbAction::Report {
                    osd,
                    addrs,
                    failed,
                    failed_for,
                } => {
                    self.log(&format!(
                        "{} osd.{osd} (no heartbeat reply for {failed_for} s)",
                        if failed {
                            "reporting failure of"
                        } else {
                            "cancelling failure report of"
                        }
                    ));
                    let m = MOSDFailure {
                        paxos: PaxosHeader {
                            version: u64::from(self.map_epoch()),
                            ..PaxosHeader::default()
                        },
                        fsid: Uuid(self.dd.cluster_fsid),
                        target_osd: osd,
                        target_addrs: addrs,
                        epoch: self.map_epoch(),
                        flags: if failed { failure_flags::FAILED } else { 0 },
                        failed_for: failed_for as i32,
                    };
                    self.send_mon(ctx, m.to_message(PACIFIC_FEATURES));
                }
            }
        }
    }

    // ---- connections ----

    fn on_connected(&mut self, ctx: &mut CoreCtx<Msg>, conn: RConn) {
        let Some(k) = self.ctl_conns.get_mut(&conn) else {
            return;
        };
        k.ready = true;
        match k.role {
            Role::Mon(mid) => {
                self.monc.handle_connected(mid, Instant::now());
                self.pump_monc(ctx);
            }
            Role::Mgr => self.mgr_connected(ctx),
            Role::Hb { .. } => {}
        }
    }

    fn on_message(&mut self, ctx: &mut CoreCtx<Msg>, conn: RConn, m: ceph_msgs::Message) {
        let Some(k) = self.ctl_conns.get(&conn).copied() else {
            return;
        };
        match k.role {
            Role::Mon(mid) => {
                self.monc.handle_message(mid, &m, Instant::now());
                self.pump_monc(ctx);
            }
            Role::Mgr => self.mgr_message(&m),
            Role::Hb { .. } => {
                if m.msg_type == osd_msg::OSD_PING
                    && let Ok(p) = MOSDPing::from_message(&m)
                    && p.op == ping_op::PING_REPLY
                {
                    let mut acts = Vec::new();
                    self.hb.reply(conn, Instant::now(), &mut acts);
                    self.hb_apply(ctx, acts);
                }
            }
        }
    }

    fn on_msgr2_event(&mut self, ctx: &mut CoreCtx<Msg>, conn: RConn, ev: msgr2::Event) {
        if let msgr2::Event::KeepaliveAck { .. } = ev
            && let Some(CtlKind {
                role: Role::Mon(mid), ..
            }) = self.ctl_conns.get(&conn).copied()
        {
            self.monc.handle_keepalive_ack(mid, Instant::now());
            self.pump_monc(ctx);
        }
    }

    fn on_reset(&mut self, ctx: &mut CoreCtx<Msg>, conn: RConn, reason: CloseReason) {
        let Some(k) = self.ctl_conns.remove(&conn) else {
            return;
        };
        let now = Instant::now();
        match k.role {
            Role::Hb { .. } => self.hb.reset(conn),
            Role::Mon(mid) => {
                self.log(&format!("mon connection closed: {reason:?}"));
                self.mon_conns.remove(&mid);
                if k.ready {
                    self.monc.handle_disconnected(mid, now);
                } else {
                    self.monc.handle_connect_failed(mid, now);
                }
                self.pump_monc(ctx);
            }
            Role::Mgr => {
                self.log(&format!("mgr connection closed: {reason:?}"));
                if self.mgr_conn == Some(conn) {
                    self.mgr_conn = None;
                    self.mgr_ready = false;
                    self.mgr_retry_at = now + Duration::from_secs(1);
                }
            }
        }
    }

    fn send(&mut self, ctx: &mut CoreCtx<Msg>, conn: RConn, m: ceph_msgs::Message) {
        if let Err(e) = ctx.send_message(conn, to_m2(m)) {
            let what = match e {
                SendError::Backpressure(_) => "backpressure",
                SendError::NotConnected(_) => "not connected",
                SendError::WrongProto(_) => "wrong protocol",
            };
            self.log(&format!("control message dropped: {what}"));
        }
    }

    // ---- mon session ----

    fn send_mon(&mut self, ctx: &mut CoreCtx<Msg>, m: ceph_msgs::Message) {
        let _ = self.monc.send_message(m);
        self.pump_monc(ctx);
    }

    fn map_epoch(&self) -> u32 {
        self.monc.osdmap().map_or(0, |m| m.epoch)
    }

    fn pump_monc(&mut self, ctx: &mut CoreCtx<Msg>) {
        while let Some(o) = self.monc.poll_output() {
            match o {
                MonOutput::Connect { conn, target } => {
                    let now = Instant::now();
                    self.seed_counter += 1;
                    let mut cfg = self.common.msgr_cfg(self.common.public_addr, self.seed_counter);
                    cfg.lossy = true;
                    cfg.keepalive_interval = None;
                    cfg.idle_timeout = None;
                    let a = CephxMonClientAuth::new(self.auth.clone(), cephx_now());
                    let c = Connection::connector(
                        cfg,
                        Box::new(a),
                        msgr2::EntityAddr::msgr2(target.addr, 0),
                        ENTITY_TYPE_MON,
                        now,
                    );
                    match ctx.connect(target.addr, ConnectProto::Msgr2Conn(Box::new(c)), CONNECT_TIMEOUT) {
                        Ok(id) => {
                            self.mon_conns.insert(conn, id);
                            self.ctl_conns.insert(
                                id,
                                CtlKind {
                                    role: Role::Mon(conn),
                                    ready: false,
                                },
                            );
                        }
                        Err(e) => {
                            self.log(&format!("connecting to mon {}: {e}", target.addr));
                            self.monc.handle_connect_failed(conn, now);
                        }
                    }
                }
                MonOutput::Send { conn, msg } => {
                    if let Some(&id) = self.mon_conns.get(&conn) {
                        self.send(ctx, id, msg);
                    }
                }
                MonOutput::Keepalive { conn } => {
                    if let Some(&id) = self.mon_conns.get(&conn)
                        && let Some(c) = ctx.msgr2(id)
                    {
                        c.send_keepalive(Instant::now());
                    }
                }
                MonOutput::Close { conn } => {
                    if let Some(id) = self.mon_conns.remove(&conn) {
                        self.ctl_conns.remove(&id);
                        ctx.close(id);
                    }
                }
            }
        }
        while let Some(e) = self.monc.poll_event() {
            self.mon_event(ctx, e);
        }
    }

    fn mon_event(&mut self, ctx: &mut CoreCtx<Msg>, e: MonEvent) {
        match e {
            MonEvent::SessionEstablished { target } => {
                self.log(&format!("mon session with {}", target.addr));
                self.send_auth_requests(ctx);
                // Boot messages are not resent by the lossy mon session: send again on a new session.
                if !self.is_up() {
                    self.boot_sent = None;
                    self.maybe_boot(ctx);
                }
            }
            MonEvent::SessionLost { .. } => {}
            MonEvent::OsdMap { epoch } => {
                if self.map_received_at.is_none() {
                    self.map_received_at = Some(Instant::now());
                }
                self.handle_osdmap(ctx, epoch);
            }
            MonEvent::OsdMapError { epoch, error } => {
                self.log(&format!("osdmap {epoch}: {error}"));
            }
            MonEvent::MgrMap(m) => {
                if let Some(a) = mgr_active_addr(&m.map) {
                    if self.mgr_addr != Some(a) {
                        self.log(&format!("active mgr at {}/{}", a.0, a.1));
                        if let Some(id) = self.mgr_conn.take() {
                            self.ctl_conns.remove(&id);
                            ctx.close(id);
                            self.mgr_ready = false;
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
                        Ok(_) => self.refresh_keys(ctx),
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

    fn refresh_keys(&mut self, ctx: &mut CoreCtx<Msg>) {
        let k = self
            .auth
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .service_keys();
        if let Some(k) = k {
            *self.common.keys.write().unwrap_or_else(PoisonError::into_inner) = k;
            if !self.have_keys {
                self.log("have rotating service keys");
            }
            self.have_keys = true;
            self.maybe_boot(ctx);
        }
    }

    fn send_auth_requests(&mut self, ctx: &mut CoreCtx<Msg>) {
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
            self.send_mon(ctx, m.to_message(PACIFIC_FEATURES));
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

    fn maybe_boot(&mut self, ctx: &mut CoreCtx<Msg>) {
        if self.is_up() || !self.have_keys || !self.monc.is_connected() || STOP.load(Ordering::SeqCst) {
            return;
        }
        if self.monc.osdmap().is_none() {
            return;
        }
        if self
            .boot_sent
            .is_some_and(|t| t.elapsed() < Duration::from_secs(10))
        {
            return;
        }
        self.crush_on_start(ctx);
        let m = MOSDBoot {
            paxos: PaxosHeader {
                version: u64::from(self.map_epoch()),
                ..PaxosHeader::default()
            },
            sb: self.superblock(),
            hb_back_addrs: self.my_addrvec(self.common.hb_back_addr),
            cluster_addrs: self.my_addrvec(self.common.cluster_addr),
            boot_epoch: 0,
            hb_front_addrs: self.my_addrvec(self.common.hb_front_addr),
            metadata: self.metadata.clone(),
            osd_features: PACIFIC_FEATURES,
        };
        self.log(&format!("sending boot at epoch {}", self.map_epoch()));
        self.boot_sent = Some(Instant::now());
        self.send_mon(ctx, m.to_message(PACIFIC_FEATURES));
    }

    /// `osd crush update on start`: place this OSD under host=<hostname> with a weight from its size, and set
    /// its device class if it has none (as ceph-osd does).
    fn crush_on_start(&mut self, ctx: &mut CoreCtx<Msg>) {
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
        self.pump_monc(ctx);
    }

    fn dd_size(&self) -> u64 {
        std::fs::metadata(&self.dd.device)
            .map(|m| m.len())
            .unwrap_or(self.opts.device_size)
    }

    /// The route table, built from every core's stored PGs once all have reported (their stores mount on their
    /// own threads). `None` until then: maps wait, so no core places a PG before the table knows what is stored.
    fn router_ready(&mut self) -> Option<&mut PgRouter> {
        if self.router.is_none() {
            let stored = self
                .common
                .stored_pgs
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            if stored.iter().all(Option::is_some) {
                let mut r = PgRouter::new(self.whoami, self.common.shards);
                for (shard, pgs) in stored.iter().enumerate() {
                    let pgs = pgs.as_deref().unwrap_or_default();
                    for c in r.add_stored(shard as u32, pgs.iter().copied()) {
                        eprintln!(
                            "{} osd.{} pg {} is stored on shards {} and {}: shard {} serves it",
                            now_utime(),
                            self.whoami,
                            c.pgid,
                            c.kept,
                            c.ignored,
                            c.kept
                        );
                    }
                }
                drop(stored);
                self.log(&format!(
                    "route table: {} stored PGs, per core {:?}",
                    r.len(),
                    r.per_shard()
                ));
                self.router = Some(r);
            }
        }
        self.router.as_mut()
    }

    /// Every core places its own PGs from the map: send it with the route table of its epoch.
    ///
    /// Every epoch the mon client moved through goes out in order (a restart catching up from its stored map
    /// gets each epoch since, so PGs record intervals that began and ended while it was down); the cores are
    /// told the newest epoch in hand, so PGs peer on that one only.
    fn send_map_to_cores(&mut self, ctx: &mut CoreCtx<Msg>) {
        self.maps_to_send.extend(self.monc.take_osdmap_epochs());
        if self.maps_to_send.is_empty()
            && let Some(m) = self.monc.osdmap()
            && m.epoch > self.map_sent
        {
            self.maps_to_send.push_back(m.clone());
        }
        if self.maps_to_send.is_empty() || self.router_ready().is_none() {
            return;
        }
        let pending = self.maps_to_send.back().map_or(0, |m| m.epoch);
        while let Some(map) = self.maps_to_send.pop_front() {
            if map.epoch <= self.map_sent {
                continue;
            }
            if self.catch_up_from > 0 && self.map_sent > 0 && map.epoch != self.map_sent + 1 {
                self.log(&format!(
                    "osdmap jumps from epoch {} to {} (the monitor trimmed the epochs between)",
                    self.map_sent, map.epoch
                ));
            }
            if self.catch_up_from > 0 && pending > map.epoch {
                self.log(&format!("catching up: osdmap epoch {} of {pending}", map.epoch));
            }
            self.send_one_map(ctx, &map, pending);
        }
    }

    fn send_one_map(&mut self, ctx: &mut CoreCtx<Msg>, map: &OsdMap, pending: u32) {
        self.map_sent = map.epoch;
        // Pools whose rule reaches OSDs of another device class are not ours: their PGs may hold data on
        // classic OSDs that ferro-osd cannot peer with yet. The cores never see them.
        let mut m = map.clone();
        let class = self.opts.device_class.clone();
        let drop: Vec<i64> = m
            .pools
            .iter()
            .filter(|(_, p)| !pool_is_ferro_only(map, p.crush_rule, &class))
            .map(|(k, _)| *k)
            .collect();
        for pid in drop {
            if self.warned_pools.insert(pid) {
                eprintln!(
                    "{} osd.{} pool {pid} is not served: its CRUSH rule also maps to OSDs without device class {class}",
                    now_utime(),
                    self.whoami
                );
            }
            m.pools.remove(&pid);
        }
        let Some(router) = self.router.as_mut() else {
            return;
        };
        let delta = router.advance(&m);
        let routes = Arc::new(router.clone());
        if !delta.added.is_empty() || !delta.removed_pools.is_empty() {
            self.log(&format!(
                "route table at epoch {}: {} PGs new, pools {:?} gone; per core {:?}",
                delta.epoch,
                delta.added.len(),
                delta.removed_pools,
                routes.per_shard()
            ));
        }
        let shared = Arc::new(m);
        for core in 0..ctx.num_cores() {
            let _ = ctx.post(
                core,
                Msg::Map {
                    map: shared.clone(),
                    up_epoch: self.up_epoch,
                    routes: routes.clone(),
                    pending,
                },
            );
        }
    }

    fn handle_osdmap(&mut self, ctx: &mut CoreCtx<Msg>, epoch: u32) {
        let Some(map) = self.monc.osdmap() else { return };
        let me = self.whoami;
        let public = self.common.public_addr;
        let nonce = self.nonce;
        let up = map.is_up(me)
            && map.client_addrs.get(me as usize).is_some_and(|a| {
                a.0.iter()
                    .any(|x| x.socket_addr() == Some(public) && x.nonce == nonce)
            });
        let up_from = map.osd_info.get(me as usize).map_or(epoch, |i| i.up_from);
        let up_thru = map.osd_info.get(me as usize).map_or(0, |i| i.up_thru);
        if up && !self.is_up() {
            self.up_epoch = up_from.max(1);
            self.log(&format!("marked up at epoch {up_from}"));
            self.next_beacon = Instant::now();
            self.next_pgstats = Instant::now();
        } else if !up && self.is_up() && !STOP.load(Ordering::SeqCst) {
            self.log(&format!("marked down in epoch {epoch}; booting again"));
            self.up_epoch = 0;
            self.boot_sent = None;
        }
        self.send_map_to_cores(ctx);
        let mut acts = Vec::new();
        if self.is_up() && self.stopping_since.is_none() {
            if let Some(map) = self.monc.osdmap() {
                self.hb.set_map(map, me, &mut acts);
            }
        } else {
            self.hb.clear(&mut acts);
        }
        self.hb_apply(ctx, acts);
        if !self.is_up() {
            self.maybe_boot(ctx);
            return;
        }
        // up_thru: the monitors want it at least at the interval start before PGs go active.
        if up_thru < self.up_epoch && self.alive_sent_for < epoch {
            self.alive_sent_for = epoch;
            let m = MOSDAlive {
                paxos: PaxosHeader {
                    version: u64::from(epoch),
                    ..PaxosHeader::default()
                },
                want: epoch,
            };
            self.send_mon(ctx, m.to_message(PACIFIC_FEATURES));
        }
    }

    fn mon_requests(&mut self, ctx: &mut CoreCtx<Msg>, reqs: Vec<worker::MonReq>) {
        for r in reqs {
            match r {
                worker::MonReq::Created(pgid) => {
                    let m = MOSDPGCreated {
                        paxos: PaxosHeader::default(),
                        pgid,
                    };
                    self.send_mon(ctx, m.to_message(PACIFIC_FEATURES));
                }
                worker::MonReq::UpThru(want) => {
                    let epoch = self.map_epoch();
                    let up_thru = self
                        .monc
                        .osdmap()
                        .and_then(|m| m.osd_info.get(self.whoami as usize))
                        .map_or(0, |i| i.up_thru);
                    // Once per map epoch at most (every shard may ask), as ceph-osd's send_alive.
                    if up_thru >= want || self.alive_sent_for >= epoch.max(want) {
                        continue;
                    }
                    self.alive_sent_for = epoch.max(want);
                    let m = MOSDAlive {
                        paxos: PaxosHeader {
                            version: u64::from(epoch),
                            ..PaxosHeader::default()
                        },
                        want: want.max(epoch),
                    };
                    self.send_mon(ctx, m.to_message(PACIFIC_FEATURES));
                }
                worker::MonReq::PgTemp(pgid, acting) => {
                    let m = MOSDPGTemp {
                        paxos: PaxosHeader {
                            version: u64::from(self.map_epoch()),
                            ..PaxosHeader::default()
                        },
                        map_epoch: self.map_epoch(),
                        pg_temp: vec![(pgid, acting)],
                        forced: false,
                    };
                    self.send_mon(ctx, m.to_message(PACIFIC_FEATURES));
                }
            }
        }
    }

    fn set_stats(&mut self, core: CoreId, st: ShardStats) {
        if let Some(s) = self.shard_stats.get_mut(core) {
            *s = Some(st);
        }
    }

    fn stats(&self) -> impl Iterator<Item = &ShardStats> {
        self.shard_stats.iter().flatten()
    }

    fn pgs_by_state(&self) -> BTreeMap<String, usize> {
        let mut m = BTreeMap::new();
        for s in self.stats() {
            for (k, v) in &s.status.by_state {
                *m.entry(k.clone()).or_default() += v;
            }
        }
        m
    }

    fn send_beacon(&mut self, ctx: &mut CoreCtx<Msg>) {
        let pgs: Vec<PgId> = self
            .stats()
            .flat_map(|s| s.pgs.iter().filter(|(r, _)| r.primary).map(|(r, _)| r.spgid.pgid))
            .collect();
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
        self.send_mon(ctx, m.to_message(PACIFIC_FEATURES));
    }

    fn mark_me_down(&mut self, ctx: &mut CoreCtx<Msg>) {
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
            target_addrs: self.my_addrvec(self.common.public_addr),
            epoch: self.map_epoch(),
            request_ack: false,
            down_and_dead: false,
        };
        self.send_mon(ctx, m.to_message(PACIFIC_FEATURES));
    }

    // ---- mgr session ----

    fn connect_mgr(&mut self, ctx: &mut CoreCtx<Msg>, a: (SocketAddr, u32)) {
        let authz = self
            .auth
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .build_authorizer(cephx::ENTITY_TYPE_MGR);
        let Ok(authz) = authz else {
            self.log("no mgr ticket yet");
            return;
        };
        self.seed_counter += 1;
        let mut cfg = self.common.msgr_cfg(self.common.public_addr, self.seed_counter);
        cfg.lossy = true;
        // The acceptor checks that we address it exactly (nonce included).
        let c = Connection::connector(
            cfg,
            Box::new(CephxAuthorizerClientAuth::new(authz)),
            msgr2::EntityAddr::msgr2(a.0, a.1),
            ENTITY_TYPE_MGR,
            Instant::now(),
        );
        match ctx.connect(a.0, ConnectProto::Msgr2Conn(Box::new(c)), CONNECT_TIMEOUT) {
            Ok(id) => {
                self.mgr_conn = Some(id);
                self.ctl_conns.insert(
                    id,
                    CtlKind {
                        role: Role::Mgr,
                        ready: false,
                    },
                );
            }
            Err(e) => self.log(&format!("connecting to mgr {}: {e}", a.0)),
        }
    }

    fn mgr_connected(&mut self, ctx: &mut CoreCtx<Msg>) {
        self.log("mgr session open");
        self.mgr_ready = true;
        self.mgr_declared = false;
        let m = MMgrOpen {
            daemon_name: self.whoami.to_string(),
            service_name: String::new(),
            service_daemon: false,
            // Empty: the mgr then keeps no config for us (a non-empty one must hold two maps).
            config_bl: Bytes::new(),
            config_defaults_bl: Bytes::new(),
            ..Default::default()
        };
        if let Some(id) = self.mgr_conn {
            self.send(ctx, id, m.to_message(PACIFIC_FEATURES));
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

    fn send_mgr_report(&mut self, ctx: &mut CoreCtx<Msg>) {
        let Some(id) = self.mgr_conn else { return };
        if !self.mgr_ready {
            return;
        }
        // The schema goes once per mgr session; values every report, in the mgr's (sorted) order.
        let declare_types = if self.mgr_declared {
            Vec::new()
        } else {
            self.mgr_declared = true;
            crate::perf::declare_types()
        };
        let m = MMgrReport {
            daemon_name: self.whoami.to_string(),
            declare_types,
            packed: crate::perf::mgr_packed(self.stats(), 0),
            daemon_health_metrics: Bytes::from_static(&[0, 0, 0, 0]),
            rest: Bytes::from_static(&ceph_msgs::osd::MGR_REPORT_EMPTY_REST),
            ..Default::default()
        };
        self.send(ctx, id, m.to_message(PACIFIC_FEATURES));
    }

    fn send_pg_stats(&mut self, ctx: &mut CoreCtx<Msg>) {
        let Some(id) = self.mgr_conn else { return };
        if !self.mgr_ready {
            return;
        }
        let epoch = self.map_epoch();
        let now = now_utime();
        self.report_seq += 1;
        let seq = (u64::from(self.up_epoch) << 32) | self.report_seq;
        let mut pg_stat = BTreeMap::new();
        let mut pool_stat: BTreeMap<i64, osd_types::statfs::StoreStatfs> = BTreeMap::new();
        let (mut total, mut free, mut stored, mut lat) = (0u64, 0u64, 0u64, 0u64);
        for sh in self.shard_stats.iter().flatten() {
            total += sh.total_bytes;
            free += sh.free_bytes;
            lat = lat.max(sh.commit_latency_ns);
            for (r, since) in &sh.pgs {
                stored += r.stats.num_bytes;
                // Only the acting primary reports a PG (as ceph-osd); PGs of deleted pools are not reported.
                if !r.primary
                    || !self
                        .monc
                        .osdmap()
                        .is_some_and(|m| m.pools.contains_key(&(r.spgid.pgid.pool as i64)))
                {
                    continue;
                }
                let ps = stats::pg_stat_report(r, epoch, seq, *since, now);
                let mut e = Encoder::new(PACIFIC_FEATURES);
                ps.encode(&mut e);
                pg_stat.insert(r.spgid.pgid, e.into_bytes());
                let p = pool_stat.entry(r.spgid.pgid.pool as i64).or_default();
                p.data_stored += r.stats.num_bytes;
                p.allocated += r.stats.num_bytes.div_ceil(4096) * 4096;
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
        self.send(ctx, id, m.to_message(PACIFIC_FEATURES));
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
            ("back_addr", addr(self.common.cluster_addr)),
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
            ("front_addr", addr(self.common.public_addr)),
            ("front_iface", String::new()),
            ("hb_back_addr", addr(self.common.hb_back_addr)),
            ("hb_front_addr", addr(self.common.hb_front_addr)),
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

    fn admin(&mut self, cmd: &str, messages_received: u64) -> (i32, String) {
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
                "num_pgs": self.stats().map(|s| s.pgs.len()).sum::<usize>(),
                "pgs_by_state": self.pgs_by_state(),
                "objectstore": "ferrostore",
                // ferro-osd's own: writes sent again to a replica that left them unanswered too long
                "repops_resent_overdue": self.stats().map(|s| s.status.repops_resent_overdue).sum::<u64>(),
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
                let mut j = crate::perf::dump(self.stats(), self.dd.shards, messages_received);
                j["ferro_reactor"] = self.turn_board.perf();
                j
            }
            "ferro long-turns" => self.turn_board.dump(),
            "ferro sched" => crate::sched::status_json(&self.opts.reactor_sched),
            "perf schema" => crate::perf::schema(),
            "dump_mempools" => crate::stats::mempools(self.stats(), crate::stats::self_rss_bytes()),
            "config show" => {
                let mut o = serde_json::Map::new();
                for (k, val) in &self.opts.all {
                    o.insert(k.clone(), val.clone().into());
                }
                o.insert("name".into(), format!("osd.{}", self.whoami).into());
                o.insert("cluster".into(), self.opts.cluster.clone().into());
                o.insert("osd_objectstore".into(), "ferrostore".into());
                o.insert("ferro_osd_shards".into(), self.dd.shards.to_string().into());
                crate::sched::config_show(&self.opts.reactor_sched, &mut o);
                serde_json::Value::Object(o)
            }
            "config get" => {
                let var = ceph_config::normalize_option_name(v["var"].as_str().unwrap_or(""));
                match self.opts.all.get(&var) {
                    Some(val) => serde_json::json!({ var: val }),
                    None => return (-2, format!("{{\"error\": \"unrecognized option {var}\"}}")),
                }
            }
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
    let dir = crate::placement::disk_dir(path)?;
    Some(dir.file_name()?.to_string_lossy().to_string())
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

/// Everything `run` needs to start.
pub struct Daemon {
    opts: OsdOptions,
    dd: DataDir,
    key: CryptoKey,
}

impl Daemon {
    pub fn new(opts: OsdOptions, dd: DataDir, key: CryptoKey) -> Result<Self, String> {
        Ok(Daemon { opts, dd, key })
    }

    /// Bind the listeners, start one reactor core per ferrostore shard (core 0 also runs control), serve until
    /// SIGTERM/SIGINT (mark-me-down, drain, unmount).
    pub fn run(self) -> Result<(), String> {
        let Daemon { opts, dd, key } = self;
        let whoami = dd.whoami as i32;
        let provider: Arc<dyn CryptoProvider> = Arc::new(AwsLcProvider);
        let auth = Arc::new(Mutex::new(MonAuthClient::new(
            provider.clone(),
            cephx::entity_name(cephx::ENTITY_TYPE_OSD, whoami.to_string()),
            key,
            cephx::ENTITY_TYPE_MON | cephx::ENTITY_TYPE_OSD | cephx::ENTITY_TYPE_MGR,
        )));
        let mut fds = Vec::new();
        let mut kinds = Vec::new();
        let mut bind = |kind: ListenerKind, ip: IpAddr| -> Result<SocketAddr, String> {
            let l = bind_range(ip, opts.bind_port_min, opts.bind_port_max)
                .map_err(|e| format!("binding {kind:?} on {ip}: {e}"))?;
            let a = l.local_addr().map_err(|e| e.to_string())?;
            l.set_nonblocking(true).map_err(|e| e.to_string())?;
            fds.push(l.into_raw_fd());
            kinds.push(kind);
            Ok(a)
        };
        let public_addr = bind(ListenerKind::Public, opts.public_ip)?;
        let cluster_addr = bind(ListenerKind::Cluster, opts.cluster_ip)?;
        let hb_back_addr = bind(ListenerKind::HbBack, opts.cluster_ip)?;
        let hb_front_addr = bind(ListenerKind::HbFront, opts.public_ip)?;
        let seed = u64::from(std::process::id()) ^ now_utime().as_nanos();
        let long_turn_us = opts
            .all
            .get("ferro_osd_long_turn_us")
            .and_then(|v| v.trim().parse::<u64>().ok())
            .unwrap_or(crate::turns::DEFAULT_LONG_TURN_US);
        let inject_peer_resets = match opts.all.get("ferro_osd_inject_peer_resets") {
            None => 0,
            Some(v) => v
                .trim()
                .parse::<u64>()
                .map_err(|_| format!("ferro_osd_inject_peer_resets = {v}: not a count"))?,
        };
        let nonce = (seed as u32 ^ (seed >> 32) as u32) | 1;
        let common = Arc::new(Common {
            whoami,
            nonce,
            cluster_fsid: dd.cluster_fsid,
            shards: dd.shards,
            public_addr,
            cluster_addr,
            hb_front_addr,
            hb_back_addr,
            listener_kinds: kinds,
            provider,
            keys: Arc::new(RwLock::new(ServiceKeys::default())),
            auth: auth.clone(),
            mono_base: Instant::now(),
            busy_poll: opts.busy_poll,
            long_turn_us,
            turn_cpu_time: opts
                .all
                .get("ferro_osd_turn_cpu_time")
                .is_some_and(|v| matches!(v.trim(), "true" | "1" | "yes" | "on")),
            inject_peer_resets,
            stored_pgs: Mutex::new(vec![None; dd.shards.max(1) as usize]),
            stored_maps: Mutex::new(vec![None; dd.shards.max(1) as usize]),
        });
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
        let now = Instant::now();
        let mut control = Control {
            common: common.clone(),
            whoami,
            nonce,
            auth,
            have_keys: false,
            monc: MonClient::new(mcfg, mons, seed),
            mon_conns: HashMap::new(),
            ctl_conns: HashMap::new(),
            seed_counter: 0,
            boot_sent: None,
            up_epoch: 0,
            alive_sent_for: 0,
            map_received_at: None,
            map_sent: 0,
            monc_started: false,
            maps_to_send: VecDeque::new(),
            catch_up_from: 0,
            router: None,
            mgr_conn: None,
            mgr_ready: false,
            mgr_declared: false,
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
            shard_stats: (0..dd.shards).map(|_| None).collect(),
            turn_board: TurnBoard::new(long_turn_us),
            stopping_since: None,
            hb: Heartbeats::new(
                HbConfig {
                    interval: Duration::from_secs(opts.heartbeat_interval_s.max(1)),
                    grace: Duration::from_secs(opts.heartbeat_grace_s.max(1)),
                    min_peers: opts.heartbeat_min_peers as usize,
                    min_size: opts.heartbeat_min_size as u32,
                },
                seed,
            ),
            next_hb_tick: now,
            warned_pools: Default::default(),
            opts: opts.clone(),
            dd: dd.clone(),
        };
        control.metadata = control.build_metadata();
        let control = Mutex::new(Some(Box::new(control)));
        let listeners = Mutex::new(Some(fds));
        let failed: Arc<Mutex<Option<String>>> = Arc::new(Mutex::new(None));
        let failed2 = failed.clone();
        let device = dd.device.clone();
        let shards = dd.shards;
        let irq_cpus = (opts.pin_cores && opts.cpus.is_empty())
            .then(|| crate::placement::device_irq_cpus(&device))
            .flatten();
        let place = crate::placement::choose(
            opts.pin_cores,
            &opts.cpus,
            &reactor::allowed_cpus(),
            irq_cpus.as_deref(),
        );
        eprintln!(
            "{} osd.{whoami} reactor cores: {}",
            now_utime(),
            match place.pin {
                true => format!("pinned to CPUs {:?} in core order ({})", place.cpus, place.why),
                false => format!("unpinned ({})", place.why),
            }
        );
        let cfg = RuntimeConfig {
            cores: shards as usize,
            pin: place.pin,
            cpus: place.cpus,
            strict_pin: place.strict,
            ..RuntimeConfig::default()
        };
        let common2 = common.clone();
        let pg_cfg = opts.pg.clone();
        let store_cfg = StoreConfig {
            cache_bytes: opts
                .cache_bytes
                .unwrap_or_else(|| crate::args::default_cache_bytes(shards))
                as usize,
            // FERROSTORE_CKPT_WALK_SLICE=0 places a checkpoint's whole snapshot in the turn that starts it (the
            // behaviour before session 8), for A/B runs of one binary.
            checkpoint_walk_slice: std::env::var(ferrostore::store::CKPT_WALK_SLICE_ENV)
                .ok()
                .and_then(|v| v.parse().ok())
                .unwrap_or(ferrostore::store::DEFAULT_CKPT_WALK_SLICE),
            journal_batch_bytes: ferrostore::store::env_u64(ferrostore::store::JOURNAL_BATCH_ENV)
                .unwrap_or(ferrostore::store::DEFAULT_JOURNAL_BATCH_BYTES),
            // FERROSTORE_ORDERED_RECORDS=unbounded: ordered commits write a record whenever data completed, not
            // one at a time (A/B runs).
            ordered_records_unbounded: ferrostore::store::ordered_records_unbounded_from_env(),
            // FERROSTORE_ORDERED_LONE=0: ordered commits order a transaction queued alone too (A/B runs).
            ordered_lone_synced: ferrostore::store::ordered_lone_synced_from_env(true),
            // FERROSTORE_ORDERED_MIN_BYTES=n: ordered commits only for transactions with n bytes of data or more
            // (smaller ones keep RWF_DSYNC data writes, in parallel with their record; A/B runs).
            ordered_min_data_bytes: ferrostore::store::ordered_min_data_bytes_from_env(0),
            defrag_extra_reads: opts
                .defrag_extra_reads
                .unwrap_or(ferrostore::store::DEFAULT_DEFRAG_EXTRA_READS),
            defrag_after_reads: opts
                .defrag_after_reads
                .unwrap_or(ferrostore::store::DEFAULT_DEFRAG_AFTER_READS),
            defrag_eager_blocks: opts
                .defrag_eager_bytes
                .map_or(ferrostore::store::DEFAULT_DEFRAG_EAGER_BLOCKS, |b| {
                    b / ferrostore::format::BLOCK_SIZE
                }),
            defrag_small_extra_reads: opts
                .defrag_small_extra_reads
                .unwrap_or(ferrostore::store::DEFAULT_DEFRAG_SMALL_EXTRA_READS),
            ..StoreConfig::default()
        };
        let uring_opts = UringOptions {
            read_pool_bytes: opts
                .read_pool_bytes
                .map_or(UringOptions::default().read_pool_bytes, |b| b as usize),
            // RWF_DSYNC: each write is durable when it completes (ext4 flushes in its own completion worker;
            // FUA on NVMe), so a commit needs no fdatasync — that one is punted to an io_uring worker thread and
            // costs two more context switches and a wake-up of this core per commit (docs/benchmarks.md, "device
            // IO on the core ring"). FERROSTORE_DURABILITY=flush restores fdatasync per group commit;
            // FERROSTORE_DURABILITY=ordered turns on ordered commits (UringOptions::ordered_commits: on a device
            // without FUA, data unsynced and the log record's RWF_DSYNC after it; a transaction queued alone is
            // written as in dsync mode). Not the default: behind dsync at 4K write QD16 and 4M write QD4, ahead
            // only at 64K write QD16, measured on allocator-bound shards (docs/benchmarks.md "durability without
            // FUA", "ordered commits in the OSD", "a fragmented allocator").
            dsync_writes: true,
            ..UringOptions::default()
        }
        .with_env();
        eprintln!(
            "ferro-osd: {shards} ferrostore shard(s), cache {} MiB and read pool {} MiB each",
            store_cfg.cache_bytes >> 20,
            uring_opts.read_pool_bytes >> 20
        );
        let reactor_sched = opts.reactor_sched;
        let log_data_max = opts.log_data_max_bytes;
        let factory = move |core: CoreId| {
            // On the core's own thread, before its loop: the reactor's scheduling options (sched.rs; never fatal).
            crate::sched::apply_reactor(core, &reactor_sched);
            // The store is opened on its core: its io_uring is single-issuer, like the core's own ring.
            let shard = UringDevice::open(&device, None, uring_opts)
                .map_err(|e| format!("opening {}: {e}", device.display()))
                .and_then(|dev| {
                    // Journaled small writes by default only where a durable write is a write plus a cache flush
                    // (RWF_DSYNC without FUA): there a small write becomes one durable write instead of two.
                    let mut cfg = store_cfg.clone();
                    cfg.log_data_max_bytes = log_data_max.unwrap_or(
                        if uring_opts.dsync_writes && dev.has_fua() == Some(false) {
                            crate::args::DEFAULT_LOG_DATA_MAX_BYTES
                        } else {
                            0
                        },
                    );
                    Store::mount(dev, core as u32, cfg)
                        .map_err(|e| format!("mounting ferrostore shard {core}: {e}"))
                })
                .and_then(|mut store| {
                    // Core 0 routes PGs from what every shard holds: list them before this core serves.
                    let pgs = osd_core::stored_pgs(&mut store)
                        .map_err(|e| format!("listing the PGs of ferrostore shard {core}: {e}"))?;
                    let mut stored = common2.stored_pgs.lock().unwrap_or_else(PoisonError::into_inner);
                    if let Some(slot) = stored.get_mut(core) {
                        *slot = Some(pgs.into_iter().map(|(s, bits)| (s.pgid, bits)).collect());
                    }
                    drop(stored);
                    // ... and the newest map this shard handled (core 0 catches up from there)
                    let newest = match osd_core::load_newest_map(&mut store) {
                        Ok(m) => m,
                        Err(e) => {
                            eprintln!("ferro-osd: shard {core}: stored map unusable ({e}): starting from the monitor's");
                            None
                        }
                    };
                    let mut maps = common2.stored_maps.lock().unwrap_or_else(PoisonError::into_inner);
                    if let Some(slot) = maps.get_mut(core) {
                        *slot = Some(newest);
                    }
                    Ok(store)
                })
                .map(|store| Shard::new(core as u32, shards, whoami, &pg_cfg, store, common2.mono_base));
            let shard = match shard {
                Ok(s) => Some(s),
                Err(e) => {
                    eprintln!("ferro-osd: {e}");
                    *failed2.lock().unwrap_or_else(PoisonError::into_inner) = Some(e);
                    STOP.store(true, Ordering::SeqCst);
                    None
                }
            };
            let (control, listeners) = if core == 0 {
                (
                    control.lock().unwrap_or_else(PoisonError::into_inner).take(),
                    listeners.lock().unwrap_or_else(PoisonError::into_inner).take(),
                )
            } else {
                (None, None)
            };
            Core {
                id: core,
                common: common2.clone(),
                shard,
                control,
                listeners,
                conns: FastMap::default(),
                by_gid: FastMap::default(),
                next_gid: 0,
                next_handoff: 0,
                fresh: None,
                map: None,
                up_epoch: 0,
                ticks: 0,
                messages_received: 0,
                out: Delivery::default(),
                osds: HashMap::new(),
                osd_by_conn: FastMap::default(),
                device_watch: None,
                ops_gathers: FastMap::default(),
                next_gather: 0,
                routes: Arc::new(PgRouter::new(whoami, shards)),
                unrouted: VecDeque::new(),
                turns: TurnLog::new(core, common2.long_turn_us, common2.turn_cpu_time),
                rng: (u64::from(common2.nonce) << 8 | core as u64) | 1,
            }
        };
        let rt = Arc::new(Runtime::start(cfg, factory).map_err(|e| format!("starting the cores: {e}"))?);
        if let Some(p) = opts.admin_socket.clone() {
            let weak = Arc::downgrade(&rt);
            let post: crate::admin::Poster = Arc::new(move |cmd, tx| {
                weak.upgrade()
                    .is_some_and(|rt| rt.post(0, Msg::Admin(cmd, tx)).is_ok())
            });
            if let Err(e) = crate::admin::start(&p, post) {
                eprintln!("ferro-osd: admin socket {}: {e}", p.display());
            }
        }
        while !rt.is_stopping() {
            std::thread::sleep(Duration::from_millis(100));
        }
        // The admin thread may hold the runtime for a moment while posting.
        let mut rt = rt;
        let rt = loop {
            match Arc::try_unwrap(rt) {
                Ok(r) => break r,
                Err(r) => {
                    rt = r;
                    std::thread::sleep(Duration::from_millis(10));
                }
            }
        };
        rt.join();
        if let Some(p) = &opts.admin_socket {
            let _ = std::fs::remove_file(p);
        }
        match failed.lock().unwrap_or_else(PoisonError::into_inner).take() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
}

/// `ferro object-digest <pgid>` (admin socket): the PG it asks about.
fn digest_request(cmd: &str) -> Option<SpgId> {
    let v: serde_json::Value = serde_json::from_str(cmd).ok()?;
    if v["prefix"].as_str()? != "ferro object-digest" {
        return None;
    }
    let (pool, seed) = v["pgid"].as_str()?.split_once('.')?;
    let pgid = PgId::new(pool.parse().ok()?, u32::from_str_radix(seed, 16).ok()?);
    Some(SpgId::new(pgid, denc::ShardId::NO_SHARD))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn op_dump_commands() {
        assert_eq!(ops_request("ops"), Some(OpsList::InFlight));
        assert_eq!(
            ops_request(r#"{"prefix": "dump_ops_in_flight"}"#),
            Some(OpsList::InFlight)
        );
        assert_eq!(ops_request("dump_historic_ops"), Some(OpsList::Historic));
        assert_eq!(
            ops_request(r#"{"prefix": "dump_historic_ops_by_duration", "format": "json"}"#),
            Some(OpsList::ByDuration)
        );
        assert_eq!(ops_request("perf dump"), None);
    }

    #[test]
    fn op_dumps_merge_across_cores() {
        let op = |at: &str, d: f64| serde_json::json!({"initiated_at": at, "duration": d});
        // Two cores' slowest ops: the OSD's list is the slowest 20 of all, slowest first.
        let mut ops: Vec<serde_json::Value> = (0..15)
            .map(|i| op(&format!("2026-12-03T12:00:{i:02}"), i as f64))
            .collect();
        ops.extend((0..15).map(|i| op(&format!("2026-12-03T12:01:{i:02}"), i as f64 + 0.5)));
        let j = merge_ops(OpsList::ByDuration, ops.clone());
        let d: Vec<f64> = j["ops"]
            .as_array()
            .unwrap()
            .iter()
            .map(|o| o["duration"].as_f64().unwrap())
            .collect();
        assert_eq!(d.len(), worker::OP_HISTORY_SIZE);
        assert_eq!(&d[..3], [14.5, 14.0, 13.5]);
        assert!(d.windows(2).all(|w| w[0] >= w[1]), "{d:?}");
        assert_eq!(
            (j["size"].as_u64(), j["duration"].as_u64()),
            (Some(20), Some(600))
        );
        // The newest 20 for the plain history, oldest first; every op in flight.
        let j = merge_ops(OpsList::Historic, ops.clone());
        let h = j["ops"].as_array().unwrap();
        assert_eq!(h.len(), 20);
        assert_eq!(h[0]["initiated_at"], "2026-12-03T12:00:10");
        assert_eq!(h[19]["initiated_at"], "2026-12-03T12:01:14");
        let j = merge_ops(OpsList::InFlight, ops);
        assert_eq!(j["num_ops"], 30);
        assert!(j.get("size").is_none());
    }
}
