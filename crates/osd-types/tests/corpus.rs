// SPDX-License-Identifier: LGPL-3.0-or-later
//! Every corpus sample of our types decodes, and 16.2 samples re-encode byte for byte.

use ceph_corpus::check_type;
use osd_types::*;

const F: u64 = denc::CEPH_FEATURES_ALL;

#[test]
fn object_info_t() {
    check_type::<ObjectInfo>("object_info_t", F);
}
#[test]
fn snapset() {
    check_type::<SnapSet>("SnapSet", F);
}
#[test]
fn watch_info_t() {
    check_type::<WatchInfo>("watch_info_t", F);
}
#[test]
fn watch_item_t() {
    check_type::<WatchItem>("watch_item_t", F);
}
#[test]
fn obj_list_watch_response_t() {
    check_type::<ObjListWatchResponse>("obj_list_watch_response_t", F);
}
#[test]
fn pg_nls_response_t() {
    check_type::<PgNlsResponse>("pg_nls_response_t", F);
}
#[test]
fn pg_log_entry_t() {
    check_type::<PgLogEntry>("pg_log_entry_t", F);
}
#[test]
fn pg_log_dup_t() {
    check_type::<PgLogDup>("pg_log_dup_t", F);
}
#[test]
fn pg_log_op_return_item_t() {
    check_type::<OpReturnItem>("pg_log_op_return_item_t", F);
}
#[test]
fn object_stat_sum_t() {
    check_type::<ObjectStatSum>("object_stat_sum_t", F);
}
#[test]
fn pg_history_t() {
    check_type::<PgHistory>("pg_history_t", F);
}
#[test]
fn pg_info_t() {
    check_type::<PgInfo>("pg_info_t", F);
}
#[test]
fn pg_fast_info_t() {
    check_type::<osd_types::pgmeta::PgFastInfo>("pg_fast_info_t", F);
}
