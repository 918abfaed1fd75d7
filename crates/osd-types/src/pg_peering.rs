// SPDX-License-Identifier: LGPL-3.0-or-later
//! What peering OSDs exchange about a PG: `pg_notify_t` (a shard's info, unsolicited or answering a query),
//! `pg_query_t` (the primary asking for info, a log or missing set) and read leases (`pg_lease_t`,
//! `pg_lease_ack_t`).

use denc::{Decode, DecodeError, Decoder, Encode, Encoder, Eversion, ShardId, Timespan};

use crate::past_intervals::PastIntervals;
use crate::pg_info::{PgHistory, PgInfo};

/// `pg_notify_t`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PgNotify {
    pub query_epoch: u32,
    pub epoch_sent: u32,
    pub info: PgInfo,
    pub to: ShardId,
    pub from: ShardId,
    pub past_intervals: PastIntervals,
}

impl Encode for PgNotify {
    fn encode(&self, e: &mut Encoder) {
        e.versioned(3, 2, |e| {
            e.u32(self.query_epoch);
            e.u32(self.epoch_sent);
            e.encode(&self.info);
            e.encode(&self.to);
            e.encode(&self.from);
            e.encode(&self.past_intervals);
        })
    }
}
impl Decode for PgNotify {
    fn decode(d: &mut Decoder) -> Result<Self, DecodeError> {
        d.decode_struct("pg_notify_t", 3, |h, d| {
            let mut x = PgNotify {
                query_epoch: d.u32()?,
                epoch_sent: d.u32()?,
                info: d.decode()?,
                to: d.decode()?,
                from: d.decode()?,
                ..Default::default()
            };
            if h.version >= 3 {
                x.past_intervals = d.decode()?;
            }
            Ok(x)
        })
    }
}

/// `pg_query_t::type`.
pub mod query_type {
    pub const INFO: i32 = 0;
    pub const LOG: i32 = 1;
    pub const MISSING: i32 = 4;
    pub const FULLLOG: i32 = 5;
}

/// `pg_query_t`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PgQuery {
    pub query_type: i32,
    /// For LOG queries: send entries after this version.
    pub since: Eversion,
    pub history: PgHistory,
    pub epoch_sent: u32,
    pub to: ShardId,
    pub from: ShardId,
}

impl Encode for PgQuery {
    fn encode(&self, e: &mut Encoder) {
        e.versioned(3, 3, |e| {
            e.i32(self.query_type);
            e.encode(&self.since);
            e.encode(&self.history);
            e.u32(self.epoch_sent);
            e.encode(&self.to);
            e.encode(&self.from);
        })
    }
}
impl Decode for PgQuery {
    fn decode(d: &mut Decoder) -> Result<Self, DecodeError> {
        d.decode_struct("pg_query_t", 3, |_, d| {
            Ok(PgQuery {
                query_type: d.i32()?,
                since: d.decode()?,
                history: d.decode()?,
                epoch_sent: d.u32()?,
                to: d.decode()?,
                from: d.decode()?,
            })
        })
    }
}

/// `pg_lease_t`: the primary lets replicas serve reads until `readable_until` (on the primary's monotonic clock,
/// as a span since the OSD started), and promises no other primary serves before `readable_until_ub`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PgLease {
    pub readable_until: Timespan,
    pub readable_until_ub: Timespan,
    pub interval: Timespan,
}

impl Encode for PgLease {
    fn encode(&self, e: &mut Encoder) {
        e.versioned(1, 1, |e| {
            e.encode(&self.readable_until);
            e.encode(&self.readable_until_ub);
            e.encode(&self.interval);
        })
    }
}
impl Decode for PgLease {
    fn decode(d: &mut Decoder) -> Result<Self, DecodeError> {
        d.decode_struct("pg_lease_t", 1, |_, d| {
            Ok(PgLease {
                readable_until: d.decode()?,
                readable_until_ub: d.decode()?,
                interval: d.decode()?,
            })
        })
    }
}

/// `pg_lease_ack_t`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PgLeaseAck {
    pub readable_until_ub: Timespan,
}

impl Encode for PgLeaseAck {
    fn encode(&self, e: &mut Encoder) {
        e.versioned(1, 1, |e| e.encode(&self.readable_until_ub))
    }
}
impl Decode for PgLeaseAck {
    fn decode(d: &mut Decoder) -> Result<Self, DecodeError> {
        d.decode_struct("pg_lease_ack_t", 1, |_, d| {
            Ok(PgLeaseAck {
                readable_until_ub: d.decode()?,
            })
        })
    }
}
