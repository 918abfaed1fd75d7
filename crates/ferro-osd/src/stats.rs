// SPDX-License-Identifier: LGPL-3.0-or-later
//! Building `pg_stat_t` / `osd_stat_t` reports from the PGs' counters.

use denc::{PgId, Utime};
use osd_core::PgReport;
use osd_types::ObjectStatSum;
use osd_types::osd_stat::{ObjectstorePerfStat, OsdStat};
use osd_types::pg_stat::{ObjectStatCollection, PgStat, pg_state};
use osd_types::statfs::StoreStatfs;
use pg::PgStats;

/// What the daemon knows about a PG's life.
#[derive(Debug, Clone, Copy, Default)]
pub struct PgLife {
    pub created_epoch: u32,
    pub active_since_epoch: u32,
    pub activated_at: Utime,
}

/// A size-1 PG owned by `osd`: active+clean once loaded.
pub fn pg_stat(osd: i32, epoch: u32, seq: u64, s: &PgStats, life: &PgLife, now: Utime) -> PgStat {
    let sum = ObjectStatSum {
        num_bytes: s.num_bytes as i64,
        num_objects: s.num_objects as i64,
        num_object_copies: s.num_objects as i64,
        num_objects_omap: s.num_omap_objects as i64,
        num_rd: s.num_rd as i64,
        num_rd_kb: s.num_rd_kb as i64,
        num_wr: s.num_wr as i64,
        num_wr_kb: s.num_wr_kb as i64,
        ..ObjectStatSum::default()
    };
    PgStat {
        version: s.last_update,
        reported_seq: seq,
        reported_epoch: epoch,
        state: pg_state::ACTIVE | pg_state::CLEAN,
        created: life.created_epoch,
        last_epoch_clean: life.active_since_epoch,
        parent: PgId::default(),
        last_scrub_stamp: life.activated_at,
        stats: ObjectStatCollection { sum },
        log_size: s.log_size as i64,
        ondisk_log_size: s.ondisk_log_size as i64,
        up: vec![osd],
        acting: vec![osd],
        last_fresh: now,
        last_change: life.activated_at,
        last_active: now,
        last_clean: now,
        last_unstale: now,
        mapping_epoch: life.active_since_epoch,
        last_deep_scrub_stamp: life.activated_at,
        last_clean_scrub_stamp: life.activated_at,
        last_became_active: life.activated_at,
        up_primary: osd,
        acting_primary: osd,
        last_undegraded: now,
        last_fullsized: now,
        last_peered: now,
        last_became_peered: life.activated_at,
        ..PgStat::default()
    }
}

/// A PG as osd-core reports it (any pool size), for MPGStats: state flags, up/acting, history epochs, object
/// counts with degraded/misplaced/missing copies. `since`: when the PG entered its current state.
pub fn pg_stat_report(r: &PgReport, epoch: u32, seq: u64, since: Utime, now: Utime) -> PgStat {
    let s = &r.stats;
    let copies = s.num_objects * r.acting.len().max(1) as u64;
    let sum = ObjectStatSum {
        num_bytes: s.num_bytes as i64,
        num_objects: s.num_objects as i64,
        num_object_copies: copies as i64,
        num_objects_missing_on_primary: r.num_objects_missing as i64,
        num_objects_degraded: r.num_objects_degraded as i64,
        num_objects_misplaced: r.num_objects_misplaced as i64,
        num_objects_omap: s.num_omap_objects as i64,
        num_rd: s.num_rd as i64,
        num_rd_kb: s.num_rd_kb as i64,
        num_wr: s.num_wr as i64,
        num_wr_kb: s.num_wr_kb as i64,
        ..ObjectStatSum::default()
    };
    let active = r.state & pg_state::ACTIVE != 0;
    let clean = r.state & pg_state::CLEAN != 0;
    PgStat {
        version: r.last_update,
        reported_seq: seq,
        reported_epoch: epoch,
        state: r.state,
        created: r.created,
        last_epoch_clean: r.last_epoch_clean,
        parent: PgId::default(),
        last_scrub_stamp: since,
        stats: ObjectStatCollection { sum },
        log_size: s.log_size as i64,
        ondisk_log_size: s.ondisk_log_size as i64,
        up: r.up.clone(),
        acting: r.acting.clone(),
        last_fresh: now,
        last_change: since,
        last_active: if active { now } else { since },
        last_clean: if clean { now } else { since },
        last_unstale: now,
        mapping_epoch: r.mapping_epoch,
        last_deep_scrub_stamp: since,
        last_clean_scrub_stamp: since,
        last_became_active: since,
        up_primary: r.up_primary,
        acting_primary: r.acting_primary,
        last_undegraded: if r.num_objects_degraded == 0 { now } else { since },
        last_fullsized: now,
        last_peered: if active { now } else { since },
        last_became_peered: since,
        ..PgStat::default()
    }
}

/// The OSD's own statistics.
#[allow(clippy::too_many_arguments)]
pub fn osd_stat(
    total: u64,
    free: u64,
    data_stored: u64,
    up_from: u32,
    seq: u64,
    num_pgs: u32,
    commit_latency_ns: u64,
) -> OsdStat {
    let used = total.saturating_sub(free);
    OsdStat {
        statfs: StoreStatfs {
            total,
            available: free,
            allocated: used,
            data_stored,
            ..StoreStatfs::default()
        },
        op_queue_age_hist: Vec::new(),
        os_perf_stat: ObjectstorePerfStat {
            commit_latency_ns,
            apply_latency_ns: commit_latency_ns,
            version: 1,
        },
        up_from,
        seq,
        num_pgs,
        num_osds: 1,
        num_per_pool_osds: 1,
        num_per_pool_omap_osds: 1,
        ..OsdStat::default()
    }
}

/// `dump_mempools`: what holds this OSD's memory, in the layout of ceph-osd's answer (`mempool.by_pool.<name>`
/// with `items` and `bytes`, and a `total`), from the shards' last statistics (at most a second old), plus the
/// process's resident set (`rss_bytes`, from /proc) to compare the pools with. `bytes` is 0 where we count items
/// only: PG log entries, tracked ops and replicated writes hold names and buffers of varying size. The large
/// receive-buffer pool is live (`ferro_rx_buffers_idle` / `_in_use` and its counters in `rx_buffer_pool`).
pub fn mempools<'a>(
    shards: impl Iterator<Item = &'a crate::worker::ShardStats>,
    rss_bytes: u64,
) -> serde_json::Value {
    let mut m = crate::worker::ShardMemory::default();
    let mut n = 0u64;
    for s in shards {
        n += 1;
        m.store_bytes += s.mem.store_bytes;
        m.ops_tracked += s.mem.ops_tracked;
        m.subops_tracked += s.mem.subops_tracked;
        m.pglog_entries += s.mem.pglog_entries;
        m.repops_in_flight += s.mem.repops_in_flight;
    }
    let (rx_pools, rx_detail) = crate::memory::rx_pool_json();
    let mut pools = vec![
        ("ferrostore", n, m.store_bytes),
        ("osd_pglog", m.pglog_entries, 0),
        ("osd", m.ops_tracked + m.subops_tracked, 0),
        ("osd_repop", m.repops_in_flight, 0),
    ];
    pools.extend(rx_pools);
    let mut by_pool = serde_json::Map::new();
    for &(name, items, bytes) in &pools {
        by_pool.insert(name.into(), serde_json::json!({"items": items, "bytes": bytes}));
    }
    serde_json::json!({
        "mempool": {
            "by_pool": by_pool,
            "total": {
                "items": pools.iter().map(|p| p.1).sum::<u64>(),
                "bytes": pools.iter().map(|p| p.2).sum::<u64>(),
            },
        },
        "rss_bytes": rss_bytes,
        "rx_buffer_pool": rx_detail,
    })
}

/// This process's resident set size (VmRSS), 0 if /proc cannot tell.
pub fn self_rss_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        })
        .map_or(0, |kb| kb * 1024)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::worker::{ShardMemory, ShardStats};

    #[test]
    fn mempools_sum_the_shards() {
        let shard = |store_bytes, pglog_entries| ShardStats {
            mem: ShardMemory {
                store_bytes,
                ops_tracked: 3,
                subops_tracked: 1,
                pglog_entries,
                repops_in_flight: 2,
            },
            ..ShardStats::default()
        };
        let v = mempools([shard(1000, 250), shard(500, 10)].iter(), 42 << 20);
        let p = &v["mempool"]["by_pool"];
        assert_eq!(p["ferrostore"]["bytes"], 1500);
        assert_eq!(p["ferrostore"]["items"], 2);
        assert_eq!(p["osd_pglog"]["items"], 260);
        assert_eq!(p["osd"]["items"], 8);
        assert_eq!(p["osd_repop"]["items"], 4);
        assert_eq!(v["mempool"]["total"]["bytes"], 1500);
        assert_eq!(v["mempool"]["total"]["items"], 2 + 260 + 8 + 4);
        assert_eq!(v["rss_bytes"], 42u64 << 20);
        assert!(p["ferro_rx_buffers_idle"]["bytes"].is_u64());
        assert!(p["ferro_rx_buffers_in_use"]["items"].is_u64());
        assert!(p["ferro_io_buffer_slab"]["bytes"].is_u64());
        assert_eq!(
            v["rx_buffer_pool"]["huge_page_buffers"],
            pagepool::contig::enabled()
        );
        assert_eq!(
            v["rx_buffer_pool"]["max_idle_bytes"],
            pagepool::DEFAULT_MAX_IDLE_BYTES
        );
        assert!(self_rss_bytes() > 0, "this test process has a resident set");
    }
}
