// SPDX-License-Identifier: LGPL-3.0-or-later
//! Perf counters: one table of the counters ferro-osd keeps, under ceph-osd's names (section `osd`), from which
//! `perf dump`, `perf schema` and the MMgrReport schema/values are all built, so they cannot disagree.

use crate::worker::ShardStats;
use reactor::TURN_HIST_BUCKETS;

/// Ceph's `perfcounter_type_d` bits.
pub mod ty {
    pub const TIME: u8 = 0x1;
    pub const U64: u8 = 0x2;
    pub const LONGRUNAVG: u8 = 0x4;
    pub const COUNTER: u8 = 0x8;
}

/// `PerfCountersBuilder::PRIO_*`.
pub mod prio {
    pub const CRITICAL: u8 = 10;
    pub const INTERESTING: u8 = 8;
    pub const USEFUL: u8 = 5;
    pub const UNINTERESTING: u8 = 2;
    pub const DEBUGONLY: u8 = 0;
}

/// `unit_t`: NONE 0, BYTES 1.
pub mod unit {
    pub const NONE: u8 = 0;
    pub const BYTES: u8 = 1;
}

/// One counter's declaration.
#[derive(Debug, Clone, Copy)]
pub struct Counter {
    pub name: &'static str,
    pub description: &'static str,
    pub nick: &'static str,
    pub ty: u8,
    pub priority: u8,
    pub unit: u8,
}

const fn c(
    name: &'static str,
    description: &'static str,
    nick: &'static str,
    ty: u8,
    priority: u8,
    unit: u8,
) -> Counter {
    Counter {
        name,
        description,
        nick,
        ty,
        priority,
        unit,
    }
}

const CTR: u8 = ty::U64 | ty::COUNTER;
const GAUGE: u8 = ty::U64;
const LAT: u8 = ty::TIME | ty::LONGRUNAVG;

/// The `osd` section, in declaration order (ceph-osd's names, descriptions and nicks for the ones it has).
pub const OSD: &[Counter] = &[
    c(
        "op_wip",
        "Replication operations currently being processed (primary)",
        "",
        GAUGE,
        prio::USEFUL,
        unit::NONE,
    ),
    c("op", "Client operations", "ops", CTR, prio::CRITICAL, unit::NONE),
    c(
        "op_in_bytes",
        "Client operations total write size",
        "wr",
        CTR,
        prio::INTERESTING,
        unit::BYTES,
    ),
    c(
        "op_out_bytes",
        "Client operations total read size",
        "rd",
        CTR,
        prio::INTERESTING,
        unit::BYTES,
    ),
    c(
        "op_latency",
        "Latency of client operations (including queue time)",
        "l",
        LAT,
        prio::INTERESTING,
        unit::NONE,
    ),
    c(
        "op_r",
        "Client read operations",
        "",
        CTR,
        prio::USEFUL,
        unit::NONE,
    ),
    c(
        "op_r_latency",
        "Latency of read operation (including queue time)",
        "",
        LAT,
        prio::USEFUL,
        unit::NONE,
    ),
    c(
        "op_w",
        "Client write operations",
        "",
        CTR,
        prio::USEFUL,
        unit::NONE,
    ),
    c(
        "op_w_latency",
        "Latency of write operation (including queue time)",
        "",
        LAT,
        prio::USEFUL,
        unit::NONE,
    ),
    c("subop", "Suboperations", "", CTR, prio::USEFUL, unit::NONE),
    c(
        "subop_latency",
        "Suboperations latency",
        "",
        LAT,
        prio::USEFUL,
        unit::NONE,
    ),
    c(
        "numpg",
        "Placement groups",
        "pgs",
        GAUGE,
        prio::USEFUL,
        unit::NONE,
    ),
    c(
        "numpg_primary",
        "Placement groups for which this osd is primary",
        "",
        GAUGE,
        prio::USEFUL,
        unit::NONE,
    ),
    c("stat_bytes", "OSD size", "size", GAUGE, prio::USEFUL, unit::BYTES),
    c(
        "stat_bytes_used",
        "Used space",
        "used",
        GAUGE,
        prio::USEFUL,
        unit::BYTES,
    ),
    c(
        "stat_bytes_avail",
        "Available space",
        "avail",
        GAUGE,
        prio::USEFUL,
        unit::BYTES,
    ),
    c(
        "messages_received",
        "Messages received from clients and peers",
        "",
        CTR,
        prio::UNINTERESTING,
        unit::NONE,
    ),
    c(
        "commit_latency",
        "ferrostore transaction commit latency (queued to durable)",
        "",
        LAT,
        prio::USEFUL,
        unit::NONE,
    ),
];

/// A counter's value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Value {
    U64(u64),
    /// Long-run average of times: count and sum in nanoseconds.
    Avg {
        count: u64,
        sum_ns: u64,
    },
}

/// The `osd` section's values, in [`OSD`] order.
pub fn values<'a>(stats: impl Iterator<Item = &'a ShardStats>, messages_received: u64) -> Vec<Value> {
    let mut t = ShardStats::default();
    let (mut pgs, mut primary) = (0u64, 0u64);
    for s in stats {
        pgs += s.pgs.len() as u64;
        primary += s.pgs.iter().filter(|(r, _)| r.primary).count() as u64;
        t.subops += s.subops;
        t.subop_latency_ns_sum += s.subop_latency_ns_sum;
        t.subop_latency_count += s.subop_latency_count;
        t.op_wip += s.op_wip;
        t.messages_received += s.messages_received;
        t.ops += s.ops;
        t.ops_r += s.ops_r;
        t.ops_w += s.ops_w;
        t.op_in_bytes += s.op_in_bytes;
        t.op_out_bytes += s.op_out_bytes;
        t.op_latency_ns_sum += s.op_latency_ns_sum;
        t.op_latency_count += s.op_latency_count;
        t.op_r_latency_ns_sum += s.op_r_latency_ns_sum;
        t.op_r_latency_count += s.op_r_latency_count;
        t.op_w_latency_ns_sum += s.op_w_latency_ns_sum;
        t.op_w_latency_count += s.op_w_latency_count;
        t.commit_latency_ns_sum += s.commit_latency_ns_sum;
        t.commit_latency_count += s.commit_latency_count;
        t.total_bytes += s.total_bytes;
        t.free_bytes += s.free_bytes;
    }
    OSD.iter()
        .map(|k| match k.name {
            "op_wip" => Value::U64(t.op_wip),
            "op" => Value::U64(t.ops),
            "op_in_bytes" => Value::U64(t.op_in_bytes),
            "op_out_bytes" => Value::U64(t.op_out_bytes),
            "op_latency" => Value::Avg {
                count: t.op_latency_count,
                sum_ns: t.op_latency_ns_sum,
            },
            "op_r" => Value::U64(t.ops_r),
            "op_r_latency" => Value::Avg {
                count: t.op_r_latency_count,
                sum_ns: t.op_r_latency_ns_sum,
            },
            "op_w" => Value::U64(t.ops_w),
            "op_w_latency" => Value::Avg {
                count: t.op_w_latency_count,
                sum_ns: t.op_w_latency_ns_sum,
            },
            "subop" => Value::U64(t.subops),
            "subop_latency" => Value::Avg {
                count: t.subop_latency_count,
                sum_ns: t.subop_latency_ns_sum,
            },
            "numpg" => Value::U64(pgs),
            "numpg_primary" => Value::U64(primary),
            "stat_bytes" => Value::U64(t.total_bytes),
            "stat_bytes_used" => Value::U64(t.total_bytes.saturating_sub(t.free_bytes)),
            "stat_bytes_avail" => Value::U64(t.free_bytes),
            "messages_received" => Value::U64(messages_received + t.messages_received),
            "commit_latency" => Value::Avg {
                count: t.commit_latency_count,
                sum_ns: t.commit_latency_ns_sum,
            },
            _ => Value::U64(0),
        })
        .collect()
}

fn secs(ns: u64) -> f64 {
    ns as f64 / 1e9
}

/// `perf dump`: Ceph's JSON shapes (integers; `{avgcount, sum, avgtime}` for time averages).
pub fn dump<'a>(
    stats: impl Iterator<Item = &'a ShardStats>,
    shards: u32,
    messages_received: u64,
) -> serde_json::Value {
    let stats: Vec<&ShardStats> = stats.collect();
    let vals = values(stats.iter().copied(), messages_received);
    let mut osd = serde_json::Map::new();
    for (k, v) in OSD.iter().zip(vals) {
        let j = match v {
            Value::U64(x) => serde_json::json!(x),
            Value::Avg { count, sum_ns } => serde_json::json!({
                "avgcount": count,
                "sum": secs(sum_ns),
                "avgtime": if count == 0 { 0.0 } else { secs(sum_ns) / count as f64 },
            }),
        };
        osd.insert(k.name.into(), j);
    }
    let (objs, bytes) = stats
        .iter()
        .flat_map(|s| s.pgs.iter())
        .fold((0u64, 0u64), |(o, b), (r, _)| {
            (o + r.stats.num_objects, b + r.stats.num_bytes)
        });
    let lat = stats.iter().map(|s| s.commit_latency_ns).max().unwrap_or(0);
    // Op latency as the OSD sees it (arrival on the core to reply), by µs: what of a client's tail is ours.
    let (mut r, mut w) = ([0u64; TURN_HIST_BUCKETS], [0u64; TURN_HIST_BUCKETS]);
    for s in &stats {
        for i in 0..TURN_HIST_BUCKETS {
            r[i] += s.op_r_lat_hist[i];
            w[i] += s.op_w_lat_hist[i];
        }
    }
    let hist = |h: [u64; TURN_HIST_BUCKETS]| -> serde_json::Map<String, serde_json::Value> {
        h.iter()
            .enumerate()
            .map(|(i, n)| (crate::turns::bucket_label(i), serde_json::json!(n)))
            .collect()
    };
    let sum = |f: fn(&ShardStats) -> u64| stats.iter().map(|s| f(s)).sum::<u64>();
    serde_json::json!({
        "osd": osd,
        "ferrostore": {
            "shards": shards, "objects": objs, "bytes": bytes, "commit_latency_ns": lat,
            "txns": sum(|s| s.store_txns),
            "journaled_txns": sum(|s| s.store_journaled_txns),
            "journaled_bytes": sum(|s| s.store_journaled_bytes),
            "journaled_writes_skipped": sum(|s| s.store_journaled_writes_skipped),
            "log_records": sum(|s| s.store_log_records),
            "log_bytes": sum(|s| s.store_log_bytes),
            "defrag_txns": sum(|s| s.store_defrag_txns),
            "defrag_blocks": sum(|s| s.store_defrag_blocks),
            "defrag_skipped": sum(|s| s.store_defrag_skipped),
            "defrag_deferred": sum(|s| s.store_defrag_deferred),
            "reads_zero_copy": sum(|s| s.store_reads_zero_copy),
            "reads_assembled": sum(|s| s.store_reads_assembled),
            "read_buf_misses": sum(|s| s.dev_read_buf_misses),
            "assembled_buf_misses": sum(|s| s.store_assembled_buf_misses),
            "checkpoints": sum(|s| s.store_checkpoints),
            "background_checkpoints": sum(|s| s.store_background_checkpoints),
            "checkpoint_waits_log": sum(|s| s.store_ckpt_waits_log),
            "checkpoint_waits_dirty": sum(|s| s.store_ckpt_waits_dirty),
            "checkpoint_log_full": sum(|s| s.store_ckpt_log_full),
        },
        "ferro_op_latency_hist": { "op_r_us": hist(r), "op_w_us": hist(w) },
    })
}

fn metric_type(k: &Counter) -> &'static str {
    if k.ty & ty::COUNTER != 0 || k.ty & ty::LONGRUNAVG != 0 {
        "counter"
    } else {
        "gauge"
    }
}

/// `perf schema`: Ceph's JSON for each counter of [`OSD`].
pub fn schema() -> serde_json::Value {
    let mut osd = serde_json::Map::new();
    for k in OSD {
        let value_type = if k.ty & ty::LONGRUNAVG != 0 {
            "real-integer-pair"
        } else if k.ty & ty::TIME != 0 {
            "real"
        } else {
            "integer"
        };
        osd.insert(
            k.name.into(),
            serde_json::json!({
                "type": k.ty,
                "metric_type": metric_type(k),
                "value_type": value_type,
                "description": k.description,
                "nick": k.nick,
                "priority": k.priority,
                "units": if k.unit == unit::BYTES { "bytes" } else { "none" },
            }),
        );
    }
    serde_json::json!({ "osd": osd, "ferrostore": {} })
}

/// `mgr_stats_threshold` (PRIO_USEFUL): counters below it are not sent to the mgr, as ceph-osd's MgrClient.
pub const MGR_STATS_THRESHOLD: u8 = prio::USEFUL;

/// The `osd` counters as MMgrReport declares them (`osd.<name>`), in [`OSD`] order.
pub fn declare_types() -> Vec<ceph_msgs::osd::PerfCounterType> {
    OSD.iter()
        .filter(|k| k.priority >= MGR_STATS_THRESHOLD)
        .map(|k| ceph_msgs::osd::PerfCounterType {
            path: format!("osd.{}", k.name),
            description: k.description.into(),
            nick: k.nick.into(),
            type_: k.ty,
            priority: k.priority,
            unit: k.unit,
        })
        .collect()
}

/// MMgrReport's `packed`: an ENCODE_START(1,1) envelope with, for every declared path in sorted order (the
/// mgr keeps declarations in a sorted set), the value as u64 (times in nanoseconds) and, for long-run averages,
/// the count twice (`avgcount`, `avgcount2`).
pub fn pack<'a>(items: impl Iterator<Item = (&'a str, u8, Value)>) -> bytes::Bytes {
    let mut v: Vec<(&str, u8, Value)> = items.collect();
    v.sort_by(|a, b| a.0.cmp(b.0));
    let mut e = denc::Encoder::new(0);
    e.versioned(1, 1, |e| {
        for (_, ty, val) in &v {
            let (x, n) = match *val {
                Value::U64(x) => (x, 0),
                Value::Avg { count, sum_ns } => (sum_ns, count),
            };
            e.u64(x);
            if ty & ty::LONGRUNAVG != 0 {
                e.u64(n);
                e.u64(n);
            }
        }
    });
    e.into_bytes()
}

/// The `packed` values of the counters [`declare_types`] declares.
pub fn mgr_packed<'a>(stats: impl Iterator<Item = &'a ShardStats>, messages_received: u64) -> bytes::Bytes {
    let vals = values(stats, messages_received);
    let names: Vec<String> = OSD.iter().map(|k| format!("osd.{}", k.name)).collect();
    pack(
        OSD.iter()
            .zip(vals)
            .zip(names.iter())
            .filter(|((k, _), _)| k.priority >= MGR_STATS_THRESHOLD)
            .map(|((k, v), n)| (n.as_str(), k.ty, v)),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schema_dump_and_mgr_declarations_agree() {
        let d = dump(std::iter::empty(), 2, 0);
        let s = schema();
        for k in OSD {
            assert!(
                d["osd"].get(k.name).is_some(),
                "{} missing from perf dump",
                k.name
            );
            assert_eq!(s["osd"][k.name]["type"], k.ty, "{}", k.name);
        }
        let decl = declare_types();
        assert!(
            decl.iter()
                .all(|t| t.path.starts_with("osd.") && t.priority >= MGR_STATS_THRESHOLD)
        );
        // One u64 per declared counter, three for long-run averages, after the 6-byte envelope.
        let want: usize = decl
            .iter()
            .map(|t| if t.type_ & ty::LONGRUNAVG != 0 { 24 } else { 8 })
            .sum();
        assert_eq!(mgr_packed(std::iter::empty(), 0).len(), 6 + want);
    }

    #[test]
    fn packed_values_are_in_path_order_with_average_counts() {
        let p = pack(
            [
                ("osd.b", ty::U64 | ty::COUNTER, Value::U64(5)),
                (
                    "osd.a",
                    ty::TIME | ty::LONGRUNAVG,
                    Value::Avg {
                        count: 2,
                        sum_ns: 3000,
                    },
                ),
            ]
            .into_iter(),
        );
        let mut want = vec![1u8, 1, 32, 0, 0, 0];
        for x in [3000u64, 2, 2, 5] {
            want.extend_from_slice(&x.to_le_bytes());
        }
        assert_eq!(p.as_ref(), &want[..]);
    }
}
