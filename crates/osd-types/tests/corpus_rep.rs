// SPDX-License-Identifier: LGPL-3.0-or-later
//! Corpus tests of the replication and peering types: every sample decodes, 16.2 samples re-encode identically.

use ceph_corpus::check_type;
use osd_types::past_intervals::{CompactInterval, PastIntervals};
use osd_types::pg_log_t::PgLog;
use osd_types::pg_missing::{PgMissing, PgMissingItem};
use osd_types::pg_peering::{PgLease, PgLeaseAck, PgNotify, PgQuery};
use osd_types::recovery::{ObjectRecoveryInfo, ObjectRecoveryProgress, PullOp, PushOp, PushReplyOp};
use osd_types::transaction::Transaction;

const F: u64 = denc::CEPH_FEATURES_ALL;

#[test]
fn pg_notify_t() {
    check_type::<PgNotify>("pg_notify_t", F);
}
#[test]
fn pg_query_t() {
    check_type::<PgQuery>("pg_query_t", F);
}
#[test]
fn past_intervals() {
    check_type::<PastIntervals>("PastIntervals", F);
}
#[test]
fn compact_interval_t() {
    check_type::<CompactInterval>("compact_interval_t", F);
}
#[test]
fn pg_missing_item() {
    check_type::<PgMissingItem>("pg_missing_item", F);
}
#[test]
fn pg_missing_t() {
    check_type::<PgMissing>("pg_missing_t", F);
}
#[test]
fn pg_log_t() {
    check_type::<PgLog>("pg_log_t", F);
}
#[test]
fn pg_lease_t() {
    check_type::<PgLease>("pg_lease_t", F);
}
#[test]
fn pg_lease_ack_t() {
    check_type::<PgLeaseAck>("pg_lease_ack_t", F);
}
#[test]
fn object_recovery_info() {
    check_type::<ObjectRecoveryInfo>("ObjectRecoveryInfo", F);
}
#[test]
fn object_recovery_progress() {
    check_type::<ObjectRecoveryProgress>("ObjectRecoveryProgress", F);
}
#[test]
fn push_op() {
    check_type::<PushOp>("PushOp", F);
}
#[test]
fn pull_op() {
    check_type::<PullOp>("PullOp", F);
}
#[test]
fn push_reply_op() {
    check_type::<PushReplyOp>("PushReplyOp", F);
}
#[test]
fn object_store_transaction() {
    check_type::<Transaction>("ObjectStore::Transaction", F);
}
#[test]
fn transaction_samples_interpret() {
    // Every corpus transaction's ops resolve (indexes and payloads), for the op codes we know.
    for v in ceph_corpus::versions() {
        for (path, b) in ceph_corpus::samples(&v, "ObjectStore::Transaction") {
            let t = <Transaction as denc::Decode>::decode_all(b)
                .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            let ops = t.ops();
            assert!(ops.is_ok(), "{}: {ops:?}", path.display());
        }
    }
}
