// SPDX-License-Identifier: LGPL-3.0-or-later
//! A thin blocking driver for [`Connection`] over `std::net::TcpStream`: one thread per connection, bounded
//! connect time, read timeouts derived from the state machine's timers. Meant for tools, tests and clients; the
//! OSD drives the very same state machine from its io_uring reactor (bytes in with `handle_input`, vectored
//! writes of `poll_output`, timers from `poll_timeout`), so nothing here is on the data path.

use std::io::{self, IoSlice, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

use bytes::Bytes;

use crate::EntityAddr;
use crate::auth::{ClientAuth, ServerAuth};
use crate::connection::{Config, ConnError, Connection, Event, PeerInfo, SendError};
use crate::message::Message;

/// Errors of the blocking driver.
#[derive(Debug, thiserror::Error)]
pub enum BlockingError {
    #[error("io: {0}")]
    Io(#[from] io::Error),
    #[error("protocol: {0}")]
    Conn(#[from] ConnError),
    #[error("timed out after {0:?}")]
    Timeout(Duration),
    #[error("connection closed: {0}")]
    Closed(ConnError),
    #[error(transparent)]
    Send(#[from] SendError),
}

/// How long one blocked write waits before the driver reads from the socket instead.
const WRITE_SLICE: Duration = Duration::from_millis(20);

/// Read buffer size: one read takes at most this much from the socket.
const READ_CHUNK: usize = 256 * 1024;

/// A connection plus its socket.
pub struct BlockingConnection {
    conn: Connection,
    stream: TcpStream,
    /// Output taken from the connection but not fully written yet (partial writes).
    pending: Vec<Bytes>,
    pending_off: usize,
    rbuf: Vec<u8>,
    peer: Option<PeerInfo>,
}

impl std::fmt::Debug for BlockingConnection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BlockingConnection")
            .field("conn", &self.conn)
            .finish_non_exhaustive()
    }
}

impl BlockingConnection {
    /// Connect to `addr` (TCP connect bounded by `timeout`), run the msgr2 handshake (bounded by `timeout` too)
    /// and return once the session is ready. The target is `v2:addr/0`, as for a monitor from ceph.conf; use
    /// [`BlockingConnection::connect_to`] for a daemon whose address carries a nonce.
    pub fn connect(
        addr: SocketAddr,
        cfg: Config,
        auth: Box<dyn ClientAuth + Send>,
        target_type: u8,
        timeout: Duration,
    ) -> Result<Self, BlockingError> {
        Self::connect_to(EntityAddr::msgr2(addr, 0), cfg, auth, target_type, timeout)
    }

    /// Like [`BlockingConnection::connect`], to a full msgr2 address (the acceptor checks the nonce).
    pub fn connect_to(
        target: EntityAddr,
        cfg: Config,
        auth: Box<dyn ClientAuth + Send>,
        target_type: u8,
        timeout: Duration,
    ) -> Result<Self, BlockingError> {
        let start = Instant::now();
        let addr = target
            .addr
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "target address has no IP"))?;
        let stream = TcpStream::connect_timeout(&addr, timeout)?;
        stream.set_nodelay(true)?;
        let conn = Connection::connector(cfg, auth, target, target_type, Instant::now());
        let mut c = BlockingConnection::new(conn, stream);
        c.wait_ready(start + timeout)?;
        Ok(c)
    }

    /// Serve an accepted socket: run the handshake (bounded by `timeout`) and return once the session is ready.
    /// The connection auto-accepts CLIENT_IDENT and resets unknown reconnects (`Config::auto_accept`).
    pub fn accept(
        stream: TcpStream,
        mut cfg: Config,
        auth: Box<dyn ServerAuth + Send>,
        timeout: Duration,
    ) -> Result<Self, BlockingError> {
        let start = Instant::now();
        stream.set_nodelay(true)?;
        cfg.auto_accept = true;
        let mut conn = Connection::acceptor(cfg, auth, Instant::now());
        if let Ok(peer) = stream.peer_addr() {
            conn.set_peer_socket_addr(peer);
        }
        let mut c = BlockingConnection::new(conn, stream);
        c.wait_ready(start + timeout)?;
        Ok(c)
    }

    fn new(conn: Connection, stream: TcpStream) -> Self {
        BlockingConnection {
            conn,
            stream,
            pending: Vec::new(),
            pending_off: 0,
            rbuf: vec![0; READ_CHUNK],
            peer: None,
        }
    }

    fn wait_ready(&mut self, deadline: Instant) -> Result<(), BlockingError> {
        while !self.conn.is_ready() {
            match self.next_event(deadline)? {
                Some(Event::Connected(p)) => self.peer = Some(p),
                Some(Event::Closed { error }) => return Err(BlockingError::Closed(error)),
                Some(Event::Faulted { error, .. }) => return Err(BlockingError::Closed(error)),
                Some(_) => {}
                None => {
                    return Err(BlockingError::Timeout(
                        deadline.saturating_duration_since(Instant::now()),
                    ));
                }
            }
        }
        // Events queued behind Connected (rare) stay in the connection for `recv`.
        if self.peer.is_none() {
            self.peer = self.conn.peer().cloned();
        }
        Ok(())
    }

    /// Who the peer is.
    pub fn peer(&self) -> Option<&PeerInfo> {
        self.peer.as_ref().or(self.conn.peer())
    }

    /// The state machine (for its counters and settings).
    pub fn connection(&mut self) -> &mut Connection {
        &mut self.conn
    }

    /// Queue a message and write what can be written.
    pub fn send(&mut self, msg: Message) -> Result<(), BlockingError> {
        self.conn.send(msg)?;
        self.flush()
    }

    /// Write everything the connection has to send (blocking). While the socket cannot take more, incoming
    /// bytes are read and handed to the connection, so two peers writing to each other cannot deadlock.
    pub fn flush(&mut self) -> Result<(), BlockingError> {
        self.stream.set_write_timeout(Some(WRITE_SLICE))?;
        loop {
            if self.pending.is_empty() {
                self.conn.drain_output(&mut self.pending);
                self.pending_off = 0;
                if self.pending.is_empty() {
                    return Ok(());
                }
            }
            self.write_pending()?;
        }
    }

    fn write_pending(&mut self) -> Result<(), BlockingError> {
        while !self.pending.is_empty() {
            let mut slices: Vec<IoSlice<'_>> = Vec::with_capacity(self.pending.len());
            slices.push(IoSlice::new(&self.pending[0][self.pending_off..]));
            for b in &self.pending[1..] {
                slices.push(IoSlice::new(b));
            }
            let mut n = match self.stream.write_vectored(&slices) {
                Ok(0) => {
                    self.conn.handle_transport_closed();
                    return Err(io::Error::new(io::ErrorKind::WriteZero, "socket closed").into());
                }
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) => {
                    self.read_some(Duration::from_millis(1))?;
                    continue;
                }
                Err(e) => {
                    self.conn.handle_transport_closed();
                    return Err(e.into());
                }
            };
            // Advance over fully written buffers.
            while n > 0 {
                let left = self.pending[0].len() - self.pending_off;
                if n >= left {
                    n -= left;
                    self.pending.remove(0);
                    self.pending_off = 0;
                } else {
                    self.pending_off += n;
                    n = 0;
                }
            }
        }
        Ok(())
    }

    /// One read (waiting at most `wait`), fed to the connection; a timeout fires the connection's timers.
    fn read_some(&mut self, wait: Duration) -> Result<(), BlockingError> {
        self.stream
            .set_read_timeout(Some(wait.max(Duration::from_millis(1))))?;
        match self.stream.read(&mut self.rbuf) {
            Ok(0) => self.conn.handle_transport_closed(),
            Ok(n) => {
                // An Err here is also reported as an event (Faulted/Closed), returned by the caller's next turn.
                let _ = self.conn.handle_input(Instant::now(), &self.rbuf[..n]);
            }
            Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) => {
                self.conn.handle_timeout(Instant::now());
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => self.conn.handle_transport_closed(),
        }
        Ok(())
    }

    /// The next event, waiting until `timeout` at most (`Ok(None)` on timeout). Handles keepalives and the idle
    /// timeout on the way.
    pub fn recv(&mut self, timeout: Duration) -> Result<Option<Event>, BlockingError> {
        self.next_event(Instant::now() + timeout)
    }

    /// The next received message, skipping other events; errors if the connection faults or closes.
    pub fn recv_message(&mut self, timeout: Duration) -> Result<Option<Message>, BlockingError> {
        let deadline = Instant::now() + timeout;
        loop {
            match self.next_event(deadline)? {
                Some(Event::Message(m)) => return Ok(Some(m)),
                Some(Event::Closed { error } | Event::Faulted { error, .. } | Event::Reset { error }) => {
                    return Err(BlockingError::Closed(error));
                }
                Some(_) => {}
                None => return Ok(None),
            }
        }
    }

    fn next_event(&mut self, deadline: Instant) -> Result<Option<Event>, BlockingError> {
        loop {
            self.flush()?;
            if let Some(e) = self.conn.poll_event() {
                return Ok(Some(e));
            }
            if self.conn.is_closed() || self.conn.is_standby() {
                return Err(BlockingError::Closed(ConnError::TransportClosed));
            }
            let now = Instant::now();
            if now >= deadline {
                return Ok(None);
            }
            let mut wake = deadline;
            if let Some(t) = self.conn.poll_timeout() {
                wake = wake.min(t);
            }
            self.read_some(wake.saturating_duration_since(now))?;
        }
    }

    /// Close the session and the socket.
    pub fn close(mut self) {
        self.conn.close();
        let _ = self.stream.shutdown(std::net::Shutdown::Both);
    }
}

/// A listening socket handing out [`BlockingConnection`]s.
#[derive(Debug)]
pub struct BlockingListener {
    listener: TcpListener,
}

impl BlockingListener {
    pub fn bind(addr: impl ToSocketAddrs) -> io::Result<Self> {
        Ok(BlockingListener {
            listener: TcpListener::bind(addr)?,
        })
    }

    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// Accept one socket and run the handshake on it.
    pub fn accept(
        &self,
        cfg: Config,
        auth: Box<dyn ServerAuth + Send>,
        timeout: Duration,
    ) -> Result<BlockingConnection, BlockingError> {
        let (stream, _) = self.listener.accept()?;
        BlockingConnection::accept(stream, cfg, auth, timeout)
    }
}

/// Exchange banners with a real msgr2 server and read its HELLO, without authenticating: checks that something
/// at `addr` speaks msgr2 rev1, and learns the address it sees for us. Returns (peer banner supported bits, peer
/// entity type, our address as the peer sees it).
pub fn probe(
    addr: SocketAddr,
    our_type: u8,
    timeout: Duration,
) -> Result<(u64, u8, EntityAddr), BlockingError> {
    use crate::control::{BANNER_HEAD_LEN, BANNER_PAYLOAD_LEN, Banner, Control, MSGR2_FEATURE_REVISION_1};
    use crate::frame::{ALIGN_DEFAULT, FrameDecoder, FrameLimits, Tag, encode_frame};
    let deadline = Instant::now() + timeout;
    let mut s = TcpStream::connect_timeout(&addr, timeout)?;
    let hello = Control::Hello {
        entity_type: our_type,
        peer_addr: EntityAddr::msgr2(addr, 0),
    };
    let mut out = Banner {
        supported: MSGR2_FEATURE_REVISION_1,
        required: 0,
    }
    .encode()
    .to_vec();
    for b in encode_frame(None, Tag::Hello, &[hello.encode()], &[ALIGN_DEFAULT]).map_err(ConnError::from)? {
        out.extend_from_slice(&b);
    }
    s.write_all(&out)?;
    let mut dec = FrameDecoder::new(FrameLimits::default());
    let mut buf = [0u8; 4096];
    let mut banner: Option<u64> = None;
    loop {
        let now = Instant::now();
        if now >= deadline {
            return Err(BlockingError::Timeout(timeout));
        }
        s.set_read_timeout(Some(deadline - now))?;
        let n = s.read(&mut buf)?;
        if n == 0 {
            return Err(BlockingError::Closed(ConnError::TransportClosed));
        }
        dec.push(&buf[..n]);
        if banner.is_none() {
            let Some(b) = dec.take_raw(BANNER_HEAD_LEN + BANNER_PAYLOAD_LEN) else {
                continue;
            };
            if &b[..8] != crate::control::BANNER_PREFIX {
                return Err(ConnError::Banner("not a msgr2 banner".into()).into());
            }
            let mut v = [0u8; 8];
            v.copy_from_slice(&b[10..18]);
            banner = Some(u64::from_le_bytes(v));
        }
        if let Some(f) = dec.next_frame().map_err(ConnError::from)? {
            let tag = f.tag().ok_or(ConnError::Banner("unknown first frame".into()))?;
            return match Control::decode(tag, f.segments[0].clone()) {
                Ok(Control::Hello {
                    entity_type,
                    peer_addr,
                }) => Ok((banner.unwrap_or(0), entity_type, peer_addr)),
                Ok(other) => {
                    Err(ConnError::Banner(format!("first frame {:?} is not HELLO", other.tag())).into())
                }
                Err(e) => Err(ConnError::Payload {
                    what: "HELLO",
                    detail: e.to_string(),
                }
                .into()),
            };
        }
    }
}
