// SPDX-License-Identifier: LGPL-3.0-or-later
//! The CRUSH map as `CrushWrapper::encode`/`decode` (ceph/ceph `src/crush/CrushWrapper.cc`, v16.2.15) lay it out.
//!
//! Layout (all little-endian):
//! ```text
//! u32 magic 0x00010000, i32 max_buckets, u32 max_rules, i32 max_devices
//! max_buckets × { u32 alg (0 = empty slot) | i32 id, u16 type, u8 alg, u8 hash, u32 weight, u32 size,
//!                 size × i32 item, per-alg arrays }
//! max_rules   × { u32 exists | u32 len, u8 ruleset, u8 type, u8 min_size, u8 max_size, len × (u32 op, i32, i32) }
//! map<i32,string> type names, item names, rule names
//! u32 choose_local_tries, u32 choose_local_fallback_tries, u32 choose_total_tries,     -- each group optional
//! u32 chooseleaf_descend_once, u8 chooseleaf_vary_r, u8 straw_calc_version,            -- on decode (old maps
//! u32 allowed_bucket_algs, u8 chooseleaf_stable (TUNABLES5)                             -- end early)
//! map<i32,i32> class_map, map<i32,string> class_name, map<i32,map<i32,i32>> class_bucket   (SERVER_LUMINOUS)
//! u32 n, n × { i64 index, u32 m, m × { u32 bucket_index, u32 positions, positions × vector<u32>,
//!                                       vector<i32> ids } }                                (SERVER_LUMINOUS)
//! ```
//! Squid appends `u32 msr_descents, u32 msr_collision_tries`; we read them when present (Pacific ignores trailing
//! bytes) and never write them, since no Pacific peer expects them.
//!
//! Like Ceph, decoding "finalizes" the map: `max_devices` becomes one more than the largest device id found in any
//! bucket or in the name map, whatever the header said. Re-encoding therefore reproduces what a Pacific daemon would
//! write after reading the same bytes.

use std::collections::BTreeMap;

use bytes::Bytes;
use denc::{Decode, DecodeError, Decoder, Encode, Encoder, Result};

/// `CRUSH_MAGIC`.
pub const CRUSH_MAGIC: u32 = 0x0001_0000;

/// `CEPH_FEATURE_CRUSH_TUNABLES5` (bit 58, first incarnation): gates `chooseleaf_stable` on the wire.
pub const FEATURE_CRUSH_TUNABLES5: u64 = denc::features::CRUSH_TUNABLES5;
/// `CEPH_FEATUREMASK_SERVER_LUMINOUS` (bit 21, incarnation 2 = bit 57): gates device classes and choose_args.
/// `CRUSH_CHOOSE_ARGS` shares this mask.
pub const FEATUREMASK_SERVER_LUMINOUS: u64 = denc::features::MASK_SERVER_LUMINOUS;

/// Bucket algorithms (`CRUSH_BUCKET_*`).
pub const CRUSH_BUCKET_UNIFORM: u8 = 1;
pub const CRUSH_BUCKET_LIST: u8 = 2;
pub const CRUSH_BUCKET_TREE: u8 = 3;
pub const CRUSH_BUCKET_STRAW: u8 = 4;
pub const CRUSH_BUCKET_STRAW2: u8 = 5;

/// The smallest encoding of a rule step (`u32 op, i32 arg1, i32 arg2`).
const STEP_SIZE: usize = 12;

/// The per-algorithm part of a bucket. Weights are 16.16 fixed point (0x10000 = 1.0).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BucketKind {
    /// All items share one weight; choice is a hashed permutation.
    Uniform { item_weight: u32 },
    /// `item_weights[i]` and the running sums `sum_weights[i]` (items 0..=i).
    List {
        item_weights: Vec<u32>,
        sum_weights: Vec<u32>,
    },
    /// An implicit binary tree: `node_weights[n]` for node numbers `0..num_nodes`, leaves at odd numbers.
    Tree { num_nodes: u8, node_weights: Vec<u32> },
    /// Legacy straw: per-item weights and the precomputed straw lengths.
    Straw {
        item_weights: Vec<u32>,
        straws: Vec<u32>,
    },
    /// straw2: per-item weights only.
    Straw2 { item_weights: Vec<u32> },
}

impl BucketKind {
    /// The `CRUSH_BUCKET_*` number.
    pub fn alg(&self) -> u8 {
        match self {
            BucketKind::Uniform { .. } => CRUSH_BUCKET_UNIFORM,
            BucketKind::List { .. } => CRUSH_BUCKET_LIST,
            BucketKind::Tree { .. } => CRUSH_BUCKET_TREE,
            BucketKind::Straw { .. } => CRUSH_BUCKET_STRAW,
            BucketKind::Straw2 { .. } => CRUSH_BUCKET_STRAW2,
        }
    }
}

/// One bucket (`crush_bucket` + its algorithm's arrays).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bucket {
    /// Negative; the bucket sits in slot `-1 - id`.
    pub id: i32,
    pub bucket_type: u16,
    pub hash: u8,
    /// Total weight, 16.16 fixed point.
    pub weight: u32,
    /// Children: `>= 0` devices, `< 0` buckets.
    pub items: Vec<i32>,
    pub kind: BucketKind,
}

impl Bucket {
    pub fn alg(&self) -> u8 {
        self.kind.alg()
    }

    /// The weight of the item at `pos`, as `crush_get_bucket_item_weight` reports it (0 when out of range).
    pub fn item_weight(&self, pos: usize) -> u32 {
        if pos >= self.items.len() {
            return 0;
        }
        match &self.kind {
            BucketKind::Uniform { item_weight } => *item_weight,
            BucketKind::List { item_weights, .. }
            | BucketKind::Straw { item_weights, .. }
            | BucketKind::Straw2 { item_weights } => item_weights.get(pos).copied().unwrap_or(0),
            // Leaf of item i is node 2i+1.
            BucketKind::Tree { node_weights, .. } => node_weights.get(2 * pos + 1).copied().unwrap_or(0),
        }
    }
}

/// One rule step (`crush_rule_step`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RuleStep {
    pub op: u32,
    pub arg1: i32,
    pub arg2: i32,
}

/// Rule step opcodes (`CRUSH_RULE_*`).
pub mod op {
    pub const NOOP: u32 = 0;
    pub const TAKE: u32 = 1;
    pub const CHOOSE_FIRSTN: u32 = 2;
    pub const CHOOSE_INDEP: u32 = 3;
    pub const EMIT: u32 = 4;
    pub const CHOOSELEAF_FIRSTN: u32 = 6;
    pub const CHOOSELEAF_INDEP: u32 = 7;
    pub const SET_CHOOSE_TRIES: u32 = 8;
    pub const SET_CHOOSELEAF_TRIES: u32 = 9;
    pub const SET_CHOOSE_LOCAL_TRIES: u32 = 10;
    pub const SET_CHOOSE_LOCAL_FALLBACK_TRIES: u32 = 11;
    pub const SET_CHOOSELEAF_VARY_R: u32 = 12;
    pub const SET_CHOOSELEAF_STABLE: u32 = 13;
    /// Squid's multi-step-retry ops; Pacific does not know them.
    pub const SET_MSR_DESCENTS: u32 = 14;
    pub const SET_MSR_COLLISION_TRIES: u32 = 15;
    pub const CHOOSE_MSR: u32 = 16;
}

/// Rule types (`pg_pool_t::TYPE_*` values used as `crush_rule_mask::type`).
pub const RULE_TYPE_REPLICATED: u8 = 1;
pub const RULE_TYPE_ERASURE: u8 = 3;

/// One rule (`crush_rule`): the Pacific mask (ruleset, type, min/max size) and its steps.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    pub ruleset: u8,
    pub rule_type: u8,
    pub min_size: u8,
    pub max_size: u8,
    pub steps: Vec<RuleStep>,
}

/// The map-wide tunables (`crush_map` fields).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tunables {
    pub choose_local_tries: u32,
    pub choose_local_fallback_tries: u32,
    pub choose_total_tries: u32,
    pub chooseleaf_descend_once: u32,
    pub chooseleaf_vary_r: u8,
    pub chooseleaf_stable: u8,
    pub straw_calc_version: u8,
    pub allowed_bucket_algs: u32,
}

impl Tunables {
    /// `set_tunables_legacy()`: what a map that predates each tunable behaves as.
    pub const LEGACY: Tunables = Tunables {
        choose_local_tries: 2,
        choose_local_fallback_tries: 5,
        choose_total_tries: 19,
        chooseleaf_descend_once: 0,
        chooseleaf_vary_r: 0,
        chooseleaf_stable: 0,
        straw_calc_version: 0,
        // uniform | list | straw
        allowed_bucket_algs: (1 << 1) | (1 << 2) | (1 << 4),
    };

    /// The "optimal"/jewel profile Pacific creates new maps with.
    pub const OPTIMAL: Tunables = Tunables {
        choose_local_tries: 0,
        choose_local_fallback_tries: 0,
        choose_total_tries: 50,
        chooseleaf_descend_once: 1,
        chooseleaf_vary_r: 1,
        chooseleaf_stable: 1,
        straw_calc_version: 1,
        // uniform | list | straw | straw2
        allowed_bucket_algs: 54,
    };
}

/// Per-bucket replacement weights and ids (`crush_choose_arg`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ChooseArg {
    /// `weight_set[position][item]`; position = the replica slot being chosen (the last set serves the rest).
    pub weight_set: Vec<Vec<u32>>,
    /// Item ids hashed instead of the real ones (empty = use the bucket's items).
    pub ids: Vec<i32>,
}

impl ChooseArg {
    fn is_empty(&self) -> bool {
        self.weight_set.is_empty() && self.ids.is_empty()
    }
}

/// One choose_args set (`crush_choose_arg_map`), keyed by bucket slot (`-1 - bucket id`).
pub type ChooseArgMap = BTreeMap<u32, ChooseArg>;

/// The choose_args index Ceph falls back to when a pool has no set of its own (`DEFAULT_CHOOSE_ARGS`).
pub const DEFAULT_CHOOSE_ARGS: i64 = -1;

/// A decoded CRUSH map (`CrushWrapper`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CrushMap {
    /// Bucket slots; slot `i` holds the bucket with id `-1 - i`. The length is `max_buckets`.
    pub buckets: Vec<Option<Bucket>>,
    /// Rule slots by rule id. The length is `max_rules`.
    pub rules: Vec<Option<Rule>>,
    /// One more than the largest device id (recomputed on decode, as `CrushWrapper::finalize` does).
    pub max_devices: i32,
    pub type_names: BTreeMap<i32, String>,
    pub names: BTreeMap<i32, String>,
    pub rule_names: BTreeMap<i32, String>,
    pub tunables: Tunables,
    /// Device (or shadow bucket) id -> class id.
    pub class_map: BTreeMap<i32, i32>,
    /// Class id -> class name.
    pub class_names: BTreeMap<i32, String>,
    /// Bucket id -> (class id -> shadow bucket id).
    pub class_buckets: BTreeMap<i32, BTreeMap<i32, i32>>,
    pub choose_args: BTreeMap<i64, ChooseArgMap>,
    /// Squid's `(msr_descents, msr_collision_tries)` when the encoding carried them; never re-encoded.
    pub msr_tunables: Option<(u32, u32)>,
}

impl Default for CrushMap {
    fn default() -> Self {
        CrushMap {
            buckets: Vec::new(),
            rules: Vec::new(),
            max_devices: 0,
            type_names: BTreeMap::new(),
            names: BTreeMap::new(),
            rule_names: BTreeMap::new(),
            tunables: Tunables::OPTIMAL,
            class_map: BTreeMap::new(),
            class_names: BTreeMap::new(),
            class_buckets: BTreeMap::new(),
            choose_args: BTreeMap::new(),
            msr_tunables: None,
        }
    }
}

fn invalid(detail: impl Into<String>) -> DecodeError {
    DecodeError::invalid("CrushWrapper", detail)
}

/// A count of items each at least `min_size` bytes long, bounded by what is left of the input.
fn count(d: &mut Decoder, what: &'static str, min_size: usize) -> Result<usize> {
    d.length(what, min_size)
}

fn u32s(d: &mut Decoder, n: usize) -> Result<Vec<u32>> {
    if n.saturating_mul(4) > d.remaining() {
        return Err(DecodeError::Truncated {
            offset: d.offset(),
            needed: n.saturating_mul(4),
            remaining: d.remaining(),
        });
    }
    (0..n).map(|_| d.u32()).collect()
}

fn i32s(d: &mut Decoder, n: usize) -> Result<Vec<i32>> {
    Ok(u32s(d, n)?.into_iter().map(|v| v as i32).collect())
}

/// `decode_32_or_64_string_map`: an old encoder wrote 64-bit keys; a zero where the string length should be means
/// the real length follows. An empty name is refused: Ceph would accept it here but re-encode it as a bare zero
/// length that no decoder (Ceph's included) reads back, and valid CRUSH names are never empty.
fn decode_name_map(d: &mut Decoder) -> Result<BTreeMap<i32, String>> {
    let n = count(d, "name map", 8)?;
    let mut m = BTreeMap::new();
    for _ in 0..n {
        let key = d.i32()?;
        let mut len = d.u32()?;
        if len == 0 {
            len = d.u32()?;
        }
        if len == 0 {
            return Err(invalid(format!("empty name for id {key}")));
        }
        let offset = d.offset();
        let raw = d.take_slice(len as usize)?;
        let s = String::from_utf8(raw.to_vec())
            .map_err(|e| invalid(format!("name at offset {offset} is not UTF-8: {e}")))?;
        m.insert(key, s);
    }
    Ok(m)
}

fn decode_bucket(d: &mut Decoder, slot: usize) -> Result<Option<Bucket>> {
    let alg = d.u32()?;
    if alg == 0 {
        return Ok(None);
    }
    if !(u32::from(CRUSH_BUCKET_UNIFORM)..=u32::from(CRUSH_BUCKET_STRAW2)).contains(&alg) {
        return Err(invalid(format!("unsupported bucket algorithm: {alg}")));
    }
    let id = d.i32()?;
    let bucket_type = d.u16()?;
    let inner_alg = d.u8()?;
    let hash = d.u8()?;
    let weight = d.u32()?;
    let size = d.u32()? as usize;
    // Ceph sizes the struct by the outer alg and fills arrays by the inner one; they must agree.
    if u32::from(inner_alg) != alg {
        return Err(invalid(format!(
            "bucket slot {slot}: alg {alg} in the slot header but {inner_alg} in the bucket"
        )));
    }
    let items = i32s(d, size)?;
    let kind = match inner_alg {
        CRUSH_BUCKET_UNIFORM => BucketKind::Uniform {
            item_weight: d.u32()?,
        },
        CRUSH_BUCKET_LIST => {
            let pairs = u32s(d, size.saturating_mul(2))?;
            BucketKind::List {
                item_weights: pairs.iter().step_by(2).copied().collect(),
                sum_weights: pairs.iter().skip(1).step_by(2).copied().collect(),
            }
        }
        CRUSH_BUCKET_TREE => {
            let num_nodes = d.u8()?;
            BucketKind::Tree {
                num_nodes,
                node_weights: u32s(d, usize::from(num_nodes))?,
            }
        }
        CRUSH_BUCKET_STRAW => {
            let pairs = u32s(d, size.saturating_mul(2))?;
            BucketKind::Straw {
                item_weights: pairs.iter().step_by(2).copied().collect(),
                straws: pairs.iter().skip(1).step_by(2).copied().collect(),
            }
        }
        _ => BucketKind::Straw2 {
            item_weights: u32s(d, size)?,
        },
    };
    Ok(Some(Bucket {
        id,
        bucket_type,
        hash,
        weight,
        items,
        kind,
    }))
}

fn decode_rule(d: &mut Decoder) -> Result<Option<Rule>> {
    let exists = d.u32()?;
    if exists == 0 {
        return Ok(None);
    }
    let len = d.u32()? as usize;
    let ruleset = d.u8()?;
    let rule_type = d.u8()?;
    let min_size = d.u8()?;
    let max_size = d.u8()?;
    if len.saturating_mul(STEP_SIZE) > d.remaining() {
        return Err(DecodeError::Truncated {
            offset: d.offset(),
            needed: len.saturating_mul(STEP_SIZE),
            remaining: d.remaining(),
        });
    }
    let mut steps = Vec::with_capacity(len);
    for _ in 0..len {
        steps.push(RuleStep {
            op: d.u32()?,
            arg1: d.i32()?,
            arg2: d.i32()?,
        });
    }
    Ok(Some(Rule {
        ruleset,
        rule_type,
        min_size,
        max_size,
        steps,
    }))
}

impl CrushMap {
    /// Decode a CRUSH map. `d` must span exactly the map (for a map inside an OSDMap: the decoder over its `crush`
    /// bufferlist), because, as in Ceph, the optional trailing sections are recognised by whether input remains.
    /// Bytes after the last section this decoder knows are skipped, as Pacific ignores them.
    pub fn decode(d: &mut Decoder) -> Result<CrushMap> {
        let magic = d.u32()?;
        if magic != CRUSH_MAGIC {
            return Err(invalid(format!("bad magic number {magic:#x}")));
        }
        let max_buckets = d.i32()?;
        let max_rules = d.u32()?;
        let _encoded_max_devices = d.i32()?;
        // Every bucket and rule slot takes at least 4 bytes, which bounds both counts by the input.
        let max_buckets = usize::try_from(max_buckets)
            .map_err(|_| invalid(format!("negative max_buckets {max_buckets}")))?;
        let max_rules = max_rules as usize;
        if max_buckets.saturating_add(max_rules).saturating_mul(4) > d.remaining() {
            return Err(DecodeError::Truncated {
                offset: d.offset(),
                needed: max_buckets.saturating_add(max_rules).saturating_mul(4),
                remaining: d.remaining(),
            });
        }

        let mut m = CrushMap {
            tunables: Tunables::LEGACY,
            ..CrushMap::default()
        };
        m.buckets.reserve(max_buckets);
        for slot in 0..max_buckets {
            m.buckets.push(decode_bucket(d, slot)?);
        }
        m.rules.reserve(max_rules);
        for _ in 0..max_rules {
            m.rules.push(decode_rule(d)?);
        }
        m.type_names = decode_name_map(d)?;
        m.names = decode_name_map(d)?;
        m.rule_names = decode_name_map(d)?;

        let t = &mut m.tunables;
        if !d.is_empty() {
            t.choose_local_tries = d.u32()?;
            t.choose_local_fallback_tries = d.u32()?;
            t.choose_total_tries = d.u32()?;
        }
        if !d.is_empty() {
            t.chooseleaf_descend_once = d.u32()?;
        }
        if !d.is_empty() {
            t.chooseleaf_vary_r = d.u8()?;
        }
        if !d.is_empty() {
            t.straw_calc_version = d.u8()?;
        }
        if !d.is_empty() {
            t.allowed_bucket_algs = d.u32()?;
        }
        if !d.is_empty() {
            t.chooseleaf_stable = d.u8()?;
        }
        if !d.is_empty() {
            m.class_map = BTreeMap::decode(d)?;
            m.class_names = BTreeMap::decode(d)?;
            m.class_buckets = BTreeMap::decode(d)?;
        }
        if !d.is_empty() {
            m.choose_args = m.decode_choose_args(d)?;
        }
        if d.remaining() >= 8 {
            m.msr_tunables = Some((d.u32()?, d.u32()?));
        }
        d.skip(d.remaining())?;
        m.finalize();
        Ok(m)
    }

    /// Decode a whole buffer holding one CRUSH map.
    pub fn decode_bytes(buf: impl Into<Bytes>) -> Result<CrushMap> {
        CrushMap::decode(&mut Decoder::new(buf))
    }

    fn decode_choose_args(&self, d: &mut Decoder) -> Result<BTreeMap<i64, ChooseArgMap>> {
        let n = count(d, "choose_args", 12)?;
        let mut all = BTreeMap::new();
        for _ in 0..n {
            let index = d.i64()?;
            let entries = count(d, "choose_arg_map", 12)?;
            let mut arg_map = ChooseArgMap::new();
            for _ in 0..entries {
                let bucket_index = d.u32()?;
                let Some(slot) = self.buckets.get(bucket_index as usize) else {
                    return Err(invalid(format!(
                        "choose_args {index}: bucket index {bucket_index} >= max_buckets {}",
                        self.buckets.len()
                    )));
                };
                let positions = count(d, "weight_set", 4)?;
                let mut weight_set = Vec::with_capacity(positions);
                for _ in 0..positions {
                    let size = count(d, "weight_set weights", 4)?;
                    weight_set.push(u32s(d, size)?);
                }
                let ids_size = count(d, "choose_args ids", 4)?;
                if ids_size != 0 {
                    let bucket_size = slot.as_ref().map(|b| b.items.len());
                    if bucket_size != Some(ids_size) {
                        return Err(invalid(format!(
                            "choose_args {index}: {ids_size} ids for bucket slot {bucket_index} of size {bucket_size:?}"
                        )));
                    }
                }
                let ids = i32s(d, ids_size)?;
                arg_map.insert(bucket_index, ChooseArg { weight_set, ids });
            }
            all.insert(index, arg_map);
        }
        Ok(all)
    }

    /// `crush_finalize` + `CrushWrapper::finalize`: max_devices from the largest device in any bucket, raised to
    /// cover named devices.
    pub fn finalize(&mut self) {
        let mut max_devices = 0i32;
        for b in self.buckets.iter().flatten() {
            for &item in &b.items {
                if item >= max_devices {
                    max_devices = item.saturating_add(1);
                }
            }
        }
        if let Some((&last, _)) = self.names.last_key_value()
            && last >= max_devices
        {
            max_devices = last.saturating_add(1);
        }
        self.max_devices = max_devices;
    }

    /// Encode for a peer with `e.features()`, as `CrushWrapper::encode` does.
    pub fn encode(&self, e: &mut Encoder) {
        let features = e.features();
        let luminous = features & FEATUREMASK_SERVER_LUMINOUS == FEATUREMASK_SERVER_LUMINOUS;
        e.u32(CRUSH_MAGIC);
        e.i32(self.buckets.len() as i32);
        e.u32(self.rules.len() as u32);
        e.i32(self.max_devices);

        // A pre-Luminous peer cannot hold choose_args; it gets the first set's position-0 weights baked into the
        // straw2 buckets instead (Ceph asserts that the set is "compatible" there; we take it as it is).
        let compat_args = if luminous {
            None
        } else {
            self.choose_args.values().next()
        };

        for (slot, b) in self.buckets.iter().enumerate() {
            let Some(b) = b else {
                e.u32(0);
                continue;
            };
            e.u32(u32::from(b.alg()));
            e.i32(b.id);
            e.u16(b.bucket_type);
            e.u8(b.alg());
            e.u8(b.hash);
            e.u32(b.weight);
            e.u32(b.items.len() as u32);
            for &item in &b.items {
                e.i32(item);
            }
            match &b.kind {
                BucketKind::Uniform { item_weight } => e.u32(*item_weight),
                BucketKind::List {
                    item_weights,
                    sum_weights,
                } => {
                    for j in 0..b.items.len() {
                        e.u32(item_weights.get(j).copied().unwrap_or(0));
                        e.u32(sum_weights.get(j).copied().unwrap_or(0));
                    }
                }
                BucketKind::Tree {
                    num_nodes,
                    node_weights,
                } => {
                    e.u8(*num_nodes);
                    for j in 0..usize::from(*num_nodes) {
                        e.u32(node_weights.get(j).copied().unwrap_or(0));
                    }
                }
                BucketKind::Straw { item_weights, straws } => {
                    for j in 0..b.items.len() {
                        e.u32(item_weights.get(j).copied().unwrap_or(0));
                        e.u32(straws.get(j).copied().unwrap_or(0));
                    }
                }
                BucketKind::Straw2 { item_weights } => {
                    let compat = compat_args
                        .and_then(|a| a.get(&(slot as u32)))
                        .and_then(|a| a.weight_set.first());
                    let weights = compat.unwrap_or(item_weights);
                    for j in 0..b.items.len() {
                        e.u32(weights.get(j).copied().unwrap_or(0));
                    }
                }
            }
        }

        for r in &self.rules {
            let Some(r) = r else {
                e.u32(0);
                continue;
            };
            e.u32(1);
            e.u32(r.steps.len() as u32);
            e.u8(r.ruleset);
            e.u8(r.rule_type);
            e.u8(r.min_size);
            e.u8(r.max_size);
            for s in &r.steps {
                e.u32(s.op);
                e.i32(s.arg1);
                e.i32(s.arg2);
            }
        }

        self.type_names.encode(e);
        self.names.encode(e);
        self.rule_names.encode(e);

        let t = &self.tunables;
        e.u32(t.choose_local_tries);
        e.u32(t.choose_local_fallback_tries);
        e.u32(t.choose_total_tries);
        e.u32(t.chooseleaf_descend_once);
        e.u8(t.chooseleaf_vary_r);
        e.u8(t.straw_calc_version);
        e.u32(t.allowed_bucket_algs);
        if features & FEATURE_CRUSH_TUNABLES5 != 0 {
            e.u8(t.chooseleaf_stable);
        }

        if luminous {
            self.class_map.encode(e);
            self.class_names.encode(e);
            self.class_buckets.encode(e);

            e.u32(self.choose_args.len() as u32);
            for (index, arg_map) in &self.choose_args {
                e.i64(*index);
                e.u32(arg_map.values().filter(|a| !a.is_empty()).count() as u32);
                for (bucket_index, arg) in arg_map.iter().filter(|(_, a)| !a.is_empty()) {
                    e.u32(*bucket_index);
                    e.u32(arg.weight_set.len() as u32);
                    for ws in &arg.weight_set {
                        ws.encode(e);
                    }
                    arg.ids.encode(e);
                }
            }
        }
    }

    /// The bucket with id `id` (< 0), if it exists.
    pub fn bucket(&self, id: i32) -> Option<&Bucket> {
        let slot = usize::try_from(-1i64 - i64::from(id)).ok()?;
        self.buckets.get(slot)?.as_ref()
    }

    /// The rule with rule id `id`.
    pub fn rule(&self, id: usize) -> Option<&Rule> {
        self.rules.get(id)?.as_ref()
    }

    /// The rule id of the rule named `name`.
    pub fn rule_id_by_name(&self, name: &str) -> Option<usize> {
        self.rule_names
            .iter()
            .find(|(_, n)| n.as_str() == name)
            .and_then(|(&id, _)| usize::try_from(id).ok())
    }

    /// The id of the item (device or bucket) named `name`.
    pub fn item_id_by_name(&self, name: &str) -> Option<i32> {
        self.names
            .iter()
            .find(|(_, n)| n.as_str() == name)
            .map(|(&id, _)| id)
    }

    /// `CrushWrapper::find_rule(ruleset, type, size)` (Pacific): the first rule id whose mask matches. The pool's
    /// `crush_rule` field is the ruleset here; Pacific's fast path (rule id == ruleset) gives the same answer.
    pub fn find_rule(&self, ruleset: i32, rule_type: i32, size: i32) -> Option<usize> {
        self.rules.iter().position(|r| {
            r.as_ref().is_some_and(|r| {
                i32::from(r.ruleset) == ruleset
                    && i32::from(r.rule_type) == rule_type
                    && i32::from(r.min_size) <= size
                    && i32::from(r.max_size) >= size
            })
        })
    }

    /// Whether any rule uses an opcode Pacific does not know (Squid's MSR steps). Pacific would silently skip such
    /// steps and map wrongly; callers that must not mis-place data can refuse such maps.
    pub fn has_unknown_rule_ops(&self) -> bool {
        self.rules
            .iter()
            .flatten()
            .flat_map(|r| &r.steps)
            .any(|s| s.op > op::SET_CHOOSELEAF_STABLE || s.op == 5)
    }
}

impl Decode for CrushMap {
    fn decode(d: &mut Decoder) -> Result<Self> {
        CrushMap::decode(d)
    }
}

impl Encode for CrushMap {
    fn encode(&self, e: &mut Encoder) {
        CrushMap::encode(self, e)
    }
}
