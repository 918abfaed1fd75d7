// SPDX-License-Identifier: LGPL-3.0-or-later
//! FerroCeph's thread-per-core runtime over io_uring (see docs/reactor.md).
//!
//! One pinned thread per core, one ring per core, a per-core [`Service`] the OSD implements, msgr2 connections
//! driven on the core that owns their socket, and an N×N mesh of bounded SPSC rings (with eventfd doorbells) as
//! the only path between cores. The service sees only [`CoreCtx`]: it queues messages and bytes, connects,
//! listens, sets timers and posts to other cores; the loop turns that into one batch of submissions per turn.
//!
//! ```no_run
//! use std::sync::Arc;
//! use std::time::Duration;
//! use reactor::msgr2::{self, Message, auth::{AuthNoneServer, ServerAuth}};
//! use reactor::{ConnId, CoreCtx, CoreId, ListenProto, Runtime, RuntimeConfig, Service};
//!
//! /// What cores say to each other: "this op is for a PG you own; answer on my connection".
//! enum Msg {
//!     Op { home: CoreId, conn: ConnId, msg: Message },
//!     Reply { conn: ConnId, msg: Message },
//! }
//!
//! struct Osd; // per-core state (PGs, store shard, …): built on its core, may be !Send
//!
//! impl Service for Osd {
//!     type Msg = Msg;
//!     fn on_start(&mut self, ctx: &mut CoreCtx<Msg>) {
//!         // Every core listens on the same port (SO_REUSEPORT): the kernel spreads the clients.
//!         let auth: reactor::ServerAuthFactory =
//!             Arc::new(|| Box::new(AuthNoneServer::default()) as Box<dyn ServerAuth + Send>);
//!         let cfg = msgr2::Config::new(msgr2::types::ENTITY_TYPE_OSD, 0);
//!         ctx.listen("0.0.0.0:6800".parse().unwrap(), ListenProto::Msgr2 { cfg, auth }).unwrap();
//!         ctx.set_timer(Duration::from_secs(5), 1); // e.g. a heartbeat tick
//!     }
//!     fn on_message(&mut self, ctx: &mut CoreCtx<Msg>, conn: ConnId, msg: Message) {
//!         let owner = (msg.tid as usize) % ctx.num_cores(); // really: the PG's core
//!         let home = ctx.core_id();
//!         if ctx.post(owner, Msg::Op { home, conn, msg }).is_err() { /* only if owner is out of range */ }
//!     }
//!     fn on_cross_core(&mut self, ctx: &mut CoreCtx<Msg>, _from: CoreId, m: Msg) {
//!         match m {
//!             Msg::Op { home, conn, msg } => {
//!                 let reply = Message::new(msg.msg_type + 1, 1, 1, msg.front); // execute on the PG here
//!                 let _ = ctx.post(home, Msg::Reply { conn, msg: reply });
//!             }
//!             Msg::Reply { conn, msg } => {
//!                 let _ = ctx.send_message(conn, msg); // Err(Backpressure): wait for on_writable
//!             }
//!         }
//!     }
//!     fn on_timer(&mut self, ctx: &mut CoreCtx<Msg>, _t: reactor::TimerId, _token: u64) {
//!         ctx.set_timer(Duration::from_secs(5), 1);
//!     }
//! }
//!
//! let rt = Runtime::start(RuntimeConfig { cores: 2, ..Default::default() }, |_core| Osd).unwrap();
//! // … later, from a signal handler thread or the admin socket:
//! rt.stop();
//! rt.join();
//! ```

mod core;
mod devring;
mod runtime;
pub mod spsc;
mod sys;

pub use crate::core::{
    CloseReason, ConnId, ConnectProto, CoreConfig, CoreCtx, CoreId, CoreStats, HandOffError, ListenProto,
    ListenerId, SendError, ServerAuthFactory, Service, TURN_HIST_BUCKETS, TimerId, TurnInfo, WatchId,
    turn_bucket,
};
pub use crate::devring::{DEVICE_TOKEN_MAX, DeviceRing};
pub use crate::runtime::{Runtime, RuntimeConfig};
pub use crate::sys::allowed_cpus;
/// The io_uring crate the entries of [`DeviceRing::push`] come from.
pub use io_uring;
pub use msgr2;
