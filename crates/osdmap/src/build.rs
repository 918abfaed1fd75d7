// SPDX-License-Identifier: LGPL-3.0-or-later
//! Build OSD maps from scratch, and their next epochs, the way a monitor would.
//!
//! * [`MapBuilder`] makes epoch 1 of a cluster: `hosts × osds_per_host` OSDs (all up and in, with addresses) under a
//!   straw2 tree `root default → hostN → osd.N`, one replicated rule (`firstn` over hosts or OSDs) and replicated
//!   pools. This is what `ceph osd pool create` + booting OSDs leave in a fresh Pacific cluster, minus history.
//! * [`IncBuilder`] makes the next epoch as an [`Incremental`] (mark down/up/out/in, pg_temp, up_thru, pools,
//!   pg_num) with the monitor's `full_crc` filled in, so consumers move forward through
//!   [`OsdMap::apply_incremental`] exactly as they do with a real monitor's incrementals, crc check included.
//!
//! Both are deterministic: the same inputs give the same bytes (used by the simulator, and by tests that need a map).

use std::collections::BTreeMap;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};

use crush::{Bucket, BucketKind, CRUSH_BUCKET_STRAW2, CrushMap, RULE_TYPE_REPLICATED, Rule, RuleStep, op};

use crate::apply::CrcCheck;
use crate::features;
use crate::inc::Incremental;
use crate::map::{OSD_IN, OSD_OUT, OsdInfo, OsdMap, OsdXinfo, release, state};
use crate::pool::{PgPool, TYPE_REPLICATED, autoscale, flag};
use crate::types::{EntityAddr, EntityAddrvec, PgId, Utime, Uuid};

/// Map flags a Pacific monitor sets on a new cluster: sortbitwise, recovery_deletes, purged_snapdirs,
/// pglog_hardlimit.
pub const PACIFIC_MAP_FLAGS: u32 = (1 << 15) | (1 << 19) | (1 << 20) | (1 << 22);

/// CRUSH type ids of Ceph's default type list (`osd host chassis rack row pdu pod room datacenter zone region root`).
pub const CRUSH_TYPE_OSD: i32 = 0;
pub const CRUSH_TYPE_HOST: i32 = 1;
pub const CRUSH_TYPE_ROOT: i32 = 11;
const CRUSH_TYPES: [&str; 12] = [
    "osd",
    "host",
    "chassis",
    "rack",
    "row",
    "pdu",
    "pod",
    "room",
    "datacenter",
    "zone",
    "region",
    "root",
];

/// The rule every built pool uses.
pub const REPLICATED_RULE: u8 = 0;

/// The level replicas are spread over.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailureDomain {
    Host,
    Osd,
}

/// A replicated pool to create.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PoolSpec {
    pub name: String,
    pub size: u8,
    pub min_size: u8,
    pub pg_num: u32,
}

impl PoolSpec {
    pub fn replicated(name: impl Into<String>, size: u8, min_size: u8, pg_num: u32) -> Self {
        PoolSpec {
            name: name.into(),
            size,
            min_size,
            pg_num,
        }
    }
}

/// The public (client) and cluster addresses of a built OSD: msgr2 + legacy on 10.0.0.1, ports from 6800 up by
/// OSD id (as a host's OSDs would bind), nonce = OSD id + 1 (a restart may change it, see [`IncBuilder::mark_up`]).
pub fn osd_addrs(osd: i32, nonce: u32) -> (EntityAddrvec, EntityAddrvec) {
    let at = |port: u32| {
        let port = u16::try_from(6800 + port).unwrap_or(u16::MAX);
        let sa = SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 1), port));
        EntityAddrvec::new(vec![
            EntityAddr::new(EntityAddr::TYPE_MSGR2, sa, nonce),
            EntityAddr::new(
                EntityAddr::TYPE_LEGACY,
                SocketAddr::V4(SocketAddrV4::new(
                    Ipv4Addr::new(10, 0, 0, 1),
                    port.saturating_add(1),
                )),
                nonce,
            ),
        ])
    };
    let base = (osd.max(0) as u32) * 4;
    (at(base), at(base + 2))
}

/// A deterministic per-OSD uuid.
fn osd_uuid(osd: i32) -> Uuid {
    let mut u = [0u8; 16];
    u[..4].copy_from_slice(b"ferr");
    u[12..].copy_from_slice(&(osd as u32).to_be_bytes());
    Uuid(u)
}

/// A straw2 CRUSH map: `root default` (id -1) over `hostH` (ids -2, -3, ...) over `osd.N` (N = H * per_host + i),
/// every OSD weighted 1.0, tunables "optimal" (jewel, Pacific's default), and rule 0 `replicated_rule`
/// (`take default; chooseleaf firstn 0 type host; emit`, or `choose firstn 0 type osd` for [`FailureDomain::Osd`]).
pub fn crush_map(hosts: u32, osds_per_host: u32, domain: FailureDomain) -> CrushMap {
    let mut c = CrushMap::default();
    for (i, t) in CRUSH_TYPES.iter().enumerate() {
        c.type_names.insert(i as i32, (*t).to_string());
    }
    let w = OSD_IN;
    let mut root_items = Vec::new();
    let mut root_weights = Vec::new();
    let mut host_buckets = Vec::new();
    for h in 0..hosts {
        let id = -2 - h as i32;
        let items: Vec<i32> = (0..osds_per_host)
            .map(|i| (h * osds_per_host + i) as i32)
            .collect();
        for &o in &items {
            c.names.insert(o, format!("osd.{o}"));
        }
        let weights = vec![w; items.len()];
        let total = w.saturating_mul(items.len() as u32);
        c.names.insert(id, format!("host{h}"));
        host_buckets.push(Bucket {
            id,
            bucket_type: CRUSH_TYPE_HOST as u16,
            hash: 0,
            weight: total,
            items,
            kind: BucketKind::Straw2 {
                item_weights: weights,
            },
        });
        root_items.push(id);
        root_weights.push(total);
    }
    c.names.insert(-1, "default".to_string());
    let root = Bucket {
        id: -1,
        bucket_type: CRUSH_TYPE_ROOT as u16,
        hash: 0,
        weight: root_weights.iter().fold(0u32, |a, b| a.saturating_add(*b)),
        items: root_items,
        kind: BucketKind::Straw2 {
            item_weights: root_weights,
        },
    };
    debug_assert!(root.alg() == CRUSH_BUCKET_STRAW2);
    c.buckets.push(Some(root));
    c.buckets.extend(host_buckets.into_iter().map(Some));
    let choose = match domain {
        FailureDomain::Host => RuleStep {
            op: op::CHOOSELEAF_FIRSTN,
            arg1: 0,
            arg2: CRUSH_TYPE_HOST,
        },
        FailureDomain::Osd => RuleStep {
            op: op::CHOOSE_FIRSTN,
            arg1: 0,
            arg2: CRUSH_TYPE_OSD,
        },
    };
    c.rules.push(Some(Rule {
        ruleset: REPLICATED_RULE,
        rule_type: RULE_TYPE_REPLICATED,
        min_size: 1,
        max_size: 10,
        steps: vec![
            RuleStep {
                op: op::TAKE,
                arg1: -1,
                arg2: 0,
            },
            choose,
            RuleStep {
                op: op::EMIT,
                arg1: 0,
                arg2: 0,
            },
        ],
    }));
    c.rule_names
        .insert(i32::from(REPLICATED_RULE), "replicated_rule".to_string());
    c.finalize();
    c
}

/// A replicated pool as `ceph osd pool create NAME PG_NUM PG_NUM replicated` leaves it (autoscale off, hashpspool,
/// rjenkins object hash), created at `epoch`.
pub fn replicated_pool(spec: &PoolSpec, epoch: u32, stamp: Utime) -> PgPool {
    let mut p = PgPool {
        type_: TYPE_REPLICATED,
        size: spec.size,
        min_size: spec.min_size,
        crush_rule: REPLICATED_RULE,
        object_hash: 2,
        flags: flag::HASHPSPOOL,
        pg_autoscale_mode: autoscale::OFF,
        last_change: epoch,
        create_time: stamp,
        ..PgPool::default()
    };
    set_pool_pg_num(&mut p, spec.pg_num);
    p
}

fn set_pool_pg_num(p: &mut PgPool, n: u32) {
    p.set_pg_num(n);
    p.set_pgp_num(n);
    p.pg_num_target = n;
    p.pgp_num_target = n;
}

/// Builds epoch 1 of a cluster.
#[derive(Debug, Clone)]
pub struct MapBuilder {
    fsid: Uuid,
    hosts: u32,
    osds_per_host: u32,
    domain: FailureDomain,
    pools: Vec<PoolSpec>,
    stamp: Utime,
}

impl MapBuilder {
    /// `hosts × osds_per_host` OSDs, failure domain host, no pools yet.
    pub fn new(hosts: u32, osds_per_host: u32) -> Self {
        MapBuilder {
            fsid: Uuid([0xfe, 0x77, 0x0c, 0xe9, 0, 0, 0x40, 0, 0x80, 0, 0, 0, 0, 0, 0, 1]),
            hosts,
            osds_per_host,
            domain: FailureDomain::Host,
            pools: Vec::new(),
            stamp: Utime::new(1_700_000_000, 0),
        }
    }
    pub fn fsid(mut self, fsid: Uuid) -> Self {
        self.fsid = fsid;
        self
    }
    pub fn failure_domain(mut self, d: FailureDomain) -> Self {
        self.domain = d;
        self
    }
    /// Add a pool; pools get ids 1, 2, ... in the order added.
    pub fn pool(mut self, p: PoolSpec) -> Self {
        self.pools.push(p);
        self
    }
    /// The `created`/`modified` stamp.
    pub fn stamp(mut self, t: Utime) -> Self {
        self.stamp = t;
        self
    }

    pub fn build(&self) -> OsdMap {
        let n = (self.hosts * self.osds_per_host) as i32;
        let mut m = OsdMap {
            fsid: self.fsid,
            epoch: 1,
            created: self.stamp,
            modified: self.stamp,
            flags: PACIFIC_MAP_FLAGS,
            nearfull_ratio: 0.85,
            backfillfull_ratio: 0.90,
            full_ratio: 0.95,
            require_min_compat_client: release::LUMINOUS,
            require_osd_release: release::PACIFIC,
            last_up_change: self.stamp,
            last_in_change: self.stamp,
            ..OsdMap::default()
        };
        m.set_crush(crush_map(self.hosts, self.osds_per_host, self.domain));
        m.set_max_osd(n);
        for o in 0..n {
            let i = o as usize;
            let (public, cluster) = osd_addrs(o, o as u32 + 1);
            m.osd_state[i] = state::EXISTS | state::UP;
            m.osd_weight[i] = OSD_IN;
            m.client_addrs[i] = public.clone();
            m.hb_front_addrs[i] = public;
            m.cluster_addrs[i] = cluster.clone();
            m.hb_back_addrs[i] = cluster;
            m.osd_uuid[i] = osd_uuid(o);
            m.osd_info[i] = OsdInfo {
                up_from: 1,
                up_thru: 1,
                ..OsdInfo::default()
            };
            m.osd_xinfo[i] = OsdXinfo {
                features: features::PACIFIC,
                ..OsdXinfo::default()
            };
        }
        for (i, spec) in self.pools.iter().enumerate() {
            let id = i as i64 + 1;
            m.pools.insert(id, replicated_pool(spec, 1, self.stamp));
            m.pool_name.insert(id, spec.name.clone());
            m.pool_max = id as i32;
        }
        if self.pools.is_empty() {
            m.pool_max = 0;
        }
        // Keep the bytes and crc a monitor would publish.
        let (bytes, crc) = m.encode_with_crc(m.encoding_features() | features::RESERVED);
        m.crc = crc;
        m.raw = Some(bytes);
        m
    }
}

/// Why an incremental could not be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BuildError {
    #[error("osd.{0} does not exist")]
    NoSuchOsd(i32),
    #[error("pool {0} does not exist")]
    NoSuchPool(i64),
    #[error("pool {pool}: pg_num may only grow (from {have} to {want})")]
    PgNumShrink { pool: i64, have: u32, want: u32 },
    #[error("applying the incremental failed: {0}")]
    Apply(String),
}

/// Builds the next epoch of `map` as an [`Incremental`], the way the monitor's pending incremental accumulates
/// changes. Changes that are no-ops on the current map (marking an up OSD up, ...) are skipped, as the monitor does.
#[derive(Debug)]
pub struct IncBuilder<'a> {
    map: &'a OsdMap,
    inc: Incremental,
}

impl<'a> IncBuilder<'a> {
    pub fn new(map: &'a OsdMap) -> Self {
        let mut inc = Incremental::new(map.epoch.wrapping_add(1));
        inc.fsid = map.fsid;
        inc.modified = Utime::new(map.modified.sec.saturating_add(1), map.modified.nsec);
        inc.encode_features = map.encoding_features();
        IncBuilder { map, inc }
    }

    /// The `modified` stamp of the new epoch (default: one second after the current one).
    pub fn stamp(&mut self, t: Utime) -> &mut Self {
        self.inc.modified = t;
        self
    }

    fn check_osd(&self, osd: i32) -> Result<(), BuildError> {
        if self.map.exists(osd) {
            Ok(())
        } else {
            Err(BuildError::NoSuchOsd(osd))
        }
    }

    fn pool(&self, id: i64) -> Result<PgPool, BuildError> {
        self.inc
            .new_pools
            .get(&id)
            .or_else(|| self.map.pools.get(&id))
            .cloned()
            .ok_or(BuildError::NoSuchPool(id))
    }

    /// Mark `osd` down (the state's UP bit toggles, `down_at` becomes this epoch).
    pub fn mark_down(&mut self, osd: i32) -> Result<&mut Self, BuildError> {
        self.check_osd(osd)?;
        if self.map.is_up(osd) {
            *self.inc.new_state.entry(osd).or_insert(0) |= state::UP;
        }
        self.inc.new_last_up_change = self.inc.modified;
        Ok(self)
    }

    /// `osd` boots: up with fresh addresses (nonce `nonce`, so peers see a new instance) and, as the monitor does
    /// in `prepare_boot`, `up_thru` = this epoch so it need not ask. Marking an up OSD up is a no-op.
    pub fn mark_up(&mut self, osd: i32, nonce: u32) -> Result<&mut Self, BuildError> {
        self.check_osd(osd)?;
        if self.map.is_up(osd) && !self.inc.new_state.contains_key(&osd) {
            return Ok(self);
        }
        let (public, cluster) = osd_addrs(osd, nonce);
        self.inc.new_state.remove(&osd);
        self.inc.new_up_client.insert(osd, public.clone());
        self.inc.new_hb_front_up.insert(osd, public);
        self.inc.new_up_cluster.insert(osd, cluster.clone());
        self.inc.new_hb_back_up.insert(osd, cluster);
        self.inc.new_up_thru.insert(osd, self.inc.epoch);
        let mut x = self.map.osd_xinfo.get(osd as usize).copied().unwrap_or_default();
        x.features = features::PACIFIC;
        self.inc.new_xinfo.insert(osd, x);
        self.inc.new_last_up_change = self.inc.modified;
        Ok(self)
    }

    pub fn mark_out(&mut self, osd: i32) -> Result<&mut Self, BuildError> {
        self.check_osd(osd)?;
        self.inc.new_weight.insert(osd, OSD_OUT);
        self.inc.new_last_in_change = self.inc.modified;
        Ok(self)
    }

    pub fn mark_in(&mut self, osd: i32) -> Result<&mut Self, BuildError> {
        self.check_osd(osd)?;
        self.inc.new_weight.insert(osd, OSD_IN);
        self.inc.new_last_in_change = self.inc.modified;
        Ok(self)
    }

    /// Honour an OSD's `MOSDPGTemp` request; an empty `acting` removes the entry.
    pub fn set_pg_temp(&mut self, pg: PgId, acting: Vec<i32>) -> &mut Self {
        self.inc.new_pg_temp.insert(pg, acting);
        self
    }

    /// Honour an `MOSDAlive`: `up_thru` of `osd` becomes `epoch` (never lowered).
    pub fn set_up_thru(&mut self, osd: i32, epoch: u32) -> Result<&mut Self, BuildError> {
        self.check_osd(osd)?;
        let have = self.map.osd_info.get(osd as usize).map_or(0, |i| i.up_thru);
        if epoch > have {
            let e = self.inc.new_up_thru.entry(osd).or_insert(0);
            *e = (*e).max(epoch);
        }
        Ok(self)
    }

    /// Create a pool; returns its id.
    pub fn create_pool(&mut self, spec: &PoolSpec) -> i64 {
        let max = if self.inc.new_pool_max >= 0 {
            self.inc.new_pool_max
        } else {
            i64::from(self.map.pool_max)
        };
        let id = max + 1;
        self.inc.new_pool_max = id;
        self.inc
            .new_pools
            .insert(id, replicated_pool(spec, self.inc.epoch, self.inc.modified));
        self.inc.new_pool_names.insert(id, spec.name.clone());
        id
    }

    pub fn delete_pool(&mut self, id: i64) -> Result<&mut Self, BuildError> {
        if !self.map.pools.contains_key(&id) {
            return Err(BuildError::NoSuchPool(id));
        }
        self.inc.new_pools.remove(&id);
        self.inc.old_pools.insert(id);
        Ok(self)
    }

    /// Grow `pool`'s pg_num (and pgp_num) to `n`: its PGs split. Shrinking (merge) is not modelled.
    pub fn set_pg_num(&mut self, pool: i64, n: u32) -> Result<&mut Self, BuildError> {
        let mut p = self.pool(pool)?;
        if n < p.pg_num {
            return Err(BuildError::PgNumShrink {
                pool,
                have: p.pg_num,
                want: n,
            });
        }
        set_pool_pg_num(&mut p, n);
        self.inc.new_pools.insert(pool, p);
        Ok(self)
    }

    /// Grow `pool`'s pg_num to `n` but keep pgp_num: the PGs split in place (children are placed like their
    /// parent until pgp_num follows), which is how a Nautilus+ monitor starts a pg_num increase.
    pub fn split_pg_num(&mut self, pool: i64, n: u32) -> Result<&mut Self, BuildError> {
        let mut p = self.pool(pool)?;
        if n < p.pg_num {
            return Err(BuildError::PgNumShrink {
                pool,
                have: p.pg_num,
                want: n,
            });
        }
        p.set_pg_num(n);
        p.pg_num_target = n;
        self.inc.new_pools.insert(pool, p);
        Ok(self)
    }

    /// Move `pool`'s pgp_num to `n` (at most pg_num): split children start to move to their own OSDs.
    pub fn set_pgp_num(&mut self, pool: i64, n: u32) -> Result<&mut Self, BuildError> {
        let mut p = self.pool(pool)?;
        p.set_pgp_num(n.min(p.pg_num));
        p.pgp_num_target = p.pgp_num;
        self.inc.new_pools.insert(pool, p);
        Ok(self)
    }

    /// Change `pool`'s size/min_size.
    pub fn set_pool_size(&mut self, pool: i64, size: u8, min_size: u8) -> Result<&mut Self, BuildError> {
        let mut p = self.pool(pool)?;
        p.size = size;
        p.min_size = min_size;
        self.inc.new_pools.insert(pool, p);
        Ok(self)
    }

    /// The incremental so far (without crcs).
    pub fn pending(&self) -> &Incremental {
        &self.inc
    }

    /// Finish the epoch: drop pg_temp entries the new map makes pointless (pool gone, every OSD down, or equal to
    /// the raw up set, as the monitor's `clean_temps` does), then fill in `full_crc` over the resulting map.
    pub fn finish(self) -> Result<Incremental, BuildError> {
        let mut inc = self.inc;
        let mut next = self.map.clone();
        let mut probe = inc.clone();
        probe.have_crc = false;
        next.apply_incremental(&probe)
            .map_err(|e| BuildError::Apply(e.to_string()))?;
        let mut cleaned = BTreeMap::new();
        for (pg, acting) in &next.pg_temp {
            let remove = match next.pools.get(&(pg.pool as i64)) {
                None => true,
                Some(_) => {
                    acting.iter().all(|o| next.is_down(*o))
                        || next.pg_to_raw_upmap(*pg).is_ok_and(|(_, up)| {
                            up.into_iter().filter(|o| next.is_up(*o)).collect::<Vec<_>>() == *acting
                        })
                }
            };
            if remove {
                cleaned.insert(*pg, Vec::new());
            }
        }
        if !cleaned.is_empty() {
            for (pg, v) in cleaned {
                if self.map.pg_temp.contains_key(&pg) {
                    inc.new_pg_temp.insert(pg, v);
                } else {
                    inc.new_pg_temp.remove(&pg);
                }
            }
            next = self.map.clone();
            let mut probe = inc.clone();
            probe.have_crc = false;
            next.apply_incremental(&probe)
                .map_err(|e| BuildError::Apply(e.to_string()))?;
        }
        let (_, crc) = next.encode_with_crc(inc.encode_features | features::RESERVED);
        inc.full_crc = crc;
        inc.have_crc = true;
        // The incremental's own bytes and crc, as the monitor publishes them.
        let (bytes, inc_crc) = inc.encode_with_crc(inc.encode_features | features::RESERVED);
        inc.inc_crc = inc_crc;
        inc.raw = Some(bytes);
        Ok(inc)
    }
}

/// Apply a built incremental and check the crc matched (it always should: a mismatch is a bug here or in apply).
pub fn advance(map: &mut OsdMap, inc: &Incremental) -> Result<(), BuildError> {
    match map.apply_incremental(inc) {
        Ok(CrcCheck::Match) | Ok(CrcCheck::NotChecked) => Ok(()),
        Ok(CrcCheck::Mismatch { expected, actual }) => Err(BuildError::Apply(format!(
            "full_crc mismatch: expected {expected:#x}, got {actual:#x}"
        ))),
        Err(e) => Err(BuildError::Apply(e.to_string())),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // test code
mod tests {
    use std::path::PathBuf;
    use std::process::Command;

    use denc::{Decode, Encode};

    use super::*;

    fn tools() -> bool {
        let ok = ["osdmaptool", "crushtool"]
            .iter()
            .all(|t| Command::new(t).arg("--help").output().is_ok());
        if !ok {
            assert!(
                std::env::var_os("FERRO_REQUIRE_CLUSTER").is_none(),
                "osdmaptool/crushtool not found but FERRO_REQUIRE_CLUSTER is set"
            );
            eprintln!("skipping: osdmaptool or crushtool not found");
        }
        ok
    }

    fn scratch(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("ferro-osdmap-build-{}-{name}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    fn run(tool: &str, args: &[&str]) -> String {
        let out = Command::new(tool).args(args).output().unwrap();
        assert!(
            out.status.success(),
            "{tool} {args:?}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    fn set(s: &str) -> Vec<i32> {
        s.trim_matches(|c| c == '[' || c == ']')
            .split(',')
            .filter(|x| !x.is_empty())
            .map(|x| x.trim().parse().unwrap())
            .collect()
    }

    /// Every PG of every pool: our up/acting (and primaries) equal `osdmaptool --test-map-pgs-dump-all`.
    fn compare_with_osdmaptool(m: &OsdMap, file: &str) -> usize {
        let mut n = 0;
        for &pool in m.pools.keys() {
            let out = run(
                "osdmaptool",
                &[file, "--test-map-pgs-dump-all", "--pool", &pool.to_string()],
            );
            for line in out.lines().filter(|l| l.starts_with(&format!("{pool}."))) {
                // "1.5 raw ([4,1], p4) up ([4,1], p4) acting ([4,1], p4)"
                let (pg, rest) = line.split_once(' ').unwrap();
                let seed = u32::from_str_radix(pg.split_once('.').unwrap().1, 16).unwrap();
                let sets: Vec<(Vec<i32>, i32)> = rest
                    .split(") ")
                    .map(|part| {
                        let inner = part.split_once('(').unwrap().1.trim_end_matches(')');
                        let (s, p) = inner.rsplit_once(", p").unwrap();
                        (set(s), p.parse().unwrap())
                    })
                    .collect();
                let ua = m.pg_to_up_acting_osds(PgId::new(pool as u64, seed)).unwrap();
                assert_eq!(sets[1], (ua.up.clone(), ua.up_primary), "{file}: up of {pg}");
                assert_eq!(
                    sets[2],
                    (ua.acting.clone(), ua.acting_primary),
                    "{file}: acting of {pg}"
                );
                n += 1;
            }
        }
        n
    }

    /// `crushtool --test` over x in 0..200 for `reps` replicas equals our `do_rule`.
    fn compare_with_crushtool(c: &CrushMap, file: &str, reps: usize) {
        let out = run(
            "crushtool",
            &[
                "-i",
                file,
                "--test",
                "--rule",
                "0",
                "--num-rep",
                &reps.to_string(),
                "--min-x",
                "0",
                "--max-x",
                "199",
                "--show-mappings",
            ],
        );
        let weights = vec![OSD_IN; c.max_devices as usize];
        let mut seen = 0;
        for line in out.lines().filter(|l| l.starts_with("CRUSH rule 0 x ")) {
            let rest = line.trim_start_matches("CRUSH rule 0 x ");
            let (x, s) = rest.split_once(' ').unwrap();
            let x: u32 = x.parse().unwrap();
            assert_eq!(c.do_rule(0, x, reps, &weights, None), set(s), "x {x}");
            seen += 1;
        }
        assert_eq!(seen, 200, "{out}");
    }

    #[test]
    fn built_maps_place_like_ceph_tools() {
        let shapes = [
            (1, 1, FailureDomain::Osd, 1u8, 8u32),
            (3, 1, FailureDomain::Host, 3, 16),
            (4, 3, FailureDomain::Host, 3, 64),
            (2, 3, FailureDomain::Osd, 2, 32),
            (5, 2, FailureDomain::Host, 2, 12),
        ];
        let round_trip = |m: &OsdMap| {
            let bytes = m.encoded(features::PACIFIC);
            let d = OsdMap::decode_all(bytes.clone()).unwrap();
            let mut again = d.clone();
            again.raw = None;
            assert_eq!(again.to_bytes(m.encoding_features() | features::RESERVED), bytes);
            d
        };
        if !tools() {
            for (h, per, dom, size, pgs) in shapes {
                let m = MapBuilder::new(h, per)
                    .failure_domain(dom)
                    .pool(PoolSpec::replicated("p", size, 1, pgs))
                    .build();
                round_trip(&m);
            }
            return;
        }
        let dir = scratch("shapes");
        for (i, (h, per, dom, size, pgs)) in shapes.into_iter().enumerate() {
            let m = MapBuilder::new(h, per)
                .failure_domain(dom)
                .pool(PoolSpec::replicated("rbd", size, size.div_ceil(2), pgs))
                .pool(PoolSpec::replicated("two", size.min(2), 1, pgs / 2 + 3))
                .build();
            let d = round_trip(&m);
            assert_eq!(d.max_osd, (h * per) as i32);
            let f = dir.join(format!("map{i}"));
            std::fs::write(&f, m.encoded(features::PACIFIC)).unwrap();
            let fs = f.to_str().unwrap();
            let print = run("osdmaptool", &[fs, "--print"]);
            assert!(print.contains(&format!("max_osd {}", h * per)), "{print}");
            assert!(print.contains("require_osd_release pacific"), "{print}");
            let n = compare_with_osdmaptool(&d, fs);
            assert_eq!(n as u32, pgs + pgs / 2 + 3);
            let cf = dir.join(format!("crush{i}"));
            std::fs::write(&cf, &m.crush).unwrap();
            let txt = dir.join(format!("crush{i}.txt"));
            run(
                "crushtool",
                &["-d", cf.to_str().unwrap(), "-o", txt.to_str().unwrap()],
            );
            let txt = std::fs::read_to_string(&txt).unwrap();
            assert!(
                txt.contains("alg straw2")
                    && txt.contains("host host0")
                    && txt.contains("rule replicated_rule"),
                "{txt}"
            );
            for reps in [1, 2, 3] {
                compare_with_crushtool(m.crush_map.as_ref().unwrap(), cf.to_str().unwrap(), reps);
            }
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn incrementals_move_the_map_like_a_monitor() {
        let mut m = MapBuilder::new(3, 2)
            .pool(PoolSpec::replicated("rbd", 3, 2, 16))
            .build();
        let tools = tools();
        let dir = scratch("inc");
        let check = |m: &OsdMap, tag: &str| {
            // Wire round trip of the full map, and (with the tools) Ceph's placement of it.
            let bytes = m.encoded(features::PACIFIC);
            let d = OsdMap::decode_all(bytes).unwrap();
            assert_eq!(d.epoch, m.epoch);
            if tools {
                let f = dir.join(tag);
                std::fs::write(&f, m.encoded(features::PACIFIC)).unwrap();
                compare_with_osdmaptool(&d, f.to_str().unwrap());
            }
        };
        check(&m, "e1");

        // osd.1 goes down: a new interval; the mon's up_thru/pg_temp machinery follows.
        let mut b = IncBuilder::new(&m);
        b.mark_down(1).unwrap();
        let inc = b.finish().unwrap();
        // The incremental goes over the wire and back unchanged.
        let wire = inc.raw.clone().unwrap();
        let back = Incremental::decode_all(wire.clone()).unwrap();
        assert_eq!(back.full_crc, inc.full_crc);
        advance(&mut m, &back).unwrap();
        assert!(m.is_down(1) && m.is_in(1));
        assert_eq!(m.osd_info[1].down_at, 2);
        check(&m, "e2");

        let pg = PgId::new(1, 0);
        let up = m.pg_to_up_acting_osds(pg).unwrap().up;
        let temp: Vec<i32> = (0..6)
            .filter(|o| *o != 1 && !up.contains(o))
            .take(1)
            .chain(up.clone())
            .collect();
        let mut b = IncBuilder::new(&m);
        b.mark_out(1).unwrap();
        b.set_pg_temp(pg, temp.clone());
        b.set_up_thru(0, 2).unwrap();
        let id = b.create_pool(&PoolSpec::replicated("new", 2, 1, 8));
        assert_eq!(id, 2);
        let inc = b.finish().unwrap();
        advance(&mut m, &inc).unwrap();
        assert!(m.is_out(1));
        assert_eq!(m.osd_info[0].up_thru, 2);
        assert_eq!(m.pg_to_up_acting_osds(pg).unwrap().acting, temp);
        assert_eq!(m.pool_name[&2], "new");
        check(&m, "e3");

        // osd.1 boots again with a new nonce; up_thru = boot epoch; pg_num grows; pool 2 goes away; the pg_temp
        // that now equals its up set (cleared explicitly) disappears.
        let mut b = IncBuilder::new(&m);
        b.mark_up(1, 77).unwrap();
        b.mark_in(1).unwrap();
        b.set_pg_num(1, 32).unwrap();
        b.delete_pool(2).unwrap();
        b.set_pg_temp(pg, Vec::new());
        assert!(b.set_pg_num(1, 4).is_err());
        let inc = b.finish().unwrap();
        advance(&mut m, &inc).unwrap();
        assert!(m.is_up(1) && m.is_in(1));
        assert_eq!(m.osd_info[1].up_from, 4);
        assert_eq!(m.osd_info[1].up_thru, 4);
        assert_eq!(m.client_addrs[1].0[0].nonce, 77);
        assert_eq!(m.pools[&1].pg_num, 32);
        assert!(!m.pools.contains_key(&2) && m.pg_temp.is_empty());
        check(&m, "e4");

        // A split in place keeps every child on its parent's OSDs until pgp_num follows.
        let before: Vec<Vec<i32>> = (0..32)
            .map(|s| m.pg_to_up_acting_osds(PgId::new(1, s)).unwrap().acting)
            .collect();
        let mut b = IncBuilder::new(&m);
        b.split_pg_num(1, 64).unwrap();
        let inc = b.finish().unwrap();
        advance(&mut m, &inc).unwrap();
        assert_eq!((m.pools[&1].pg_num, m.pools[&1].pgp_num), (64, 32));
        for s in 32..64u32 {
            let parent = (s & 31) as usize;
            let acting = m.pg_to_up_acting_osds(PgId::new(1, s)).unwrap().acting;
            assert_eq!(acting, before[parent], "child 1.{s:x} placed like its parent");
        }
        check(&m, "e4b");
        let mut b = IncBuilder::new(&m);
        b.set_pgp_num(1, 64).unwrap();
        let inc = b.finish().unwrap();
        advance(&mut m, &inc).unwrap();
        assert_eq!(m.pools[&1].pgp_num, 64);
        check(&m, "e4c");

        // A pg_temp naming only down OSDs is dropped by the monitor's cleanup.
        let mut b = IncBuilder::new(&m);
        b.mark_down(4).unwrap();
        b.set_pg_temp(PgId::new(1, 3), vec![4]);
        let inc = b.finish().unwrap();
        advance(&mut m, &inc).unwrap();
        assert!(m.pg_temp.is_empty());
        check(&m, "e5");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
