// SPDX-License-Identifier: LGPL-3.0-or-later
//! FerroCeph's thread-per-core runtime over io_uring (see docs/reactor.md).
//!
//! One pinned thread per core, one ring per core, a per-core [`Service`] the OSD implements, msgr2 connections
//! driven on the core that owns their socket, and an N×N mesh of bounded SPSC rings (with eventfd doorbells) as
//! the only path between cores. The service sees only [`CoreCtx`]: it queues messages and bytes, connects,
//! listens, sets timers and posts to other cores; the loop turns that into one batch of submissions per turn.

mod core;
mod runtime;
pub mod spsc;
mod sys;

pub use crate::core::{
    CloseReason, ConnId, ConnectProto, CoreConfig, CoreCtx, CoreId, CoreStats, HandOffError, ListenProto,
    ListenerId, SendError, ServerAuthFactory, Service, TimerId, WatchId,
};
pub use crate::runtime::{Runtime, RuntimeConfig};
pub use msgr2;
