// SPDX-License-Identifier: LGPL-3.0-or-later
//! One core: its ring, its connections, its timers, its ends of the SPSC mesh, and the event loop that drives
//! them and calls the core's [`Service`].
//!
//! Everything here runs on the core's own thread. The service never touches the ring: [`CoreCtx`] methods
//! record intent (queue bytes, mark a connection dirty, add a timer) and the loop turns intent into submissions
//! once per turn, so a burst of sends becomes one `sendmsg` per connection and one `io_uring_enter` per turn.

use std::collections::{BTreeMap, VecDeque};
use std::io;
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, RawFd};
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::{Ordering, fence};
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use io_uring::{IoUring, cqueue, opcode, squeue, types};
use msgr2::auth::{ClientAuth, ServerAuth};
use msgr2::frame::RxSink;
use msgr2::{Connection, EntityAddr, Event, Message, PeerInfo};

use crate::devring::{DeviceRing, RingShare};
use crate::runtime::Shared;
use crate::spsc::{Consumer, Producer};
use crate::sys;

/// Index of a core (0-based; core 0 also runs control).
pub type CoreId = usize;

/// A connection on this core. Ids are never reused while a stale copy could still be around (generation).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ConnId {
    idx: u32,
    generation: u32,
}

impl std::fmt::Display for ConnId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "conn{}.{}", self.idx, self.generation)
    }
}

/// A listening socket on this core.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ListenerId(pub u32);

/// A timer; cancel it with [`CoreCtx::cancel_timer`]. Ordered by deadline, then by creation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TimerId(Instant, u64);

/// An fd watched for readability ([`CoreCtx::watch_fd`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct WatchId(pub u32);

/// Builds the auth of each accepted msgr2 connection.
pub type ServerAuthFactory = Arc<dyn Fn() -> Box<dyn ServerAuth + Send> + Send + Sync>;

/// What a listener speaks.
// Built once per listener: the inline msgr2 config costs nothing worth a box.
#[allow(clippy::large_enum_variant)]
#[derive(Clone)]
pub enum ListenProto {
    /// Plain bytes: [`Service::on_data`], [`CoreCtx::send_bytes`].
    Raw,
    /// msgr2 acceptor (auto-accepting new sessions): [`Service::on_message`], [`CoreCtx::send_message`].
    Msgr2 {
        cfg: msgr2::Config,
        auth: ServerAuthFactory,
    },
    /// msgr2, with each accepted connection's state machine built by [`Service::msgr2_acceptor`] (per-connection
    /// auth state, e.g. a cephx server whose verified peer the service keeps).
    Msgr2ByService,
}

/// What an outgoing connection speaks.
// Built once per connect: the inline msgr2 config costs nothing worth a box.
#[allow(clippy::large_enum_variant)]
pub enum ConnectProto {
    Raw,
    /// msgr2 connector to an entity of `target_type` at the connect address (nonce 0).
    Msgr2 {
        cfg: msgr2::Config,
        auth: Box<dyn ClientAuth + Send>,
        target_type: u8,
    },
    /// A connector the caller built (`Connection::connector` with the exact target address and nonce it wants,
    /// e.g. a mgr that checks its nonce); the reactor drives it once TCP is up.
    Msgr2Conn(Box<Connection>),
}

/// Why a connection ended (reported once through [`Service::on_reset`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CloseReason {
    /// The peer closed the socket.
    Eof,
    /// A socket error (errno).
    Io(i32),
    ConnectFailed(i32),
    ConnectTimeout,
    /// The msgr2 session faulted, was reset or closed.
    Protocol(msgr2::ConnError),
    /// The runtime is stopping.
    Shutdown,
}

/// Why [`CoreCtx::hand_off`] refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum HandOffError {
    #[error("no such core (or this core)")]
    BadCore,
    #[error("no such connection")]
    NotConnected,
    #[error("only a connection just accepted, with nothing sent or received, can move")]
    NotFresh,
}

/// Refused sends hand the data back.
#[derive(Debug)]
pub enum SendError<T> {
    /// No such connection (closed, or never existed).
    NotConnected(T),
    /// Outgoing bytes are over the connection's bound: wait for [`Service::on_writable`].
    Backpressure(T),
    /// Wrong kind of connection (bytes on msgr2 or messages on raw).
    WrongProto(T),
}

impl<T> SendError<T> {
    pub fn into_inner(self) -> T {
        match self {
            SendError::NotConnected(t) | SendError::Backpressure(t) | SendError::WrongProto(t) => t,
        }
    }
}

/// What the OSD (or a test) implements, one instance per core, created on that core (so it may be `!Send`).
/// Every callback gets the core's [`CoreCtx`]; none may block.
#[allow(unused_variables)]
pub trait Service: 'static {
    /// Messages other cores (and [`crate::Runtime::post`]) send to this core.
    type Msg: Send + 'static;

    fn on_start(&mut self, ctx: &mut CoreCtx<Self::Msg>) {}
    /// A connection was accepted on `listener`. For msgr2 the handshake starts now; `on_connected` follows.
    fn on_accept(
        &mut self,
        ctx: &mut CoreCtx<Self::Msg>,
        listener: ListenerId,
        conn: ConnId,
        peer: SocketAddr,
    ) {
    }
    /// [`ListenProto::Msgr2ByService`]: build the acceptor for a socket accepted on `listener` (for a handed-off
    /// socket: the listener id on the core that accepted it) from `peer`. Call `set_peer_socket_addr(peer)` on it
    /// (Ceph clients need it in HELLO) and set `Config::auto_accept`. `None` refuses the connection.
    fn msgr2_acceptor(&mut self, listener: ListenerId, peer: SocketAddr) -> Option<Connection> {
        None
    }
    /// A connection another core handed to this one ([`CoreCtx::hand_off`]); `conn` is its id here.
    fn on_handoff(&mut self, ctx: &mut CoreCtx<Self::Msg>, conn: ConnId, peer: SocketAddr, from: CoreId) {}
    /// Raw: the TCP connect completed (`peer` is None). msgr2: the session is ready (both roles).
    fn on_connected(&mut self, ctx: &mut CoreCtx<Self::Msg>, conn: ConnId, peer: Option<&PeerInfo>) {}
    /// A msgr2 message, in order, exactly once per session.
    fn on_message(&mut self, ctx: &mut CoreCtx<Self::Msg>, conn: ConnId, msg: Message) {}
    /// Raw bytes received (a pooled receive buffer frozen into `Bytes`: no copy was made).
    fn on_data(&mut self, ctx: &mut CoreCtx<Self::Msg>, conn: ConnId, data: Bytes) {}
    /// A connection that refused a send ([`SendError::Backpressure`] or msgr2 QueueFull) can take more.
    fn on_writable(&mut self, ctx: &mut CoreCtx<Self::Msg>, conn: ConnId) {}
    /// Other msgr2 events (keepalive acks, MyAddr, …).
    fn on_msgr2_event(&mut self, ctx: &mut CoreCtx<Self::Msg>, conn: ConnId, ev: Event) {}
    /// The connection is gone; its id is dead from now on. Not called for [`CoreCtx::close`].
    fn on_reset(&mut self, ctx: &mut CoreCtx<Self::Msg>, conn: ConnId, reason: CloseReason) {}
    fn on_timer(&mut self, ctx: &mut CoreCtx<Self::Msg>, timer: TimerId, token: u64) {}
    /// A message from core `from` (or from outside the runtime: `from` is `usize::MAX`).
    fn on_cross_core(&mut self, ctx: &mut CoreCtx<Self::Msg>, from: CoreId, msg: Self::Msg) {}
    /// Called once per loop turn, after completions were dispatched: poll sibling devices here.
    fn on_poll(&mut self, ctx: &mut CoreCtx<Self::Msg>) {}
    /// A watched fd ([`CoreCtx::watch_fd`]) became readable.
    fn on_fd_ready(&mut self, ctx: &mut CoreCtx<Self::Msg>, watch: WatchId) {}
    /// Completion of an entry submitted with [`CoreCtx::submit_raw`].
    fn on_raw_completion(&mut self, ctx: &mut CoreCtx<Self::Msg>, token: u64, result: i32, flags: u32) {}
    /// The runtime is stopping; connections are about to be closed.
    fn on_stop(&mut self, ctx: &mut CoreCtx<Self::Msg>) {}
    /// End of a loop turn's work, before the loop waits: what the turn did and how long it took (for the
    /// service's long-turn records; the loop's own histogram is [`CoreStats::turn_hist`]).
    fn on_turn_end(&mut self, ctx: &mut CoreCtx<Self::Msg>, turn: &TurnInfo) {}
}

/// Buckets of [`CoreStats::turn_hist`]: bucket 0 counts turns shorter than 2 µs, bucket i (1 ≤ i < 15) turns of
/// [2^i, 2^(i+1)) µs, the last one every turn of 32.768 ms or more.
pub const TURN_HIST_BUCKETS: usize = 16;

/// The histogram bucket of a turn that took `busy`.
pub fn turn_bucket(busy: Duration) -> usize {
    let us = busy.as_micros().min(u128::from(u64::MAX)) as u64;
    ((63 - (us | 1).leading_zeros()) as usize).min(TURN_HIST_BUCKETS - 1)
}

/// One loop turn as [`Service::on_turn_end`] sees it. Counts are of this turn only.
#[derive(Debug, Clone, Copy, Default)]
pub struct TurnInfo {
    /// From the turn's start to its wait: the loop's and the service's work, plus any time the thread spent
    /// descheduled meanwhile (the submission inside the wait's `io_uring_enter` is not included).
    pub busy: Duration,
    /// Completions dispatched (receives, sends, accepts, watches, …).
    pub cqes: u32,
    /// Cross-core messages delivered.
    pub mesh_in: u32,
    /// Timers fired.
    pub timers: u32,
    /// Connections driven (received messages delivered, output pulled).
    pub conns_driven: u32,
    /// Bytes whose receive or send completed this turn.
    pub recv_bytes: u64,
    pub sent_bytes: u64,
}

/// Sizes and bounds of one core.
#[derive(Debug, Clone)]
pub struct CoreConfig {
    pub ring_entries: u32,
    /// Receive buffer per connection (bytes a single recv may take).
    pub recv_buf_bytes: usize,
    /// Outgoing bytes queued or in flight per connection before sends are refused (raw) or msgr2 output stops
    /// being pulled (its own queue bounds then apply).
    pub max_out_bytes: usize,
    /// Free receive buffers kept per core for reuse.
    pub recv_pool_buffers: usize,
    /// Cross-core messages taken from one peer per turn (batch bound: fairness between rings and sockets).
    pub mesh_batch: usize,
    /// Connections this core holds at most; accepts beyond it are closed at once (`CoreStats::refused`).
    pub max_connections: usize,
    /// msgr2 segments at least this long (in practice MESSAGE data of large writes) are received straight into
    /// a page-aligned buffer of their own instead of the connection's receive buffer: no assembling copy, and
    /// an O_DIRECT write can take the buffer as it is. `None`: everything goes through receive buffers.
    pub direct_rx_min: Option<usize>,
    /// Wake a sleeping core with an `IORING_OP_MSG_RING` entry on this core's ring (a completion posted straight
    /// into the target's ring, submitted with the turn's one `io_uring_enter`) instead of an eventfd `write` and
    /// the target's re-armed eventfd read. Falls back to the eventfd per wake-up when the kernel refuses it.
    /// Default true; the environment variable `REACTOR_EVENTFD_DOORBELLS=1` turns it off (A/B measurements).
    pub msg_ring_doorbells: bool,
    /// The loop as before session 5 (A/B measurements; `REACTOR_LEGACY_TURN=1`): `on_poll` before messages are
    /// delivered, and one extra non-blocking turn after every turn that did work.
    pub legacy_turn: bool,
    /// When a receive completes and the kernel says the socket holds more (`IORING_CQE_F_SOCK_NONEMPTY`, or
    /// `TCP_INQ` after an inline receive), a msgr2 connection keeps receiving in the same turn with plain
    /// non-blocking `recvmsg` calls — a large segment still straight into its sink, the rest of its frame and
    /// the next frame's head into the stream buffer in the same call — so the messages a pipelining peer
    /// queued are all delivered before the turn's `on_poll` and share its device submission and log record.
    /// At most this many inline receives per connection and turn (0: off; the environment variable
    /// `REACTOR_INLINE_RECVS=N` sets it for A/B measurements). Default 8 (was 32 until session 12): with 32 a
    /// client's whole queue of 64K writes (16 × 64 KiB) was taken and processed in one ~1 ms turn before any of
    /// its IO was submitted, and all 16 were then committed and acknowledged together, so the client sent the
    /// next 16 together too (a lock-step convoy with the device idle during the turn); with 8 the first
    /// messages' IO and log record go out while the rest is received (64K write QD16 +17–50 % IOPS, p99 −20–35 %
    /// against 32 in all five same-binary triples with 8 and 4; docs/benchmarks.md, "inline receive budget").
    pub inline_recvs: u32,
    /// ... and at most about this many bytes per connection and turn (the receive that crosses it completes).
    pub inline_recv_bytes: usize,
    /// Send a connection's queued output with a plain non-blocking `sendmsg` from the turn when no ring send is
    /// in flight on it; only what the socket does not take (its buffer full) goes to a ring send. A reply then
    /// needs no completion and no extra loop turn (and `io_uring_enter`) to reap it. Default **false**: it once
    /// stalled 4 MiB read replies (runs 15–16, fixed by `Conn::out_capped`, tests/direct_send_stall.rs), and the
    /// session-8 A/B (seven pairs, docs/benchmarks.md) found no QD1 row better with it. `REACTOR_DIRECT_SENDS=1`
    /// turns it on.
    pub direct_sends: bool,
    /// With `direct_sends`: instead of a `sendmsg` syscall, the end-of-turn send is a ring `sendmsg` entry
    /// (`MSG_DONTWAIT|MSG_WAITALL`, `IOSQE_CQE_SKIP_SUCCESS`) submitted with the turn's own `io_uring_enter` —
    /// also the sleeping one. `MSG_DONTWAIT` makes the kernel issue it inline, during the enter's submission,
    /// and never park it (no poll arming); a send that wrote everything posts no completion, so it does not end
    /// the wait; one that did not (socket full, error) posts one with the bytes written, which ends the wait and
    /// hands the rest to an ordinary ring send. Saves the `sendmsg` syscall per QD1 op. Default false;
    /// `REACTOR_FOLD_SENDS=1` turns it on (docs/reactor.md, "Sends").
    pub fold_sends: bool,
    /// Wake for the earliest timer through one standing absolute `IORING_OP_TIMEOUT`, re-armed only when that
    /// deadline moves, instead of a timeout on every sleeping `io_uring_enter` (each of which starts and
    /// cancels a kernel hrtimer — a clock-event reprogramming, expensive in a VM — per sleep). Default true;
    /// `REACTOR_WAIT_TIMEOUT=1` restores the per-wait timeout (A/B measurements).
    pub standing_timer: bool,
    /// Submit the device entries that the turn's messages queued (e.g. the device reads of newly arrived read
    /// ops) before `on_poll`, with one non-blocking `io_uring_enter`, when the device has completions waiting for
    /// `on_poll`: that processing (verifying a completed 4 MiB read, running its op, building the reply) can take
    /// a large part of a millisecond, during which the new IO would otherwise wait in the submission queue and the
    /// device could idle. Costs one enter (and virtio kick) in such turns only. Default true;
    /// `REACTOR_EARLY_DEVICE_SUBMIT=0` turns it off (A/B measurements).
    pub early_device_submit: bool,
    /// Once the messages delivered since the core's last `io_uring_enter` carry at least this many data bytes,
    /// the device entries they queued are submitted (one non-blocking enter) before the connection receives more
    /// inline: a 4 MiB write's data write then starts while the next message is received and checked (about a
    /// millisecond of copy and crc), instead of waiting for the turn's end. (Counted on delivery, not on
    /// receipt: the bulk of a message often arrived in an earlier turn and only its last bytes in this one.)
    /// Small messages rarely reach the threshold, so their turns keep one enter. 0: off. Default **off**: on the
    /// loaded machine of session 10 it moved 4M write QD4 both ways at size 1 (+24 %, −24 %, +26 % IOPS) and was
    /// behind in four of five size-3 pairs (docs/benchmarks.md, "4M writes (session 10, bigw)");
    /// `REACTOR_RX_SUBMIT_BYTES=1048576` turns it on for A/B runs.
    pub rx_submit_bytes: usize,
    /// Deliver at most this many messages per connection and turn; the rest stay decoded in the connection and
    /// are delivered from the next turn on, after this turn's `on_poll` has submitted the IO of those delivered
    /// (and the wait in between does not sleep). A client that sends its whole queue at once (16 4K writes fit
    /// one or two receives) is then handled a few messages at a time, so the device starts on the first ones
    /// while the rest are processed, and their commits and replies do not all come back in one burst. 0: no
    /// cap. Default 4 (session 12: 4K read and write QD16 +7–35 % IOPS in each of five same-binary pairs, at up
    /// to +15 % CPU per op on 4K writes; one later pair on a noisy host had the QD16 reads behind;
    /// docs/benchmarks.md, "a message cap per turn"). `REACTOR_MSG_CAP=N` sets it (A/B measurements).
    pub msgs_per_turn: u32,
}

impl Default for CoreConfig {
    fn default() -> Self {
        CoreConfig {
            ring_entries: 1024,
            recv_buf_bytes: 64 * 1024,
            max_out_bytes: 4 << 20,
            recv_pool_buffers: 256,
            mesh_batch: 256,
            max_connections: 16384,
            direct_rx_min: Some(16 * 1024),
            msg_ring_doorbells: std::env::var_os("REACTOR_EVENTFD_DOORBELLS").is_none(),
            legacy_turn: std::env::var_os("REACTOR_LEGACY_TURN").is_some(),
            inline_recvs: std::env::var("REACTOR_INLINE_RECVS")
                .ok()
                .and_then(|v| v.parse().ok())
                .unwrap_or(8),
            inline_recv_bytes: 4 << 20,
            direct_sends: std::env::var("REACTOR_DIRECT_SENDS").is_ok_and(|v| v == "1"),
            fold_sends: std::env::var("REACTOR_FOLD_SENDS").is_ok_and(|v| v == "1"),
            standing_timer: std::env::var_os("REACTOR_WAIT_TIMEOUT").is_none(),
            early_device_submit: std::env::var("REACTOR_EARLY_DEVICE_SUBMIT").map_or(true, |v| v != "0"),
            rx_submit_bytes: std::env::var("REACTOR_RX_SUBMIT_BYTES")
                .ok()
                .and_then(|v| v.parse().ok())
                .unwrap_or(0),
            msgs_per_turn: std::env::var("REACTOR_MSG_CAP")
                .ok()
                .and_then(|v| v.parse().ok())
                .unwrap_or(4),
        }
    }
}

/// Counters of one core (plain integers: only this core writes them).
#[derive(Debug, Clone, Copy, Default)]
pub struct CoreStats {
    pub turns: u64,
    pub waits: u64,
    pub cqes: u64,
    pub submits: u64,
    pub recv_bytes: u64,
    pub sent_bytes: u64,
    /// `sendmsg` completions that wrote less than asked (the rest was queued again).
    pub partial_sends: u64,
    pub mesh_in: u64,
    pub mesh_out: u64,
    pub doorbells_rung: u64,
    /// Of `doorbells_rung`: wake-ups posted straight into the target core's ring (`IORING_OP_MSG_RING`, no
    /// syscall of their own), and the ones that went through the target's eventfd (a `write`).
    pub doorbells_msg_ring: u64,
    pub doorbells_eventfd: u64,
    pub accepted: u64,
    /// Accepted sockets closed at once because the core was at `max_connections`.
    pub refused: u64,
    /// Receives straight into a msgr2 segment's own buffer (`CoreConfig::direct_rx_min`), and their bytes.
    pub direct_recvs: u64,
    pub direct_recv_bytes: u64,
    /// Receives made inline (a plain non-blocking `recvmsg` in the turn that found the socket non-empty, see
    /// [`CoreConfig::inline_recvs`]) and their bytes; they are part of `recv_bytes` (and of `direct_*` for the
    /// part that went into a sink).
    pub inline_recvs: u64,
    pub inline_recv_bytes: u64,
    /// `sendmsg` calls made directly from the turn ([`CoreConfig::direct_sends`]), and how many of them left
    /// bytes behind for a ring send (socket buffer full).
    pub direct_sends: u64,
    pub direct_sends_partial: u64,
    /// End-of-turn sends folded into the turn's `io_uring_enter` ([`CoreConfig::fold_sends`]), and how many of
    /// them came back with a completion (socket full or an error) instead of writing everything.
    pub folded_sends: u64,
    pub folded_sends_partial: u64,
    /// Standing wake-up timeouts armed for the earliest timer ([`CoreConfig::standing_timer`]).
    pub wait_timers_armed: u64,
    /// Connections open now.
    pub connections: u64,
    /// Loop turns by their busy time ([`TurnInfo::busy`], buckets as [`turn_bucket`]), the sum of busy times
    /// and the longest one (nanoseconds).
    pub turn_hist: [u64; TURN_HIST_BUCKETS],
    pub turn_busy_ns: u64,
    pub turn_max_ns: u64,
    /// A device on this core's ring ([`CoreCtx::device_ring`]): entries it pushed, completions routed to it, and
    /// the times it blocked on the ring inside a service callback ([`DeviceRing::wait`]).
    pub device_sqes: u64,
    pub device_cqes: u64,
    pub device_waits: u64,
    /// Non-blocking enters that handed the turn's new device entries to the kernel before `on_poll`
    /// ([`CoreConfig::early_device_submit`]).
    pub early_device_submits: u64,
    /// Non-blocking enters that handed device entries to the kernel before a further inline receive, after
    /// messages with [`CoreConfig::rx_submit_bytes`] of data were delivered.
    pub rx_device_submits: u64,
    /// Drives that stopped at [`CoreConfig::msgs_per_turn`] with messages still waiting.
    pub msg_cap_holds: u64,
}

// ---------------------------------------------------------------------------------------------------------------

/// Receive buffers: a received range is split off and frozen into `Bytes` (zero copy); the connection keeps
/// receiving into the rest of the allocation, or reclaims the whole allocation once every `Bytes` of it is gone
/// (msgr2 drops its input right after parsing, so this is the common case), or takes a fresh one from here.
struct RecvPool {
    size: usize,
    free: Vec<BytesMut>,
    max_free: usize,
}

impl RecvPool {
    fn take(&mut self) -> BytesMut {
        self.free
            .pop()
            .unwrap_or_else(|| BytesMut::with_capacity(self.size))
    }

    fn give(&mut self, mut b: BytesMut) {
        b.clear();
        if self.free.len() < self.max_free && b.try_reclaim(self.size) {
            self.free.push(b);
        }
    }

    /// Make sure `b` has room for a useful recv.
    fn refill(&mut self, b: &mut BytesMut) {
        debug_assert!(b.is_empty());
        if b.capacity() >= self.size / 4 || b.try_reclaim(self.size) {
            return;
        }
        *b = self.take();
    }
}

enum Proto {
    Raw,
    Msgr2(Box<Connection>),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ConnState {
    Connecting,
    Open,
    /// Shut down; waiting for in-flight ops before the fd is closed and the slot freed.
    Closing,
}

struct Conn {
    fd: RawFd,
    state: ConnState,
    proto: Proto,
    peer: Option<SocketAddr>,
    recv_armed: bool,
    send_armed: bool,
    ops: u32,
    rbuf: BytesMut,
    out: VecDeque<Bytes>,
    out_bytes: usize,
    /// A raw send was refused: tell the service when the queue drains below half.
    want_writable: bool,
    /// The last drive stopped taking msgr2 output at `max_out_bytes`: more is held in the connection, so a send
    /// that frees room must drive it again (a ring send's completion always does; a direct send checks this).
    out_capped: bool,
    timer: Option<TimerId>,
    dirty: bool,
    reported: bool,
    close_when_flushed: bool,
    /// The service paused reading (its own backlog is full).
    recv_paused: bool,
    /// In `CoreCtx::send_ready`: its output goes out with a direct send at the end of this turn.
    send_ready: bool,
    /// The last receive left bytes queued on the socket: receive inline before arming a ring receive.
    rx_more: bool,
    /// Inline receives left this turn (`inline_turn` is the turn they were counted for), and bytes.
    inline_turn: u64,
    inline_left: u32,
    inline_bytes_left: usize,
    /// Messages delivered in turn `msgs_turn` ([`CoreConfig::msgs_per_turn`]).
    msgs_turn: u64,
    msgs_delivered: u32,
    /// Accepted and untouched: how to rebuild it on another core (`hand_off`).
    origin: Option<(ListenerId, ListenProto)>,
}

struct ConnSlot {
    generation: u32,
    conn: Option<Conn>,
}

struct Listener {
    fd: RawFd,
    proto: ListenProto,
    multishot: bool,
    armed: bool,
}

enum Op {
    Doorbell,
    Accept {
        listener: u32,
    },
    Connect {
        conn: ConnId,
        _addr: Box<sys::RawAddr>,
        _ts: Box<types::Timespec>,
    },
    Recv {
        conn: ConnId,
        buf: BytesMut,
    },
    /// A receive into a msgr2 segment's own buffer (its sink); the kernel writes into `sink`'s spare capacity.
    RecvSink {
        conn: ConnId,
        sink: Box<RxSink>,
    },
    /// The kernel reads the slot's `bufs` through its `iov` and `msg` until the completion.
    Send {
        conn: ConnId,
        slot: SendSlot,
        /// A folded send ([`CoreConfig::fold_sends`]): no completion when it wrote everything.
        folded: bool,
    },
    Watch {
        id: u32,
        fd: RawFd,
    },
    Raw {
        token: u64,
    },
    /// A wake-up timeout: the standing one for the earliest timer, or one wait's (kernels without EXT_ARG).
    WaitTimeout {
        _ts: Box<types::Timespec>,
    },
}

/// user_data of linked timeouts (their completions carry nothing we need), and of the wake-up completions other
/// cores post into this ring with MSG_RING (the wake-up is all they carry).
const UD_IGNORE: u64 = u64::MAX;

/// user_data of this core's MSG_RING entries: `UD_WAKE_BASE + target core`. They are submitted with
/// `CQE_SKIP_SUCCESS`, so a completion comes back only when the kernel refused the wake-up (then the target is
/// woken through its eventfd instead). Far above any op index.
const UD_WAKE_BASE: u64 = 0xffff_0000_0000_0000;

/// What travels on the mesh: the service's messages and the reactor's own socket hand-offs.
pub(crate) enum Envelope<M> {
    User(M),
    /// A freshly accepted socket moving to another core (boxed: rare, and keeps ring slots small).
    Adopt(Box<Adopt>),
}

/// A socket on its way to another core: nothing was ever submitted on it. Closed if dropped undelivered (a ring
/// or overflow queue torn down at shutdown).
pub(crate) struct Adopt {
    fd: RawFd,
    peer: Option<SocketAddr>,
    listener: ListenerId,
    proto: ListenProto,
}

impl Drop for Adopt {
    fn drop(&mut self) {
        if self.fd >= 0 {
            sys::close(self.fd);
        }
    }
}

enum TimerKind {
    User(u64),
    Conn(ConnId),
}

/// `IORING_ENTER_GETEVENTS` (linux/io_uring.h).
const IORING_ENTER_GETEVENTS: u32 = 1;

/// Most iovecs one sendmsg takes (IOV_MAX).
const MAX_IOV: usize = 1024;

/// The per-core API the service uses, and the core's state.
pub struct CoreCtx<M: Send + 'static> {
    id: CoreId,
    ncores: usize,
    cfg: CoreConfig,
    /// The ring, shared with a storage device that submits on it ([`CoreCtx::device_ring`]).
    share: Rc<RingShare>,
    ring_setup: &'static str,
    ext_arg: bool,
    /// The standing wake-up for the earliest timer ([`CoreConfig::standing_timer`]): its deadline and op index.
    wait_timer: Option<(Instant, usize)>,
    /// `RingShare`'s count of device entries pushed, as of this core's last `io_uring_enter` from the loop:
    /// a larger count means the turn queued device IO not yet handed to the kernel.
    dev_sqes_entered: u64,
    /// Data bytes of the messages delivered since this core's last `io_uring_enter` from the loop
    /// ([`CoreConfig::rx_submit_bytes`]).
    delivered_since_enter: u64,
    /// An `Instant` and CLOCK_MONOTONIC read together: turns deadlines into the absolute timespecs io_uring
    /// takes (std's `Instant` is CLOCK_MONOTONIC on Linux but does not expose its value).
    clock_base: (Instant, Duration),
    ops: Vec<Option<Op>>,
    free_ops: Vec<usize>,
    conns: Vec<ConnSlot>,
    free_conns: Vec<u32>,
    dirty: Vec<ConnId>,
    /// The list `drive_dirty` works through, kept between turns with its capacity (no allocation per turn).
    dirty_spare: Vec<ConnId>,
    /// Connections that reached [`CoreConfig::msgs_per_turn`] with messages still waiting: driven again in the
    /// next turn (marked dirty at this turn's end, so the wait in between does not sleep).
    held: Vec<ConnId>,
    listeners: Vec<Option<Listener>>,
    timers: BTreeMap<TimerId, TimerKind>,
    timer_seq: u64,
    pool: RecvPool,
    tx: Vec<Option<Producer<Envelope<M>>>>,
    rx: Vec<Option<Consumer<Envelope<M>>>>,
    /// Messages to ourselves, and messages a full ring refused (retried each turn, in order).
    local: VecDeque<M>,
    overflow: Vec<VecDeque<Envelope<M>>>,
    /// The service asked for a non-sleeping turn (a polled sibling device has IO in flight).
    keep_polling: bool,
    ring_doorbell: Vec<bool>,
    shared: Arc<Shared<M>>,
    efd_buf: Box<u64>,
    watches: Vec<Option<RawFd>>,
    now: Instant,
    stopping: bool,
    stats: CoreStats,
    cqe_scratch: Vec<(u64, i32, u32)>,
    /// Finished send slots, reused so a `sendmsg` allocates nothing (see [`SendSlot`]).
    send_free: Vec<SendSlot>,
    /// The iovec array of direct sends (reused: no allocation per send).
    direct_iov: Vec<libc::iovec>,
    /// Connections whose output goes out with a direct send at the end of the turn ([`CoreConfig::direct_sends`]).
    send_ready: Vec<ConnId>,
    /// Ops of folded sends not yet known to be done: each either completes (a CQE: it did not write
    /// everything) or, once the kernel has consumed its entry, is done without one (`resolve_folded`).
    folded: Vec<usize>,
    /// Reused for the messages drained from one mesh ring per turn.
    mesh_scratch: Vec<Envelope<M>>,
}

/// What one `sendmsg` needs to stay put until its completion: the buffers, their iovec array and the msghdr.
/// Recycled through `CoreCtx::send_free` (cleared, capacity kept): three allocations fewer per send.
struct SendSlot {
    bufs: Vec<Bytes>,
    iov: Vec<libc::iovec>,
    msg: Box<libc::msghdr>,
}

/// Free send slots kept per core (beyond this, finished slots are dropped).
const SEND_SLOTS_KEPT: usize = 256;

fn errno_of(e: &io::Error) -> i32 {
    e.raw_os_error().unwrap_or(libc::EIO)
}

/// An `Instant` and the CLOCK_MONOTONIC time read right after it (the latter is at most a few ns later, so a
/// deadline converted through the pair never fires before the `Instant` it stands for).
fn monotonic_base() -> (Instant, Duration) {
    let i = Instant::now();
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes the timespec we own.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    (i, Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32))
}

/// Build the core's ring with the flags a single-threaded submitter wants, falling back on older kernels.
fn build_ring(entries: u32) -> io::Result<(IoUring, &'static str)> {
    type Build = fn(u32) -> io::Result<IoUring>;
    let tries: [(&'static str, Build); 3] = [
        ("single_issuer+defer_taskrun+coop_taskrun", |n| {
            IoUring::builder()
                .setup_single_issuer()
                .setup_defer_taskrun()
                .setup_coop_taskrun()
                .build(n)
        }),
        ("coop_taskrun", |n| {
            IoUring::builder().setup_coop_taskrun().build(n)
        }),
        ("plain", |n| IoUring::builder().build(n)),
    ];
    let mut last = io::Error::other("no ring");
    for (name, t) in tries {
        match t(entries) {
            Ok(r) => return Ok((r, name)),
            Err(e) => last = e,
        }
    }
    Err(last)
}

/// Whether this kernel gives folded sends ([`CoreConfig::fold_sends`]) what they rely on, checked on a fresh
/// ring and a socket pair with a small buffer: a send that writes everything is done when the enter that
/// submits it returns and posts no completion; a short one has posted its completion by then, with the bytes it
/// wrote. (A kernel that parked the send instead would still hold our buffers: they are leaked then.)
fn fold_sends_work(ring: &mut IoUring) -> bool {
    let Ok((a, b)) = sys::stream_pair(4096) else {
        return false;
    };
    let mut ok = true;
    let mut in_flight = Vec::new();
    for len in [1usize, 256 << 10] {
        let buf = vec![7u8; len].into_boxed_slice();
        let mut iov = Box::new(libc::iovec {
            iov_base: buf.as_ptr() as *mut libc::c_void,
            iov_len: len,
        });
        // SAFETY: msghdr is plain data; zero is "no name, no control".
        let mut msg: Box<libc::msghdr> = Box::new(unsafe { std::mem::zeroed() });
        msg.msg_iov = &mut *iov;
        msg.msg_iovlen = 1;
        let e = opcode::SendMsg::new(types::Fd(a), &*msg as *const libc::msghdr)
            .flags((libc::MSG_NOSIGNAL | libc::MSG_DONTWAIT | libc::MSG_WAITALL) as u32)
            .build()
            .flags(squeue::Flags::SKIP_SUCCESS)
            .user_data(1);
        let queued = sys::queued_in(b).unwrap_or(0);
        // SAFETY: the entry points into `buf`, `iov` and `msg`, kept (or leaked) below until the kernel is done.
        let pushed = unsafe { ring.submission().push(&e) }.is_ok();
        // SAFETY: no argument struct; valid flags.
        let r = unsafe {
            ring.submitter()
                .enter::<libc::sigset_t>(1, 0, IORING_ENTER_GETEVENTS, None)
        };
        let cqes: Vec<i32> = ring.completion().map(|c| c.result()).collect();
        let written = sys::queued_in(b).unwrap_or(0).saturating_sub(queued);
        let sq_empty = ring.submission().is_empty();
        ok = ok
            && pushed
            && matches!(r, Ok(1))
            && sq_empty
            && match cqes[..] {
                // Everything written: no completion.
                [] => written == len,
                // Short: the completion says how much.
                [n] => n > 0 && (n as usize) < len && written == n as usize,
                _ => false,
            };
        in_flight.push((buf, iov, msg));
        if !ok {
            break;
        }
    }
    sys::close(a);
    sys::close(b);
    if !ok {
        std::mem::forget(in_flight);
    }
    ok
}

impl Conn {
    /// After a send that needs no completion (direct or folded) wrote some output: whether the connection must be
    /// driven again for what a ring send's completion would have triggered — a waiting writer, a close after the
    /// flush, or msgr2 output held back at `max_out_bytes` (a 4 MiB reply: else the rest waits for the
    /// connection's next event, seconds; runs 15–16, tests/direct_send_stall.rs).
    fn revisit_after_send(&mut self, max_out: usize) -> bool {
        (self.want_writable && self.out_bytes < max_out / 2)
            || (self.out.is_empty() && self.close_when_flushed)
            || std::mem::take(&mut self.out_capped)
    }
}

impl<M: Send + 'static> CoreCtx<M> {
    pub(crate) fn new(
        id: CoreId,
        ncores: usize,
        cfg: CoreConfig,
        tx: Vec<Option<Producer<Envelope<M>>>>,
        rx: Vec<Option<Consumer<Envelope<M>>>>,
        shared: Arc<Shared<M>>,
    ) -> io::Result<Self> {
        let mut cfg = cfg;
        let (mut ring, ring_setup) = build_ring(cfg.ring_entries)?;
        if cfg.direct_sends && cfg.fold_sends && !fold_sends_work(&mut ring) {
            cfg.fold_sends = false;
        }
        let ext_arg = ring.params().is_feature_ext_arg();
        let pool = RecvPool {
            size: cfg.recv_buf_bytes.max(4096),
            free: Vec::new(),
            max_free: cfg.recv_pool_buffers,
        };
        let mut c = CoreCtx {
            id,
            ncores,
            cfg,
            share: Rc::new(RingShare::new(ring)),
            ring_setup,
            ext_arg,
            wait_timer: None,
            dev_sqes_entered: 0,
            delivered_since_enter: 0,
            clock_base: monotonic_base(),
            ops: Vec::new(),
            free_ops: Vec::new(),
            conns: Vec::new(),
            free_conns: Vec::new(),
            dirty: Vec::new(),
            dirty_spare: Vec::new(),
            held: Vec::new(),
            listeners: Vec::new(),
            timers: BTreeMap::new(),
            timer_seq: 0,
            pool,
            tx,
            rx,
            local: VecDeque::new(),
            overflow: (0..ncores).map(|_| VecDeque::new()).collect(),
            keep_polling: false,
            ring_doorbell: vec![false; ncores],
            shared,
            efd_buf: Box::new(0),
            watches: Vec::new(),
            now: Instant::now(),
            stopping: false,
            stats: CoreStats::default(),
            cqe_scratch: Vec::new(),
            send_free: Vec::new(),
            direct_iov: Vec::new(),
            send_ready: Vec::new(),
            folded: Vec::new(),
            mesh_scratch: Vec::new(),
        };
        c.arm_doorbell();
        if c.cfg.msg_ring_doorbells
            && let Ok(fd) = sys::dup(c.share.ring.borrow().as_raw_fd())
        {
            c.shared.set_ring_fd(id, fd);
        }
        Ok(c)
    }

    // -----------------------------------------------------------------------------------------------------------
    // Public API

    /// This core's index.
    pub fn core_id(&self) -> CoreId {
        self.id
    }

    pub fn num_cores(&self) -> usize {
        self.ncores
    }

    /// The time this loop turn started (cheap; refreshed once per turn).
    pub fn now(&self) -> Instant {
        self.now
    }

    pub fn stats(&self) -> CoreStats {
        let mut s = self.stats;
        s.connections = (self.conns.len() - self.free_conns.len()) as u64;
        (s.device_sqes, s.device_cqes, s.device_waits) = self.share.counts();
        s
    }

    /// The CPUs this core's thread may run on (one CPU when pinned).
    pub fn cpus(&self) -> Vec<usize> {
        sys::allowed_cpus()
    }

    /// Which ring set-up this kernel accepted: "single_issuer+defer_taskrun+coop_taskrun", "coop_taskrun" or
    /// "plain".
    pub fn ring_setup(&self) -> &'static str {
        self.ring_setup
    }

    /// Listen on `addr` (SO_REUSEPORT: every core may listen on the same address; the kernel spreads
    /// connections). Returns the listener and the bound address (port 0 picks one).
    pub fn listen(&mut self, addr: SocketAddr, proto: ListenProto) -> io::Result<(ListenerId, SocketAddr)> {
        let fd = sys::tcp_listen(&addr, 1024)?;
        let bound = sys::local_addr(fd).unwrap_or(addr);
        let idx = self.listeners.len() as u32;
        self.listeners.push(Some(Listener {
            fd,
            proto,
            multishot: true,
            armed: false,
        }));
        self.arm_accept(idx);
        Ok((ListenerId(idx), bound))
    }

    /// Accept on a listening socket the caller bound itself (e.g. exclusively, without SO_REUSEPORT, so that
    /// another process probing the same port range cannot share it). The reactor owns `fd` from now on.
    pub fn listen_fd(&mut self, fd: RawFd, proto: ListenProto) -> ListenerId {
        let idx = self.listeners.len() as u32;
        self.listeners.push(Some(Listener {
            fd,
            proto,
            multishot: true,
            armed: false,
        }));
        self.arm_accept(idx);
        ListenerId(idx)
    }

    /// Connect to `addr` within `timeout`. Success: [`Service::on_connected`] (raw) or, once the msgr2 session
    /// is up, the same with the peer's info. Failure: [`Service::on_reset`].
    pub fn connect(
        &mut self,
        addr: SocketAddr,
        proto: ConnectProto,
        timeout: Duration,
    ) -> io::Result<ConnId> {
        let fd = sys::tcp_socket(&addr)?;
        let _ = sys::set_nodelay(fd);
        let _ = sys::set_recv_inq(fd);
        let proto = match proto {
            ConnectProto::Raw => Proto::Raw,
            ConnectProto::Msgr2 {
                cfg,
                auth,
                target_type,
            } => Proto::Msgr2(Box::new(Connection::connector(
                cfg,
                auth,
                EntityAddr::msgr2(addr, 0),
                target_type,
                self.now,
            ))),
            ConnectProto::Msgr2Conn(c) => Proto::Msgr2(c),
        };
        let id = self.new_conn(fd, proto, ConnState::Connecting, Some(addr));
        let raddr = sys::RawAddr::new(&addr);
        let ts = Box::new(
            types::Timespec::new()
                .sec(timeout.as_secs())
                .nsec(timeout.subsec_nanos()),
        );
        let e = opcode::Connect::new(types::Fd(fd), raddr.as_ptr(), raddr.len)
            .build()
            .flags(squeue::Flags::IO_LINK);
        let lt = opcode::LinkTimeout::new(&*ts as *const types::Timespec)
            .build()
            .user_data(UD_IGNORE);
        // The linked pair must reach the kernel in one submission, or the link would be cut.
        let sq_free = {
            let mut ring = self.share.ring.borrow_mut();
            let sq = ring.submission();
            sq.capacity() - sq.len()
        };
        if sq_free < 2 {
            self.stats.submits += 1;
            let _ = self.share.ring.borrow_mut().submit();
        }
        self.push_op(
            e,
            Op::Connect {
                conn: id,
                _addr: raddr,
                _ts: ts,
            },
        );
        // SAFETY: the timespec lives in the Connect op until its completion, which comes after the timeout's.
        unsafe { self.push_sqe(&lt) };
        if let Some(c) = self.conn_mut(id) {
            c.ops += 1;
        }
        Ok(id)
    }

    /// Queue a msgr2 message on `conn`.
    /// Refusals hand the message back (boxed: the error path stays small).
    pub fn send_message(&mut self, conn: ConnId, msg: Message) -> Result<(), SendError<Box<Message>>> {
        let Some(c) = self.conn_mut(conn) else {
            return Err(SendError::NotConnected(Box::new(msg)));
        };
        if c.state == ConnState::Closing {
            return Err(SendError::NotConnected(Box::new(msg)));
        }
        let Proto::Msgr2(m) = &mut c.proto else {
            return Err(SendError::WrongProto(Box::new(msg)));
        };
        match m.send(msg) {
            Ok(()) => {
                self.mark_dirty(conn);
                Ok(())
            }
            Err(e) => match e.kind {
                msgr2::SendErrorKind::QueueFull => Err(SendError::Backpressure(e.msg)),
                msgr2::SendErrorKind::Closed => Err(SendError::NotConnected(e.msg)),
            },
        }
    }

    /// Queue bytes on a raw connection (gathered into one sendmsg with whatever else is queued). Refused while
    /// the connection's outgoing bytes are over [`CoreConfig::max_out_bytes`].
    pub fn send_bytes(&mut self, conn: ConnId, bufs: Vec<Bytes>) -> Result<(), SendError<Vec<Bytes>>> {
        let max = self.cfg.max_out_bytes;
        let Some(c) = self.conn_mut(conn) else {
            return Err(SendError::NotConnected(bufs));
        };
        if c.state == ConnState::Closing {
            return Err(SendError::NotConnected(bufs));
        }
        if !matches!(c.proto, Proto::Raw) {
            return Err(SendError::WrongProto(bufs));
        }
        if c.out_bytes >= max {
            c.want_writable = true;
            return Err(SendError::Backpressure(bufs));
        }
        for b in bufs {
            if !b.is_empty() {
                c.out_bytes += b.len();
                c.out.push_back(b);
            }
        }
        self.mark_dirty(conn);
        Ok(())
    }

    /// Stop reading from `conn` (a receive already in flight still completes): the service's own backlog for
    /// it is full — the throttle ceph-osd applies with `osd_client_message_cap`. TCP then pushes back on the peer.
    pub fn pause_recv(&mut self, conn: ConnId) {
        if let Some(c) = self.conn_mut(conn) {
            c.recv_paused = true;
        }
    }

    pub fn resume_recv(&mut self, conn: ConnId) {
        if let Some(c) = self.conn_mut(conn) {
            c.recv_paused = false;
        }
        self.mark_dirty(conn);
    }

    /// Outgoing bytes queued or in flight on `conn`.
    pub fn queued_bytes(&self, conn: ConnId) -> usize {
        self.conn_ref(conn).map_or(0, |c| c.out_bytes)
    }

    /// The peer's socket address.
    pub fn peer_addr(&self, conn: ConnId) -> Option<SocketAddr> {
        self.conn_ref(conn).and_then(|c| c.peer)
    }

    /// The msgr2 state machine of `conn` (counters, features, peer). The connection is driven again this turn,
    /// so output queued through it directly (e.g. `send_keepalive`) goes out.
    pub fn msgr2(&mut self, conn: ConnId) -> Option<&mut Connection> {
        self.mark_dirty(conn);
        match &mut self.conn_mut(conn)?.proto {
            Proto::Msgr2(m) => Some(m),
            Proto::Raw => None,
        }
    }

    /// Close `conn` now (queued output is dropped; no [`Service::on_reset`]).
    pub fn close(&mut self, conn: ConnId) {
        if let Some(c) = self.conn_mut(conn) {
            c.reported = true;
            if let Proto::Msgr2(m) = &mut c.proto {
                m.close();
            }
        }
        self.begin_close(conn);
    }

    /// Close `conn` once everything queued so far was written (raw connections; msgr2 ones too, best effort).
    pub fn close_after_flush(&mut self, conn: ConnId) {
        if let Some(c) = self.conn_mut(conn) {
            c.reported = true;
            c.want_writable = false;
            c.close_when_flushed = true;
        }
        self.mark_dirty(conn);
    }

    /// Call [`Service::on_timer`] with `token` after `after`.
    pub fn set_timer(&mut self, after: Duration, token: u64) -> TimerId {
        let at = self.now + after;
        self.set_timer_at(at, token)
    }

    pub fn set_timer_at(&mut self, at: Instant, token: u64) -> TimerId {
        self.timer_seq += 1;
        let id = TimerId(at, self.timer_seq);
        self.timers.insert(id, TimerKind::User(token));
        id
    }

    /// Cancel a timer; false if it already fired or was cancelled.
    pub fn cancel_timer(&mut self, id: TimerId) -> bool {
        matches!(self.timers.get(&id), Some(TimerKind::User(_))) && self.timers.remove(&id).is_some()
    }

    /// Send `msg` to core `to` over the SPSC mesh (to ourselves: delivered next turn). A full ring keeps the
    /// message in a local per-target overflow queue (bounded by the caller's own flow control), retried in
    /// order each turn, so `post` never fails unless `to` is out of range.
    pub fn post(&mut self, to: CoreId, msg: M) -> Result<(), M> {
        if to >= self.ncores {
            return Err(msg);
        }
        if to == self.id {
            self.local.push_back(msg);
            return Ok(());
        }
        if self.tx[to].is_none() {
            return Err(msg);
        }
        self.send_envelope(to, Envelope::User(msg));
        Ok(())
    }

    fn send_envelope(&mut self, to: CoreId, e: Envelope<M>) {
        self.stats.mesh_out += 1;
        if !self.overflow[to].is_empty() {
            self.overflow[to].push_back(e);
            return;
        }
        let Some(p) = self.tx[to].as_mut() else { return };
        if let Err(e) = p.push(e) {
            self.overflow[to].push_back(e);
        }
        self.ring_doorbell[to] = true;
    }

    /// Move a connection just accepted (call this from [`Service::on_accept`], before anything was sent or
    /// received on it) to core `to`, which gets [`Service::on_handoff`] with its new id there. Sessions whose
    /// owner core is decided by the first bytes (msgr2 ident) cannot move later: their work crosses cores instead.
    pub fn hand_off(&mut self, conn: ConnId, to: CoreId) -> Result<(), HandOffError> {
        if to >= self.ncores || to == self.id {
            return Err(HandOffError::BadCore);
        }
        let Some(c) = self.conn_ref(conn) else {
            return Err(HandOffError::NotConnected);
        };
        let Some((listener, proto)) = c.origin.clone() else {
            return Err(HandOffError::NotFresh);
        };
        if c.ops != 0 || c.state != ConnState::Open || !c.out.is_empty() || c.recv_armed {
            return Err(HandOffError::NotFresh);
        }
        let (fd, peer) = (c.fd, c.peer);
        // Free the slot without closing the socket: it lives on at the target.
        if let Some(s) = self.conns.get_mut(conn.idx as usize)
            && let Some(c) = s.conn.take()
        {
            self.pool.give(c.rbuf);
            self.free_conns.push(conn.idx);
        }
        self.send_envelope(
            to,
            Envelope::Adopt(Box::new(Adopt {
                fd,
                peer,
                listener,
                proto,
            })),
        );
        Ok(())
    }

    /// Do not sleep at the end of this turn: a sibling device polled in [`Service::on_poll`] has IO in flight
    /// and no fd to wake us (busy polling, as for NVMe poll queues).
    pub fn keep_polling(&mut self) {
        self.keep_polling = true;
    }

    /// Messages waiting in the local overflow queue towards `to` (a full ring): the caller's backpressure signal.
    pub fn post_backlog(&self, to: CoreId) -> usize {
        self.overflow.get(to).map_or(0, |q| q.len())
    }

    /// Ask every core to stop (each calls [`Service::on_stop`], closes its connections and returns).
    pub fn stop_all(&mut self) {
        self.shared.request_stop();
    }

    /// Watch `fd` for readability on this core's ring (multishot poll): e.g. a sibling io_uring (a ferrostore
    /// device ring) whose completions the service reaps in [`Service::on_fd_ready`] or [`Service::on_poll`].
    pub fn watch_fd(&mut self, fd: RawFd) -> WatchId {
        let id = self.watches.len() as u32;
        self.watches.push(Some(fd));
        self.arm_watch(id, fd);
        WatchId(id)
    }

    /// Stop watching (the fd itself stays the caller's).
    pub fn unwatch_fd(&mut self, w: WatchId) {
        if let Some(slot) = self.watches.get_mut(w.0 as usize) {
            *slot = None;
        }
    }

    /// A handle through which a storage device submits its IO on this core's ring (storage hook 3 in
    /// docs/reactor.md): its entries go to the kernel with the turn's one `io_uring_enter`, its completions
    /// come back through [`DeviceRing::take`] (the service takes them in [`Service::on_poll`], which every turn
    /// calls: a turn that ends with device completions not taken does not sleep) and it may block on them
    /// with [`DeviceRing::wait`]. One device per core.
    pub fn device_ring(&self) -> DeviceRing {
        DeviceRing(self.share.clone())
    }

    /// Submit an arbitrary entry on this core's ring; its completion comes to [`Service::on_raw_completion`]
    /// with `token` (user_data is overwritten). This is how a storage device can share the core's ring.
    ///
    /// # Safety
    /// Every buffer, fd and struct the entry points to must stay valid until that completion is delivered.
    pub unsafe fn submit_raw(&mut self, entry: squeue::Entry, token: u64) {
        self.push_op(entry, Op::Raw { token });
    }

    // -----------------------------------------------------------------------------------------------------------
    // Connections

    fn new_conn(
        &mut self,
        fd: RawFd,
        mut proto: Proto,
        state: ConnState,
        peer: Option<SocketAddr>,
    ) -> ConnId {
        if let Proto::Msgr2(m) = &mut proto {
            m.set_direct_rx(self.cfg.direct_rx_min);
        }
        let c = Conn {
            fd,
            state,
            proto,
            peer,
            recv_armed: false,
            send_armed: false,
            ops: 0,
            rbuf: self.pool.take(),
            out: VecDeque::new(),
            out_bytes: 0,
            want_writable: false,
            out_capped: false,
            timer: None,
            dirty: false,
            reported: false,
            close_when_flushed: false,
            origin: None,
            recv_paused: false,
            send_ready: false,
            rx_more: false,
            inline_turn: 0,
            inline_left: 0,
            inline_bytes_left: 0,
            msgs_turn: 0,
            msgs_delivered: 0,
        };
        let idx = match self.free_conns.pop() {
            Some(i) => i,
            None => {
                self.conns.push(ConnSlot {
                    generation: 0,
                    conn: None,
                });
                (self.conns.len() - 1) as u32
            }
        };
        let slot = &mut self.conns[idx as usize];
        slot.generation = slot.generation.wrapping_add(1);
        slot.conn = Some(c);
        ConnId {
            idx,
            generation: slot.generation,
        }
    }

    fn conn_mut(&mut self, id: ConnId) -> Option<&mut Conn> {
        let s = self.conns.get_mut(id.idx as usize)?;
        if s.generation != id.generation {
            return None;
        }
        s.conn.as_mut()
    }

    fn conn_ref(&self, id: ConnId) -> Option<&Conn> {
        let s = self.conns.get(id.idx as usize)?;
        if s.generation != id.generation {
            return None;
        }
        s.conn.as_ref()
    }

    fn mark_dirty(&mut self, id: ConnId) {
        if let Some(c) = self.conn_mut(id)
            && !c.dirty
        {
            c.dirty = true;
            self.dirty.push(id);
        }
    }

    /// Shut the socket down so in-flight ops complete; the fd is closed once they have.
    fn begin_close(&mut self, id: ConnId) {
        let Some(c) = self.conn_mut(id) else { return };
        if c.state != ConnState::Closing {
            c.state = ConnState::Closing;
            sys::shutdown(c.fd);
            c.out.clear();
            c.out_bytes = 0;
        }
        let timer = c.timer.take();
        if let Some(t) = timer {
            self.timers.remove(&t);
        }
        self.maybe_free(id);
    }

    fn maybe_free(&mut self, id: ConnId) {
        let Some(s) = self.conns.get_mut(id.idx as usize) else {
            return;
        };
        if s.generation != id.generation {
            return;
        }
        let done = s
            .conn
            .as_ref()
            .is_some_and(|c| c.state == ConnState::Closing && c.ops == 0);
        if done && let Some(c) = s.conn.take() {
            sys::close(c.fd);
            self.pool.give(c.rbuf);
            self.free_conns.push(id.idx);
        }
    }

    /// Report the end of a connection to the service (once) and start closing it.
    fn fail_conn<S: Service<Msg = M>>(&mut self, svc: &mut S, id: ConnId, reason: CloseReason) {
        let Some(c) = self.conn_mut(id) else { return };
        let report = !c.reported;
        c.reported = true;
        if let Proto::Msgr2(m) = &mut c.proto {
            m.handle_transport_closed();
            // Drain what the state machine says about it, but report the end once, below.
            while m.poll_event().is_some() {}
        }
        self.begin_close(id);
        if report {
            svc.on_reset(self, id, reason);
        }
    }

    // -----------------------------------------------------------------------------------------------------------
    // Submission plumbing

    /// # Safety
    /// Whatever `e` points to must outlive its completion.
    unsafe fn push_sqe(&mut self, e: &squeue::Entry) {
        loop {
            // SAFETY: forwarded to the caller.
            if unsafe { self.share.ring.borrow_mut().submission().push(e) }.is_ok() {
                return;
            }
            // Full: hand the queue to the kernel to make room; GETEVENTS also flushes an overflowed CQ (the
            // EBUSY case) so the next round can make progress. Completions wait in the scratch list.
            self.stats.submits += 1;
            let mut ring = self.share.ring.borrow_mut();
            let to_submit = ring.submission().len() as u32;
            // SAFETY: no argument struct; valid flags.
            let r = unsafe {
                ring.submitter()
                    .enter::<libc::sigset_t>(to_submit, 0, IORING_ENTER_GETEVENTS, None)
            };
            drop(ring);
            if r.is_err() {
                self.reap_into_scratch();
            }
        }
    }

    fn push_op(&mut self, e: squeue::Entry, op: Op) -> usize {
        let i = match self.free_ops.pop() {
            Some(i) => {
                self.ops[i] = Some(op);
                i
            }
            None => {
                self.ops.push(Some(op));
                self.ops.len() - 1
            }
        };
        let e = e.user_data(i as u64);
        // SAFETY: every pointer in the entries built by this module targets memory owned by the op just stored
        // (or by the connection/listener, which outlive their ops); raw entries are the caller's promise.
        unsafe { self.push_sqe(&e) };
        i
    }

    fn arm_doorbell(&mut self) {
        let fd = self.shared.doorbell_fd(self.id);
        let p = &mut *self.efd_buf as *mut u64 as *mut u8;
        let e = opcode::Read::new(types::Fd(fd), p, 8).build();
        self.push_op(e, Op::Doorbell);
    }

    fn arm_accept(&mut self, idx: u32) {
        let Some(Some(l)) = self.listeners.get_mut(idx as usize) else {
            return;
        };
        if l.armed {
            return;
        }
        l.armed = true;
        let fd = types::Fd(l.fd);
        let e = if l.multishot {
            opcode::AcceptMulti::new(fd).flags(libc::SOCK_CLOEXEC).build()
        } else {
            opcode::Accept::new(fd, std::ptr::null_mut(), std::ptr::null_mut())
                .flags(libc::SOCK_CLOEXEC)
                .build()
        };
        self.push_op(e, Op::Accept { listener: idx });
    }

    fn arm_watch(&mut self, id: u32, fd: RawFd) {
        let e = opcode::PollAdd::new(types::Fd(fd), libc::POLLIN as u32)
            .multi(true)
            .build();
        self.push_op(e, Op::Watch { id, fd });
    }

    fn arm_recv(&mut self, id: ConnId) {
        let Some(c) = self.conn_mut(id) else { return };
        if c.recv_armed || c.recv_paused || c.state != ConnState::Open {
            return;
        }
        let mut limit = usize::MAX;
        if let Proto::Msgr2(m) = &mut c.proto {
            if let Some(mut sink) = m.take_rx_sink() {
                // The next bytes are (the rest of) a large segment: straight into its own buffer. MSG_WAITALL
                // lets the kernel retry until the segment is complete (one completion instead of one per
                // arriving chunk); a short count (EOF, signal) is handled like any partial receive.
                c.recv_armed = true;
                c.ops += 1;
                let fd = c.fd;
                let want = sink.remaining();
                let spare = sink.buf_mut().spare_capacity_mut();
                let n = want.min(spare.len()).min(u32::MAX as usize) as u32;
                let p = spare.as_mut_ptr() as *mut u8;
                let e = opcode::Recv::new(types::Fd(fd), p, n)
                    .flags(libc::MSG_WAITALL)
                    .build();
                self.stats.direct_recvs += 1;
                self.push_op(
                    e,
                    Op::RecvSink {
                        conn: id,
                        sink: Box::new(sink),
                    },
                );
                return;
            }
            limit = m.rx_stream_limit().unwrap_or(usize::MAX).max(1);
        }
        let mut buf = std::mem::take(&mut c.rbuf);
        self.pool.refill(&mut buf);
        let Some(c) = self.conn_mut(id) else { return };
        c.recv_armed = true;
        c.ops += 1;
        let fd = c.fd;
        let spare = buf.spare_capacity_mut();
        let (p, n) = (
            spare.as_mut_ptr() as *mut u8,
            spare.len().min(limit).min(u32::MAX as usize) as u32,
        );
        let e = opcode::Recv::new(types::Fd(fd), p, n).build();
        self.push_op(e, Op::Recv { conn: id, buf });
    }

    /// A receive made right here with a plain non-blocking `recvmsg`, when the last receive on `id` left bytes
    /// on the socket ([`CoreConfig::inline_recvs`]): into the msgr2 sink if the next bytes are a large segment,
    /// with the rest of its frame and the next frame's head into the stream buffer in the same call (two
    /// iovecs), else into the stream buffer as a ring receive would. True if bytes were handed to msgr2 (its new
    /// events are waiting); false when the connection is not in that state, the turn's budget is spent, the
    /// socket turned out empty, or it ended (then the connection is failed here).
    fn recv_inline<S: Service<Msg = M>>(&mut self, svc: &mut S, id: ConnId) -> bool {
        let turn = self.stats.turns;
        let (max_recvs, max_bytes) = (self.cfg.inline_recvs, self.cfg.inline_recv_bytes);
        let Some(c) = self.conn_mut(id) else { return false };
        if !c.rx_more || c.recv_armed || c.recv_paused || c.state != ConnState::Open {
            return false;
        }
        if c.inline_turn != turn {
            c.inline_turn = turn;
            c.inline_left = max_recvs;
            c.inline_bytes_left = max_bytes;
        }
        if c.inline_left == 0 || c.inline_bytes_left == 0 {
            return false;
        }
        let Proto::Msgr2(m) = &mut c.proto else {
            return false;
        };
        let mut sink = m.take_rx_sink();
        let limit = match &sink {
            Some(s) => s.stream_after(),
            None => m.rx_stream_limit().unwrap_or(usize::MAX).max(1),
        };
        let mut buf = std::mem::take(&mut c.rbuf);
        self.pool.refill(&mut buf);
        let empty = libc::iovec {
            iov_base: std::ptr::null_mut(),
            iov_len: 0,
        };
        let mut iov = [empty, empty];
        let mut k = 0;
        let mut sink_want = 0;
        if let Some(s) = sink.as_mut() {
            let want = s.remaining();
            let spare = s.buf_mut().spare_capacity_mut();
            sink_want = want.min(spare.len());
            iov[0] = libc::iovec {
                iov_base: spare.as_mut_ptr() as *mut libc::c_void,
                iov_len: sink_want,
            };
            k = 1;
        }
        let spare = buf.spare_capacity_mut();
        let stream_want = spare.len().min(limit);
        if stream_want > 0 {
            iov[k] = libc::iovec {
                iov_base: spare.as_mut_ptr() as *mut libc::c_void,
                iov_len: stream_want,
            };
            k += 1;
        }
        let now = self.now;
        let Some(c) = self.conn_mut(id) else { return false };
        let fd = c.fd;
        // SAFETY: the iovecs point into the spare capacity of the sink and of `buf`, both owned here and
        // untouched until the call returns.
        let r = unsafe { sys::recv_inline(fd, &mut iov[..k]) };
        let Proto::Msgr2(m) = &mut c.proto else {
            return false;
        };
        let (n, inq) = match r {
            Ok((n, inq)) if n > 0 => (n, inq),
            Ok(_) | Err(_) => {
                c.rbuf = buf;
                c.rx_more = false;
                if let Some(s) = sink {
                    m.return_rx_sink(s);
                }
                let reason = match r {
                    Ok(_) => CloseReason::Eof,
                    Err(e)
                        if e.kind() == io::ErrorKind::WouldBlock
                            || e.kind() == io::ErrorKind::Interrupted =>
                    {
                        return false;
                    }
                    Err(e) => CloseReason::Io(errno_of(&e)),
                };
                self.fail_conn(svc, id, reason);
                return false;
            }
        };
        c.inline_left -= 1;
        c.inline_bytes_left = c.inline_bytes_left.saturating_sub(n);
        // Without TCP_INQ: a receive that filled everything it asked for may have left more behind.
        c.rx_more = inq.map_or(n == sink_want + stream_want, |q| q > 0);
        let n0 = n.min(sink_want);
        let mut ok = true;
        if let Some(mut s) = sink {
            let b = s.buf_mut();
            // SAFETY: the kernel initialised the first n0 bytes of the sink's spare capacity (at most
            // `remaining()`, which msgr2 checks again).
            unsafe { b.set_len(b.len() + n0) };
            ok = m.handle_rx_sink(now, s, n0).is_ok();
        }
        let n1 = n - n0;
        if ok && n1 > 0 {
            // SAFETY: the kernel initialised the n1 bytes that followed the sink's, at the start of `buf`'s
            // spare capacity.
            unsafe { buf.set_len(buf.len() + n1) };
            // Errors come back as Faulted/Closed events, delivered by the caller.
            let _ = m.handle_input_bytes(now, buf.split().freeze());
        }
        c.rbuf = buf;
        self.stats.inline_recvs += 1;
        self.stats.inline_recv_bytes += n as u64;
        self.stats.recv_bytes += n as u64;
        if sink_want > 0 {
            self.stats.direct_recvs += 1;
            self.stats.direct_recv_bytes += n0 as u64;
        }
        true
    }

    fn arm_send(&mut self, id: ConnId) {
        let direct = self.cfg.direct_sends;
        let Some(c) = self.conn_mut(id) else { return };
        if c.send_armed || c.state != ConnState::Open || c.out.is_empty() {
            return;
        }
        if direct {
            // At the end of the turn, with everything the turn queued for it (one sendmsg per connection and
            // turn), and as the turn's last work: waking the peer may hand it this CPU, which then costs no
            // extra switch because the core is about to sleep anyway.
            if !c.send_ready {
                c.send_ready = true;
                self.send_ready.push(id);
            }
            return;
        }
        self.arm_ring_send(id, false);
    }

    /// The end of the turn: direct sends for the connections that queued output; what a socket does not take
    /// goes to a ring send.
    fn flush_sends(&mut self) {
        let mut ready = std::mem::take(&mut self.send_ready);
        for &id in &ready {
            let Some(c) = self.conn_mut(id) else { continue };
            c.send_ready = false;
            if c.send_armed || c.state != ConnState::Open || c.out.is_empty() {
                continue;
            }
            // A folded send that writes everything is done without a completion, i.e. without waking this core:
            // only when nothing has to follow it (else, e.g. with msgr2 output held back at max_out_bytes, the
            // rest would wait for the core's next event, as in tests/direct_send_stall.rs).
            let nothing_follows =
                !(c.want_writable || c.close_when_flushed || c.out_capped || c.out.len() > MAX_IOV);
            if self.cfg.fold_sends && nothing_follows {
                self.arm_ring_send(id, true);
            } else if !self.send_direct(id) {
                self.arm_ring_send(id, false);
            }
        }
        ready.clear();
        if self.send_ready.is_empty() {
            self.send_ready = ready;
        }
    }

    /// A `sendmsg` of `id`'s queued output on the ring (its completion re-drives the connection), or a folded
    /// one ([`CoreConfig::fold_sends`]): issued inline by the enter that submits it, completing only if it did
    /// not write everything.
    fn arm_ring_send(&mut self, id: ConnId, folded: bool) {
        let Some(c) = self.conn_mut(id) else { return };
        if c.send_armed || c.state != ConnState::Open || c.out.is_empty() {
            return;
        }
        let mut slot = self.send_free.pop().unwrap_or_else(|| SendSlot {
            bufs: Vec::new(),
            iov: Vec::new(),
            // SAFETY: msghdr is plain data; zero is "no name, no control".
            msg: Box::new(unsafe { std::mem::zeroed() }),
        });
        let Some(c) = self.conn_mut(id) else { return };
        let n = c.out.len().min(MAX_IOV);
        slot.bufs.extend(c.out.drain(..n));
        let queued: usize = if folded {
            slot.bufs.iter().map(Bytes::len).sum()
        } else {
            0
        };
        c.send_armed = true;
        c.ops += 1;
        let fd = c.fd;
        slot.iov.extend(slot.bufs.iter().map(|b| libc::iovec {
            iov_base: b.as_ptr() as *mut libc::c_void,
            iov_len: b.len(),
        }));
        // SAFETY: as above; a recycled msghdr is reset so nothing from its last use survives.
        *slot.msg = unsafe { std::mem::zeroed() };
        slot.msg.msg_iov = slot.iov.as_mut_ptr();
        slot.msg.msg_iovlen = slot.iov.len() as _;
        let flags = if folded {
            // DONTWAIT: the kernel never parks it (an EAGAIN completes it), so it is done when its entry has
            // been consumed; WAITALL: a short write is a failure, so SKIP_SUCCESS skips only complete writes
            // (the completion of a short one carries the bytes written).
            libc::MSG_NOSIGNAL | libc::MSG_DONTWAIT | libc::MSG_WAITALL
        } else {
            libc::MSG_NOSIGNAL
        };
        let mut e = opcode::SendMsg::new(types::Fd(fd), &*slot.msg as *const libc::msghdr)
            .flags(flags as u32)
            .build();
        if folded {
            e = e.flags(squeue::Flags::SKIP_SUCCESS);
        }
        let op = self.push_op(
            e,
            Op::Send {
                conn: id,
                slot,
                folded,
            },
        );
        if folded {
            self.stats.folded_sends += 1;
            self.stats.sent_bytes += queued as u64;
            // An entry for this op index left from an earlier folded send (completed by a CQE while its
            // resolution waited) must not complete this one too.
            self.folded.retain(|&j| j != op);
            self.folded.push(op);
        }
    }

    /// Write `id`'s queued output with one non-blocking `sendmsg` right now (no ring send in flight on it, so
    /// the order holds). True if everything went; otherwise what is left (socket buffer full, or an error, which
    /// the ring send then reports through its completion) stays queued for the ring send.
    fn send_direct(&mut self, id: ConnId) -> bool {
        let mut iov = std::mem::take(&mut self.direct_iov);
        let Some(c) = self.conn_mut(id) else {
            self.direct_iov = iov;
            return false;
        };
        iov.clear();
        iov.extend(c.out.iter().take(MAX_IOV).map(|b| libc::iovec {
            iov_base: b.as_ptr() as *mut libc::c_void,
            iov_len: b.len(),
        }));
        let fd = c.fd;
        // SAFETY: msghdr is plain data; zero is "no name, no control".
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        msg.msg_iov = iov.as_mut_ptr();
        msg.msg_iovlen = iov.len() as _;
        // SAFETY: the iovecs point into `c.out`'s buffers, which nothing touches until the call returns.
        let r = unsafe { libc::sendmsg(fd, &msg, libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL) };
        iov.clear();
        self.direct_iov = iov;
        let max_out = self.cfg.max_out_bytes;
        self.stats.direct_sends += 1;
        let Some(c) = self.conn_mut(id) else { return false };
        if r <= 0 {
            // EAGAIN (nothing fits), EINTR, or an error: the ring send takes over and reports it.
            return false;
        }
        let mut n = r as usize;
        c.out_bytes = c.out_bytes.saturating_sub(n);
        while let Some(b) = c.out.front_mut() {
            if n < b.len() {
                if n > 0 {
                    let _ = b.split_to(n);
                }
                break;
            }
            n -= b.len();
            c.out.pop_front();
        }
        let done = c.out.is_empty();
        let revisit = c.revisit_after_send(max_out);
        self.stats.sent_bytes += r as u64;
        if !done {
            self.stats.direct_sends_partial += 1;
        }
        if revisit {
            self.mark_dirty(id);
        }
        done
    }

    // -----------------------------------------------------------------------------------------------------------
    // Completions

    /// Collect completions: first those a device's blocking wait set aside, then the ring's. A device's own
    /// completions go to its list at once (a service callback may block on one before this batch is dispatched).
    fn reap_into_scratch(&mut self) {
        let share = &*self.share;
        {
            let mut d = share.deferred.borrow_mut();
            if !d.is_empty() {
                self.cqe_scratch.append(&mut d);
            }
        }
        let mut ring = share.ring.borrow_mut();
        for c in ring.completion() {
            if !share.route(c.user_data(), c.result()) {
                self.cqe_scratch.push((c.user_data(), c.result(), c.flags()));
            }
        }
    }

    /// Folded sends ([`CoreConfig::fold_sends`]) whose entries the kernel has consumed were issued inline by
    /// that `io_uring_enter`, and the completion of one that did not write everything was posted before the
    /// enter returned: it is in the scratch list now. The others wrote everything; they get a completion of
    /// their full length here. Nothing is decided while an entry is still queued or a completion may still be
    /// in the kernel's overflow list.
    fn resolve_folded(&mut self) {
        {
            let mut ring = self.share.ring.borrow_mut();
            let sq = ring.submission();
            if !sq.is_empty() || sq.cq_overflow() {
                return;
            }
        }
        for i in std::mem::take(&mut self.folded) {
            let ud = i as u64;
            if self.cqe_scratch.iter().any(|c| c.0 == ud) {
                continue;
            }
            if let Some(Some(Op::Send {
                slot, folded: true, ..
            })) = self.ops.get(i)
            {
                let len: usize = slot.bufs.iter().map(Bytes::len).sum();
                // At most max_out_bytes plus one msgr2 buffer: far below i32::MAX.
                self.cqe_scratch.push((ud, len.min(i32::MAX as usize) as i32, 0));
            }
        }
    }

    fn dispatch_cqes<S: Service<Msg = M>>(&mut self, svc: &mut S) -> usize {
        self.reap_into_scratch();
        let real = self.cqe_scratch.len();
        if !self.folded.is_empty() {
            self.resolve_folded();
        }
        let cqes = std::mem::take(&mut self.cqe_scratch);
        let n = cqes.len();
        self.stats.cqes += real as u64;
        for &(ud, res, flags) in &cqes {
            if ud == UD_IGNORE {
                continue;
            }
            if ud >= UD_WAKE_BASE {
                // A MSG_RING wake-up the kernel refused (an old kernel: EINVAL; the target's CQ overflowing):
                // wake the target the old way, and stop using MSG_RING if the opcode is unknown.
                let to = (ud - UD_WAKE_BASE) as usize;
                if res == -libc::EINVAL || res == -libc::EOPNOTSUPP || res == -libc::EBADFD {
                    self.cfg.msg_ring_doorbells = false;
                }
                if to < self.ncores {
                    self.shared.ring_eventfd(to);
                    self.stats.doorbells_eventfd += 1;
                }
                continue;
            }
            let i = ud as usize;
            let more = cqueue::more(flags);
            let op = if more {
                // Multishot: the op stays armed; look at it without taking it.
                match self.ops.get(i) {
                    Some(Some(Op::Accept { listener })) => Some(Op::Accept { listener: *listener }),
                    Some(Some(Op::Watch { id, fd })) => Some(Op::Watch { id: *id, fd: *fd }),
                    _ => None,
                }
            } else {
                let op = self.ops.get_mut(i).and_then(|o| o.take());
                if op.is_some() {
                    self.free_ops.push(i);
                }
                op
            };
            let Some(op) = op else { continue };
            if !more && self.wait_timer.is_some_and(|(_, w)| w == i) {
                self.wait_timer = None;
            }
            self.complete(svc, op, res, flags);
        }
        let mut cqes = cqes;
        cqes.clear();
        if self.cqe_scratch.is_empty() {
            self.cqe_scratch = cqes;
        }
        n
    }

    fn complete<S: Service<Msg = M>>(&mut self, svc: &mut S, op: Op, res: i32, flags: u32) {
        let more = cqueue::more(flags);
        match op {
            Op::Doorbell => {
                if !self.stopping {
                    self.arm_doorbell();
                }
            }
            Op::WaitTimeout { .. } => {}
            Op::Raw { token } => svc.on_raw_completion(self, token, res, 0),
            Op::Watch { id, fd } => {
                let live = self.watches.get(id as usize).copied().flatten() == Some(fd);
                if live {
                    if !more && !self.stopping {
                        self.arm_watch(id, fd);
                    }
                    svc.on_fd_ready(self, WatchId(id));
                }
            }
            Op::Accept { listener } => self.on_accept_cqe(svc, listener, res, more),
            Op::Connect { conn, .. } => {
                let Some(c) = self.conn_mut(conn) else { return };
                c.ops -= 1;
                if c.state == ConnState::Closing {
                    self.maybe_free(conn);
                    return;
                }
                if res < 0 {
                    let reason = if res == -libc::ECANCELED || res == -libc::ETIME {
                        CloseReason::ConnectTimeout
                    } else {
                        CloseReason::ConnectFailed(-res)
                    };
                    self.fail_conn(svc, conn, reason);
                    return;
                }
                c.state = ConnState::Open;
                let raw = matches!(c.proto, Proto::Raw);
                self.mark_dirty(conn);
                if raw {
                    svc.on_connected(self, conn, None);
                }
            }
            Op::Recv { conn, mut buf } => {
                let now = self.now;
                let Some(c) = self.conn_mut(conn) else { return };
                c.ops -= 1;
                c.recv_armed = false;
                if c.state == ConnState::Closing {
                    c.rbuf = buf;
                    self.maybe_free(conn);
                    return;
                }
                if res <= 0 {
                    c.rbuf = buf;
                    let reason = if res == 0 {
                        CloseReason::Eof
                    } else {
                        CloseReason::Io(-res)
                    };
                    self.fail_conn(svc, conn, reason);
                    return;
                }
                let n = res as usize;
                debug_assert!(n <= buf.capacity() - buf.len());
                // SAFETY: the kernel initialised n bytes of the spare capacity it was given.
                unsafe { buf.set_len(buf.len() + n) };
                let data = buf.split().freeze();
                c.rbuf = buf;
                c.rx_more = cqueue::sock_nonempty(flags);
                if let Proto::Msgr2(m) = &mut c.proto {
                    // Errors come back as Faulted/Closed events, handled in drive_conn. msgr2 keeps `data`
                    // (crc-mode message segments are slices of it), so no second copy of the payload; the
                    // receive buffer is reclaimed once the last message referencing it is dropped.
                    let _ = m.handle_input_bytes(now, data);
                    self.stats.recv_bytes += n as u64;
                    self.mark_dirty(conn);
                } else {
                    self.stats.recv_bytes += n as u64;
                    self.mark_dirty(conn);
                    svc.on_data(self, conn, data);
                }
            }
            Op::RecvSink { conn, mut sink } => {
                let now = self.now;
                let Some(c) = self.conn_mut(conn) else { return };
                c.ops -= 1;
                c.recv_armed = false;
                if c.state == ConnState::Closing {
                    self.maybe_free(conn);
                    return;
                }
                if res <= 0 {
                    let reason = if res == 0 {
                        CloseReason::Eof
                    } else {
                        CloseReason::Io(-res)
                    };
                    self.fail_conn(svc, conn, reason);
                    return;
                }
                let n = res as usize;
                c.rx_more = cqueue::sock_nonempty(flags);
                let buf = sink.buf_mut();
                debug_assert!(n <= buf.capacity() - buf.len());
                // SAFETY: the kernel initialised n bytes of the spare capacity it was given (at most
                // `remaining()`, which msgr2 checks again).
                unsafe { buf.set_len(buf.len() + n) };
                if let Proto::Msgr2(m) = &mut c.proto {
                    // Errors come back as Faulted/Closed events, handled in drive_conn.
                    let _ = m.handle_rx_sink(now, *sink, n);
                }
                self.stats.recv_bytes += n as u64;
                self.stats.direct_recv_bytes += n as u64;
                self.mark_dirty(conn);
            }
            Op::Send {
                conn,
                mut slot,
                folded,
            } => {
                // The kernel is done with the slot: forget the pointers, keep the capacity.
                slot.iov.clear();
                // A folded send that found the socket full wrote nothing; its rest goes to a ring send below.
                let res = if folded && res == -libc::EAGAIN { 0 } else { res };
                // Folded sends count as sent when queued (a complete one may be resolved only at shutdown); a
                // short one takes back what it did not write.
                let unsent = if folded && res >= 0 {
                    slot.bufs
                        .iter()
                        .map(Bytes::len)
                        .sum::<usize>()
                        .saturating_sub(res as usize)
                } else {
                    0
                };
                self.stats.sent_bytes = self.stats.sent_bytes.saturating_sub(unsent as u64);
                let max_out = self.cfg.max_out_bytes;
                let Some(c) = self.conn_mut(conn) else {
                    self.recycle_send_slot(slot);
                    return;
                };
                c.ops -= 1;
                c.send_armed = false;
                if c.state == ConnState::Closing {
                    self.recycle_send_slot(slot);
                    self.maybe_free(conn);
                    return;
                }
                if res < 0 {
                    self.recycle_send_slot(slot);
                    self.fail_conn(svc, conn, CloseReason::Io(-res));
                    return;
                }
                let mut n = res as usize;
                c.out_bytes = c.out_bytes.saturating_sub(n);
                // Skip what was written; a partial write puts the rest back at the front, in order.
                let mut written = 0;
                for b in &slot.bufs {
                    if n < b.len() {
                        break;
                    }
                    n -= b.len();
                    written += 1;
                }
                let partial = written < slot.bufs.len();
                if partial {
                    // Rare (socket buffer full): allocating here is fine.
                    let rest: Vec<Bytes> = slot.bufs.drain(written..).collect();
                    for (k, b) in rest.into_iter().enumerate().rev() {
                        // Only the first unsent buffer can be partly written.
                        c.out.push_front(if k == 0 && n > 0 { b.slice(n..) } else { b });
                    }
                }
                let revisit = folded && !partial && c.revisit_after_send(max_out);
                if !folded {
                    self.stats.sent_bytes += res as u64;
                    self.stats.partial_sends += u64::from(partial);
                    self.recycle_send_slot(slot);
                    self.mark_dirty(conn);
                } else if partial {
                    // The socket is full: an ordinary ring send waits for room (another folded one would come
                    // straight back, every turn).
                    self.stats.folded_sends_partial += 1;
                    self.recycle_send_slot(slot);
                    self.arm_ring_send(conn, false);
                } else {
                    self.recycle_send_slot(slot);
                    if revisit {
                        self.mark_dirty(conn);
                    }
                }
            }
        }
    }

    fn recycle_send_slot(&mut self, mut slot: SendSlot) {
        slot.bufs.clear();
        slot.iov.clear();
        if self.send_free.len() < SEND_SLOTS_KEPT && slot.bufs.capacity() <= MAX_IOV {
            self.send_free.push(slot);
        }
    }

    fn on_accept_cqe<S: Service<Msg = M>>(&mut self, svc: &mut S, li: u32, res: i32, more: bool) {
        let Some(Some(l)) = self.listeners.get_mut(li as usize) else {
            if res >= 0 {
                sys::close(res);
            }
            return;
        };
        if !more {
            l.armed = false;
        }
        if res < 0 {
            if res == -libc::EINVAL && l.multishot {
                // No multishot accept on this kernel: one accept at a time.
                l.multishot = false;
            }
            if !self.stopping && !more {
                self.arm_accept(li);
            }
            return;
        }
        let proto = l.proto.clone();
        if !more && !self.stopping {
            self.arm_accept(li);
        }
        let fd = res;
        if self.conns.len() - self.free_conns.len() >= self.cfg.max_connections {
            self.stats.refused += 1;
            sys::close(fd);
            return;
        }
        let _ = sys::set_nodelay(fd);
        let _ = sys::set_recv_inq(fd);
        let peer = sys::peer_addr(fd);
        self.stats.accepted += 1;
        let Some(id) = self.adopt(svc, fd, peer, ListenerId(li), proto) else {
            return;
        };
        let pa = peer.unwrap_or_else(|| SocketAddr::from(([0, 0, 0, 0], 0)));
        svc.on_accept(self, ListenerId(li), id, pa);
    }

    fn adopt<S: Service<Msg = M>>(
        &mut self,
        svc: &mut S,
        fd: RawFd,
        peer: Option<SocketAddr>,
        listener: ListenerId,
        proto: ListenProto,
    ) -> Option<ConnId> {
        let p = match &proto {
            ListenProto::Raw => Proto::Raw,
            ListenProto::Msgr2 { cfg, auth } => {
                let mut cfg = cfg.clone();
                cfg.auto_accept = true;
                let mut m = Connection::acceptor(cfg, auth(), self.now);
                if let Some(pa) = peer {
                    m.set_peer_socket_addr(pa);
                }
                Proto::Msgr2(Box::new(m))
            }
            ListenProto::Msgr2ByService => {
                let pa = peer.unwrap_or_else(|| SocketAddr::from(([0, 0, 0, 0], 0)));
                match svc.msgr2_acceptor(listener, pa) {
                    Some(m) => Proto::Msgr2(Box::new(m)),
                    None => {
                        sys::close(fd);
                        return None;
                    }
                }
            }
        };
        let id = self.new_conn(fd, p, ConnState::Open, peer);
        if let Some(c) = self.conn_mut(id) {
            c.origin = Some((listener, proto));
        }
        self.mark_dirty(id);
        Some(id)
    }

    // -----------------------------------------------------------------------------------------------------------
    // The loop

    /// Pull output, arm ops, deliver msgr2 events, refresh the connection's timer.
    fn drive_conn<S: Service<Msg = M>>(&mut self, svc: &mut S, id: ConnId) {
        let max_out = self.cfg.max_out_bytes;
        let now = self.now;
        let Some(c) = self.conn_mut(id) else { return };
        c.dirty = false;
        c.origin = None;
        if c.state == ConnState::Closing {
            return;
        }
        // Events first: they may queue output. Then, while the socket holds more, receive inline and deliver
        // what that completed, so every message already queued is handed over before this turn's `on_poll` —
        // up to `msgs_per_turn` messages; the rest wait for the next turn.
        let (cap, turn) = (self.cfg.msgs_per_turn, self.stats.turns);
        let mut capped = false;
        loop {
            loop {
                let Some(c) = self.conn_mut(id) else { return };
                if c.msgs_turn != turn {
                    c.msgs_turn = turn;
                    c.msgs_delivered = 0;
                }
                let Proto::Msgr2(m) = &mut c.proto else { break };
                if cap > 0 && c.msgs_delivered >= cap {
                    capped = m.has_events();
                    break;
                }
                let Some(ev) = m.poll_event() else { break };
                match ev {
                    Event::Connected(p) => svc.on_connected(self, id, Some(&p)),
                    Event::Message(msg) => {
                        c.msgs_delivered += 1;
                        self.delivered_since_enter += msg.data.len() as u64;
                        svc.on_message(self, id, msg)
                    }
                    Event::Writable => svc.on_writable(self, id),
                    Event::Faulted { error, .. } | Event::Reset { error } | Event::Closed { error } => {
                        self.fail_conn(svc, id, CloseReason::Protocol(error));
                        return;
                    }
                    other => svc.on_msgr2_event(self, id, other),
                }
            }
            self.submit_device_after_rx();
            if capped || !self.recv_inline(svc, id) {
                break;
            }
        }
        if capped {
            self.stats.msg_cap_holds += 1;
            if !self.held.contains(&id) {
                self.held.push(id);
            }
        }
        let Some(c) = self.conn_mut(id) else { return };
        if c.state != ConnState::Open {
            return;
        }
        if let Proto::Msgr2(m) = &mut c.proto {
            c.out_capped = false;
            while c.out_bytes < max_out {
                let Some(b) = m.poll_output() else { break };
                c.out_bytes += b.len();
                c.out.push_back(b);
            }
            c.out_capped = c.out_bytes >= max_out;
        }
        let notify = c.want_writable && c.out_bytes < max_out / 2;
        if notify {
            c.want_writable = false;
        }
        let close_now = c.close_when_flushed && c.out.is_empty() && !c.send_armed;
        self.arm_send(id);
        if !capped {
            // A held connection receives again when its waiting messages are delivered (next turn).
            self.arm_recv(id);
        }
        // Re-arm the msgr2 timer if its deadline moved.
        let Some(c) = self.conn_mut(id) else { return };
        if let Proto::Msgr2(m) = &c.proto {
            let want = m.poll_timeout();
            if c.timer.map(|t| t.0) != want {
                let old = c.timer.take();
                if let Some(t) = old {
                    self.timers.remove(&t);
                }
                if let Some(at) = want {
                    self.timer_seq += 1;
                    let t = TimerId(at.max(now), self.timer_seq);
                    self.timers.insert(t, TimerKind::Conn(id));
                    if let Some(c) = self.conn_mut(id) {
                        c.timer = Some(t);
                    }
                }
            }
        }
        if close_now {
            self.begin_close(id);
        } else if notify {
            svc.on_writable(self, id);
        }
    }

    fn fire_timers<S: Service<Msg = M>>(&mut self, svc: &mut S) -> usize {
        // Bounded per turn so a flood of timers cannot starve the sockets.
        for n in 0..4096 {
            let Some((&id, _)) = self.timers.first_key_value() else {
                return n;
            };
            if id.0 > self.now {
                return n;
            }
            let Some(kind) = self.timers.remove(&id) else {
                return n;
            };
            match kind {
                TimerKind::User(token) => svc.on_timer(self, id, token),
                TimerKind::Conn(cid) => {
                    let now = self.now;
                    if let Some(c) = self.conn_mut(cid) {
                        if c.timer == Some(id) {
                            c.timer = None;
                        }
                        if let Proto::Msgr2(m) = &mut c.proto {
                            m.handle_timeout(now);
                        }
                        self.mark_dirty(cid);
                    }
                }
            }
        }
        4096
    }

    fn drain_mesh<S: Service<Msg = M>>(&mut self, svc: &mut S) -> usize {
        let mut got = 0;
        let batch = self.cfg.mesh_batch;
        for from in 0..self.ncores {
            let Some(mut rx) = self.rx.get_mut(from).and_then(|r| r.take()) else {
                continue;
            };
            let mut msgs = std::mem::take(&mut self.mesh_scratch);
            rx.drain(batch, |m| msgs.push(m));
            self.rx[from] = Some(rx);
            got += msgs.len();
            self.stats.mesh_in += msgs.len() as u64;
            for m in msgs.drain(..) {
                match m {
                    Envelope::User(m) => svc.on_cross_core(self, from, m),
                    Envelope::Adopt(a) => {
                        let mut a = a;
                        if self.stopping {
                            continue; // dropping `a` closes the socket
                        }
                        let fd = std::mem::replace(&mut a.fd, -1);
                        let (peer, listener, proto) = (a.peer, a.listener, a.proto.clone());
                        drop(a);
                        let Some(id) = self.adopt(svc, fd, peer, listener, proto) else {
                            continue;
                        };
                        let pa = peer.unwrap_or_else(|| SocketAddr::from(([0, 0, 0, 0], 0)));
                        svc.on_handoff(self, id, pa, from);
                    }
                }
            }
            self.mesh_scratch = msgs;
        }
        let n = self.local.len().min(batch);
        for _ in 0..n {
            if let Some(m) = self.local.pop_front() {
                got += 1;
                svc.on_cross_core(self, self.id, m);
            }
        }
        if self.shared.has_injected(self.id) {
            for m in self.shared.take_injected(self.id) {
                got += 1;
                svc.on_cross_core(self, usize::MAX, m);
            }
        }
        got
    }

    /// Retry overflowed posts and wake the cores we sent to (one eventfd write per sleeping target per turn).
    fn flush_mesh(&mut self) {
        for to in 0..self.ncores {
            if !self.overflow[to].is_empty()
                && let Some(p) = self.tx[to].as_mut()
            {
                while let Some(m) = self.overflow[to].pop_front() {
                    if let Err(m) = p.push(m) {
                        self.overflow[to].push_front(m);
                        break;
                    }
                    self.ring_doorbell[to] = true;
                }
            }
        }
        if self.ring_doorbell.iter().any(|b| *b) {
            // Pairs with the fence in `may_sleep`: either the target sees our pushes or we see it asleep.
            fence(Ordering::SeqCst);
            for to in 0..self.ncores {
                if std::mem::take(&mut self.ring_doorbell[to]) && self.shared.claim_wake(to) {
                    self.stats.doorbells_rung += 1;
                    self.wake_core(to);
                }
            }
        }
    }

    /// Wake `to`, which announced it sleeps: a MSG_RING entry that the end of this turn submits (the target's
    /// wait returns on the completion it posts), or its eventfd.
    fn wake_core(&mut self, to: CoreId) {
        if self.cfg.msg_ring_doorbells
            && let Some(fd) = self.shared.ring_fd(to)
        {
            let e = opcode::MsgRingData::new(types::Fd(fd), 0, UD_IGNORE, None)
                .build()
                .flags(squeue::Flags::SKIP_SUCCESS)
                .user_data(UD_WAKE_BASE + to as u64);
            // SAFETY: the entry points to no memory; the fd is a duplicate the runtime keeps open.
            unsafe { self.push_sqe(&e) };
            self.stats.doorbells_msg_ring += 1;
        } else {
            self.shared.ring_eventfd(to);
            self.stats.doorbells_eventfd += 1;
        }
    }

    /// Announce that we are about to sleep, then check once more for cross-core work.
    fn may_sleep(&mut self) -> bool {
        self.shared.set_sleeping(self.id, true);
        fence(Ordering::SeqCst);
        let pending = self.rx.iter_mut().flatten().any(|c| !c.is_empty())
            || self.shared.has_injected(self.id)
            || self.shared.stop_requested();
        if pending {
            self.shared.set_sleeping(self.id, false);
        }
        !pending
    }

    fn wait(&mut self, block: bool) {
        self.stats.submits += 1;
        self.dev_sqes_entered = self.share.counts().0;
        self.delivered_since_enter = 0;
        if !block {
            // Submit and collect without sleeping. GETEVENTS with min_complete 0 runs deferred task work
            // (DEFER_TASKRUN) and returns at once; a zero timeout instead would go through schedule() and, on a
            // loaded machine, hand the CPU away for a whole time slice.
            let mut ring = self.share.ring.borrow_mut();
            let to_submit = ring.submission().len() as u32;
            // SAFETY: no argument struct is passed; the flags are valid for io_uring_enter.
            let _ = unsafe {
                ring.submitter()
                    .enter::<libc::sigset_t>(to_submit, 0, IORING_ENTER_GETEVENTS, None)
            };
            return;
        }
        let share = self.share.clone();
        let first = self.timers.first_key_value().map(|(t, _)| t.0);
        let timeout = match first {
            Some(at) if self.cfg.standing_timer => {
                self.arm_wait_timer(at);
                None
            }
            Some(at) => Some(at.saturating_duration_since(Instant::now())),
            None => None,
        };
        let r = match timeout {
            None => share.ring.borrow_mut().submit_and_wait(1),
            Some(d) if self.ext_arg => {
                let ts = types::Timespec::new().sec(d.as_secs()).nsec(d.subsec_nanos());
                let args = types::SubmitArgs::new().timespec(&ts);
                share.ring.borrow_mut().submitter().submit_with_args(1, &args)
            }
            Some(d) => {
                let ts = Box::new(types::Timespec::new().sec(d.as_secs()).nsec(d.subsec_nanos()));
                let e = opcode::Timeout::new(&*ts as *const types::Timespec).build();
                self.push_op(e, Op::WaitTimeout { _ts: ts });
                share.ring.borrow_mut().submit_and_wait(1)
            }
        };
        self.stats.waits += 1;
        match r {
            Ok(_) => {}
            Err(e)
                if matches!(
                    e.raw_os_error(),
                    Some(libc::ETIME) | Some(libc::EINTR) | Some(libc::EBUSY)
                ) => {}
            Err(e) => {
                // Nothing sensible to do but retry next turn; avoid a hot spin.
                let _ = errno_of(&e);
                std::thread::yield_now();
            }
        }
        self.shared.set_sleeping(self.id, false);
    }

    /// Make sure a timeout wakes the ring by `at`: the standing one if it fires no later, else a new absolute
    /// `IORING_OP_TIMEOUT` (the later one is removed). It stays armed across sleeps, so a sleep costs no timer
    /// of its own; one that fires before its timer is due (cancelled, or moved later) is only a spurious wake.
    fn arm_wait_timer(&mut self, at: Instant) {
        if let Some((cur, idx)) = self.wait_timer {
            if cur <= at {
                return;
            }
            let e = opcode::TimeoutRemove::new(idx as u64)
                .build()
                .flags(squeue::Flags::SKIP_SUCCESS)
                .user_data(UD_IGNORE);
            // SAFETY: a timeout removal points to no memory.
            unsafe { self.push_sqe(&e) };
            self.wait_timer = None;
        }
        let d = self.clock_base.1 + at.saturating_duration_since(self.clock_base.0);
        let ts = Box::new(types::Timespec::new().sec(d.as_secs()).nsec(d.subsec_nanos()));
        let e = opcode::Timeout::new(&*ts as *const types::Timespec)
            .flags(types::TimeoutFlags::ABS)
            .build();
        let idx = self.push_op(e, Op::WaitTimeout { _ts: ts });
        self.wait_timer = Some((at, idx));
        self.stats.wait_timers_armed += 1;
    }

    /// Drive every dirty connection (bounded rounds keep one turn finite); how many were driven.
    fn drive_dirty<S: Service<Msg = M>>(&mut self, svc: &mut S) -> usize {
        let mut n = 0;
        for _ in 0..8 {
            if self.dirty.is_empty() {
                break;
            }
            // Swap in the spare list: what driving marks dirty goes to the other one.
            let mut dirty = std::mem::replace(&mut self.dirty, std::mem::take(&mut self.dirty_spare));
            n += dirty.len();
            for id in dirty.drain(..) {
                self.drive_conn(svc, id);
            }
            self.dirty_spare = dirty;
        }
        n
    }

    /// Hand the device entries queued since the last enter to the kernel now, if `on_poll` has device
    /// completions to process first ([`CoreConfig::early_device_submit`]). Whatever else is queued (receives,
    /// sends) goes with them; nothing is waited for.
    fn submit_device_early(&mut self) {
        if !self.cfg.early_device_submit
            || !self.share.device_pending()
            || self.share.counts().0 == self.dev_sqes_entered
        {
            return;
        }
        self.dev_sqes_entered = self.share.counts().0;
        let mut ring = self.share.ring.borrow_mut();
        if ring.submission().is_empty() {
            return;
        }
        // No GETEVENTS: completions are not reaped here (the turn's wait does that), so nothing is dispatched
        // out of order.
        if ring.submit().is_ok() {
            self.stats.early_device_submits += 1;
        }
    }

    /// Before another inline receive: hand the device entries queued since the last enter to the kernel if the
    /// messages delivered since then carry [`CoreConfig::rx_submit_bytes`] of data.
    fn submit_device_after_rx(&mut self) {
        let min = self.cfg.rx_submit_bytes as u64;
        if min == 0 || self.delivered_since_enter < min || self.share.counts().0 == self.dev_sqes_entered {
            return;
        }
        self.dev_sqes_entered = self.share.counts().0;
        self.delivered_since_enter = 0;
        let mut ring = self.share.ring.borrow_mut();
        // No GETEVENTS, as in submit_device_early: nothing is reaped out of order.
        if !ring.submission().is_empty() && ring.submit().is_ok() {
            self.stats.rx_device_submits += 1;
        }
    }

    /// One loop turn.
    fn turn<S: Service<Msg = M>>(&mut self, svc: &mut S) {
        self.stats.turns += 1;
        self.now = Instant::now();
        let (recv0, sent0) = (self.stats.recv_bytes, self.stats.sent_bytes);
        let cqes = self.dispatch_cqes(svc);
        let mut work = self.drain_mesh(svc);
        let mesh_in = work;
        let timers = self.fire_timers(svc);
        let mut driven = 0;
        if self.cfg.legacy_turn {
            svc.on_poll(self);
            driven = self.drive_dirty(svc);
            work += driven;
        } else {
            // Messages received this turn are delivered (drive_dirty) before on_poll, so the storage IO they
            // queue is submitted in this same turn; what on_poll completes (replies) is driven out right after.
            // Rounds are bounded: whatever is still dirty makes the wait below non-blocking.
            for _ in 0..4 {
                driven += self.drive_dirty(svc);
                self.submit_device_early();
                svc.on_poll(self);
                if self.dirty.is_empty() {
                    break;
                }
            }
            driven += self.drive_dirty(svc);
            work = 0;
        }
        self.flush_mesh();
        self.flush_sends();
        // One clock read per turn: the turn-time histogram, and the service's long-turn records.
        let busy = self.now.elapsed();
        let ns = busy.as_nanos().min(u128::from(u64::MAX)) as u64;
        self.stats.turn_hist[turn_bucket(busy)] += 1;
        self.stats.turn_busy_ns += ns;
        self.stats.turn_max_ns = self.stats.turn_max_ns.max(ns);
        let info = TurnInfo {
            busy,
            cqes: cqes as u32,
            mesh_in: mesh_in as u32,
            timers: timers as u32,
            conns_driven: driven as u32,
            recv_bytes: self.stats.recv_bytes - recv0,
            // A short folded send takes back bytes counted when it was queued (in an earlier turn).
            sent_bytes: self.stats.sent_bytes.saturating_sub(sent0),
        };
        svc.on_turn_end(self, &info);
        for id in std::mem::take(&mut self.held) {
            self.mark_dirty(id);
        }
        let polling = std::mem::take(&mut self.keep_polling);
        let more = polling
            || self.share.device_pending()
            || !self.share.deferred.borrow().is_empty()
            || !self.dirty.is_empty()
            || !self.local.is_empty()
            || self.overflow.iter().any(|q| !q.is_empty());
        // Against the turn's start time, not a fresh clock read (one clock_gettime fewer per turn, which counts
        // when a polled device keeps the loop spinning): a timer that fell due during the turn makes the
        // blocking wait below compute a zero timeout and return at once.
        let timer_due = self
            .timers
            .first_key_value()
            .is_some_and(|(t, _)| t.0 <= self.now);
        // A turn that did work still sleeps when nothing is left to do: the blocking enter submits this turn's
        // entries and returns at once if one of them (or anything else) already completed, so the extra
        // non-blocking turn the loop used to make after every busy turn (one more io_uring_enter and a turn that
        // finds nothing) is gone.
        let block = !more && !timer_due && work == 0 && self.may_sleep();
        self.wait(block);
    }

    pub(crate) fn run<S: Service<Msg = M>>(&mut self, svc: &mut S) {
        svc.on_start(self);
        while !self.shared.stop_requested() {
            self.turn(svc);
        }
        self.shutdown(svc);
    }

    fn shutdown<S: Service<Msg = M>>(&mut self, svc: &mut S) {
        self.stopping = true;
        svc.on_stop(self);
        let ids: Vec<ConnId> = self
            .conns
            .iter()
            .enumerate()
            .filter(|(_, s)| s.conn.is_some())
            .map(|(i, s)| ConnId {
                idx: i as u32,
                generation: s.generation,
            })
            .collect();
        for id in ids {
            self.fail_conn(svc, id, CloseReason::Shutdown);
        }
        for l in self.listeners.iter_mut().flatten() {
            sys::shutdown(l.fd);
        }
        // Cancel everything still in flight and wait (bounded) for the kernel to let go of our buffers.
        for i in 0..self.ops.len() {
            if self.ops[i].is_some() {
                let e = opcode::AsyncCancel::new(i as u64).build().user_data(UD_IGNORE);
                // SAFETY: a cancel entry points to nothing.
                unsafe { self.push_sqe(&e) };
            }
        }
        let deadline = Instant::now() + Duration::from_secs(2);
        while self.ops.iter().any(|o| o.is_some()) && Instant::now() < deadline {
            let ts = types::Timespec::new().nsec(10_000_000);
            let args = types::SubmitArgs::new().timespec(&ts);
            let _ = self
                .share
                .ring
                .borrow_mut()
                .submitter()
                .submit_with_args(1, &args);
            self.now = Instant::now();
            self.dispatch_cqes(svc);
        }
        for l in self.listeners.iter_mut() {
            if let Some(l) = l.take() {
                sys::close(l.fd);
            }
        }
        if self.ops.iter().any(|o| o.is_some()) {
            // The kernel still holds some buffers: leak them rather than free memory it may write to.
            std::mem::forget(std::mem::take(&mut self.ops));
        }
    }
}
