// SPDX-License-Identifier: LGPL-3.0-or-later
//! Test support: a BTreeMap model of the object store, a seeded transaction generator, and a full dump of a
//! store for comparison with the model.
#![allow(dead_code, clippy::unwrap_used, clippy::type_complexity)]

use bytes::Bytes;
use ferrostore::rng::Rng;
use ferrostore::{
    CollectionId, Device, MkfsOptions, ObjectKey, Op, SimConfig, SimDevice, Store, StoreConfig, StoreError,
    Transaction, mkfs,
};
use std::collections::BTreeMap;

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MObj {
    pub hash: u32,
    pub data: Vec<u8>,
    pub attrs: BTreeMap<Vec<u8>, Vec<u8>>,
    pub omap: BTreeMap<Vec<u8>, Vec<u8>>,
    pub header: Vec<u8>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Model {
    pub colls: BTreeMap<Vec<u8>, (u32, BTreeMap<Vec<u8>, MObj>)>,
}

type R = Result<(), i32>;

impl Model {
    /// Apply `txn` atomically: on error the model is unchanged and the errno is returned.
    pub fn apply(&mut self, txn: &Transaction) -> R {
        let mut m = self.clone();
        for op in &txn.ops {
            m.op(op)?;
        }
        *self = m;
        Ok(())
    }

    fn obj(&mut self, c: &CollectionId, o: &ObjectKey) -> Result<&mut MObj, i32> {
        self.colls
            .get_mut(&c.0[..])
            .and_then(|(_, objs)| objs.get_mut(&o.name[..]))
            .ok_or(libc::ENOENT)
    }

    fn obj_or_create(&mut self, c: &CollectionId, o: &ObjectKey) -> Result<&mut MObj, i32> {
        let (_, objs) = self.colls.get_mut(&c.0[..]).ok_or(libc::ENOENT)?;
        Ok(objs.entry(o.name.to_vec()).or_insert_with(|| MObj {
            hash: o.hash,
            ..Default::default()
        }))
    }

    fn op(&mut self, op: &Op) -> R {
        match op {
            Op::CreateCollection { cid, bits } => {
                if self.colls.contains_key(&cid.0[..]) {
                    return Err(libc::EEXIST);
                }
                self.colls.insert(cid.0.to_vec(), (*bits, BTreeMap::new()));
            }
            Op::RemoveCollection { cid } => {
                let (_, objs) = self.colls.get(&cid.0[..]).ok_or(libc::ENOENT)?;
                if !objs.is_empty() {
                    return Err(libc::ENOTEMPTY);
                }
                self.colls.remove(&cid.0[..]);
            }
            Op::SplitCollection { src, dst, bits, rem } => {
                if !self.colls.contains_key(&src.0[..]) || !self.colls.contains_key(&dst.0[..]) {
                    return Err(libc::ENOENT);
                }
                let mask = if *bits >= 32 { u32::MAX } else { (1u32 << bits) - 1 };
                if src != dst {
                    let (_, sobjs) = &self.colls[&src.0[..]];
                    let (_, dobjs) = &self.colls[&dst.0[..]];
                    if sobjs
                        .iter()
                        .any(|(k, o)| o.hash & mask == *rem & mask && dobjs.contains_key(k))
                    {
                        return Err(libc::EEXIST);
                    }
                }
                let (sb, objs) = self.colls.get_mut(&src.0[..]).unwrap();
                *sb = *bits;
                if src == dst {
                    return Ok(());
                }
                let moving: Vec<Vec<u8>> = objs
                    .iter()
                    .filter(|(_, o)| o.hash & mask == *rem & mask)
                    .map(|(k, _)| k.clone())
                    .collect();
                let moved: Vec<(Vec<u8>, MObj)> = moving
                    .into_iter()
                    .map(|k| {
                        let o = objs.remove(&k).unwrap();
                        (k, o)
                    })
                    .collect();
                let (db, dobjs) = self.colls.get_mut(&dst.0[..]).unwrap();
                *db = *bits;
                dobjs.extend(moved);
            }
            Op::Touch { cid, oid } => {
                self.obj_or_create(cid, oid)?;
            }
            Op::Write {
                cid,
                oid,
                offset,
                data,
            } => {
                let o = self.obj_or_create(cid, oid)?;
                let end = *offset as usize + data.len();
                if o.data.len() < end {
                    o.data.resize(end, 0);
                }
                o.data[*offset as usize..end].copy_from_slice(data);
                if data.is_empty() && o.data.len() < *offset as usize {
                    o.data.resize(*offset as usize, 0);
                }
            }
            Op::Zero {
                cid,
                oid,
                offset,
                len,
            } => {
                let o = self.obj_or_create(cid, oid)?;
                let end = (*offset + *len) as usize;
                if o.data.len() < end {
                    o.data.resize(end, 0);
                }
                o.data[*offset as usize..end].fill(0);
            }
            Op::Truncate { cid, oid, size } => {
                self.obj(cid, oid)?.data.resize(*size as usize, 0);
            }
            Op::Remove { cid, oid } => {
                self.obj(cid, oid)?;
                self.colls.get_mut(&cid.0[..]).unwrap().1.remove(&oid.name[..]);
            }
            Op::Clone { cid, src, dst } => {
                let s = self.obj(cid, src)?.clone();
                if src.name != dst.name {
                    self.colls
                        .get_mut(&cid.0[..])
                        .unwrap()
                        .1
                        .insert(dst.name.to_vec(), MObj { hash: dst.hash, ..s });
                }
            }
            Op::CloneRange {
                cid,
                src,
                dst,
                src_offset,
                len,
                dst_offset,
            } => {
                let s = self.obj(cid, src)?.data.clone();
                if src_offset + len > s.len() as u64 {
                    return Err(libc::EINVAL);
                }
                let d = self.obj_or_create(cid, dst)?;
                if *len == 0 {
                    // As BlueStore: a zero-length clone_range creates the target but does not extend it.
                    return Ok(());
                }
                let end = (*dst_offset + *len) as usize;
                if d.data.len() < end {
                    d.data.resize(end, 0);
                }
                d.data[*dst_offset as usize..end]
                    .copy_from_slice(&s[*src_offset as usize..(*src_offset + *len) as usize]);
            }
            Op::Rename {
                cid,
                oid,
                new_cid,
                new_oid,
            } => {
                let o = self.obj(cid, oid)?.clone();
                let (_, nobjs) = self.colls.get(&new_cid.0[..]).ok_or(libc::ENOENT)?;
                if nobjs.contains_key(&new_oid.name[..]) {
                    return Err(libc::EEXIST);
                }
                self.colls.get_mut(&cid.0[..]).unwrap().1.remove(&oid.name[..]);
                self.colls.get_mut(&new_cid.0[..]).unwrap().1.insert(
                    new_oid.name.to_vec(),
                    MObj {
                        hash: new_oid.hash,
                        ..o
                    },
                );
            }
            Op::SetAttrs { cid, oid, attrs } => {
                let o = self.obj(cid, oid)?;
                for (k, v) in attrs {
                    o.attrs.insert(k.to_vec(), v.to_vec());
                }
            }
            Op::RmAttr { cid, oid, name } => {
                let o = self.obj(cid, oid)?;
                o.attrs.remove(&name[..]).ok_or(libc::ENODATA)?;
            }
            Op::RmAttrs { cid, oid } => self.obj(cid, oid)?.attrs.clear(),
            Op::OmapSetKeys { cid, oid, kvs } => {
                let o = self.obj(cid, oid)?;
                for (k, v) in kvs {
                    o.omap.insert(k.to_vec(), v.to_vec());
                }
            }
            Op::OmapRmKeys { cid, oid, keys } => {
                let o = self.obj(cid, oid)?;
                for k in keys {
                    o.omap.remove(&k[..]);
                }
            }
            Op::OmapRmKeyRange {
                cid,
                oid,
                first,
                last,
            } => {
                let o = self.obj(cid, oid)?;
                if first < last {
                    let ks: Vec<_> = o
                        .omap
                        .range(first.to_vec()..last.to_vec())
                        .map(|(k, _)| k.clone())
                        .collect();
                    for k in ks {
                        o.omap.remove(&k);
                    }
                }
            }
            Op::OmapClear { cid, oid } => {
                let o = self.obj(cid, oid)?;
                o.omap.clear();
                o.header.clear();
            }
            Op::OmapSetHeader { cid, oid, header } => self.obj(cid, oid)?.header = header.to_vec(),
        }
        Ok(())
    }
}

/// Read the whole visible state of a store.
pub fn dump<D: Device>(s: &mut Store<D>) -> Result<Model, StoreError> {
    let mut m = Model::default();
    for cid in s.list_collections()? {
        let bits = s.collection_bits(&cid)?;
        let mut objs = BTreeMap::new();
        let mut cursor: Vec<u8> = Vec::new();
        loop {
            let page = s.list_objects(&cid, &cursor, None, 3)?;
            if page.is_empty() {
                break;
            }
            for oid in &page {
                let st = s.stat(&cid, oid)?;
                let data = s.read(&cid, oid, 0, 0)?;
                assert_eq!(data.len() as u64, st.size);
                let attrs: BTreeMap<Vec<u8>, Vec<u8>> = s
                    .getattrs(&cid, oid)?
                    .into_iter()
                    .map(|(k, v)| (k.to_vec(), v.to_vec()))
                    .collect();
                let mut omap = BTreeMap::new();
                let mut from: Vec<u8> = Vec::new();
                loop {
                    let kv = s.omap_iterate(&cid, oid, &from, 4)?;
                    if kv.is_empty() {
                        break;
                    }
                    for (k, v) in &kv {
                        omap.insert(k.to_vec(), v.to_vec());
                    }
                    from = kv.last().unwrap().0.to_vec();
                    from.push(0);
                }
                let header = s.omap_get_header(&cid, oid)?.to_vec();
                objs.insert(
                    oid.name.to_vec(),
                    MObj {
                        hash: st.hash,
                        data: data.to_vec(),
                        attrs,
                        omap,
                        header,
                    },
                );
            }
            cursor = page.last().unwrap().name.to_vec();
            cursor.push(0);
        }
        m.colls.insert(cid.0.to_vec(), (bits, objs));
    }
    Ok(m)
}

pub fn cid(i: u64) -> CollectionId {
    CollectionId::new(Bytes::from(format!("pg{i}")))
}

pub fn oid(i: u64) -> ObjectKey {
    // The hash is a function of the name, as in Ceph.
    let name = format!("obj{i:02}");
    ObjectKey::new(crc32c::crc32c(name.as_bytes()), Bytes::from(name))
}

fn bytes(rng: &mut Rng, max: u64) -> Bytes {
    let mut v = vec![0u8; rng.below(max + 1) as usize];
    rng.fill(&mut v);
    Bytes::from(v)
}

/// Attr / omap values: mostly small; one in 12 is 1,000–9,000 bytes, around and above the largest value a tree
/// entry holds inline (~1.34 KiB), so spilled values (data blocks) are created, overwritten, cloned and removed.
fn value(rng: &mut Rng, max: u64) -> Bytes {
    if rng.chance(8) {
        let mut v = vec![0u8; 1000 + rng.below(8001) as usize];
        rng.fill(&mut v);
        Bytes::from(v)
    } else {
        bytes(rng, max)
    }
}

fn small_key(rng: &mut Rng) -> Bytes {
    Bytes::from(format!("k{:02}", rng.below(24)))
}

/// Offsets and lengths that hit block boundaries, partial blocks and multi-block extents.
fn off_len(rng: &mut Rng) -> (u64, u64) {
    let b = 4096u64;
    match rng.below(4) {
        0 => (rng.below(8) * b, (1 + rng.below(4)) * b),
        1 => (rng.below(40_000), rng.below(9000)),
        2 => (rng.below(8) * b + rng.below(b), rng.below(b)),
        _ => (rng.below(4) * b, rng.below(20) * b + rng.below(2) * rng.below(b)),
    }
}

/// One random operation over `ncoll` collections and `nobj` object names.
pub fn random_op(rng: &mut Rng, ncoll: u64, nobj: u64) -> Op {
    let c = cid(rng.below(ncoll));
    let o = oid(rng.below(nobj));
    match rng.below(100) {
        0..=2 => Op::CreateCollection {
            cid: c,
            bits: rng.below(4) as u32,
        },
        3 => Op::RemoveCollection { cid: c },
        4 => Op::SplitCollection {
            src: c,
            dst: cid(rng.below(ncoll)),
            bits: 1 + rng.below(3) as u32,
            rem: rng.below(2) as u32,
        },
        5..=7 => Op::Touch { cid: c, oid: o },
        8..=34 => {
            let (off, len) = off_len(rng);
            let mut v = vec![0u8; len as usize];
            rng.fill(&mut v);
            Op::Write {
                cid: c,
                oid: o,
                offset: off,
                data: Bytes::from(v),
            }
        }
        35..=39 => {
            let (off, len) = off_len(rng);
            Op::Zero {
                cid: c,
                oid: o,
                offset: off,
                len,
            }
        }
        40..=44 => Op::Truncate {
            cid: c,
            oid: o,
            size: off_len(rng).0,
        },
        45..=48 => Op::Remove { cid: c, oid: o },
        49..=53 => Op::Clone {
            cid: c,
            src: o,
            dst: oid(rng.below(nobj)),
        },
        54..=58 => {
            let (so, len) = off_len(rng);
            let aligned = rng.chance(60);
            let (so, d) = if aligned {
                (so / 4096 * 4096, rng.below(6) * 4096)
            } else {
                (so, rng.below(30_000))
            };
            let len = if aligned {
                len / 4096 * 4096 + rng.below(2) * rng.below(4096)
            } else {
                len
            };
            Op::CloneRange {
                cid: c,
                src: o,
                dst: oid(rng.below(nobj)),
                src_offset: so,
                len,
                dst_offset: d,
            }
        }
        59..=61 => Op::Rename {
            cid: c,
            oid: o,
            new_cid: cid(rng.below(ncoll)),
            new_oid: oid(rng.below(nobj)),
        },
        62..=67 => Op::SetAttrs {
            cid: c,
            oid: o,
            attrs: (0..1 + rng.below(3))
                .map(|_| (small_key(rng), value(rng, 300)))
                .collect(),
        },
        68..=70 => Op::RmAttr {
            cid: c,
            oid: o,
            name: small_key(rng),
        },
        71 => Op::RmAttrs { cid: c, oid: o },
        72..=81 => Op::OmapSetKeys {
            cid: c,
            oid: o,
            kvs: (0..1 + rng.below(6))
                .map(|_| (small_key(rng), value(rng, 200)))
                .collect(),
        },
        82..=85 => Op::OmapRmKeys {
            cid: c,
            oid: o,
            keys: (0..1 + rng.below(3)).map(|_| small_key(rng)).collect(),
        },
        86..=88 => Op::OmapRmKeyRange {
            cid: c,
            oid: o,
            first: small_key(rng),
            last: small_key(rng),
        },
        89..=90 => Op::OmapClear { cid: c, oid: o },
        _ => Op::OmapSetHeader {
            cid: c,
            oid: o,
            header: value(rng, 100),
        },
    }
}

pub fn random_txn(rng: &mut Rng, ncoll: u64, nobj: u64) -> Transaction {
    let mut t = Transaction::new();
    for _ in 0..1 + rng.below(3) {
        t.push(random_op(rng, ncoll, nobj));
    }
    t
}

/// A transaction that creates every collection (so random streams do useful work).
pub fn setup_txn(ncoll: u64) -> Transaction {
    let mut t = Transaction::new();
    for i in 0..ncoll {
        t.push(Op::CreateCollection { cid: cid(i), bits: 0 });
    }
    t
}

/// A formatted and mounted one-shard store on the simulated device (`size` bytes, `log_bytes` of log), whose
/// completions come reordered, three per poll, and whose unflushed writes a crash may lose.
pub fn sim_store(seed: u64, size: usize, log_bytes: u64, cfg: StoreConfig) -> Store<SimDevice> {
    let dev = SimDevice::new(
        size,
        SimConfig {
            seed,
            reorder: true,
            max_completions_per_poll: 3,
            durable_writes: false,
        },
    );
    let dev = mkfs(
        dev,
        &MkfsOptions {
            shards: 1,
            log_bytes,
            uuid: seed,
            ..Default::default()
        },
    )
    .unwrap();
    Store::mount(dev, 0, cfg).unwrap()
}

/// Every object and collection `random_op` can name exists in the store exactly when it does in the model
/// (point lookups, which the onode and collection caches answer, against the model rather than a listing).
pub fn check_exists<D: Device>(s: &mut Store<D>, model: &Model, ncoll: u64, nobj: u64) -> Result<(), String> {
    for c in 0..ncoll {
        let coll = model.colls.get(cid(c).0.as_ref());
        let have = s.collection_exists(&cid(c)).map_err(|e| e.to_string())?;
        if have != coll.is_some() {
            return Err(format!("collection {c}: exists {have}, model {}", coll.is_some()));
        }
        if let Some((bits, _)) = coll
            && s.collection_bits(&cid(c)).map_err(|e| e.to_string())? != *bits
        {
            return Err(format!("collection {c}: bits differ"));
        }
        for o in 0..nobj {
            let want = coll.and_then(|(_, objs)| objs.get(oid(o).name.as_ref()));
            match (s.stat(&cid(c), &oid(o)), want) {
                (Ok(st), Some(m)) if st.size == m.data.len() as u64 && st.hash == m.hash => {}
                (Err(StoreError::NotFound), None) => {}
                (got, want) => {
                    return Err(format!(
                        "collection {c} object {o}: store {got:?}, model size {:?}",
                        want.map(|m| m.data.len())
                    ));
                }
            }
        }
    }
    Ok(())
}

/// Point lookups agree with the model: every omap key by name (plus an absent one), every attr by name (plus an
/// absent one), for every object of the model. (Separate from `dump`, which the crash test runs per image.)
pub fn check_point_reads<D: Device>(s: &mut Store<D>, model: &Model) -> Result<(), String> {
    for (c, (_, objs)) in &model.colls {
        let cid = CollectionId::new(Bytes::from(c.clone()));
        for (name, o) in objs {
            let oid = ObjectKey::new(o.hash, Bytes::from(name.clone()));
            let mut want: Vec<Bytes> = o.omap.keys().map(|k| Bytes::from(k.clone())).collect();
            want.push(Bytes::from_static(b"\xff-absent"));
            let got = s.omap_get_values(&cid, &oid, &want).map_err(|e| e.to_string())?;
            if got.len() != o.omap.len()
                || got
                    .iter()
                    .any(|(k, v)| o.omap.get(k.as_ref()).map(|x| &x[..]) != Some(&v[..]))
            {
                return Err(format!("omap_get_values of {name:?} differs from the model"));
            }
            for (k, v) in &o.attrs {
                if s.getattr(&cid, &oid, k).map_err(|e| e.to_string())? != v[..] {
                    return Err(format!("getattr {k:?} of {name:?} differs from the model"));
                }
            }
            if !matches!(s.getattr(&cid, &oid, b"\xff-absent"), Err(StoreError::NoData)) {
                return Err(format!("absent attr of {name:?} found"));
            }
        }
    }
    Ok(())
}

/// Queue `t` (applying it to `model` too) and wait until no transaction is unacknowledged.
pub fn commit_acked<D: Device>(s: &mut Store<D>, model: &mut Model, t: &Transaction) {
    model.apply(t).unwrap();
    s.queue_transaction(t).unwrap();
    wait_acked(s, 0);
}

/// Wait until fewer than `max(limit, 1)` transactions are unacknowledged (0: all acknowledged); returns the
/// acknowledgements seen meanwhile.
pub fn wait_acked<D: Device>(s: &mut Store<D>, limit: usize) -> usize {
    let mut ev = Vec::new();
    let mut acks = 0;
    while s.unacked() >= limit.max(1) {
        ev.clear();
        s.wait(&mut ev).unwrap();
        acks += ev
            .iter()
            .filter(|e| matches!(e, ferrostore::Event::Durable(_)))
            .count();
    }
    acks
}

pub fn env_u64(name: &str) -> Option<u64> {
    std::env::var(name).ok().and_then(|v| v.parse().ok())
}

/// A short description of the first difference between two models (for assertion messages).
pub fn diff(got: &Model, want: &Model) -> String {
    if got == want {
        return "equal".into();
    }
    let gk: Vec<_> = got.colls.keys().collect();
    let wk: Vec<_> = want.colls.keys().collect();
    if gk != wk {
        return format!("collections differ: got {gk:?} want {wk:?}");
    }
    for (c, (gb, go)) in &got.colls {
        let (wb, wo) = &want.colls[c];
        if gb != wb {
            return format!("coll {c:?} bits got {gb} want {wb}");
        }
        let gn: Vec<_> = go
            .keys()
            .map(|k| String::from_utf8_lossy(k).to_string())
            .collect();
        let wn: Vec<_> = wo
            .keys()
            .map(|k| String::from_utf8_lossy(k).to_string())
            .collect();
        if gn != wn {
            return format!("coll {c:?} objects got {gn:?} want {wn:?}");
        }
        for (n, g) in go {
            let w = &wo[n];
            let name = String::from_utf8_lossy(n);
            if g.data != w.data {
                let first = g.data.iter().zip(&w.data).position(|(a, b)| a != b);
                return format!(
                    "{name}: data len got {} want {}, first differing byte {first:?}",
                    g.data.len(),
                    w.data.len()
                );
            }
            if g.attrs != w.attrs {
                return format!("{name}: attrs got {:?} want {:?}", g.attrs.keys(), w.attrs.keys());
            }
            if g.omap != w.omap {
                return format!("{name}: omap got {:?} want {:?}", g.omap.keys(), w.omap.keys());
            }
            if g.header != w.header {
                return format!("{name}: header differs");
            }
            if g.hash != w.hash {
                return format!("{name}: hash differs");
            }
        }
    }
    "?".into()
}

/// A freshly made one-shard store on an io_uring device (32 MiB file `name` under the test's tmp dir, O_DIRECT,
/// durability by RWF_DSYNC writes when `dsync`, else by flushes) with collection 0 created, and the file's path; `None` (after saying why) where
/// O_DIRECT + io_uring is unavailable.
pub fn uring_store(
    name: &str,
    uuid: u64,
    dsync: bool,
) -> Option<(Store<ferrostore::uring::UringDevice>, std::path::PathBuf)> {
    use ferrostore::uring::{UringDevice, UringOptions};
    let p = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_file(&p);
    let dev = match UringDevice::open(
        &p,
        Some(32 << 20),
        UringOptions {
            dsync_writes: dsync,
            ..Default::default()
        },
    ) {
        Ok(d) => d,
        Err(e) => {
            eprintln!(
                "skipping: cannot open {} with O_DIRECT + io_uring: {e}",
                p.display()
            );
            return None;
        }
    };
    let dev = mkfs(
        dev,
        &MkfsOptions {
            shards: 1,
            log_bytes: 1 << 20,
            uuid,
            ..Default::default()
        },
    )
    .unwrap();
    let mut s = Store::mount(dev, 0, StoreConfig::default()).unwrap();
    s.commit(&setup_txn(1)).unwrap();
    Some((s, p))
}
