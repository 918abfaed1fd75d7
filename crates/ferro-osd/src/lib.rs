// SPDX-License-Identifier: LGPL-3.0-or-later
//! ferro-osd: a Ceph OSD daemon built on ferrostore and the sans-IO `pg` engine.
//!
//! * [`args`]: ceph-osd's command line and the ceph.conf options the daemon reads.
//! * [`mkfs`]: the data directory files ceph-osd writes, plus a ferrostore on the block device.
//! * [`daemon`]: the control and network thread: mon session (boot, maps, beacons, mark-me-down), mgr session
//!   (open, reports, PG stats), client connections (msgr2 + cephx service side), PG placement.
//! * [`worker`]: one thread per ferrostore shard running the PGs placed on it.
//! * [`admin`]: the admin socket (`ceph daemon osd.N ...`).
//!
//! Threads: the control/network thread drives every msgr2 connection's state machine (small reader threads
//! only move bytes off sockets); ops cross to the owning shard worker over a bounded channel and replies come
//! back the same way. This is the seam an io_uring reactor replaces: `daemon::Net`.

pub mod admin;
pub mod args;
pub mod daemon;
pub mod mkfs;
pub mod stats;
pub mod worker;

use ceph_msgs::osd_op::{MOSDOp, MOSDOpReply, MWatchNotify};
use denc::SpgId;

/// Everything the control thread reacts to.
pub enum Ev {
    /// A listener accepted a socket.
    Accepted(daemon::ListenerKind, std::net::TcpStream),
    /// Bytes read from connection `id`.
    Data(u64, Vec<u8>),
    /// Connection `id`'s socket reached EOF or failed.
    Eof(u64),
    /// An outgoing TCP connect finished.
    Connected(u64, std::net::TcpStream),
    ConnectFailed(u64, String),
    /// A worker's durable op reply for a client connection.
    OpReply(pg::ConnId, Box<MOSDOpReply>),
    Notify(pg::ConnId, Box<MWatchNotify>),
    /// A worker got an op for a PG it does not have.
    NoPg(pg::ConnId, Box<MOSDOp>),
    PgReady {
        spgid: SpgId,
        created: bool,
    },
    /// An admin socket command (JSON) and where to send the answer.
    Admin(String, std::sync::mpsc::Sender<(i32, String)>),
}
