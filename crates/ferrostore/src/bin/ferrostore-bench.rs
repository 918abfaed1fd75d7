// SPDX-License-Identifier: LGPL-3.0-or-later
//! Engine vs raw fio on the same file (or loop block device), same queue depth, io_uring + O_DIRECT.
//!
//! Usage: ferrostore-bench [--path FILE] [--size BYTES|NG] [--runtime SECS] [--loop] [--durability dsync|ordered|flush]
//!                         [--log-data-max BYTES] [--only SUBSTR]
//! Prints one markdown table row per test: IOPS, p50/p99 latency, CPU us/op, device bytes written per user byte,
//! and engine IOPS / fio IOPS. Every engine test starts from a fresh mkfs (fio overwrites the whole file).

use bytes::Bytes;
use ferrostore::rng::Rng;
use ferrostore::uring::{AlignedBuf, UringDevice, UringOptions};
use ferrostore::{CollectionId, Event, MkfsOptions, ObjectKey, Op, Store, StoreConfig, Transaction, mkfs};
use std::collections::HashMap;
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

type Res<T> = std::result::Result<T, String>;

#[derive(Clone)]
struct Args {
    path: PathBuf,
    size: u64,
    runtime: Duration,
    use_loop: bool,
    dsync: bool,
    /// `--durability ordered`: RWF_DSYNC with ordered commits (`UringOptions::ordered_commits`).
    ordered: bool,
    log_align: u64,
    /// `--log-data-max N`: journal writes of up to N bytes in their log record (`StoreConfig::log_data_max_bytes`;
    /// default 0 = off): run it both ways on a device to see whether its flushes make journaling pay.
    log_data_max: u64,
    only: Option<String>,
    no_fio: bool,
    /// `--mem N`: write N GiB of 4K objects with the production StoreConfig and report RSS as it goes.
    mem_gib: Option<u64>,
    /// Write size of `--mem` (default 4K); `--mem-unaligned` passes payloads at an odd address (as network
    /// buffers arrive), which takes the bounce-buffer path.
    mem_bs: u64,
    mem_unaligned: bool,
    /// `--p99`: 4K QD16 writes with blocking and with background checkpoints, alternating, in one run.
    p99: bool,
    blocking_checkpoints: bool,
}

fn parse_size(s: &str) -> Res<u64> {
    let (n, m) = match s.chars().last() {
        Some('G') | Some('g') => (&s[..s.len() - 1], 1u64 << 30),
        Some('M') | Some('m') => (&s[..s.len() - 1], 1 << 20),
        Some('K') | Some('k') => (&s[..s.len() - 1], 1 << 10),
        _ => (s, 1),
    };
    n.parse::<u64>()
        .map(|v| v * m)
        .map_err(|e| format!("bad size {s}: {e}"))
}

fn parse_args() -> Res<Args> {
    let mut a = Args {
        path: PathBuf::from("target/ferrostore-bench.img"),
        size: 2 << 30,
        runtime: Duration::from_secs(5),
        use_loop: false,
        dsync: true,
        ordered: false,
        log_align: 512,
        log_data_max: 0,
        only: None,
        no_fio: false,
        mem_gib: None,
        mem_bs: 4096,
        mem_unaligned: false,
        p99: false,
        blocking_checkpoints: false,
    };
    let mut it = std::env::args().skip(1);
    while let Some(k) = it.next() {
        let mut val = || it.next().ok_or(format!("{k} needs a value"));
        match k.as_str() {
            "--path" => a.path = PathBuf::from(val()?),
            "--size" => a.size = parse_size(&val()?)?,
            "--runtime" => a.runtime = Duration::from_secs_f64(val()?.parse().map_err(|e| format!("{e}"))?),
            "--loop" => a.use_loop = true,
            "--durability" => {
                let v = val()?;
                (a.dsync, a.ordered) = (v == "dsync" || v == "ordered", v == "ordered");
            }
            "--only" => a.only = Some(val()?),
            "--log-align" => a.log_align = parse_size(&val()?)?,
            "--log-data-max" => a.log_data_max = parse_size(&val()?)?,
            "--no-fio" => a.no_fio = true,
            "--mem-bs" => a.mem_bs = parse_size(&val()?)?,
            "--mem-unaligned" => a.mem_unaligned = true,
            "--p99" => a.p99 = true,
            "--mem" => a.mem_gib = Some(val()?.parse().map_err(|e| format!("--mem: {e}"))?),
            "-h" | "--help" => {
                println!(
                    "ferrostore-bench [--path FILE] [--size 2G] [--runtime 5] [--loop] [--durability flush|dsync|ordered] [--log-data-max 16K] [--only NAME]"
                );
                std::process::exit(0);
            }
            _ => return Err(format!("unknown argument {k}")),
        }
    }
    Ok(a)
}

#[derive(Default, Clone)]
struct Result1 {
    iops: f64,
    p50_us: f64,
    p99_us: f64,
    cpu_us_per_op: f64,
    dev_bytes_per_user_byte: Option<f64>,
    p999_us: f64,
    max_us: f64,
    checkpoints: u64,
}

fn cpu_seconds() -> f64 {
    // SAFETY: getrusage only writes into the struct we pass.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let t = |tv: libc::timeval| tv.tv_sec as f64 + tv.tv_usec as f64 / 1e6;
    t(ru.ru_utime) + t(ru.ru_stime)
}

fn pct(sorted: &[u64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    sorted[((sorted.len() as f64 - 1.0) * p) as usize] as f64 / 1000.0
}

fn rss_mib() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse::<f64>().ok())
        })
        .unwrap_or(0.0)
        / 1024.0
}

// ------------------------------------------------------------------ fio

struct FioJob<'a> {
    rw: &'a str,
    bs: u64,
    qd: u32,
}

fn fio(a: &Args, j: &FioJob) -> Res<Result1> {
    let out = Command::new("fio")
        .args([
            "--name=ref",
            &format!("--filename={}", a.path.display()),
            "--ioengine=io_uring",
            "--direct=1",
            &format!("--rw={}", j.rw),
            &format!("--bs={}", j.bs),
            &format!("--iodepth={}", j.qd),
            &format!("--size={}", a.size),
            &format!("--runtime={}", a.runtime.as_secs_f64().max(1.0) as u64),
            "--time_based",
            "--norandommap",
            "--randrepeat=0",
            "--group_reporting",
            "--output-format=json",
        ])
        .output()
        .map_err(|e| format!("running fio: {e}"))?;
    if !out.status.success() {
        return Err(format!("fio failed: {}", String::from_utf8_lossy(&out.stderr)));
    }
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).map_err(|e| format!("fio json: {e}"))?;
    let job = &v["jobs"][0];
    let side = if j.rw.contains("read") {
        &job["read"]
    } else {
        &job["write"]
    };
    let ios = side["total_ios"].as_f64().unwrap_or(0.0);
    let runtime_ms = side["runtime"].as_f64().unwrap_or(1.0).max(1.0);
    let lat = &side["clat_ns"]["percentile"];
    let cpu_pct = job["usr_cpu"].as_f64().unwrap_or(0.0) + job["sys_cpu"].as_f64().unwrap_or(0.0);
    Ok(Result1 {
        iops: side["iops"].as_f64().unwrap_or(0.0),
        p50_us: lat["50.000000"].as_f64().unwrap_or(0.0) / 1000.0,
        p99_us: lat["99.000000"].as_f64().unwrap_or(0.0) / 1000.0,
        cpu_us_per_op: if ios > 0.0 {
            cpu_pct / 100.0 * runtime_ms * 1000.0 / ios
        } else {
            0.0
        },
        dev_bytes_per_user_byte: if j.rw.contains("write") { Some(1.0) } else { None },
        ..Default::default()
    })
}

// ------------------------------------------------------------------ engine

fn aligned_random(len: usize, rng: &mut Rng) -> Bytes {
    let mut b = AlignedBuf::zeroed(len);
    rng.fill(b.as_mut());
    Bytes::from_owner(b)
}

fn coll() -> CollectionId {
    CollectionId::new(Bytes::from_static(b"bench"))
}

fn obj(i: u64) -> ObjectKey {
    let name = format!("rbd_data.{i:016x}");
    ObjectKey::new(crc32c::crc32c(name.as_bytes()), Bytes::from(name))
}

fn fresh_store(a: &Args) -> Res<Store<UringDevice>> {
    let opts = UringOptions {
        dsync_writes: a.dsync,
        ordered_commits: a.ordered,
        ..Default::default()
    };
    let dev =
        UringDevice::open(&a.path, None, opts).map_err(|e| format!("open {}: {e}", a.path.display()))?;
    let dev = mkfs(
        dev,
        &MkfsOptions {
            shards: 1,
            log_bytes: 256 << 20,
            uuid: 0xbe,
            ..Default::default()
        },
    )
    .map_err(|e| e.to_string())?;
    let cfg = StoreConfig {
        node_cache_nodes: 64 << 10,
        max_dirty_nodes: 32 << 10,
        log_align: a.log_align,
        background_checkpoints: !a.blocking_checkpoints,
        log_data_max_bytes: a.log_data_max,
        ordered_records_unbounded: ferrostore::store::ordered_records_unbounded_from_env(),
        ordered_lone_synced: ferrostore::store::ordered_lone_synced_from_env(true),
        ..Default::default()
    };
    let mut s = Store::mount(dev, 0, cfg).map_err(|e| e.to_string())?;
    let mut t = Transaction::new();
    t.push(Op::CreateCollection { cid: coll(), bits: 0 });
    s.commit(&t).map_err(|e| e.to_string())?;
    Ok(s)
}

enum Work {
    Txn(Transaction, u64),
    Read(ObjectKey, u64, u64),
    /// A blocking `Store::read` (how the op engine reads today: the caller's core waits for the device).
    SyncRead(ObjectKey, u64, u64),
    /// `Store::prefetch`, then on `Event::Prefetched` the `Store::read` that an OSD op does (served from memory)
    /// and `release_prefetch` (the osd-core path for client reads).
    Prefetch(ObjectKey, u64, u64),
    OmapGet(ObjectKey, Bytes),
    OmapIter(ObjectKey, Bytes),
}

/// Run `gen` at queue depth `qd` for the runtime; user bytes count toward write amplification.
fn drive(
    s: &mut Store<UringDevice>,
    a: &Args,
    qd: usize,
    next_op: &mut dyn FnMut(&mut Rng) -> Work,
) -> Res<Result1> {
    let mut rng = Rng::new(7);
    let mut lat = Vec::new();
    let mut inflight_tx: HashMap<u64, Instant> = HashMap::new();
    let mut inflight_rd: HashMap<u64, Instant> = HashMap::new();
    let mut inflight_pf: HashMap<u64, (Instant, ObjectKey, u64, u64)> = HashMap::new();
    let mut user_bytes = 0u64;
    let dev0 = s.device_stats();
    let ck0 = s.stats.checkpoints;
    let cpu0 = cpu_seconds();
    let start = Instant::now();
    let mut ev = Vec::new();
    let mut ops = 0u64;
    while start.elapsed() < a.runtime {
        while inflight_tx.len() + inflight_rd.len() + inflight_pf.len() < qd {
            match next_op(&mut rng) {
                Work::Txn(t, ub) => {
                    let now = Instant::now();
                    let seq = s.queue_transaction(&t).map_err(|e| e.to_string())?;
                    user_bytes += ub;
                    inflight_tx.insert(seq, now);
                }
                Work::Read(o, off, len) => {
                    let now = Instant::now();
                    let id = s.queue_read(&coll(), &o, off, len).map_err(|e| e.to_string())?;
                    inflight_rd.insert(id, now);
                }
                Work::SyncRead(o, off, len) => {
                    let now = Instant::now();
                    let v = s.read(&coll(), &o, off, len).map_err(|e| e.to_string())?;
                    std::hint::black_box(v);
                    lat.push(now.elapsed().as_nanos() as u64);
                    ops += 1;
                }
                Work::Prefetch(o, off, len) => {
                    let now = Instant::now();
                    match s
                        .prefetch(&coll(), &o, &[(off, len)])
                        .map_err(|e| e.to_string())?
                    {
                        Some(t) => {
                            inflight_pf.insert(t, (now, o, off, len));
                        }
                        None => {
                            let v = s.read(&coll(), &o, off, len).map_err(|e| e.to_string())?;
                            std::hint::black_box(v);
                            lat.push(now.elapsed().as_nanos() as u64);
                            ops += 1;
                        }
                    }
                }
                Work::OmapGet(o, k) => {
                    let now = Instant::now();
                    let v = s.omap_get_values(&coll(), &o, &[k]).map_err(|e| e.to_string())?;
                    std::hint::black_box(v);
                    lat.push(now.elapsed().as_nanos() as u64);
                    ops += 1;
                }
                Work::OmapIter(o, k) => {
                    let now = Instant::now();
                    let v = s.omap_iterate(&coll(), &o, &k, 16).map_err(|e| e.to_string())?;
                    std::hint::black_box(v);
                    lat.push(now.elapsed().as_nanos() as u64);
                    ops += 1;
                }
            }
            if start.elapsed() >= a.runtime {
                break;
            }
        }
        if inflight_tx.is_empty() && inflight_rd.is_empty() && inflight_pf.is_empty() {
            continue;
        }
        ev.clear();
        s.wait(&mut ev).map_err(|e| e.to_string())?;
        let now = Instant::now();
        for e in ev.drain(..) {
            match e {
                Event::Durable(seq) => {
                    if let Some(t0) = inflight_tx.remove(&seq) {
                        lat.push((now - t0).as_nanos() as u64);
                        ops += 1;
                    }
                }
                Event::ReadDone(id, r) => {
                    r.map_err(|e| format!("read: {e}"))?;
                    if let Some(t0) = inflight_rd.remove(&id) {
                        lat.push((now - t0).as_nanos() as u64);
                        ops += 1;
                    }
                }
                Event::Prefetched(t) => {
                    if let Some((t0, o, off, len)) = inflight_pf.remove(&t) {
                        let v = s.read(&coll(), &o, off, len).map_err(|e| format!("read: {e}"))?;
                        std::hint::black_box(v);
                        s.release_prefetch(t);
                        lat.push(t0.elapsed().as_nanos() as u64);
                        ops += 1;
                    }
                }
            }
        }
    }
    let elapsed = start.elapsed().as_secs_f64();
    // Drain what is left so the next test starts clean (not counted).
    while !inflight_tx.is_empty() || !inflight_rd.is_empty() || !inflight_pf.is_empty() {
        ev.clear();
        s.wait(&mut ev).map_err(|e| e.to_string())?;
        for e in ev.drain(..) {
            match e {
                Event::Durable(seq) => {
                    inflight_tx.remove(&seq);
                }
                Event::ReadDone(id, _) => {
                    inflight_rd.remove(&id);
                }
                Event::Prefetched(t) => {
                    inflight_pf.remove(&t);
                    s.release_prefetch(t);
                }
            }
        }
    }
    let cpu = cpu_seconds() - cpu0;
    let dev1 = s.device_stats();
    let checkpoints = s.stats.checkpoints - ck0;
    if std::env::var("FERRO_BENCH_DEBUG").is_ok() {
        eprintln!(
            "ops {ops} device reads {} writes {} (synced {}) flushes {} tree {:?} store {:?}",
            dev1.reads - dev0.reads,
            dev1.writes - dev0.writes,
            dev1.synced_writes - dev0.synced_writes,
            dev1.flushes - dev0.flushes,
            s.tree_stats(),
            s.stats
        );
    }
    lat.sort_unstable();
    Ok(Result1 {
        iops: ops as f64 / elapsed,
        p50_us: pct(&lat, 0.50),
        p99_us: pct(&lat, 0.99),
        p999_us: pct(&lat, 0.999),
        max_us: pct(&lat, 1.0),
        checkpoints,
        cpu_us_per_op: cpu * 1e6 / ops.max(1) as f64,
        dev_bytes_per_user_byte: if user_bytes > 0 {
            Some((dev1.bytes_written - dev0.bytes_written) as f64 / user_bytes as f64)
        } else {
            None
        },
    })
}

/// `n` objects of `obj_size` bytes, written with 4 MiB transactions at QD 8.
fn prefill(s: &mut Store<UringDevice>, n: u64, obj_size: u64) -> Res<()> {
    let mut rng = Rng::new(1);
    let chunk = (4u64 << 20).min(obj_size);
    let data = aligned_random(chunk as usize, &mut rng);
    let mut pending = Vec::new();
    for i in 0..n {
        let mut off = 0;
        while off < obj_size {
            let mut t = Transaction::new();
            t.push(Op::Write {
                cid: coll(),
                oid: obj(i),
                offset: off,
                data: data.clone(),
            });
            pending.push(s.queue_transaction(&t).map_err(|e| e.to_string())?);
            off += chunk;
            if pending.len() >= 8 {
                for p in pending.drain(..) {
                    s.wait_durable(p).map_err(|e| e.to_string())?;
                }
            }
        }
    }
    for p in pending.drain(..) {
        s.wait_durable(p).map_err(|e| e.to_string())?;
    }
    s.checkpoint().map_err(|e| e.to_string())
}

fn prefill_fragmented(s: &mut Store<UringDevice>, n: u64, obj_size: u64) -> Res<()> {
    let data = aligned_random(4096, &mut Rng::new(1));
    let blocks = obj_size / 4096;
    let mut pending = Vec::new();
    for i in 0..n {
        for parity in [0, 1] {
            let mut t = Transaction::new();
            for b in (parity..blocks).step_by(2) {
                t.push(Op::Write {
                    cid: coll(),
                    oid: obj(i),
                    offset: b * 4096,
                    data: data.clone(),
                });
                if t.ops.len() == 64 {
                    pending.push(s.queue_transaction(&t).map_err(|e| e.to_string())?);
                    t = Transaction::new();
                }
            }
            if !t.ops.is_empty() {
                pending.push(s.queue_transaction(&t).map_err(|e| e.to_string())?);
            }
            if pending.len() >= 8 {
                for p in pending.drain(..) {
                    s.wait_durable(p).map_err(|e| e.to_string())?;
                }
            }
        }
    }
    for p in pending.drain(..) {
        s.wait_durable(p).map_err(|e| e.to_string())?;
    }
    s.checkpoint().map_err(|e| e.to_string())
}

type Runner = Box<dyn Fn(&Args) -> Res<Result1>>;

struct Test {
    name: String,
    fio: Option<(String, u64, u32)>,
    run: Runner,
}

fn write_new(bs: u64, qd: usize) -> Runner {
    Box::new(move |a: &Args| {
        let mut s = fresh_store(a)?;
        let data = aligned_random(bs as usize, &mut Rng::new(2));
        // New objects until half the device is used, then the names cycle (whole-object rewrites).
        let cap = (a.size / 2 / bs).max(1);
        let mut next = 0u64;
        drive(&mut s, a, qd, &mut |_| {
            next = (next + 1) % cap + (1 << 32);
            let mut t = Transaction::new();
            t.push(Op::Write {
                cid: coll(),
                oid: obj(next),
                offset: 0,
                data: data.clone(),
            });
            Work::Txn(t, bs)
        })
    })
}

const OBJ: u64 = 4 << 20;

fn objects(a: &Args) -> u64 {
    // Fill about a quarter of the device with 4 MiB objects (overwrites then always find free space).
    (a.size / 4 / OBJ).clamp(4, 256)
}

fn overwrite(bs: u64, qd: usize) -> Runner {
    Box::new(move |a: &Args| {
        let mut s = fresh_store(a)?;
        let n = objects(a);
        prefill(&mut s, n, OBJ)?;
        let data = aligned_random(bs as usize, &mut Rng::new(3));
        drive(&mut s, a, qd, &mut |r| {
            let mut t = Transaction::new();
            let off = r.below(OBJ / bs) * bs;
            t.push(Op::Write {
                cid: coll(),
                oid: obj(r.below(n)),
                offset: off,
                data: data.clone(),
            });
            Work::Txn(t, bs)
        })
    })
}

/// How a read test reads: `queue_read` (async, result in the event), a blocking `read`, or `prefetch` + `read`.
#[derive(Clone, Copy)]
enum ReadMode {
    Queue,
    Sync,
    Prefetch,
}

fn read(bs: u64, qd: usize) -> Runner {
    read_with(bs, qd, ReadMode::Queue)
}

fn read_with(bs: u64, qd: usize, mode: ReadMode) -> Runner {
    read_opts(bs, qd, mode, false)
}

/// `fragmented`: the objects are written 4 KiB at a time, even blocks first, so every block is its own extent
/// (as after random 4K overwrites: the layout RBD images get, and what extent lookups cost most on).
fn read_opts(bs: u64, qd: usize, mode: ReadMode, fragmented: bool) -> Runner {
    Box::new(move |a: &Args| {
        let mut s = fresh_store(a)?;
        let n = objects(a);
        if fragmented {
            prefill_fragmented(&mut s, n, OBJ)?;
        } else {
            prefill(&mut s, n, OBJ)?;
        }
        drive(&mut s, a, qd, &mut |r| {
            let (o, off) = (obj(r.below(n)), r.below(OBJ / bs) * bs);
            match mode {
                ReadMode::Queue => Work::Read(o, off, bs),
                ReadMode::Sync => Work::SyncRead(o, off, bs),
                ReadMode::Prefetch => Work::Prefetch(o, off, bs),
            }
        })
    })
}

fn omap(kind: u8, qd: usize) -> Runner {
    Box::new(move |a: &Args| {
        let mut s = fresh_store(a)?;
        let nobj = 64u64;
        let nkeys = 20_000u64;
        let val = Bytes::from(vec![0x5au8; 100]);
        let key = |i: u64| Bytes::from(format!("omap_key_{i:08}"));
        let mut t = Transaction::new();
        for o in 0..nobj {
            t.push(Op::Touch {
                cid: coll(),
                oid: obj(o),
            });
        }
        s.commit(&t).map_err(|e| e.to_string())?;
        if kind != 0 {
            for chunk in 0..nkeys / 100 {
                let mut t = Transaction::new();
                let o = obj(chunk % nobj);
                let kvs = (0..100).map(|i| (key(chunk * 100 + i), val.clone())).collect();
                t.push(Op::OmapSetKeys {
                    cid: coll(),
                    oid: o,
                    kvs,
                });
                s.commit(&t).map_err(|e| e.to_string())?;
            }
            s.checkpoint().map_err(|e| e.to_string())?;
        }
        drive(&mut s, a, qd, &mut |r| {
            let k = r.below(nkeys);
            let o = obj((k / 100) % nobj);
            match kind {
                0 => {
                    let mut t = Transaction::new();
                    t.push(Op::OmapSetKeys {
                        cid: coll(),
                        oid: o,
                        kvs: vec![(key(k), val.clone())],
                    });
                    Work::Txn(t, 100 + 16)
                }
                1 => Work::OmapGet(o, key(k)),
                _ => Work::OmapIter(o, key(k)),
            }
        })
    })
}

/// Memory bound check: `gib` GiB of 4K writes to new objects at QD16 (then the same objects overwritten when the
/// device is half full), with `StoreConfig::default()` as ferro-osd mounts it; prints RSS every 1/16 of the way.
fn mem_run(a: &Args, gib: u64) -> Res<()> {
    let opts = UringOptions {
        dsync_writes: a.dsync,
        ordered_commits: a.ordered,
        ..Default::default()
    };
    let dev =
        UringDevice::open(&a.path, None, opts).map_err(|e| format!("open {}: {e}", a.path.display()))?;
    let dev = mkfs(dev, &MkfsOptions::default()).map_err(|e| e.to_string())?;
    let mut s = Store::mount(dev, 0, StoreConfig::default()).map_err(|e| e.to_string())?;
    let mut t = Transaction::new();
    t.push(Op::CreateCollection { cid: coll(), bits: 0 });
    s.commit(&t).map_err(|e| e.to_string())?;
    let bs = a.mem_bs.max(4096);
    let data = if a.mem_unaligned {
        let mut v = vec![0u8; bs as usize + 1];
        Rng::new(2).fill(&mut v);
        Bytes::from(v).slice(1..)
    } else {
        aligned_random(bs as usize, &mut Rng::new(2))
    };
    let total = (gib << 30) / bs;
    let cap = (a.size / 2 / bs).max(1);
    let qd = if bs >= 1 << 20 { 4 } else { 16 };
    let step = (total / 16).max(1);
    let (mut done, mut queued) = (0u64, 0u64);
    let mut ev = Vec::new();
    let mut lat: Vec<u64> = Vec::new();
    let mut inflight: HashMap<u64, Instant> = HashMap::new();
    let t0 = Instant::now();
    let cpu0 = cpu_seconds();
    println!(
        "| GiB written | objects | RSS MiB | store memory MiB | cached nodes | dirty nodes | p99 µs (last 1/16) |"
    );
    println!("|---:|---:|---:|---:|---:|---:|---:|");
    while done < total {
        while queued < total && inflight.len() < qd {
            let mut t = Transaction::new();
            t.push(Op::Write {
                cid: coll(),
                oid: obj(queued % cap + (1 << 32)),
                offset: 0,
                data: data.clone(),
            });
            let seq = s.queue_transaction(&t).map_err(|e| e.to_string())?;
            inflight.insert(seq, Instant::now());
            queued += 1;
        }
        ev.clear();
        s.wait(&mut ev).map_err(|e| e.to_string())?;
        let now = Instant::now();
        for e in ev.drain(..) {
            if let Event::Durable(seq) = e
                && let Some(t) = inflight.remove(&seq)
            {
                lat.push((now - t).as_nanos() as u64);
                done += 1;
                if done % step == 0 {
                    lat.sort_unstable();
                    let (cached, dirty) = s.tree_stats();
                    println!(
                        "| {:.2} | {} | {:.0} | {:.0} | {cached} | {dirty} | {:.0} |",
                        (done * bs) as f64 / (1u64 << 30) as f64,
                        done.min(cap),
                        rss_mib(),
                        s.memory_bytes() as f64 / (1u64 << 20) as f64,
                        pct(&lat, 0.99)
                    );
                    lat.clear();
                }
            }
        }
    }
    let secs = t0.elapsed().as_secs_f64();
    println!(
        "\n{total} writes in {secs:.1} s: {:.0} IOPS, CPU {:.1} µs/op, peak RSS {:.0} MiB",
        total as f64 / secs,
        (cpu_seconds() - cpu0) * 1e6 / total as f64,
        peak_rss_mib()
    );
    Ok(())
}

fn peak_rss_mib() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse::<f64>().ok())
        })
        .unwrap_or(0.0)
        / 1024.0
}

/// Blocking vs background checkpoints on 4K QD16 writes, alternating (A B A B) so machine load hits both.
fn p99_run(a: &Args) {
    println!(
        "| test | checkpoints | run | IOPS | p50 µs | p99 µs | p99.9 µs | max µs | checkpoints done | CPU µs/op |"
    );
    println!("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|");
    let tests: Vec<(&str, Runner)> = vec![
        ("4K randwrite new objects QD16", write_new(4096, 16)),
        ("4K random overwrite QD16", overwrite(4096, 16)),
    ];
    for (name, run) in &tests {
        for round in 1..=2 {
            for blocking in [true, false] {
                let mut a = a.clone();
                a.blocking_checkpoints = blocking;
                match run(&a) {
                    Ok(r) => println!(
                        "| {name} | {} | {round} | {:.0} | {:.0} | {:.0} | {:.0} | {:.0} | {} | {:.1} |",
                        if blocking { "blocking" } else { "background" },
                        r.iops,
                        r.p50_us,
                        r.p99_us,
                        r.p999_us,
                        r.max_us,
                        r.checkpoints,
                        r.cpu_us_per_op
                    ),
                    Err(e) => println!("| {name} | error: {e} |"),
                }
            }
        }
    }
}

fn tests() -> Vec<Test> {
    let mut v = Vec::new();
    for qd in [1usize, 16, 64] {
        v.push(Test {
            name: format!("4K randwrite new objects QD{qd}"),
            fio: Some(("randwrite".into(), 4096, qd as u32)),
            run: write_new(4096, qd),
        });
    }
    for qd in [1usize, 16, 64] {
        v.push(Test {
            name: format!("4K random overwrite QD{qd}"),
            fio: Some(("randwrite".into(), 4096, qd as u32)),
            run: overwrite(4096, qd),
        });
    }
    for qd in [1usize, 16] {
        v.push(Test {
            name: format!("4K randread QD{qd}"),
            fio: Some(("randread".into(), 4096, qd as u32)),
            run: read(4096, qd),
        });
    }
    v.push(Test {
        name: "64K randwrite QD16".into(),
        fio: Some(("randwrite".into(), 65536, 16)),
        run: overwrite(65536, 16),
    });
    v.push(Test {
        name: "64K randread QD16".into(),
        fio: Some(("randread".into(), 65536, 16)),
        run: read(65536, 16),
    });
    v.push(Test {
        name: "64K randread QD1".into(),
        fio: Some(("randread".into(), 65536, 1)),
        run: read(65536, 1),
    });
    // The three ways an OSD op can read (queue_read above; blocking read; prefetch, then read from memory).
    for bs in [4096u64, 65536] {
        let k = bs / 1024;
        v.push(Test {
            name: format!("{k}K read blocking (QD1)"),
            fio: None,
            run: read_with(bs, 1, ReadMode::Sync),
        });
        for qd in [1usize, 16] {
            v.push(Test {
                name: format!("{k}K read prefetch QD{qd}"),
                fio: None,
                run: read_with(bs, qd, ReadMode::Prefetch),
            });
        }
    }
    // The same on objects whose every block is its own extent (after random 4K writes).
    for (bs, qd, mode, what) in [
        (4096u64, 1usize, ReadMode::Queue, "randread"),
        (4096, 16, ReadMode::Queue, "randread"),
        (65536, 16, ReadMode::Queue, "randread"),
        (4096, 16, ReadMode::Prefetch, "read prefetch"),
    ] {
        v.push(Test {
            name: format!("{}K {what} QD{qd} fragmented", bs / 1024),
            fio: None,
            run: read_opts(bs, qd, mode, true),
        });
    }
    v.push(Test {
        name: "4M write new objects QD4".into(),
        fio: Some(("randwrite".into(), 4 << 20, 4)),
        run: write_new(4 << 20, 4),
    });
    v.push(Test {
        name: "4M read QD4".into(),
        fio: Some(("randread".into(), 4 << 20, 4)),
        run: read(4 << 20, 4),
    });
    v.push(Test {
        name: "omap set 1 key QD16".into(),
        fio: None,
        run: omap(0, 16),
    });
    v.push(Test {
        name: "omap get 1 key".into(),
        fio: None,
        run: omap(1, 1),
    });
    v.push(Test {
        name: "omap iterate 16 keys".into(),
        fio: None,
        run: omap(2, 1),
    });
    v
}

fn sh(cmd: &str, args: &[&str]) -> String {
    Command::new(cmd)
        .args(args)
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default()
}

fn main() {
    let mut a = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(2);
        }
    };
    let file = a.path.clone();
    if std::fs::metadata(&file)
        .map(|m| m.is_file() && m.len() < a.size)
        .unwrap_or(true)
        && !file.starts_with("/dev")
    {
        if let Some(dir) = file.parent() {
            let _ = std::fs::create_dir_all(dir);
        }
        // Allocate real blocks so neither fio nor the engine measures first-write extent conversion.
        let st = Command::new("fio")
            .args([
                "--name=fill",
                &format!("--filename={}", file.display()),
                "--rw=write",
                "--bs=1M",
                "--direct=1",
                &format!("--size={}", a.size),
                "--ioengine=io_uring",
                "--iodepth=8",
                "--output=/dev/null",
            ])
            .status();
        if !st.map(|s| s.success()).unwrap_or(false) {
            eprintln!("could not preallocate {}", file.display());
            std::process::exit(1);
        }
    }
    let mut loopdev = None;
    if a.use_loop {
        let dev = sh(
            "losetup",
            &["--find", "--show", "--direct-io=on", &file.display().to_string()],
        );
        if dev.is_empty() {
            eprintln!("losetup failed (needs root)");
            std::process::exit(1);
        }
        a.path = PathBuf::from(&dev);
        loopdev = Some(dev);
    }
    if let Some(gib) = a.mem_gib {
        println!(
            "# ferrostore memory — {} — commit {} — target {} ({} MiB), load average {}\n",
            sh("date", &["-u", "+%Y-%m-%dT%H:%M:%SZ"]),
            sh("git", &["rev-parse", "--short", "HEAD"]),
            a.path.display(),
            a.size >> 20,
            sh("cut", &["-d", " ", "-f", "1-3", "/proc/loadavg"])
        );
        if let Err(e) = mem_run(&a, gib) {
            eprintln!("{e}");
            std::process::exit(1);
        }
        return;
    }
    if a.p99 {
        println!(
            "# ferrostore checkpoints: blocking vs background — {} — commit {} — target {} ({} MiB), runtime {:?}, load average {}\n",
            sh("date", &["-u", "+%Y-%m-%dT%H:%M:%SZ"]),
            sh("git", &["rev-parse", "--short", "HEAD"]),
            a.path.display(),
            a.size >> 20,
            a.runtime,
            sh("cut", &["-d", " ", "-f", "1-3", "/proc/loadavg"])
        );
        p99_run(&a);
        println!(
            "\nload average after: {}",
            sh("cut", &["-d", " ", "-f", "1-3", "/proc/loadavg"])
        );
        return;
    }
    let cpu = sh("sh", &["-c", "grep -m1 'model name' /proc/cpuinfo | cut -d: -f2"]);
    println!(
        "# ferrostore vs fio — {} — commit {} — {} ({} CPUs, kernel {})",
        sh("date", &["-u", "+%Y-%m-%dT%H:%M:%SZ"]),
        sh("git", &["rev-parse", "--short", "HEAD"]),
        cpu.trim(),
        sh("nproc", &[]),
        sh("uname", &["-r"])
    );
    println!(
        "target: {} ({} MiB), runtime {:?} per test, durability: {}, log alignment {} B, journaled writes up to {} B\n",
        a.path.display(),
        a.size >> 20,
        a.runtime,
        if a.ordered {
            "RWF_DSYNC, ordered commits where the device has no FUA"
        } else if a.dsync {
            "RWF_DSYNC writes"
        } else {
            "fdatasync per group commit"
        },
        a.log_align,
        a.log_data_max
    );
    println!(
        "| test | engine IOPS | p50 µs | p99 µs | CPU µs/op | dev B/user B | fio IOPS | fio p50 µs | fio p99 µs | fio CPU µs/op | engine/fio |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for t in tests() {
        if a.only.as_ref().is_some_and(|o| !t.name.contains(o.as_str())) {
            continue;
        }
        let f = t
            .fio
            .as_ref()
            .filter(|_| !a.no_fio)
            .map(|(rw, bs, qd)| fio(&a, &FioJob { rw, bs: *bs, qd: *qd }));
        let e = (t.run)(&a);
        let fmt_opt = |v: Option<f64>| v.map(|x| format!("{x:.2}")).unwrap_or_else(|| "–".into());
        match (e, f) {
            (Ok(e), f) => {
                let (fi, fp50, fp99, fcpu, ratio) = match f {
                    Some(Ok(f)) => (
                        format!("{:.0}", f.iops),
                        format!("{:.0}", f.p50_us),
                        format!("{:.0}", f.p99_us),
                        format!("{:.1}", f.cpu_us_per_op),
                        format!("{:.0}%", 100.0 * e.iops / f.iops.max(1e-9)),
                    ),
                    Some(Err(err)) => (
                        format!("fio error: {err}"),
                        "–".into(),
                        "–".into(),
                        "–".into(),
                        "–".into(),
                    ),
                    None => ("–".into(), "–".into(), "–".into(), "–".into(), "–".into()),
                };
                println!(
                    "| {} | {:.0} | {:.0} | {:.0} | {:.1} | {} | {fi} | {fp50} | {fp99} | {fcpu} | {ratio} |",
                    t.name,
                    e.iops,
                    e.p50_us,
                    e.p99_us,
                    e.cpu_us_per_op,
                    fmt_opt(e.dev_bytes_per_user_byte)
                );
            }
            (Err(err), _) => println!("| {} | error: {err} | | | | | | | | | |", t.name),
        }
    }
    if let Some(dev) = loopdev {
        sh("losetup", &["-d", &dev]);
    }
}
