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
/// Older corpora also file transactions under the bare name `Transaction`.
#[test]
fn transaction_bare_name() {
    check_type::<Transaction>("Transaction", F);
}
#[test]
fn transaction_samples_interpret() {
    // Every corpus transaction's ops resolve (indexes and payloads), for the op codes we know.
    for v in ceph_corpus::versions() {
        let samples = ceph_corpus::samples(&v, "ObjectStore::Transaction")
            .into_iter()
            .chain(ceph_corpus::samples(&v, "Transaction"));
        for (path, b) in samples {
            let t = <Transaction as denc::Decode>::decode_all(b)
                .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            let ops = t.ops();
            assert!(ops.is_ok(), "{}: {ops:?}", path.display());
        }
    }
}

mod hostile {
    use super::*;
    use denc::Decode;
    use proptest::prelude::*;

    /// Corpus samples with bytes flipped or cut: decoders return errors or values, never panic.
    fn mutate_all<T: Decode>(type_name: &str, flips: &[(usize, u8)], cut: usize) {
        for v in ceph_corpus::versions() {
            for (_, b) in ceph_corpus::samples(&v, type_name).into_iter().take(3) {
                let mut m = b.to_vec();
                for &(at, x) in flips {
                    if !m.is_empty() {
                        let i = at % m.len();
                        m[i] ^= x;
                    }
                }
                m.truncate(cut.min(m.len()).max(m.len().saturating_sub(cut)));
                let _ = T::decode_all(m);
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]
        #[test]
        fn mutated_samples_never_panic(flips in proptest::collection::vec((any::<usize>(), 1u8..), 1..4), cut in 0usize..64) {
            mutate_all::<PgNotify>("pg_notify_t", &flips, cut);
            mutate_all::<PgLog>("pg_log_t", &flips, cut);
            mutate_all::<PgMissing>("pg_missing_t", &flips, cut);
            mutate_all::<PastIntervals>("PastIntervals", &flips, cut);
            mutate_all::<PushOp>("PushOp", &flips, cut);
            mutate_all::<Transaction>("ObjectStore::Transaction", &flips, cut);
        }
    }
}
