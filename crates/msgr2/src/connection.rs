// SPDX-License-Identifier: LGPL-3.0-or-later
//! The msgr2 connection state machine (sans-IO).
//!
//! A [`Connection`] is one logical session with one peer. It is driven by its owner:
//!
//! * bytes from the socket go into [`Connection::handle_input_bytes`] (or [`Connection::handle_input`], which copies);
//! * bytes to write come out of [`Connection::poll_output`] (a list of shared buffers, for vectored writes);
//! * what happened comes out of [`Connection::poll_event`];
//! * [`Connection::poll_timeout`] says when to call [`Connection::handle_timeout`] (keepalives, idle timeout);
//! * when the socket dies, [`Connection::handle_transport_closed`]; a lossless connector then calls
//!   [`Connection::reconnect`] on a fresh socket, and the session resumes with no loss and no duplicates.
//!
//! The state is split in two: the session (cookies, sequence numbers, queues: it outlives sockets) and the
//! transport (banner, auth, frame codec: one per socket). An acceptor that sees a SESSION_RECONNECT asks its owner
//! which existing connection it belongs to; [`Connection::take_over`] then moves the new socket's transport into
//! the existing connection, as Ceph's `reuse_connection` does, so the object upper layers hold stays the same.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};

use crate::addr::{AddrVec, EntityAddr};
use crate::auth::{AuthContext, AuthError, AuthStep, CON_MODE_CRC, CON_MODE_SECURE, ClientAuth, ServerAuth};
use crate::control::{
    BANNER_HEAD_LEN, BANNER_PAYLOAD_LEN, BANNER_PREFIX, Banner, ClientIdent, Control, IDENT_FLAG_LOSSY,
    MSGR2_FEATURE_REVISION_1, ServerIdent, SessionReconnect, UTime,
};
use crate::crypto::{CryptoProvider, default_provider};
use crate::frame::{
    ALIGN_DEFAULT, Frame, FrameDecoder, FrameError, FrameLimits, Role, RxSink, SecureRx, SecureTx, Tag,
    encode_frame,
};
use crate::message::{Message, MessageError, encode_message_frame};
use crate::prioq::PrioQueue;
use crate::types::EntityName;

/// `CEPH_FEATURE_MSG_ADDR2` (bit 59): msgr2 requires it of every peer.
pub const FEATURE_MSG_ADDR2: u64 = denc::features::MASK_MSG_ADDR2;
/// Everything Ceph 16.2.15 (Pacific) daemons and clients advertise.
pub const PACIFIC_FEATURES: u64 = denc::CEPH_FEATURES_ALL;
const _: () = assert!(FEATURE_MSG_ADDR2 == 1 << 59 && PACIFIC_FEATURES == 0x3f01_cfbd_fffd_ffff);

/// Default [`Config::ack_delay`]. What the peer keeps for replay is bounded by [`Config::ack_every`] and
/// [`Config::ack_bytes`]; this only bounds how long that remainder lingers once the session goes quiet, and sets
/// the ACK rate of a session whose messages all flow one way (ferro-osd's OSD-to-OSD sessions: each OSD sends on
/// its own connection, so no reply ever carries the ack): one ACK per `ack_delay` while busy. Linux holds a pure
/// TCP ACK 40–200 ms (`TCP_DELACK_MIN`, `TCP_DELACK_MAX`) for the same reason; 100 ms gives 10 ACKs a second
/// per busy one-way session instead of one per message (10 ms gave 100 a second: ~1 send per client write at
/// size 3 and QD1, measured in docs/benchmarks.md).
pub const ACK_DELAY_DEFAULT: Duration = Duration::from_millis(100);

/// Default [`Config::ack_bytes`]: an ACK costs the two sides a few µs of CPU, receiving 1 MiB about a hundred
/// times that, so acknowledging at least every MiB costs under 1 % and bounds what the peer keeps for replay.
pub const ACK_BYTES_DEFAULT: usize = 1 << 20;

/// Static configuration of a connection.
#[derive(Clone, Debug)]
pub struct Config {
    /// Our entity type (`types::ENTITY_TYPE_*`).
    pub entity_type: u8,
    /// Our entity number (`entity_name_t::num`, the "gid" in idents): the OSD id, the client's global id, …
    pub entity_num: i64,
    /// The addresses we advertise (CLIENT_IDENT / SERVER_IDENT / SESSION_RECONNECT).
    pub my_addrs: AddrVec,
    /// Ceph feature bits we support and require (CEPH_FEATURE_*).
    pub features_supported: u64,
    pub features_required: u64,
    /// Lossy sessions drop everything on a fault (clients, heartbeats); lossless ones reconnect and replay.
    /// For a connector this is our policy (the acceptor's SERVER_IDENT flag then decides); an acceptor makes the
    /// session lossy if this is set or the connector's CLIENT_IDENT says lossy.
    pub lossy: bool,
    pub limits: FrameLimits,
    /// Send KEEPALIVE2 this often while the session is ready (None: never).
    pub keepalive_interval: Option<Duration>,
    /// Fault the transport if nothing arrives for this long (None: never).
    pub idle_timeout: Option<Duration>,
    /// Bounds of the outgoing queue (messages waiting to be written plus, on lossless sessions, messages written
    /// but not yet acknowledged). [`Connection::send`] refuses beyond them: that is the backpressure signal.
    pub max_queued_messages: usize,
    pub max_queued_bytes: usize,
    /// Send an ACK after this many unacknowledged received messages even if no message carries it.
    pub ack_every: u64,
    /// How long an acknowledgement may wait for an outgoing message to carry it (`ack_seq`) before a standalone
    /// ACK frame goes out; `None`: an ACK goes out as soon as nothing else is queued (what Ceph does, and what
    /// this crate did before session 6). See docs/msgr2.md, "Acknowledgements".
    pub ack_delay: Option<Duration>,
    /// Send a standalone ACK at once (nothing else queued) when this many payload bytes arrived unacknowledged:
    /// what the peer keeps for replay is bounded in bytes, not only in messages and time (4 MiB writes would
    /// otherwise stay on the primary's sent queue for `ack_delay` each).
    pub ack_bytes: usize,
    /// Send standalone ACKs on lossy sessions too. Ceph never does (a lossy peer keeps no sent queue and ignores
    /// ACKs), so the default is false; the ack still rides on every outgoing message.
    pub ack_lossy: bool,
    pub crypto: Arc<dyn CryptoProvider>,
    /// Seed for cookies (the state machine has no randomness of its own; the driver passes some in).
    pub seed: u64,
    /// Our messenger's global_seq for this connection attempt.
    pub global_seq: u64,
    /// Acceptor only: accept every CLIENT_IDENT as a new session and answer every SESSION_RECONNECT with a full
    /// SESSION_RESET, without asking the owner. Owners that track sessions set this to false and answer
    /// [`Event::AcceptRequest`].
    pub auto_accept: bool,
    /// Our address nonce (Ceph: the pid for daemons, random for clients), used when `my_addrs` is empty.
    pub nonce: u32,
    /// Ceph's `Policy::server`: we never initiate connections to this kind of peer (e.g. an OSD's client-facing
    /// side). Decides connection races in the peer's favour never, in ours always.
    pub server: bool,
}

impl Config {
    pub fn new(entity_type: u8, entity_num: i64) -> Self {
        Config {
            entity_type,
            entity_num,
            my_addrs: AddrVec::default(),
            features_supported: PACIFIC_FEATURES,
            features_required: FEATURE_MSG_ADDR2,
            lossy: false,
            limits: FrameLimits::default(),
            keepalive_interval: Some(Duration::from_secs(10)),
            idle_timeout: Some(Duration::from_secs(900)),
            max_queued_messages: 4096,
            max_queued_bytes: 512 << 20,
            ack_every: 64,
            ack_delay: Some(ACK_DELAY_DEFAULT),
            ack_lossy: false,
            ack_bytes: ACK_BYTES_DEFAULT,
            crypto: default_provider(),
            seed: 0x5eed,
            global_seq: 1,
            auto_accept: true,
            server: false,
            nonce: 0,
        }
    }
}

/// Why a connection or session ended.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConnError {
    #[error("bad banner: {0}")]
    Banner(String),
    #[error("peer requires msgr2 features {0:#x} we lack")]
    Msgr2Features(u64),
    #[error("peer does not speak msgr2 revision 1 (v2.0 peers are not supported)")]
    Rev0Peer,
    #[error("frame error: {0}")]
    Frame(#[from] FrameError),
    #[error("undecodable {what} payload: {detail}")]
    Payload { what: &'static str, detail: String },
    #[error("unexpected {tag:?} frame in state {state}")]
    Unexpected { tag: Tag, state: &'static str },
    #[error("authentication failed: {0}")]
    Auth(#[from] AuthError),
    #[error("AUTH_SIGNATURE mismatch: the peer saw different pre-auth bytes (tampering or a bug)")]
    BadSignature,
    #[error("feature mismatch: missing {missing:#x}")]
    MissingFeatures { missing: u64 },
    #[error("peer identifies as {peer} which does not include the target address {target}")]
    WrongPeer { peer: String, target: String },
    #[error("peer asked us to WAIT (connection race); retry later")]
    Wait,
    #[error("transport closed")]
    TransportClosed,
    #[error("no data from peer for {0:?}")]
    IdleTimeout(Duration),
    #[error("connection was replaced by a newer one for the same session")]
    Replaced,
    #[error("session was reset by the peer")]
    SessionReset,
    #[error("closed locally")]
    Closed,
    #[error("message: {0}")]
    Message(#[from] MessageError),
    #[error("operation not valid in state {0}")]
    InvalidState(&'static str),
}

/// Why [`Connection::send`] refused a message; the message is handed back.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("message not queued: {kind:?}")]
pub struct SendError {
    pub kind: SendErrorKind,
    pub msg: Box<Message>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SendErrorKind {
    /// The outgoing queue is at its bounds (backpressure): retry after [`Event::Writable`].
    QueueFull,
    /// The connection is closed.
    Closed,
}

/// What the owner learns from the connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// The session is ready (first time, or again after a reconnect).
    Connected(PeerInfo),
    /// A message from the peer, delivered exactly once per session.
    Message(Message),
    /// KEEPALIVE2_ACK received: the peer echoed this stamp.
    KeepaliveAck { stamp: UTime },
    /// The peer told us the address it sees for us (HELLO).
    MyAddr(EntityAddr),
    /// Acceptor: a CLIENT_IDENT or SESSION_RECONNECT needs the owner's decision (see [`Config::auto_accept`]).
    AcceptRequest(AcceptRequest),
    /// The transport failed; a lossless session survives (`will_resume`), queued messages are kept and
    /// unacknowledged ones will be replayed.
    Faulted { error: ConnError, will_resume: bool },
    /// The session was reset: unsent and unacknowledged messages are dropped, sequence numbers restart. The
    /// peer restarted or the session was lossy.
    Reset { error: ConnError },
    /// The connection is closed for good.
    Closed { error: ConnError },
    /// The outgoing queue dropped below its bounds after [`Connection::send`] refused a message.
    Writable,
}

/// Counters of one connection (all transports of its session).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stats {
    pub messages_sent: u64,
    pub messages_received: u64,
    /// Messages written again after a reconnect because the peer had not acknowledged them.
    pub messages_resent: u64,
    /// Received messages dropped because they were already delivered (replay overlap).
    pub duplicates_dropped: u64,
    pub bytes_in: u64,
    pub bytes_out: u64,
    pub faults: u64,
    pub resumes: u64,
    /// Received payload bytes msgr2 copied after the socket read (segments assembled across receive buffers,
    /// the already-received head of a sink, secure-mode frames).
    pub rx_copied_bytes: u64,
    /// Received bytes that went straight into their segment's own buffer ([`Connection::take_rx_sink`]).
    pub rx_direct_bytes: u64,
    /// Standalone ACK frames written.
    pub acks_sent: u64,
    /// Messages written whose `ack_seq` acknowledged something the peer had not been told yet (an ACK frame
    /// saved, unless the ack was due anyway).
    pub acks_piggybacked: u64,
    /// KEEPALIVE2 and KEEPALIVE2_ACK frames written.
    pub keepalives_sent: u64,
    pub keepalive_acks_sent: u64,
}

/// Who the peer is, once the session is established.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PeerInfo {
    pub peer_type: u8,
    /// `entity_name_t::num` of the peer (its gid in the ident).
    pub peer_num: i64,
    pub peer_addrs: AddrVec,
    /// Ceph features of the peer and the negotiated intersection (use the latter to encode messages).
    pub peer_features: u64,
    pub features: u64,
    /// From AUTH_DONE.
    pub global_id: u64,
    /// Auth identity the acceptor verified (acceptor side only).
    pub auth_name: Option<EntityName>,
    pub con_mode: u32,
    pub lossy: bool,
    /// true when an existing session resumed (SESSION_RECONNECT_OK) instead of starting anew.
    pub resumed: bool,
}

/// An acceptor-side decision point.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AcceptRequest {
    Ident(ClientIdent),
    Reconnect(SessionReconnect),
}

/// Answers an owner can give to [`Event::AcceptRequest`] other than [`Connection::take_over`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AcceptDecision {
    /// CLIENT_IDENT: start a new session on this connection.
    NewSession,
    /// SESSION_RECONNECT: no such session here (SESSION_RESET full=true).
    ResetSession,
    /// Ask the peer to retry with a higher connect_seq / global_seq.
    Retry {
        connect_seq: u64,
    },
    RetryGlobal {
        global_seq: u64,
    },
    /// Connection race lost: tell the peer to wait for our own connection.
    Wait,
    /// Drop the connection.
    Close,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Waiting for the peer's banner.
    Banner,
    /// Waiting for the peer's HELLO.
    Hello,
    AuthConnecting,
    AuthConnectingSign,
    SessionConnecting,
    SessionReconnecting,
    AuthAccepting,
    AuthAcceptingSign,
    SessionAccepting,
    /// Acceptor waiting for its owner's answer to an AcceptRequest.
    AcceptPending,
    Ready,
    /// No transport; a lossless session waiting to resume.
    Standby,
    Closed,
}

impl State {
    fn name(self) -> &'static str {
        match self {
            State::Banner => "BANNER",
            State::Hello => "HELLO",
            State::AuthConnecting => "AUTH_CONNECTING",
            State::AuthConnectingSign => "AUTH_CONNECTING_SIGN",
            State::SessionConnecting => "SESSION_CONNECTING",
            State::SessionReconnecting => "SESSION_RECONNECTING",
            State::AuthAccepting => "AUTH_ACCEPTING",
            State::AuthAcceptingSign => "AUTH_ACCEPTING_SIGN",
            State::SessionAccepting => "SESSION_ACCEPTING",
            State::AcceptPending => "ACCEPT_PENDING",
            State::Ready => "READY",
            State::Standby => "STANDBY",
            State::Closed => "CLOSED",
        }
    }
}

/// Per-socket state: thrown away on a fault, moved between connections by [`Connection::take_over`].
struct Transport {
    /// Which side of *this socket* we are. A lossless session may be carried by sockets in either direction
    /// over its life (Ceph's lossless peers reconnect from whichever side has something to send).
    role: Role,
    state: State,
    decoder: FrameDecoder,
    tx: Option<SecureTx>,
    out: VecDeque<Bytes>,
    /// Bytes sent and received before auth completed, for AUTH_SIGNATURE (None once disabled).
    pre_auth_rx: Option<BytesMut>,
    pre_auth_tx: Option<BytesMut>,
    /// The sent pre-auth bytes once recording stopped, until the peer's AUTH_SIGNATURE is checked.
    pre_auth_tx_done: Option<BytesMut>,
    peer_type: u8,
    session_key: Bytes,
    /// Acceptor: the method of the connector\'s last AUTH_REQUEST (echoed in AUTH_BAD_METHOD).
    auth_method: u32,
    con_mode: u32,
    global_id: u64,
    auth_name: Option<EntityName>,
    pending: Option<AcceptRequest>,
    /// From the peer's CLIENT_IDENT or SERVER_IDENT (the new transport's view of the peer).
    peer_features: u64,
    peer_addrs: AddrVec,
    peer_num: i64,
    peer_global_seq: u64,
    peer_lossy: bool,
    client_cookie: u64,
    last_rx: Option<Instant>,
    /// When a standalone ACK is due if no message has carried the ack by then ([`Config::ack_delay`]). Belongs
    /// to the transport: a reconnect acknowledges through its `msg_seq`.
    ack_due: Option<Instant>,
}

impl Transport {
    fn new(limits: FrameLimits, state: State, role: Role) -> Self {
        Transport {
            role,
            state,
            decoder: FrameDecoder::new(limits),
            tx: None,
            out: VecDeque::new(),
            pre_auth_rx: Some(BytesMut::new()),
            pre_auth_tx: Some(BytesMut::new()),
            pre_auth_tx_done: None,
            peer_type: 0,
            session_key: Bytes::new(),
            auth_method: 0,
            con_mode: CON_MODE_CRC,
            global_id: 0,
            auth_name: None,
            pending: None,
            peer_features: 0,
            peer_addrs: AddrVec::default(),
            peer_num: 0,
            peer_global_seq: 0,
            peer_lossy: false,
            client_cookie: 0,
            last_rx: None,
            ack_due: None,
        }
    }
}

/// Per-session state: survives transport faults on lossless sessions.
#[derive(Debug, Default)]
struct Session {
    client_cookie: u64,
    server_cookie: u64,
    connect_seq: u64,
    peer_global_seq: u64,
    /// Seq of the last message received and delivered.
    in_seq: u64,
    /// Seq of the last message sent.
    out_seq: u64,
    /// in_seq value last sent to the peer (ACK or piggybacked).
    acked_in_seq: u64,
    /// Payload bytes received since `acked_in_seq` was last sent ([`Config::ack_bytes`]).
    unacked_bytes: usize,
    /// Messages not yet written, by priority (highest first), FIFO within a priority.
    queue: PrioQueue<Message>,
    /// Written, not yet acknowledged (lossless only), in seq order.
    sent: VecDeque<Message>,
    /// Messages written on a previous transport and not acknowledged: resent first, with their original seqs,
    /// before anything new (Ceph requeues them at the highest priority).
    requeued: VecDeque<Message>,
    queued_msgs: usize,
    queued_bytes: usize,
    blocked: bool,
    lossy: bool,
    established: bool,
    peer: Option<PeerInfo>,
}

impl Session {
    fn push_back(&mut self, m: Message) {
        self.queued_msgs += 1;
        self.queued_bytes += m.payload_len();
        self.queue.push_back(m.priority, m);
    }

    fn pop_next(&mut self) -> Option<Message> {
        if let Some(m) = self.requeued.pop_front() {
            return Some(m);
        }
        self.queue.pop()
    }

    fn release(&mut self, m: &Message) {
        self.queued_msgs = self.queued_msgs.saturating_sub(1);
        self.queued_bytes = self.queued_bytes.saturating_sub(m.payload_len());
    }

    /// Ceph's requeue_sent: written-but-unacked messages go back to the front of the queue, keeping their seqs.
    fn requeue_sent(&mut self) {
        while let Some(m) = self.sent.pop_back() {
            self.requeued.push_front(m);
        }
    }

    /// Drop requeued messages the peer already has (seq <= `upto`).
    fn discard_requeued_up_to(&mut self, upto: u64) {
        while let Some(m) = self.requeued.front() {
            if m.seq > upto {
                break;
            }
            if let Some(m) = self.requeued.pop_front() {
                self.release(&m);
            }
        }
    }

    /// A new session that keeps the messages queued for the peer: unacknowledged ones go back to the queue
    /// front and everything is renumbered from 1.
    fn restart_keeping_queue(&mut self) {
        self.requeue_sent();
        while let Some(mut m) = self.requeued.pop_back() {
            m.seq = 0;
            self.queue.push_front(m.priority, m);
        }
        self.in_seq = 0;
        self.out_seq = 0;
        self.acked_in_seq = 0;
        self.unacked_bytes = 0;
        self.client_cookie = 0;
        self.server_cookie = 0;
        self.connect_seq = 0;
        self.peer_global_seq = 0;
        self.established = false;
    }

    /// Forget every message and sequence number (a session reset).
    fn reset(&mut self) {
        self.queue.clear();
        self.sent.clear();
        self.requeued.clear();
        self.queued_msgs = 0;
        self.queued_bytes = 0;
        self.in_seq = 0;
        self.out_seq = 0;
        self.acked_in_seq = 0;
        self.unacked_bytes = 0;
        self.client_cookie = 0;
        self.server_cookie = 0;
        self.connect_seq = 0;
        self.peer_global_seq = 0;
        self.established = false;
    }
}

/// One msgr2 connection (see the module documentation).
pub struct Connection {
    cfg: Config,
    t: Transport,
    s: Session,
    client_auth: Option<Box<dyn ClientAuth + Send>>,
    server_auth: Option<Box<dyn ServerAuth + Send>>,
    /// Connector: the address we dialled and the entity type we expect there.
    target_addr: EntityAddr,
    target_type: u8,
    /// Acceptor: the peer's socket address, told to the peer in HELLO (Ceph clients refuse a blank one).
    peer_socket_addr: EntityAddr,
    events: VecDeque<Event>,
    cookie_counter: u64,
    keepalive_due: Option<Instant>,
    /// Our KEEPALIVE2 stamps count from this instant.
    epoch: Instant,
    last_keepalive_ack: Option<Instant>,
    stats: Stats,
    /// Our address as the peer sees it (its HELLO).
    learned_addr: Option<EntityAddr>,
    /// Segments at least this long go into receive sinks ([`Connection::take_rx_sink`]); kept across transports.
    direct_rx_min: Option<usize>,
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection")
            .field("role", &self.t.role)
            .field("state", &self.t.state)
            .field("in_seq", &self.s.in_seq)
            .field("out_seq", &self.s.out_seq)
            .finish_non_exhaustive()
    }
}

fn splitmix64(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

type R<T = ()> = Result<T, ConnError>;

impl Connection {
    /// Open a connection to `target_addr`, where an entity of type `target_type` is expected. The banner is
    /// queued for output at once.
    pub fn connector(
        cfg: Config,
        auth: Box<dyn ClientAuth + Send>,
        target_addr: EntityAddr,
        target_type: u8,
        now: Instant,
    ) -> Self {
        let mut c = Connection::new(cfg, now);
        c.s.lossy = c.cfg.lossy;
        c.client_auth = Some(auth);
        c.target_addr = target_addr;
        c.target_type = target_type;
        c.start_transport(now, Role::Connector);
        c
    }

    /// Serve an accepted socket. The banner is queued for output at once. Give it the socket's peer address
    /// (`set_peer_socket_addr`) before feeding it input: our HELLO carries it, and real Ceph clients abort on a
    /// blank one.
    pub fn acceptor(cfg: Config, auth: Box<dyn ServerAuth + Send>, now: Instant) -> Self {
        let mut c = Connection::new(cfg, now);
        c.server_auth = Some(auth);
        c.start_transport(now, Role::Acceptor);
        c
    }

    fn new(cfg: Config, now: Instant) -> Self {
        let limits = cfg.limits;
        Connection {
            cfg,
            t: Transport::new(limits, State::Closed, Role::Acceptor),
            s: Session::default(),
            client_auth: None,
            server_auth: None,
            target_addr: EntityAddr::default(),
            target_type: 0,
            peer_socket_addr: EntityAddr::default(),
            events: VecDeque::new(),
            cookie_counter: 0,
            keepalive_due: None,
            epoch: now,
            last_keepalive_ack: None,
            stats: Stats::default(),
            learned_addr: None,
            direct_rx_min: None,
        }
    }

    fn start_transport(&mut self, now: Instant, role: Role) {
        let pre_auth = FrameLimits {
            max_segment_len: FrameLimits::PRE_AUTH
                .max_segment_len
                .min(self.cfg.limits.max_segment_len),
            max_frame_len: FrameLimits::PRE_AUTH
                .max_frame_len
                .min(self.cfg.limits.max_frame_len),
        };
        self.fold_rx_counters();
        self.t = Transport::new(pre_auth, State::Banner, role);
        self.t.decoder.set_direct_min(self.direct_rx_min);
        self.t.last_rx = Some(now);
        self.keepalive_due = None;
        let banner = Banner {
            supported: MSGR2_FEATURE_REVISION_1,
            required: 0,
        }
        .encode();
        self.push_out(banner);
    }

    /// Acceptor: the address the accepted socket's peer connects from. Sent in our HELLO as Ceph does (type
    /// msgr2, nonce 0); Ceph clients learn their own address from it and abort on a blank one.
    pub fn set_peer_socket_addr(&mut self, addr: std::net::SocketAddr) {
        self.peer_socket_addr = EntityAddr::msgr2(addr, 0);
    }

    /// Our side of the current (or last) socket.
    pub fn role(&self) -> Role {
        self.t.role
    }

    pub fn is_ready(&self) -> bool {
        self.t.state == State::Ready
    }

    pub fn is_closed(&self) -> bool {
        self.t.state == State::Closed
    }

    /// A lossless session whose transport is gone (connector: call [`Connection::reconnect`]).
    pub fn is_standby(&self) -> bool {
        self.t.state == State::Standby
    }

    pub fn state_name(&self) -> &'static str {
        self.t.state.name()
    }

    /// The peer, once a session was established.
    pub fn peer(&self) -> Option<&PeerInfo> {
        self.s.peer.as_ref()
    }

    /// The negotiated Ceph feature bits (ours ∩ the peer's); 0 before the session is established.
    pub fn features(&self) -> u64 {
        self.s.peer.as_ref().map_or(0, |p| p.features)
    }

    pub fn is_lossy(&self) -> bool {
        self.s.lossy
    }

    /// Messages queued or written-but-unacknowledged, and their payload bytes.
    pub fn queued(&self) -> (usize, usize) {
        (self.s.queued_msgs, self.s.queued_bytes)
    }

    pub fn in_seq(&self) -> u64 {
        self.s.in_seq
    }

    pub fn out_seq(&self) -> u64 {
        self.s.out_seq
    }

    pub fn stats(&self) -> Stats {
        let mut s = self.stats;
        s.rx_copied_bytes += self.t.decoder.copied_bytes();
        s.rx_direct_bytes += self.t.decoder.direct_bytes();
        s
    }

    /// Keep the receive copy counters of a transport about to be replaced.
    fn fold_rx_counters(&mut self) {
        self.stats.rx_copied_bytes += self.t.decoder.copied_bytes();
        self.stats.rx_direct_bytes += self.t.decoder.direct_bytes();
    }

    pub fn last_keepalive_ack(&self) -> Option<Instant> {
        self.last_keepalive_ack
    }

    /// The client cookie of this session (acceptor: the one the connector presented; 0 for lossy sessions).
    pub fn client_cookie(&self) -> u64 {
        self.s.client_cookie
    }

    /// The addresses we advertise: `Config::my_addrs`, with blank IPs filled from what the peer told us in its
    /// HELLO (Ceph's `learned_addr`). With none configured, a connector advertises the learned IP with port 0 and
    /// type ANY (what Ceph clients do; acceptors refuse an empty address), and an acceptor the address it was
    /// reached at (which the connector checks).
    pub fn my_addrs(&self) -> AddrVec {
        let learned = self.learned_addr.and_then(|a| a.addr);
        if self.cfg.my_addrs.0.is_empty() {
            return match (learned, self.t.role) {
                (Some(ip), Role::Connector) => AddrVec::one(EntityAddr {
                    ty: crate::addr::ADDR_TYPE_ANY,
                    nonce: self.cfg.nonce,
                    addr: Some(std::net::SocketAddr::new(ip.ip(), 0)),
                }),
                (Some(_), Role::Acceptor) => AddrVec::one(EntityAddr {
                    nonce: self.cfg.nonce,
                    ..self.learned_addr.unwrap_or_default()
                }),
                (None, _) => AddrVec::default(),
            };
        }
        let mut v = self.cfg.my_addrs.clone();
        if let Some(l) = learned {
            for a in &mut v.0 {
                if let Some(sa) = a.addr.as_mut()
                    && sa.ip().is_unspecified()
                {
                    sa.set_ip(l.ip());
                }
            }
        }
        v
    }

    /// Whether `a` names us: same port and nonce as one of our addresses, and the same IP unless we are bound
    /// to the unspecified address. Without configured addresses anything matches.
    fn is_my_addr(&self, a: &EntityAddr) -> bool {
        if self.cfg.my_addrs.0.is_empty() {
            return true;
        }
        let Some(t) = a.addr else { return false };
        self.cfg.my_addrs.0.iter().any(|m| {
            m.nonce == a.nonce
                && m.addr.is_some_and(|ma| {
                    ma.port() == t.port() && (ma.ip() == t.ip() || ma.ip().is_unspecified())
                })
        })
    }

    fn new_cookie(&mut self) -> u64 {
        loop {
            self.cookie_counter += 1;
            let c = splitmix64(self.cfg.seed ^ splitmix64(self.cookie_counter));
            if c != 0 {
                return c;
            }
        }
    }

    // ---------------------------------------------------------------------------------------------------------
    // Output

    fn push_out(&mut self, b: Bytes) {
        if let Some(tx) = self.t.pre_auth_tx.as_mut() {
            tx.extend_from_slice(&b);
        }
        self.t.out.push_back(b);
    }

    fn send_control(&mut self, c: &Control) -> R {
        let payload = c.encode();
        let bufs = encode_frame(self.t.tx.as_mut(), c.tag(), &[payload], &[ALIGN_DEFAULT])?;
        for b in bufs {
            self.push_out(b);
        }
        Ok(())
    }

    /// The next buffer to write, if any. Messages are framed lazily here, so at most one frame is buffered
    /// inside the connection and queue bounds apply to everything else.
    pub fn poll_output(&mut self) -> Option<Bytes> {
        if self.t.out.is_empty() {
            self.fill_output();
        }
        let b = self.t.out.pop_front();
        if let Some(b) = &b {
            self.stats.bytes_out += b.len() as u64;
        }
        b
    }

    /// Move every buffer ready to write into `out` (for one vectored write).
    pub fn drain_output(&mut self, out: &mut Vec<Bytes>) {
        while let Some(b) = self.poll_output() {
            out.push(b);
        }
    }

    /// Whether [`Connection::poll_output`] would return something.
    pub fn wants_write(&mut self) -> bool {
        if self.t.out.is_empty() {
            self.fill_output();
        }
        !self.t.out.is_empty()
    }

    fn fill_output(&mut self) {
        if self.t.state != State::Ready {
            return;
        }
        if let Some(mut m) = self.s.pop_next() {
            if m.seq == 0 {
                self.s.out_seq += 1;
                m.seq = self.s.out_seq;
            } else {
                self.stats.messages_resent += 1;
            }
            self.stats.messages_sent += 1;
            if self.s.acked_in_seq < self.s.in_seq {
                self.stats.acks_piggybacked += 1;
            }
            m.ack_seq = self.s.in_seq;
            self.s.acked_in_seq = self.s.in_seq;
            self.s.unacked_bytes = 0;
            self.t.ack_due = None;
            match encode_message_frame(self.t.tx.as_mut(), &m, &mut self.t.out) {
                Ok(()) => {}
                Err(e) => {
                    self.s.release(&m);
                    self.fault(ConnError::Frame(e));
                    return;
                }
            }
            if self.s.lossy {
                self.s.release(&m);
            } else {
                self.s.sent.push_back(m);
            }
            self.maybe_unblock();
        } else if self.cfg.ack_delay.is_none()
            && self.acks_wanted()
            && self.s.acked_in_seq < self.s.in_seq
            && let Err(e) = self.send_ack()
        {
            self.fault(e);
        }
    }

    /// Whether the peer wants standalone ACKs: only lossless peers keep a sent queue to trim.
    fn acks_wanted(&self) -> bool {
        !self.s.lossy || self.cfg.ack_lossy
    }

    /// A standalone ACK of everything received so far.
    fn send_ack(&mut self) -> R {
        let seq = self.s.in_seq;
        self.s.acked_in_seq = seq;
        self.s.unacked_bytes = 0;
        self.t.ack_due = None;
        self.stats.acks_sent += 1;
        self.send_control(&Control::Ack { seq })
    }

    fn maybe_unblock(&mut self) {
        if self.s.blocked
            && self.s.queued_msgs < self.cfg.max_queued_messages
            && self.s.queued_bytes < self.cfg.max_queued_bytes
        {
            self.s.blocked = false;
            self.events.push_back(Event::Writable);
        }
    }

    /// Queue a message. Refused (and handed back) when the queue bounds are reached — wait for
    /// [`Event::Writable`] — or when the connection is closed.
    pub fn send(&mut self, mut msg: Message) -> Result<(), SendError> {
        if self.t.state == State::Closed {
            return Err(SendError {
                kind: SendErrorKind::Closed,
                msg: Box::new(msg),
            });
        }
        let over_bytes =
            self.s.queued_bytes + msg.payload_len() > self.cfg.max_queued_bytes && self.s.queued_msgs > 0;
        if self.s.queued_msgs >= self.cfg.max_queued_messages || over_bytes {
            self.s.blocked = true;
            return Err(SendError {
                kind: SendErrorKind::QueueFull,
                msg: Box::new(msg),
            });
        }
        msg.seq = 0;
        self.s.push_back(msg);
        Ok(())
    }

    /// Queue a KEEPALIVE2 now (sent only while ready).
    pub fn send_keepalive(&mut self, now: Instant) {
        if self.t.state == State::Ready {
            let ns = now.saturating_duration_since(self.epoch).as_nanos() as u64;
            self.stats.keepalives_sent += 1;
            if let Err(e) = self.send_control(&Control::Keepalive2 {
                stamp: UTime::from_nanos(ns),
            }) {
                self.fault(e);
            }
        }
    }

    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    /// Events are waiting for [`Connection::poll_event`].
    pub fn has_events(&self) -> bool {
        !self.events.is_empty()
    }

    // ---------------------------------------------------------------------------------------------------------
    // Timers

    /// When [`Connection::handle_timeout`] should next be called.
    pub fn poll_timeout(&self) -> Option<Instant> {
        let idle = match (self.cfg.idle_timeout, self.t.last_rx) {
            (Some(d), Some(t)) if self.has_transport() => Some(t + d),
            _ => None,
        };
        let (ka, ack) = if self.t.state == State::Ready {
            (self.keepalive_due, self.t.ack_due)
        } else {
            (None, None)
        };
        [idle, ka, ack].into_iter().flatten().min()
    }

    fn has_transport(&self) -> bool {
        !matches!(self.t.state, State::Standby | State::Closed)
    }

    pub fn handle_timeout(&mut self, now: Instant) {
        if !self.has_transport() {
            return;
        }
        if let (Some(d), Some(t)) = (self.cfg.idle_timeout, self.t.last_rx)
            && now >= t + d
        {
            self.fault(ConnError::IdleTimeout(d));
            return;
        }
        if self.t.state == State::Ready
            && let Some(due) = self.keepalive_due
            && now >= due
        {
            self.send_keepalive(now);
            self.keepalive_due = self.cfg.keepalive_interval.map(|i| now + i);
        }
        if self.t.state == State::Ready
            && let Some(due) = self.t.ack_due
            && now >= due
        {
            self.t.ack_due = None;
            if self.s.acked_in_seq < self.s.in_seq
                && let Err(e) = self.send_ack()
            {
                self.fault(e);
            }
        }
    }

    // ---------------------------------------------------------------------------------------------------------
    // Faults

    /// The socket is gone (EOF, reset, write error).
    pub fn handle_transport_closed(&mut self) {
        if self.has_transport() {
            self.fault(ConnError::TransportClosed);
        }
    }

    /// Close for good, dropping everything.
    pub fn close(&mut self) {
        if self.t.state != State::Closed {
            self.t.state = State::Closed;
            self.t.out.clear();
            self.events.push_back(Event::Closed {
                error: ConnError::Closed,
            });
        }
    }

    fn close_with(&mut self, error: ConnError) {
        if self.t.state != State::Closed {
            self.t.state = State::Closed;
            self.events.push_back(Event::Closed { error });
        }
    }

    /// A transport failure. Lossy sessions (or sessions never established by an acceptor) end; lossless ones
    /// keep their queues and wait for a new transport.
    fn fault(&mut self, error: ConnError) {
        if !self.has_transport() {
            return;
        }
        let fatal = matches!(
            error,
            ConnError::Auth(_)
                | ConnError::BadSignature
                | ConnError::MissingFeatures { .. }
                | ConnError::Msgr2Features(_)
                | ConnError::Rev0Peer
                | ConnError::WrongPeer { .. }
        );
        let lossy_ready = self.s.lossy && self.s.established;
        let acceptor_unestablished = self.t.role == Role::Acceptor && !self.s.established;
        if fatal || lossy_ready || acceptor_unestablished {
            if self.s.established {
                self.s.reset();
                self.events.push_back(Event::Reset { error: error.clone() });
            }
            self.t.out.clear();
            self.t.decoder.reset();
            self.close_with(error);
            return;
        }
        self.stats.faults += 1;
        // Lossless (or a connector still establishing): keep the session, drop the transport.
        self.s.requeue_sent();
        self.t.decoder.reset();
        self.t.out.clear();
        self.t.tx = None;
        self.t.state = State::Standby;
        self.events.push_back(Event::Faulted {
            error,
            will_resume: true,
        });
    }

    /// Start over on a fresh outgoing socket after a fault (banner, auth, then SESSION_RECONNECT if a session
    /// exists, CLIENT_IDENT otherwise). Queued and unacknowledged messages are kept. Works for sessions we
    /// accepted too (Ceph's lossless peers reconnect from whichever side has something to send): the target is
    /// the peer's msgr2 address from its ident, and a [`ClientAuth`] must have been given with
    /// [`Connection::set_client_auth`].
    pub fn reconnect(&mut self, now: Instant) -> R {
        if self.t.state != State::Standby {
            return Err(ConnError::InvalidState(self.t.state.name()));
        }
        if self.client_auth.is_none() {
            return Err(ConnError::InvalidState(
                "reconnect needs a ClientAuth (set_client_auth)",
            ));
        }
        if self.t.role == Role::Acceptor {
            let peer = self
                .s
                .peer
                .as_ref()
                .ok_or(ConnError::InvalidState("no established session to resume"))?;
            let target = peer
                .peer_addrs
                .msgr2()
                .copied()
                .ok_or(ConnError::InvalidState("the peer advertised no msgr2 address"))?;
            self.target_addr = target;
            self.target_type = peer.peer_type;
        }
        if self.s.server_cookie != 0 {
            self.s.connect_seq += 1;
        }
        self.cfg.global_seq += 1;
        self.start_transport(now, Role::Connector);
        Ok(())
    }

    /// Give an accepted connection the means to reconnect actively (see [`Connection::reconnect`]).
    pub fn set_client_auth(&mut self, auth: Box<dyn ClientAuth + Send>) {
        self.client_auth = Some(auth);
    }

    /// The address this connection dials when it (re)connects.
    pub fn target_addr(&self) -> EntityAddr {
        self.target_addr
    }

    /// Acceptor owner: set our global_seq for SERVER_IDENT (a messenger-wide counter in Ceph).
    pub fn set_global_seq(&mut self, gs: u64) {
        self.cfg.global_seq = gs;
    }

    // ---------------------------------------------------------------------------------------------------------
    // Input

    /// Bytes received from the socket. On `Err` the transport is unusable (the matching `Faulted`/`Closed`
    /// event is queued); drop the socket.
    ///
    /// This copies `data`; a caller that owns its receive buffer should use [`Connection::handle_input_bytes`].
    pub fn handle_input(&mut self, now: Instant, data: &[u8]) -> R {
        self.handle_input_bytes(now, Bytes::copy_from_slice(data))
    }

    /// Receive segments of at least `min` bytes straight into buffers of their own (crc mode, ready sessions):
    /// the IO layer then asks [`Connection::take_rx_sink`] before each receive. Off by default.
    pub fn set_direct_rx(&mut self, min: Option<usize>) {
        self.direct_rx_min = min;
        self.t.decoder.set_direct_min(min);
    }

    /// Where the next receive should go: `Some(sink)` when the next bytes on the wire are (the rest of) a large
    /// segment — receive at most [`RxSink::remaining`] bytes into it and return it with
    /// [`Connection::handle_rx_sink`] before any other input. Its buffer is page-aligned and becomes the
    /// segment (e.g. a MESSAGE's data) without another copy.
    pub fn take_rx_sink(&mut self) -> Option<RxSink> {
        if !self.has_transport() {
            return None;
        }
        let ready = self.t.state == State::Ready;
        self.t.decoder.take_sink(ready)
    }

    /// At most how many bytes the next plain receive should take (`None`: any): stops short of a large
    /// segment so it can be received whole into a sink.
    pub fn rx_stream_limit(&self) -> Option<usize> {
        if self.t.state != State::Ready {
            return None;
        }
        self.t.decoder.stream_limit()
    }

    /// A sink back from the IO layer after a receive of `received` bytes into it. Errors as for
    /// [`Connection::handle_input`].
    pub fn handle_rx_sink(&mut self, now: Instant, sink: RxSink, received: usize) -> R {
        if !self.has_transport() {
            return Err(ConnError::InvalidState(self.t.state.name()));
        }
        self.t.last_rx = Some(now);
        self.stats.bytes_in += received as u64;
        if let Err(e) = self.t.decoder.put_sink(sink) {
            let e = ConnError::Frame(e);
            self.fault(e.clone());
            return Err(e);
        }
        match self.process(now) {
            Ok(()) => Ok(()),
            Err(e) => {
                self.fault(e.clone());
                Err(e)
            }
        }
    }

    /// A sink taken with [`Connection::take_rx_sink`] back unused (the receive found nothing to read): it is
    /// handed out again by the next [`Connection::take_rx_sink`]. Nothing was received, so nothing is counted.
    pub fn return_rx_sink(&mut self, sink: RxSink) {
        if !self.has_transport() {
            return;
        }
        if let Err(e) = self.t.decoder.put_sink(sink) {
            self.fault(ConnError::Frame(e));
        }
    }

    /// Bytes received from the socket, kept without copying: in crc mode MESSAGE segments (front, middle, data)
    /// come out as slices of these buffers unless a segment spans two of them. Errors as for
    /// [`Connection::handle_input`].
    pub fn handle_input_bytes(&mut self, now: Instant, data: Bytes) -> R {
        if !self.has_transport() {
            return Err(ConnError::InvalidState(self.t.state.name()));
        }
        self.t.last_rx = Some(now);
        self.stats.bytes_in += data.len() as u64;
        self.t.decoder.push_bytes(data);
        // While the owner decides on an AcceptRequest the peer should be waiting for our answer; do not let it
        // pile up input meanwhile.
        if self.t.state == State::AcceptPending
            && self.t.decoder.buffered() > FrameLimits::PRE_AUTH.max_frame_len as usize
        {
            let e = ConnError::InvalidState("peer kept sending while its ident awaited an answer");
            self.fault(e.clone());
            return Err(e);
        }
        match self.process(now) {
            Ok(()) => Ok(()),
            Err(e) => {
                self.fault(e.clone());
                Err(e)
            }
        }
    }

    fn process(&mut self, now: Instant) -> R {
        loop {
            match self.t.state {
                State::Banner => {
                    if !self.read_banner()? {
                        return Ok(());
                    }
                }
                State::Closed | State::Standby | State::AcceptPending => return Ok(()),
                _ => {
                    // The raw frame is only needed while the pre-auth transcript is kept.
                    self.t.decoder.set_keep_raw(self.t.pre_auth_rx.is_some());
                    let Some(frame) = self.t.decoder.next_frame()? else {
                        return Ok(());
                    };
                    if let (Some(rx), Some(raw)) = (self.t.pre_auth_rx.as_mut(), frame.raw.as_ref()) {
                        rx.extend_from_slice(raw);
                    }
                    self.handle_frame(now, frame)?;
                }
            }
        }
    }

    fn read_banner(&mut self) -> R<bool> {
        if self.t.decoder.buffered() < BANNER_HEAD_LEN + BANNER_PAYLOAD_LEN {
            // Reject a wrong prefix early rather than waiting for 26 bytes that may never come.
            return Ok(false);
        }
        let Some(b) = self.t.decoder.take_raw(BANNER_HEAD_LEN + BANNER_PAYLOAD_LEN) else {
            return Ok(false);
        };
        if let Some(rx) = self.t.pre_auth_rx.as_mut() {
            rx.extend_from_slice(&b);
        }
        if &b[..8] != BANNER_PREFIX {
            return Err(ConnError::Banner(format!(
                "prefix {:?} is not \"ceph v2\\n\"",
                String::from_utf8_lossy(&b[..8])
            )));
        }
        let len = u16::from_le_bytes([b[8], b[9]]) as usize;
        if len != BANNER_PAYLOAD_LEN {
            return Err(ConnError::Banner(format!("payload length {len}, expected 16")));
        }
        let u64_at = |o: usize| {
            let mut a = [0u8; 8];
            a.copy_from_slice(&b[o..o + 8]);
            u64::from_le_bytes(a)
        };
        let peer = Banner {
            supported: u64_at(10),
            required: u64_at(18),
        };
        let ours = MSGR2_FEATURE_REVISION_1;
        if peer.required & !ours != 0 {
            return Err(ConnError::Msgr2Features(peer.required & !ours));
        }
        if peer.supported & MSGR2_FEATURE_REVISION_1 == 0 {
            return Err(ConnError::Rev0Peer);
        }
        // HELLO: our entity type and the address we see for the peer.
        let peer_addr = match self.t.role {
            Role::Connector => self.target_addr,
            Role::Acceptor => self.peer_socket_addr,
        };
        self.t.state = State::Hello;
        self.send_control(&Control::Hello {
            entity_type: self.cfg.entity_type,
            peer_addr,
        })?;
        Ok(true)
    }

    fn unexpected(&self, tag: Tag) -> ConnError {
        ConnError::Unexpected {
            tag,
            state: self.t.state.name(),
        }
    }

    fn handle_frame(&mut self, now: Instant, frame: Frame) -> R {
        let tag = frame.tag().ok_or(FrameError::UnknownTag(frame.tag))?;
        if tag == Tag::Message {
            if self.t.state != State::Ready {
                return Err(self.unexpected(tag));
            }
            let m = Message::from_segments(&frame.segments)?;
            return self.handle_message(now, m);
        }
        let ctl = Control::decode(tag, frame.segments[0].clone()).map_err(|e| ConnError::Payload {
            what: tag.name(),
            detail: e.to_string(),
        })?;
        match (self.t.state, ctl) {
            (
                State::Hello,
                Control::Hello {
                    entity_type,
                    peer_addr,
                },
            ) => {
                self.t.peer_type = entity_type;
                if peer_addr.addr.is_some() {
                    self.learned_addr = Some(peer_addr);
                    self.events.push_back(Event::MyAddr(peer_addr));
                }
                match self.t.role {
                    Role::Connector => {
                        if self.target_type != 0 && entity_type != self.target_type {
                            return Err(ConnError::WrongPeer {
                                peer: crate::types::entity_type_name(entity_type).into(),
                                target: crate::types::entity_type_name(self.target_type).into(),
                            });
                        }
                        self.t.state = State::AuthConnecting;
                        let ctx = self.auth_ctx();
                        let req = self.client_auth_mut()?.initial_request(&ctx)?;
                        self.send_control(&Control::AuthRequest {
                            method: req.method,
                            preferred_modes: req.preferred_modes,
                            payload: req.payload,
                        })
                    }
                    Role::Acceptor => {
                        self.t.state = State::AuthAccepting;
                        Ok(())
                    }
                }
            }
            // ---- connector auth
            (
                State::AuthConnecting,
                Control::AuthBadMethod {
                    method,
                    result,
                    allowed_methods,
                    allowed_modes,
                },
            ) => {
                let req = self.client_auth_mut()?.handle_bad_method(
                    method,
                    result,
                    &allowed_methods,
                    &allowed_modes,
                )?;
                self.send_control(&Control::AuthRequest {
                    method: req.method,
                    preferred_modes: req.preferred_modes,
                    payload: req.payload,
                })
            }
            (State::AuthConnecting, Control::AuthReplyMore { payload }) => {
                let reply = self.client_auth_mut()?.handle_reply_more(payload)?;
                self.send_control(&Control::AuthRequestMore { payload: reply })
            }
            (
                State::AuthConnecting,
                Control::AuthDone {
                    global_id,
                    con_mode,
                    payload,
                },
            ) => {
                let done = self
                    .client_auth_mut()?
                    .handle_done(global_id, con_mode, payload)?;
                self.t.global_id = global_id;
                self.t.con_mode = con_mode;
                self.t.session_key = done.session_key;
                self.switch_mode(&done.connection_secret)?;
                let rx = self.t.pre_auth_rx.take().unwrap_or_default();
                let sig = self.signature(&rx);
                self.t.pre_auth_tx_freeze();
                self.t.state = State::AuthConnectingSign;
                self.send_control(&Control::AuthSignature { sha256: sig })
            }
            (State::AuthConnectingSign, Control::AuthSignature { sha256 }) => {
                self.check_signature(&sha256)?;
                if self.s.server_cookie == 0 {
                    self.send_client_ident()
                } else {
                    self.send_reconnect()
                }
            }
            // ---- connector session
            (State::SessionConnecting, Control::ServerIdent(si)) => self.handle_server_ident(now, si),
            (State::SessionConnecting, Control::IdentMissingFeatures { features }) => {
                Err(ConnError::MissingFeatures { missing: features })
            }
            (State::SessionConnecting | State::SessionReconnecting, Control::Wait) => Err(ConnError::Wait),
            (State::SessionReconnecting, Control::SessionReconnectOk { msg_seq }) => {
                self.s.discard_requeued_up_to(msg_seq);
                self.become_ready(now, true);
                Ok(())
            }
            (State::SessionReconnecting, Control::SessionReset { full }) => {
                if full {
                    self.reset_session(ConnError::SessionReset);
                } else {
                    self.s.server_cookie = 0;
                    self.s.connect_seq = 0;
                    self.s.in_seq = 0;
                    self.s.acked_in_seq = 0;
                    self.s.unacked_bytes = 0;
                }
                self.send_client_ident()
            }
            (State::SessionReconnecting, Control::SessionRetry { connect_seq }) => {
                self.s.connect_seq = connect_seq + 1;
                self.send_reconnect()
            }
            (State::SessionReconnecting, Control::SessionRetryGlobal { global_seq }) => {
                self.cfg.global_seq = self.cfg.global_seq.max(global_seq) + 1;
                self.send_reconnect()
            }
            // ---- acceptor auth
            (
                State::AuthAccepting,
                Control::AuthRequest {
                    method,
                    preferred_modes,
                    payload,
                },
            ) => {
                let ctx = self.auth_ctx();
                self.t.auth_method = method;
                let step = self
                    .server_auth_mut()?
                    .handle_request(&ctx, method, &preferred_modes, payload)?;
                self.handle_auth_step(step, &preferred_modes)
            }
            (State::AuthAccepting, Control::AuthRequestMore { payload }) => {
                let step = self.server_auth_mut()?.handle_request_more(payload)?;
                self.handle_auth_step(step, &[])
            }
            (State::AuthAcceptingSign, Control::AuthSignature { sha256 }) => {
                self.check_signature(&sha256)?;
                self.t.state = State::SessionAccepting;
                Ok(())
            }
            // ---- acceptor session
            (State::SessionAccepting, Control::ClientIdent(ci)) => self.handle_client_ident(now, ci),
            (State::SessionAccepting, Control::SessionReconnect(r)) => {
                self.t.peer_addrs = r.addrs.clone();
                self.t.peer_global_seq = r.global_seq;
                self.t.client_cookie = r.client_cookie;
                if self.cfg.auto_accept {
                    self.send_control(&Control::SessionReset { full: true })
                } else {
                    self.t.state = State::AcceptPending;
                    self.t.pending = Some(AcceptRequest::Reconnect(r.clone()));
                    self.events
                        .push_back(Event::AcceptRequest(AcceptRequest::Reconnect(r)));
                    Ok(())
                }
            }
            // ---- ready
            (State::Ready, Control::Ack { seq }) => {
                self.handle_ack(seq);
                Ok(())
            }
            (State::Ready, Control::Keepalive2 { stamp }) => {
                self.stats.keepalive_acks_sent += 1;
                self.send_control(&Control::Keepalive2Ack { stamp })
            }
            (State::Ready, Control::Keepalive2Ack { stamp }) => {
                self.last_keepalive_ack = Some(now);
                self.events.push_back(Event::KeepaliveAck { stamp });
                Ok(())
            }
            (_, ctl) => Err(self.unexpected(ctl.tag())),
        }
    }

    fn auth_ctx(&self) -> AuthContext {
        AuthContext {
            local_type: self.cfg.entity_type,
            peer_type: self.t.peer_type,
        }
    }

    fn client_auth_mut(&mut self) -> R<&mut (dyn ClientAuth + Send + 'static)> {
        self.client_auth
            .as_deref_mut()
            .ok_or(ConnError::InvalidState("connector without ClientAuth"))
    }

    fn server_auth_mut(&mut self) -> R<&mut (dyn ServerAuth + Send + 'static)> {
        self.server_auth
            .as_deref_mut()
            .ok_or(ConnError::InvalidState("acceptor without ServerAuth"))
    }

    fn handle_auth_step(&mut self, step: AuthStep, preferred_modes: &[u32]) -> R {
        match step {
            AuthStep::More(payload) => self.send_control(&Control::AuthReplyMore { payload }),
            AuthStep::Bad {
                result,
                allowed_methods,
                allowed_modes,
            } => self.send_control(&Control::AuthBadMethod {
                method: self.t.auth_method,
                result,
                allowed_methods,
                allowed_modes,
            }),
            AuthStep::Done(done) => {
                if !preferred_modes.is_empty() && !preferred_modes.contains(&done.con_mode) {
                    return Err(ConnError::Auth(AuthError::Protocol(format!(
                        "server auth chose mode {} not offered ({preferred_modes:?})",
                        done.con_mode
                    ))));
                }
                self.t.global_id = done.global_id;
                self.t.con_mode = done.con_mode;
                self.t.session_key = done.session_key;
                self.t.auth_name = Some(done.peer_name);
                // AUTH_DONE still goes out in crc mode and counts as pre-auth bytes.
                self.send_control(&Control::AuthDone {
                    global_id: done.global_id,
                    con_mode: done.con_mode,
                    payload: done.payload,
                })?;
                self.switch_mode(&done.connection_secret)?;
                let rx = self.t.pre_auth_rx.take().unwrap_or_default();
                let sig = self.signature(&rx);
                self.t.pre_auth_tx_freeze();
                self.t.state = State::AuthAcceptingSign;
                self.send_control(&Control::AuthSignature { sha256: sig })
            }
        }
    }

    fn switch_mode(&mut self, secret: &Bytes) -> R {
        // Authenticated from here on: the session's frame limits apply.
        self.t.decoder.set_limits(self.cfg.limits);
        match self.t.con_mode {
            CON_MODE_CRC => Ok(()),
            CON_MODE_SECURE => {
                let p = self.cfg.crypto.clone();
                self.t.tx = Some(SecureTx::new(p.as_ref(), secret, self.t.role)?);
                self.t
                    .decoder
                    .set_secure(Some(SecureRx::new(p.as_ref(), secret, self.t.role)?));
                Ok(())
            }
            m => Err(ConnError::Auth(AuthError::Protocol(format!(
                "unknown connection mode {m}"
            )))),
        }
    }

    /// HMAC-SHA256 keyed by the session key; all zeros without one (auth none), as Ceph does.
    fn signature(&self, data: &[u8]) -> [u8; 32] {
        if self.t.session_key.is_empty() {
            [0; 32]
        } else {
            self.cfg.crypto.hmac_sha256(&self.t.session_key, &[data])
        }
    }

    fn check_signature(&mut self, got: &[u8; 32]) -> R {
        let tx = self.t.pre_auth_tx_done.take().unwrap_or_default();
        let want = self.signature(&tx);
        // Constant-time comparison is not needed for a value the peer computed over bytes it already knows, but
        // it costs nothing.
        let diff = want.iter().zip(got.iter()).fold(0u8, |a, (x, y)| a | (x ^ y));
        if diff != 0 {
            return Err(ConnError::BadSignature);
        }
        Ok(())
    }

    fn send_client_ident(&mut self) -> R {
        if !self.s.lossy && self.s.client_cookie == 0 {
            self.s.client_cookie = self.new_cookie();
        }
        self.t.state = State::SessionConnecting;
        let ci = ClientIdent {
            addrs: self.my_addrs(),
            target_addr: self.target_addr,
            gid: self.cfg.entity_num,
            global_seq: self.cfg.global_seq,
            supported_features: self.cfg.features_supported,
            required_features: self.cfg.features_required | FEATURE_MSG_ADDR2,
            flags: if self.s.lossy { IDENT_FLAG_LOSSY } else { 0 },
            cookie: self.s.client_cookie,
        };
        self.send_control(&Control::ClientIdent(ci))
    }

    fn send_reconnect(&mut self) -> R {
        self.t.state = State::SessionReconnecting;
        let r = SessionReconnect {
            addrs: self.my_addrs(),
            client_cookie: self.s.client_cookie,
            server_cookie: self.s.server_cookie,
            global_seq: self.cfg.global_seq,
            connect_seq: self.s.connect_seq,
            msg_seq: self.s.in_seq,
        };
        // msg_seq acknowledges everything received so far (the acceptor trims its sent queue by it).
        self.s.acked_in_seq = self.s.in_seq;
        self.s.unacked_bytes = 0;
        self.send_control(&Control::SessionReconnect(r))
    }

    fn handle_server_ident(&mut self, now: Instant, si: ServerIdent) -> R {
        if self.target_addr.addr.is_some()
            && !si.addrs.0.is_empty()
            && !si.addrs.0.iter().any(|a| a.addr == self.target_addr.addr)
        {
            return Err(ConnError::WrongPeer {
                peer: si.addrs.to_string(),
                target: self.target_addr.to_string(),
            });
        }
        let missing = self.cfg.features_required & !si.supported_features;
        if missing != 0 {
            return Err(ConnError::MissingFeatures { missing });
        }
        self.s.server_cookie = si.cookie;
        self.s.peer_global_seq = si.global_seq;
        self.s.lossy = si.flags & IDENT_FLAG_LOSSY != 0;
        self.t.peer_features = si.supported_features;
        self.t.peer_addrs = si.addrs;
        self.t.peer_num = si.gid;
        self.become_ready(now, false);
        Ok(())
    }

    fn handle_client_ident(&mut self, now: Instant, ci: ClientIdent) -> R {
        // Ceph refuses an ident without an address, and one aimed at another incarnation of us (a stale nonce in
        // the peer's map after we restarted): the peer then refreshes its maps.
        if ci.addrs.0.is_empty() || ci.addrs.0[0] == EntityAddr::default() {
            return Err(ConnError::WrongPeer {
                peer: "a peer with no address".into(),
                target: ci.target_addr.to_string(),
            });
        }
        if !self.is_my_addr(&ci.target_addr) {
            return Err(ConnError::WrongPeer {
                peer: format!("a peer dialling {}", ci.target_addr),
                target: self.my_addrs().to_string(),
            });
        }
        let missing = self.cfg.features_required & !ci.supported_features;
        if missing != 0 {
            self.send_control(&Control::IdentMissingFeatures { features: missing })?;
            return Ok(());
        }
        let theirs_missing = ci.required_features & !self.cfg.features_supported;
        if theirs_missing != 0 {
            self.send_control(&Control::IdentMissingFeatures {
                features: theirs_missing,
            })?;
            return Ok(());
        }
        self.t.peer_features = ci.supported_features;
        self.t.peer_addrs = ci.addrs.clone();
        self.t.peer_num = ci.gid;
        self.t.peer_global_seq = ci.global_seq;
        // Ceph decides by the acceptor's policy for the peer type; standard policies agree with the connector's flag,
        // so a lossy policy here (Config::lossy) or a lossy connector makes the session lossy.
        self.t.peer_lossy = self.cfg.lossy || ci.flags & IDENT_FLAG_LOSSY != 0;
        self.t.client_cookie = ci.cookie;
        if self.cfg.auto_accept {
            self.accept_new_session(now)
        } else {
            self.t.state = State::AcceptPending;
            self.t.pending = Some(AcceptRequest::Ident(ci.clone()));
            self.events
                .push_back(Event::AcceptRequest(AcceptRequest::Ident(ci)));
            Ok(())
        }
    }

    /// Acceptor: send SERVER_IDENT and start a fresh session on this connection.
    fn accept_new_session(&mut self, now: Instant) -> R {
        self.accept_session(now, false)
    }

    /// Send SERVER_IDENT and start a session; `keep_queue` keeps the messages queued for this peer (renumbered
    /// from 1 in the new session), otherwise they are dropped.
    fn accept_session(&mut self, now: Instant, keep_queue: bool) -> R {
        if keep_queue {
            self.s.restart_keeping_queue();
        } else {
            self.s.reset();
        }
        self.s.lossy = self.t.peer_lossy;
        self.s.client_cookie = self.t.client_cookie;
        self.s.peer_global_seq = self.t.peer_global_seq;
        if !self.s.lossy {
            self.s.server_cookie = self.new_cookie();
        }
        let si = ServerIdent {
            addrs: self.my_addrs(),
            gid: self.cfg.entity_num,
            global_seq: self.cfg.global_seq,
            supported_features: self.cfg.features_supported,
            required_features: self.cfg.features_required | FEATURE_MSG_ADDR2,
            flags: if self.s.lossy { IDENT_FLAG_LOSSY } else { 0 },
            cookie: self.s.server_cookie,
        };
        self.send_control(&Control::ServerIdent(si))?;
        self.become_ready(now, false);
        Ok(())
    }

    fn become_ready(&mut self, now: Instant, resumed: bool) {
        if resumed {
            self.stats.resumes += 1;
        }
        self.t.state = State::Ready;
        self.s.established = true;
        let peer = PeerInfo {
            peer_type: self.t.peer_type,
            peer_num: self.t.peer_num,
            peer_addrs: self.t.peer_addrs.clone(),
            peer_features: self.t.peer_features,
            features: self.t.peer_features & self.cfg.features_supported,
            global_id: self.t.global_id,
            auth_name: self.t.auth_name.clone(),
            con_mode: self.t.con_mode,
            lossy: self.s.lossy,
            resumed,
        };
        self.s.peer = Some(peer.clone());
        self.keepalive_due = self.cfg.keepalive_interval.map(|i| now + i);
        self.events.push_back(Event::Connected(peer));
    }

    fn reset_session(&mut self, error: ConnError) {
        let was = self.s.established || self.s.queued_msgs > 0;
        let lossy = self.s.lossy;
        self.s.reset();
        self.s.lossy = lossy;
        if was {
            self.events.push_back(Event::Reset { error });
        }
        self.maybe_unblock();
    }

    fn handle_message(&mut self, now: Instant, m: Message) -> R {
        self.handle_ack(m.ack_seq);
        if m.seq <= self.s.in_seq {
            // Already delivered before a reconnect: the replay overlapped. Dropping it is what makes delivery
            // exactly-once.
            self.stats.duplicates_dropped += 1;
            return Ok(());
        }
        self.s.in_seq = m.seq;
        self.stats.messages_received += 1;
        self.s.unacked_bytes = self.s.unacked_bytes.saturating_add(m.payload_len());
        self.events.push_back(Event::Message(m));
        if !self.acks_wanted() {
            return Ok(());
        }
        let due = self.s.in_seq.saturating_sub(self.s.acked_in_seq) >= self.cfg.ack_every.max(1)
            || self.s.unacked_bytes >= self.cfg.ack_bytes;
        if due && self.s.queue.is_empty() {
            self.send_ack()?;
        } else if let Some(d) = self.cfg.ack_delay
            && self.t.ack_due.is_none()
        {
            // The first unacknowledged message starts the clock; later ones ride on the same deadline, so a
            // stream of messages cannot postpone the ACK forever.
            self.t.ack_due = Some(now + d);
        }
        Ok(())
    }

    fn handle_ack(&mut self, seq: u64) {
        if self.s.lossy {
            return;
        }
        while let Some(m) = self.s.sent.front() {
            if m.seq > seq {
                break;
            }
            if let Some(m) = self.s.sent.pop_front() {
                self.s.release(&m);
            }
        }
        self.maybe_unblock();
    }

    // ---------------------------------------------------------------------------------------------------------
    // Acceptor decisions

    /// The pending acceptor request, if this connection waits for its owner.
    pub fn pending_accept(&self) -> Option<&AcceptRequest> {
        self.t.pending.as_ref()
    }

    /// Answer an [`Event::AcceptRequest`] without another connection involved.
    pub fn resolve_accept(&mut self, now: Instant, d: AcceptDecision) -> R {
        let Some(req) = self.t.pending.take() else {
            return Err(ConnError::InvalidState(self.t.state.name()));
        };
        self.t.state = State::SessionAccepting;
        let r = match (d, &req) {
            (AcceptDecision::NewSession, AcceptRequest::Ident(_)) => self.accept_new_session(now),
            (AcceptDecision::ResetSession, AcceptRequest::Reconnect(_)) => {
                self.send_control(&Control::SessionReset { full: true })
            }
            (AcceptDecision::Retry { connect_seq }, _) => {
                self.send_control(&Control::SessionRetry { connect_seq })
            }
            (AcceptDecision::RetryGlobal { global_seq }, _) => {
                self.send_control(&Control::SessionRetryGlobal { global_seq })
            }
            (AcceptDecision::Wait, _) => self.send_control(&Control::Wait),
            (AcceptDecision::Close, _) => {
                self.close();
                Ok(())
            }
            (d, req) => {
                self.t.pending = Some(req.clone());
                self.t.state = State::AcceptPending;
                return Err(ConnError::InvalidState(match d {
                    AcceptDecision::NewSession => "NewSession answers only a CLIENT_IDENT",
                    _ => "ResetSession answers only a SESSION_RECONNECT",
                }));
            }
        };
        let r = r.and_then(|()| self.process(now));
        if let Err(e) = &r {
            self.fault(e.clone());
        }
        r
    }

    /// Acceptor: `new` holds a freshly accepted transport whose pending request (SESSION_RECONNECT or
    /// CLIENT_IDENT) names the session held by `self` (the owner found it by peer address or cookie). Applies
    /// Ceph's rules and either moves `new`'s transport into `self` — the session resumes (RECONNECT_OK, replay)
    /// or restarts (SERVER_IDENT) on it, and `new` is closed as replaced — or answers on `new` (RESET, RETRY,
    /// RETRY_GLOBAL, WAIT). Returns the decision taken.
    pub fn take_over(&mut self, new: &mut Connection, now: Instant) -> R<TakeOver> {
        let Some(req) = new.t.pending.clone() else {
            return Err(ConnError::InvalidState(new.t.state.name()));
        };
        let decision = decide(self, new, &req);
        let answer_on_new = |new: &mut Connection, c: Option<Control>| -> R {
            new.t.pending = None;
            new.t.state = State::SessionAccepting;
            match c {
                Some(c) => new.send_control(&c),
                None => {
                    new.close_with(ConnError::Replaced);
                    Ok(())
                }
            }
        };
        match decision {
            TakeOver::Reset { full } => answer_on_new(new, Some(Control::SessionReset { full }))?,
            TakeOver::Retry { connect_seq } => {
                answer_on_new(new, Some(Control::SessionRetry { connect_seq }))?
            }
            TakeOver::RetryGlobal { global_seq } => {
                answer_on_new(new, Some(Control::SessionRetryGlobal { global_seq }))?
            }
            TakeOver::Wait => answer_on_new(new, Some(Control::Wait))?,
            TakeOver::Stale => answer_on_new(new, None)?,
            TakeOver::Resumed
            | TakeOver::Restarted
            | TakeOver::NewSessionOnExisting { .. }
            | TakeOver::RaceWon => {
                // Move the socket's transport into the existing connection; whatever transport it had is dropped.
                let had_transport = self.has_transport();
                let old = std::mem::replace(
                    &mut self.t,
                    Transport::new(self.cfg.limits, State::Closed, Role::Acceptor),
                );
                drop(old);
                if had_transport {
                    // Its unacknowledged messages go back to the queue, as on any fault.
                    self.s.requeue_sent();
                }
                std::mem::swap(&mut self.t, &mut new.t);
                self.t.decoder.set_direct_min(self.direct_rx_min);
                new.t.state = State::Closed;
                new.events.push_back(Event::Closed {
                    error: ConnError::Replaced,
                });
                self.t.pending = None;
                self.t.state = State::SessionAccepting;
                self.t.last_rx = Some(now);
                match (decision, req) {
                    (TakeOver::Resumed, AcceptRequest::Reconnect(r)) => {
                        self.s.connect_seq = r.connect_seq;
                        self.s.peer_global_seq = r.global_seq;
                        self.s.requeue_sent();
                        self.s.discard_requeued_up_to(r.msg_seq);
                        let ms = self.s.in_seq;
                        self.s.acked_in_seq = ms;
                        self.s.unacked_bytes = 0;
                        self.send_control(&Control::SessionReconnectOk { msg_seq: ms })?;
                        self.become_ready(now, true);
                    }
                    (TakeOver::NewSessionOnExisting { kept_queue: true } | TakeOver::RaceWon, _) => {
                        self.accept_session(now, true)?;
                    }
                    _ => {
                        if self.s.established {
                            self.events.push_back(Event::Reset {
                                error: ConnError::SessionReset,
                            });
                        }
                        self.accept_session(now, false)?;
                    }
                }
            }
        }
        // Frames the peer sent right behind its request (rare: it normally waits for our answer).
        if let Err(e) = self.process(now) {
            self.fault(e.clone());
            return Err(e);
        }
        Ok(decision)
    }
}

/// What [`Connection::take_over`] decided. For `Resumed`, `Restarted`, `NewSessionOnExisting` and `RaceWon` the
/// new socket now belongs to the existing connection (and any socket the existing connection had — e.g. its own
/// outgoing attempt in a race — must be closed by the owner); the other answers went out on the new connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TakeOver {
    /// SESSION_RECONNECT accepted: the session resumed on the existing connection.
    Resumed,
    /// CLIENT_IDENT from a restarted peer (another client cookie): a new session, the old queue dropped.
    Restarted,
    /// CLIENT_IDENT for a session that was lossy (queue dropped) or never finished establishing or idle (queue
    /// kept and renumbered).
    NewSessionOnExisting {
        kept_queue: bool,
    },
    /// Connection race (both sides dialling): the incoming connection wins and carries the session; the
    /// existing connection's own outgoing attempt is abandoned, its queue kept.
    RaceWon,
    /// Connection race lost by the incoming side: WAIT sent on it; our own attempt carries on.
    Wait,
    /// The incoming connection is older than what we know (peer global_seq): closed.
    Stale,
    Reset {
        full: bool,
    },
    Retry {
        connect_seq: u64,
    },
    RetryGlobal {
        global_seq: u64,
    },
}

/// Ceph's `handle_reconnect` / `handle_existing_connection` rules, in Ceph's order.
fn decide(existing: &Connection, new: &Connection, req: &AcceptRequest) -> TakeOver {
    let s = &existing.s;
    let peer_addr = new.t.peer_addrs.msgr2().copied().unwrap_or_default();
    let my_addr = existing.cfg.my_addrs.msgr2().copied().unwrap_or_default();
    match req {
        AcceptRequest::Reconnect(r) => {
            if existing.t.state == State::Closed || s.client_cookie != r.client_cookie {
                return TakeOver::Reset { full: true };
            }
            if s.server_cookie == 0 {
                // We never sent SERVER_IDENT for this session: let the peer restart establishment.
                return TakeOver::Reset { full: false };
            }
            if s.peer_global_seq > r.global_seq {
                return TakeOver::RetryGlobal {
                    global_seq: s.peer_global_seq,
                };
            }
            if s.connect_seq > r.connect_seq {
                return TakeOver::Retry {
                    connect_seq: s.connect_seq,
                };
            }
            if s.connect_seq == r.connect_seq
                && addr_cmp(&peer_addr, &my_addr) == std::cmp::Ordering::Greater
                && !existing.cfg.server
            {
                // Both sides reconnecting at once: the side with the higher address wins; here, our own attempt.
                return TakeOver::Wait;
            }
            TakeOver::Resumed
        }
        AcceptRequest::Ident(ci) => {
            if existing.t.state == State::Closed {
                return TakeOver::NewSessionOnExisting { kept_queue: false };
            }
            if s.peer_global_seq > new.t.peer_global_seq {
                return TakeOver::Stale;
            }
            if s.lossy {
                return TakeOver::NewSessionOnExisting { kept_queue: false };
            }
            if s.server_cookie != 0 && s.client_cookie != 0 && s.client_cookie != ci.cookie {
                return TakeOver::Restarted;
            }
            if s.client_cookie == ci.cookie || s.established {
                // Establishment interrupted between CLIENT_IDENT and SERVER_IDENT, or an idle session: reuse it.
                return TakeOver::NewSessionOnExisting { kept_queue: true };
            }
            // A connection race: we are dialling the peer while it dials us.
            if addr_cmp(&peer_addr, &my_addr) == std::cmp::Ordering::Less || existing.cfg.server {
                TakeOver::RaceWon
            } else {
                TakeOver::Wait
            }
        }
    }
}

/// Ceph orders `entity_addr_t` by `memcmp` of the in-memory struct (type, nonce, sockaddr union); both sides of a
/// race must agree, so compare exactly that byte image.
fn addr_cmp(a: &EntityAddr, b: &EntityAddr) -> std::cmp::Ordering {
    fn image(a: &EntityAddr) -> [u8; 36] {
        let mut m = [0u8; 36];
        m[0..4].copy_from_slice(&a.ty.to_le_bytes());
        m[4..8].copy_from_slice(&a.nonce.to_le_bytes());
        match a.addr {
            None => {}
            Some(std::net::SocketAddr::V4(v)) => {
                m[8..10].copy_from_slice(&2u16.to_le_bytes());
                m[10..12].copy_from_slice(&v.port().to_be_bytes());
                m[12..16].copy_from_slice(&v.ip().octets());
            }
            Some(std::net::SocketAddr::V6(v)) => {
                m[8..10].copy_from_slice(&10u16.to_le_bytes());
                m[10..12].copy_from_slice(&v.port().to_be_bytes());
                m[12..16].copy_from_slice(&v.flowinfo().to_be_bytes());
                m[16..32].copy_from_slice(&v.ip().octets());
                m[32..36].copy_from_slice(&v.scope_id().to_le_bytes());
            }
        }
        m
    }
    image(a).cmp(&image(b))
}

impl Transport {
    /// Stop recording sent bytes; what was recorded is kept until the peer's signature is checked.
    fn pre_auth_tx_freeze(&mut self) {
        self.pre_auth_tx_done = self.pre_auth_tx.take();
    }
}
