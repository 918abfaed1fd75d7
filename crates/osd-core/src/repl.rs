// SPDX-License-Identifier: LGPL-3.0-or-later
//! Primary-copy replication on the wire: routing peer messages to their PG, MOSDRepOp / MOSDRepOpReply
//! construction, and the primary's bookkeeping of writes waiting for replicas (Ceph's RepGather).

use ceph_msgs::CephMessage;
use ceph_msgs::osd_rep::{
    self, CEPH_OSD_FLAG_ONDISK, MOSDPGBackfill, MOSDPGBackfillRemove, MOSDPGPull, MOSDPGPush,
    MOSDPGPushReply, MOSDPGRecoveryDelete, MOSDPGRecoveryDeleteReply, MOSDPGScan, MOSDPGTrim,
    MOSDPGUpdateLogMissing, MOSDPGUpdateLogMissingReply, MOSDRepOp, MOSDRepOpReply, TraceInfo, rep_msg,
};
use denc::{Decoder, Eversion, OsdReqId, PgShard, ShardId, SpgId};

/// The PG a peer message is about (see [`crate::route_peer_message`]).
pub(crate) fn route(m: &ceph_msgs::Message) -> Option<SpgId> {
    match m.msg_type {
        // MOSDRepOp and MOSDRepOpReply start alike: map_epoch, min_epoch, trace, reqid, pgid. Reading only that
        // prefix keeps routing from decoding the transaction.
        rep_msg::REPOP | rep_msg::REPOPREPLY => {
            let mut d = Decoder::new(m.front.clone());
            d.skip(4 + 4 + 24).ok()?;
            let _: OsdReqId = d.decode().ok()?;
            d.decode::<SpgId>().ok()
        }
        rep_msg::PG_NOTIFY2
        | rep_msg::PG_QUERY2
        | rep_msg::PG_INFO2
        | rep_msg::PG_LOG
        | rep_msg::PG_LEASE
        | rep_msg::PG_LEASE_ACK => peering::PeerMsg::from_message(m)
            .ok()
            .flatten()
            .map(|p| p.spgid()),
        rep_msg::PG_PUSH => MOSDPGPush::from_message(m).ok().map(|x| x.pgid),
        rep_msg::PG_PULL => MOSDPGPull::from_message(m).ok().map(|x| x.pgid),
        rep_msg::PG_PUSH_REPLY => MOSDPGPushReply::from_message(m).ok().map(|x| x.pgid),
        rep_msg::PG_SCAN => MOSDPGScan::from_message(m).ok().map(|x| x.pgid),
        rep_msg::PG_BACKFILL => MOSDPGBackfill::from_message(m).ok().map(|x| x.pgid),
        rep_msg::PG_BACKFILL_REMOVE => MOSDPGBackfillRemove::from_message(m).ok().map(|x| x.pgid),
        rep_msg::PG_RECOVERY_DELETE => MOSDPGRecoveryDelete::from_message(m).ok().map(|x| x.pgid),
        rep_msg::PG_RECOVERY_DELETE_REPLY => MOSDPGRecoveryDeleteReply::from_message(m).ok().map(|x| x.pgid),
        rep_msg::PG_UPDATE_LOG_MISSING => MOSDPGUpdateLogMissing::from_message(m).ok().map(|x| x.pgid),
        rep_msg::PG_UPDATE_LOG_MISSING_REPLY => {
            MOSDPGUpdateLogMissingReply::from_message(m).ok().map(|x| x.pgid)
        }
        rep_msg::PG_TRIM => MOSDPGTrim::from_message(m).ok().map(|x| x.pgid),
        rep_msg::RECOVERY_RESERVE => osd_rep::MRecoveryReserve::from_message(m).ok().map(|x| x.pgid),
        rep_msg::BACKFILL_RESERVE => osd_rep::MBackfillReserve::from_message(m).ok().map(|x| x.pgid),
        _ => None,
    }
}

/// Ceph's `acting_recovery_backfill` without `whoami`: every client write goes to the acting set and to the
/// backfill targets (those outside the acting set too, e.g. an out OSD's replacement while pg_temp keeps the
/// old acting set), and its reply waits for all of them. A backfill target gets the transaction only for
/// objects its backfill has passed (`Backfill::should_send_op`), else the log entries alone.
pub(crate) fn acting_recovery_backfill(
    acting: &[i32],
    backfill_targets: &std::collections::BTreeSet<i32>,
    whoami: i32,
) -> Vec<i32> {
    let all: std::collections::BTreeSet<i32> = acting
        .iter()
        .chain(backfill_targets.iter())
        .copied()
        .filter(|&o| o != whoami && o >= 0)
        .collect();
    all.into_iter().collect()
}

/// The `map_epoch` a MOSDRepOp/MOSDRepOpReply starts with.
pub(crate) fn epoch_prefix(m: &ceph_msgs::Message) -> Option<u32> {
    Decoder::new(m.front.clone()).u32().ok()
}

/// The epoch a peering message was sent at (Ceph's `epoch_sent`): one newer than our map waits for it.
pub(crate) fn peer_msg_epoch(p: &peering::PeerMsg) -> u32 {
    use peering::PeerMsg;
    match p {
        PeerMsg::Notify(m) => m.notify.epoch_sent,
        PeerMsg::Query(m) => m.query.epoch_sent,
        PeerMsg::Info(m) => m.epoch_sent,
        PeerMsg::Log(m) => m.epoch,
        PeerMsg::Lease(m) => m.epoch,
        PeerMsg::LeaseAck(m) => m.epoch,
    }
}

/// The answer to a query for a PG this OSD does not hold: a notify with an empty `pg_info_t`.
pub(crate) fn empty_notify(
    spgid: SpgId,
    q: &osd_rep::MOSDPGQuery2,
    epoch: u32,
    features: u64,
) -> ceph_msgs::Message {
    let m = osd_rep::MOSDPGNotify2 {
        spgid: SpgId::new(spgid.pgid, q.query.from),
        notify: osd_types::pg_peering::PgNotify {
            query_epoch: q.query.epoch_sent,
            epoch_sent: epoch,
            info: osd_types::pg_info::PgInfo {
                pgid: spgid.pgid,
                shard: q.query.to,
                ..Default::default()
            },
            to: q.query.from,
            from: q.query.to,
            past_intervals: osd_types::past_intervals::PastIntervals::new_compact(),
        },
    };
    m.to_message(features)
}

/// A notify with this PG's info and past intervals in answer to `q`.
pub(crate) fn notify_for(
    spgid: SpgId,
    q: &osd_rep::MOSDPGQuery2,
    epoch: u32,
    p: &peering::Pg,
    features: u64,
) -> ceph_msgs::Message {
    osd_rep::MOSDPGNotify2 {
        spgid: SpgId::new(spgid.pgid, q.query.from),
        notify: osd_types::pg_peering::PgNotify {
            query_epoch: q.query.epoch_sent,
            epoch_sent: epoch,
            info: p.info().clone(),
            to: q.query.from,
            from: q.query.to,
            past_intervals: p.past_intervals().clone(),
        },
    }
    .to_message(features)
}

/// Which module handles a peer message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    RepOp,
    RepOpReply,
    Peering,
    Recovery,
    Backfill,
    Trim,
    Other,
}

pub(crate) fn kind(msg_type: u16) -> Kind {
    match msg_type {
        rep_msg::REPOP => Kind::RepOp,
        rep_msg::REPOPREPLY => Kind::RepOpReply,
        rep_msg::PG_NOTIFY2
        | rep_msg::PG_QUERY2
        | rep_msg::PG_INFO2
        | rep_msg::PG_LOG
        | rep_msg::PG_LEASE
        | rep_msg::PG_LEASE_ACK => Kind::Peering,
        rep_msg::PG_PUSH
        | rep_msg::PG_PULL
        | rep_msg::PG_PUSH_REPLY
        | rep_msg::PG_RECOVERY_DELETE
        | rep_msg::PG_RECOVERY_DELETE_REPLY
        | rep_msg::RECOVERY_RESERVE => Kind::Recovery,
        rep_msg::PG_SCAN | rep_msg::PG_BACKFILL | rep_msg::PG_BACKFILL_REMOVE | rep_msg::BACKFILL_RESERVE => {
            Kind::Backfill
        }
        rep_msg::PG_TRIM => Kind::Trim,
        _ => Kind::Other,
    }
}

/// The replica's ONDISK answer.
pub(crate) fn build_reply(
    req: &MOSDRepOp,
    whoami: i32,
    epoch: u32,
    min_epoch: u32,
    last_complete_ondisk: Eversion,
    result: i32,
    features: u64,
) -> ceph_msgs::Message {
    MOSDRepOpReply {
        map_epoch: epoch,
        min_epoch,
        trace: TraceInfo::default(),
        reqid: req.reqid,
        pgid: req.pgid,
        ack_type: CEPH_OSD_FLAG_ONDISK,
        result,
        last_complete_ondisk,
        from: PgShard::new(whoami, ShardId::NO_SHARD),
    }
    .to_message(features)
}

/// Decode a MOSDRepOp for applying it here (errors become log lines, never panics). `pg_stats` is decoded only
/// up to its object counts, all a replica takes from it (`Pg::apply_rep_op_entries`).
pub(crate) fn decode_repop(m: &ceph_msgs::Message) -> Result<MOSDRepOp, String> {
    MOSDRepOp::from_message_replica(m).map_err(|e| e.to_string())
}

pub(crate) fn decode_repop_reply(m: &ceph_msgs::Message) -> Result<MOSDRepOpReply, String> {
    MOSDRepOpReply::from_message(m).map_err(|e| e.to_string())
}

pub(crate) fn decode_trim(m: &ceph_msgs::Message) -> Result<MOSDPGTrim, String> {
    osd_rep::MOSDPGTrim::from_message(m).map_err(|e| e.to_string())
}
