// SPDX-License-Identifier: LGPL-3.0-or-later
//! Ceph MonClient.
//!
//! * [`MonClient`] is the sans-IO core: hunting over the monmap, subscriptions (monmap, osdmap, config, mgrmap),
//!   OSDMap catch-up (full maps and incrementals, re-requesting missing epochs), mon commands and version
//!   queries that survive reconnections, keepalives. It is driven with `(now, event)` and yields [`Output`]s and
//!   [`Event`]s; see `core.rs` for the life cycle.
//! * [`blocking`] (feature `blocking`): a thin std::net driver over msgr2's sans-IO connection; cephx comes from
//!   `cephx::msgr2_auth` ([`blocking::cephx_auth`] builds the per-attempt factory).
//! * [`monmap_lite`] decodes the part of a MonMap the client needs (fsid, epoch, monitor addresses).

#[cfg(feature = "blocking")]
pub mod blocking;
mod core;
pub mod epoch_map;
pub mod monmap_lite;
#[cfg(feature = "osdmap")]
pub mod osdmap_impl;
mod rng;

pub use crate::core::{
    CommandReply, Config, ConnId, Event, MonClient, MonClientError, MonTarget, OsdMapLike, Output, errno,
};
pub use epoch_map::EpochOnlyMap;
pub use monmap_lite::MonMapLite;
