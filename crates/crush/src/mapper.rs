// SPDX-License-Identifier: LGPL-3.0-or-later
//! `crush_do_rule` and the bucket choosers, following the behaviour of ceph/ceph `src/crush/mapper.c` (Pacific)
//! decision for decision: the same hash inputs, the same retry counters and the same order of rejections, so that
//! every mapping matches `crushtool --test` and the OSDMap placement of a real cluster.
//!
//! Where the C code would read out of bounds or loop forever on a malformed map (a rule naming a missing bucket,
//! a bucket whose arrays are shorter than its item list, a degenerate tree) we pick a safe, deterministic outcome
//! instead: the item counts as unusable. Valid maps never reach those paths.

use crate::hash::{CRUSH_HASH_RJENKINS1, crush_hash32_2, crush_hash32_3, crush_hash32_4};
use crate::ln::crush_ln;
use crate::map::{
    Bucket, BucketKind, CRUSH_BUCKET_UNIFORM, ChooseArg, ChooseArgMap, CrushMap, DEFAULT_CHOOSE_ARGS, op,
};

/// The absence of an item: holes in `indep` (erasure-coded) results.
pub const CRUSH_ITEM_NONE: i32 = 0x7fff_ffff;
/// A position not decided yet (internal to `indep`).
pub const CRUSH_ITEM_UNDEF: i32 = 0x7fff_fffe;

/// A device weight meaning "fully in" (1.0 in 16.16 fixed point).
pub const WEIGHT_IN: u32 = 0x10000;

/// Everything one `crush_do_rule` call shares between its recursive choosers.
struct Mapper<'a> {
    map: &'a CrushMap,
    weights: &'a [u32],
    args: Option<&'a ChooseArgMap>,
    x: u32,
}

/// Parameters of one `crush_choose_firstn` call.
#[derive(Clone, Copy)]
struct FirstnParams {
    numrep: i32,
    item_type: i32,
    out_size: i32,
    tries: u32,
    recurse_tries: u32,
    local_retries: u32,
    local_fallback_retries: u32,
    recurse_to_leaf: bool,
    vary_r: u32,
    stable: u32,
    parent_r: i32,
}

/// Parameters of one `crush_choose_indep` call.
#[derive(Clone, Copy)]
struct IndepParams {
    left: i32,
    numrep: i32,
    item_type: i32,
    tries: u32,
    recurse_tries: u32,
    recurse_to_leaf: bool,
    parent_r: i32,
}

/// What a chooser learns about a picked item.
enum ItemClass<'a> {
    /// A device (type 0).
    Device,
    /// A bucket of the given type.
    Bucket(&'a Bucket),
    /// A negative id with no bucket behind it.
    Missing,
}

impl<'a> Mapper<'a> {
    fn classify(&self, item: i32) -> ItemClass<'a> {
        if item >= 0 {
            return ItemClass::Device;
        }
        match self.map.bucket(item) {
            Some(b) => ItemClass::Bucket(b),
            None => ItemClass::Missing,
        }
    }

    /// The deepest descent a valid (acyclic) hierarchy allows. The C code follows a cycle in a malformed map
    /// forever; we treat the item as unusable instead, which changes nothing for valid maps.
    fn max_depth(&self) -> usize {
        self.map.buckets.len()
    }

    fn arg_for(&self, bucket: &Bucket) -> Option<&'a ChooseArg> {
        let slot = u32::try_from(-1i64 - i64::from(bucket.id)).ok()?;
        self.args?.get(&slot)
    }

    /// `is_out`: a device whose reweight is below 1.0 is kept for a hashed fraction of inputs.
    fn is_out(&self, item: i32) -> bool {
        let Ok(idx) = usize::try_from(item) else {
            return true;
        };
        let Some(&w) = self.weights.get(idx) else {
            return true;
        };
        if w >= WEIGHT_IN {
            return false;
        }
        if w == 0 {
            return true;
        }
        (crush_hash32_2(CRUSH_HASH_RJENKINS1, self.x, item as u32) & 0xffff) >= w
    }

    /// `bucket_perm_choose`: item `r mod size` of a hash-driven permutation of the bucket. Ceph caches the partial
    /// permutation per call; it is a pure function of (x, bucket, position), so we recompute it.
    fn perm_choose(&self, b: &Bucket, r: i32) -> i32 {
        let size = b.items.len() as u32;
        let pr = (r as u32) % size;
        let hash = |p: u32| crush_hash32_3(b.hash, self.x, b.id as u32, p);
        let s = if pr == 0 {
            hash(0) % size
        } else {
            let mut perm: Vec<u32> = (0..size).collect();
            for p in 0..=pr {
                if p < size - 1 {
                    let i = hash(p) % (size - p);
                    if i != 0 {
                        perm.swap((p + i) as usize, p as usize);
                    }
                }
            }
            perm[pr as usize]
        };
        b.items[s as usize]
    }

    fn list_choose(&self, b: &Bucket, item_weights: &[u32], sum_weights: &[u32], r: i32) -> i32 {
        for i in (0..b.items.len()).rev() {
            let item = b.items[i];
            let mut w =
                u64::from(crush_hash32_4(b.hash, self.x, item as u32, r as u32, b.id as u32) & 0xffff);
            w = (w * u64::from(sum_weights.get(i).copied().unwrap_or(0))) >> 16;
            if w < u64::from(item_weights.get(i).copied().unwrap_or(0)) {
                return item;
            }
        }
        b.items[0]
    }

    fn tree_choose(&self, b: &Bucket, num_nodes: u8, node_weights: &[u32], r: i32) -> i32 {
        let weight = |n: u32| u64::from(node_weights.get(n as usize).copied().unwrap_or(0));
        let mut n = u32::from(num_nodes >> 1);
        // Node 0 has no children (the C loop would never end); treat such a tree as pointing at item 0.
        while n != 0 && n & 1 == 0 {
            let h = n.trailing_zeros();
            let t = (u64::from(crush_hash32_4(b.hash, self.x, n, r as u32, b.id as u32)) * weight(n)) >> 32;
            let left = n - (1 << (h - 1));
            n = if t < weight(left) {
                left
            } else {
                n + (1 << (h - 1))
            };
        }
        b.items.get((n >> 1) as usize).copied().unwrap_or(CRUSH_ITEM_NONE)
    }

    fn straw_choose(&self, b: &Bucket, straws: &[u32], r: i32) -> i32 {
        let mut high = 0;
        let mut high_draw = 0u64;
        for (i, &item) in b.items.iter().enumerate() {
            let draw = u64::from(crush_hash32_3(b.hash, self.x, item as u32, r as u32) & 0xffff)
                * u64::from(straws.get(i).copied().unwrap_or(0));
            if i == 0 || draw > high_draw {
                high = i;
                high_draw = draw;
            }
        }
        b.items[high]
    }

    /// straw2: each item draws `ln(u) / weight` (u uniform in 16 bits); the largest draw wins, the first on ties.
    /// choose_args may replace the weights (per output position) and the ids fed to the hash.
    fn straw2_choose(
        &self,
        b: &Bucket,
        item_weights: &[u32],
        r: i32,
        arg: Option<&ChooseArg>,
        position: i32,
    ) -> i32 {
        let weights: &[u32] = match arg {
            Some(a) if !a.weight_set.is_empty() => {
                let last = a.weight_set.len() - 1;
                let pos = usize::try_from(position).unwrap_or(0).min(last);
                &a.weight_set[pos]
            }
            _ => item_weights,
        };
        let ids: &[i32] = match arg {
            Some(a) if !a.ids.is_empty() => &a.ids,
            _ => &b.items,
        };
        let mut high = 0;
        let mut high_draw = 0i64;
        for i in 0..b.items.len() {
            let w = weights.get(i).copied().unwrap_or(0);
            let draw = if w != 0 {
                let id = ids.get(i).copied().unwrap_or(b.items[i]);
                let u = crush_hash32_3(b.hash, self.x, id as u32, r as u32) & 0xffff;
                let ln = (crush_ln(u as u16) as i64).wrapping_sub(0x1_0000_0000_0000);
                ln / i64::from(w)
            } else {
                i64::MIN
            };
            if i == 0 || draw > high_draw {
                high = i;
                high_draw = draw;
            }
        }
        b.items[high]
    }

    /// `crush_bucket_choose`; the bucket must not be empty.
    fn bucket_choose(&self, b: &Bucket, r: i32, position: i32) -> i32 {
        debug_assert!(!b.items.is_empty());
        match &b.kind {
            BucketKind::Uniform { .. } => self.perm_choose(b, r),
            BucketKind::List {
                item_weights,
                sum_weights,
            } => self.list_choose(b, item_weights, sum_weights, r),
            BucketKind::Tree {
                num_nodes,
                node_weights,
            } => self.tree_choose(b, *num_nodes, node_weights, r),
            BucketKind::Straw { straws, .. } => self.straw_choose(b, straws, r),
            BucketKind::Straw2 { item_weights } => {
                self.straw2_choose(b, item_weights, r, self.arg_for(b), position)
            }
        }
    }

    /// `crush_choose_firstn`: fill `out[outpos..]` with up to `numrep` distinct items of `item_type` below `bucket`,
    /// retrying with a new `r` on collisions and rejections; with `recurse_to_leaf`, also one device under each
    /// into `out2`. Returns the new `outpos`.
    fn choose_firstn(
        &self,
        bucket: &'a Bucket,
        out: &mut [i32],
        mut outpos: usize,
        mut out2: Option<&mut [i32]>,
        p: FirstnParams,
    ) -> usize {
        let mut count = p.out_size;
        let mut rep: i32 = if p.stable != 0 { 0 } else { outpos as i32 };
        while rep < p.numrep && count > 0 {
            let mut ftotal: u32 = 0;
            let mut skip_rep = false;
            let mut item = 0i32;
            'descent: loop {
                let mut retry_descent = false;
                let mut inb: &'a Bucket = bucket;
                let mut depth = 0usize;
                let mut flocal: u32 = 0;
                loop {
                    let mut collide = false;
                    let mut retry_bucket = false;
                    let r = rep.wrapping_add(p.parent_r).wrapping_add(ftotal as i32);
                    let reject;
                    let in_size = inb.items.len() as u32;
                    if in_size == 0 {
                        reject = true;
                    } else {
                        item = if p.local_fallback_retries > 0
                            && flocal >= (in_size >> 1)
                            && flocal > p.local_fallback_retries
                        {
                            self.perm_choose(inb, r)
                        } else {
                            self.bucket_choose(inb, r, outpos as i32)
                        };
                        if item >= self.map.max_devices {
                            skip_rep = true;
                            break 'descent;
                        }
                        let class = self.classify(item);
                        let itemtype = match class {
                            ItemClass::Device => 0,
                            ItemClass::Bucket(b) => i32::from(b.bucket_type),
                            ItemClass::Missing => -1,
                        };
                        if itemtype != p.item_type {
                            match class {
                                ItemClass::Bucket(b) if depth < self.max_depth() => {
                                    inb = b;
                                    depth += 1;
                                    continue;
                                }
                                _ => {
                                    skip_rep = true;
                                    break 'descent;
                                }
                            }
                        }
                        collide = out[..outpos].contains(&item);
                        let mut rej = false;
                        if !collide && p.recurse_to_leaf {
                            if let ItemClass::Bucket(sub) = class {
                                let sub_r = if p.vary_r != 0 {
                                    r.checked_shr(p.vary_r - 1).unwrap_or(if r < 0 { -1 } else { 0 })
                                } else {
                                    0
                                };
                                let leaf_params = FirstnParams {
                                    numrep: if p.stable != 0 { 1 } else { outpos as i32 + 1 },
                                    item_type: 0,
                                    out_size: count,
                                    tries: p.recurse_tries,
                                    recurse_tries: 0,
                                    recurse_to_leaf: false,
                                    parent_r: sub_r,
                                    ..p
                                };
                                let got = match out2.as_deref_mut() {
                                    Some(o2) => self.choose_firstn(sub, o2, outpos, None, leaf_params),
                                    None => outpos,
                                };
                                if got <= outpos {
                                    rej = true;
                                }
                            } else if let Some(o2) = out2.as_deref_mut() {
                                o2[outpos] = item;
                            }
                        }
                        if !rej && !collide && itemtype == 0 {
                            rej = self.is_out(item);
                        }
                        reject = rej;
                    }
                    if reject || collide {
                        ftotal += 1;
                        flocal += 1;
                        // First retry locally (a few times on collision, or exhaustively with the fallback
                        // permutation), then re-descend from the top, then give up on this replica.
                        let local = collide && flocal <= p.local_retries;
                        let fallback = p.local_fallback_retries > 0
                            && flocal <= in_size.wrapping_add(p.local_fallback_retries);
                        if local || fallback {
                            retry_bucket = true;
                        } else if ftotal < p.tries {
                            retry_descent = true;
                        } else {
                            skip_rep = true;
                        }
                    }
                    if !retry_bucket {
                        break;
                    }
                }
                if !retry_descent {
                    break;
                }
            }
            rep += 1;
            if skip_rep {
                continue;
            }
            out[outpos] = item;
            outpos += 1;
            count -= 1;
        }
        outpos
    }

    /// `crush_choose_indep`: positionally stable choice of `left` items into `out[outpos..outpos+left]`; a position
    /// that cannot be filled becomes CRUSH_ITEM_NONE instead of shifting the others.
    fn choose_indep(
        &self,
        bucket: &'a Bucket,
        out: &mut [i32],
        outpos: usize,
        mut out2: Option<&mut [i32]>,
        p: IndepParams,
    ) {
        let mut left = p.left;
        let endpos = outpos + usize::try_from(p.left).unwrap_or(0);
        for rep in outpos..endpos {
            out[rep] = CRUSH_ITEM_UNDEF;
            if let Some(o2) = out2.as_deref_mut() {
                o2[rep] = CRUSH_ITEM_UNDEF;
            }
        }
        let mut ftotal: u32 = 0;
        while left > 0 && ftotal < p.tries {
            for rep in outpos..endpos {
                if out[rep] != CRUSH_ITEM_UNDEF {
                    continue;
                }
                let mut inb: &'a Bucket = bucket;
                let mut depth = 0usize;
                loop {
                    // The choice depends on the position, also in the nested call, so a bucket picked for
                    // another position tends to yield a different item here.
                    let mut r = (rep as i32).wrapping_add(p.parent_r);
                    let in_size = inb.items.len() as u32;
                    let numrep = p.numrep as u32;
                    if inb.alg() == CRUSH_BUCKET_UNIFORM && numrep != 0 && in_size.is_multiple_of(numrep) {
                        r = r.wrapping_add(numrep.wrapping_add(1).wrapping_mul(ftotal) as i32);
                    } else {
                        r = r.wrapping_add(numrep.wrapping_mul(ftotal) as i32);
                    }
                    if in_size == 0 {
                        break;
                    }
                    let item = self.bucket_choose(inb, r, outpos as i32);
                    let mut give_up = item >= self.map.max_devices;
                    let class = self.classify(item);
                    let itemtype = match class {
                        ItemClass::Device => 0,
                        ItemClass::Bucket(b) => i32::from(b.bucket_type),
                        ItemClass::Missing => -1,
                    };
                    if !give_up && itemtype != p.item_type {
                        match class {
                            ItemClass::Bucket(b) if depth < self.max_depth() => {
                                inb = b;
                                depth += 1;
                                continue;
                            }
                            _ => give_up = true,
                        }
                    }
                    if give_up {
                        out[rep] = CRUSH_ITEM_NONE;
                        if let Some(o2) = out2.as_deref_mut() {
                            o2[rep] = CRUSH_ITEM_NONE;
                        }
                        left -= 1;
                        break;
                    }
                    if out[outpos..endpos].contains(&item) {
                        break;
                    }
                    if p.recurse_to_leaf {
                        if let ItemClass::Bucket(sub) = class {
                            if let Some(o2) = out2.as_deref_mut() {
                                let leaf_params = IndepParams {
                                    left: 1,
                                    numrep: p.numrep,
                                    item_type: 0,
                                    tries: p.recurse_tries,
                                    recurse_tries: 0,
                                    recurse_to_leaf: false,
                                    parent_r: r,
                                };
                                self.choose_indep(sub, o2, rep, None, leaf_params);
                                if o2[rep] == CRUSH_ITEM_NONE {
                                    break;
                                }
                            }
                        } else if let Some(o2) = out2.as_deref_mut() {
                            o2[rep] = item;
                        }
                    }
                    if itemtype == 0 && self.is_out(item) {
                        break;
                    }
                    out[rep] = item;
                    left -= 1;
                    break;
                }
            }
            ftotal += 1;
        }
        for rep in outpos..endpos {
            if out[rep] == CRUSH_ITEM_UNDEF {
                out[rep] = CRUSH_ITEM_NONE;
            }
            if let Some(o2) = out2.as_deref_mut()
                && o2[rep] == CRUSH_ITEM_UNDEF
            {
                o2[rep] = CRUSH_ITEM_NONE;
            }
        }
    }
}

impl CrushMap {
    /// The choose_args set a pool uses (`choose_args_get_with_fallback`): its own, else the default (-1), else none.
    pub fn choose_args_for(&self, index: i64) -> Option<&ChooseArgMap> {
        self.choose_args
            .get(&index)
            .or_else(|| self.choose_args.get(&DEFAULT_CHOOSE_ARGS))
    }

    /// `CrushWrapper::do_rule`: map input `x` through rule `rule_id` to at most `result_max` items.
    ///
    /// `weights[osd]` is the OSD reweight vector (16.16; 0x10000 = in, 0 = out; devices past its end count as out).
    /// `choose_args_index` selects the choose_args set as Ceph does for a pool id (falling back to the default set);
    /// `None` maps with the plain bucket weights. `indep` rules leave [`CRUSH_ITEM_NONE`] in positions they could
    /// not fill. A rule id that does not exist yields an empty result.
    pub fn do_rule(
        &self,
        rule_id: usize,
        x: u32,
        result_max: usize,
        weights: &[u32],
        choose_args_index: Option<i64>,
    ) -> Vec<i32> {
        let Some(rule) = self.rule(rule_id) else {
            return Vec::new();
        };
        let mapper = Mapper {
            map: self,
            weights,
            args: choose_args_index.and_then(|i| self.choose_args_for(i)),
            x,
        };
        let result_max_i = i32::try_from(result_max).unwrap_or(i32::MAX);
        let scratch = result_max.max(1);
        let mut w = vec![0i32; scratch];
        let mut o = vec![0i32; scratch];
        let mut c = vec![0i32; scratch];
        let mut wsize = 0usize;
        let mut result = Vec::with_capacity(result_max);

        let t = &self.tunables;
        // choose_total_tries historically counted retries, not tries; Ceph adds one.
        let mut choose_tries = t.choose_total_tries.wrapping_add(1);
        let mut choose_leaf_tries = 0u32;
        let mut choose_local_retries = t.choose_local_tries;
        let mut choose_local_fallback_retries = t.choose_local_fallback_tries;
        let mut vary_r = u32::from(t.chooseleaf_vary_r);
        let mut stable = u32::from(t.chooseleaf_stable);

        for step in &rule.steps {
            match step.op {
                op::TAKE => {
                    let a = step.arg1;
                    let is_device = a >= 0 && a < self.max_devices;
                    if is_device || (a < 0 && self.bucket(a).is_some()) {
                        w[0] = a;
                        wsize = 1;
                    }
                }
                op::SET_CHOOSE_TRIES if step.arg1 > 0 => choose_tries = step.arg1 as u32,
                op::SET_CHOOSELEAF_TRIES if step.arg1 > 0 => choose_leaf_tries = step.arg1 as u32,
                op::SET_CHOOSE_LOCAL_TRIES if step.arg1 >= 0 => choose_local_retries = step.arg1 as u32,
                op::SET_CHOOSE_LOCAL_FALLBACK_TRIES if step.arg1 >= 0 => {
                    choose_local_fallback_retries = step.arg1 as u32
                }
                op::SET_CHOOSELEAF_VARY_R if step.arg1 >= 0 => vary_r = step.arg1 as u32,
                op::SET_CHOOSELEAF_STABLE if step.arg1 >= 0 => stable = step.arg1 as u32,
                op::CHOOSE_FIRSTN | op::CHOOSELEAF_FIRSTN | op::CHOOSE_INDEP | op::CHOOSELEAF_INDEP => {
                    if wsize == 0 {
                        continue;
                    }
                    let firstn = matches!(step.op, op::CHOOSE_FIRSTN | op::CHOOSELEAF_FIRSTN);
                    let recurse_to_leaf = matches!(step.op, op::CHOOSELEAF_FIRSTN | op::CHOOSELEAF_INDEP);
                    let mut osize = 0usize;
                    for &item in &w[..wsize] {
                        // arg1 <= 0 means "result_max minus |arg1|".
                        let mut numrep = step.arg1;
                        if numrep <= 0 {
                            numrep = numrep.saturating_add(result_max_i);
                            if numrep <= 0 {
                                continue;
                            }
                        }
                        let Some(bucket) = self.bucket(item) else {
                            // w[i] is a device or CRUSH_ITEM_NONE from an earlier indep step.
                            continue;
                        };
                        let room = result_max - osize;
                        if firstn {
                            let recurse_tries = if choose_leaf_tries != 0 {
                                choose_leaf_tries
                            } else if t.chooseleaf_descend_once != 0 {
                                1
                            } else {
                                choose_tries
                            };
                            let params = FirstnParams {
                                numrep,
                                item_type: step.arg2,
                                out_size: i32::try_from(room).unwrap_or(i32::MAX),
                                tries: choose_tries,
                                recurse_tries,
                                local_retries: choose_local_retries,
                                local_fallback_retries: choose_local_fallback_retries,
                                recurse_to_leaf,
                                vary_r,
                                stable,
                                parent_r: 0,
                            };
                            osize += mapper.choose_firstn(
                                bucket,
                                &mut o[osize..],
                                0,
                                Some(&mut c[osize..]),
                                params,
                            );
                        } else {
                            let out_size = (numrep as usize).min(room);
                            let params = IndepParams {
                                left: out_size as i32,
                                numrep,
                                item_type: step.arg2,
                                tries: choose_tries,
                                recurse_tries: if choose_leaf_tries != 0 {
                                    choose_leaf_tries
                                } else {
                                    1
                                },
                                recurse_to_leaf,
                                parent_r: 0,
                            };
                            mapper.choose_indep(bucket, &mut o[osize..], 0, Some(&mut c[osize..]), params);
                            osize += out_size;
                        }
                    }
                    if recurse_to_leaf {
                        // The leaves, not the intermediate buckets, are what the next step sees.
                        o[..osize].copy_from_slice(&c[..osize]);
                    }
                    std::mem::swap(&mut o, &mut w);
                    wsize = osize;
                }
                op::EMIT => {
                    for &item in &w[..wsize] {
                        if result.len() >= result_max {
                            break;
                        }
                        result.push(item);
                    }
                    wsize = 0;
                }
                // NOOP and anything Pacific does not know (Squid's MSR steps) are skipped, as Pacific does.
                _ => {}
            }
        }
        result
    }
}
