// SPDX-License-Identifier: LGPL-3.0-or-later
//! Ceph messenger v2 (msgr2, revision 1 "v2.1") as a sans-IO protocol engine.
//!
//! Bytes and events go in, bytes and events come out; nothing here opens sockets, reads clocks or spawns threads
//! (the optional [`blocking`] module is the one thin std::net adapter). See docs/msgr2.md for the state machine,
//! the frame layouts and the seams.

pub mod auth;
#[cfg(feature = "blocking")]
pub mod blocking;
pub mod types;

pub use types::EntityName;
pub mod addr;
pub mod control;
pub mod crypto;
pub mod frame;
pub mod message;
mod prioq;

pub use addr::{AddrVec, EntityAddr};
pub use message::Message;
pub mod connection;
pub mod replay;
pub mod testing;

pub use connection::{
    AcceptDecision, AcceptRequest, Config, ConnError, Connection, Event, PeerInfo, SendError, SendErrorKind,
    Stats, TakeOver,
};
