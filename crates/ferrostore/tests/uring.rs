// SPDX-License-Identifier: LGPL-3.0-or-later
#![allow(clippy::unwrap_used)]
//! The io_uring + O_DIRECT backend on a real file: mkfs, two shards on two threads, write, read, remount, fsck.

mod common;

use bytes::Bytes;
use common::*;
use ferrostore::rng::Rng;
use ferrostore::uring::{UringDevice, UringOptions};
use ferrostore::{MkfsOptions, Op, Store, StoreConfig, Transaction, mkfs};
use std::path::PathBuf;

fn path(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(name)
}

fn opts(dsync: bool) -> UringOptions {
    UringOptions {
        dsync_writes: dsync,
        ..Default::default()
    }
}

fn open(p: &std::path::Path, size: Option<u64>, opts: UringOptions) -> Option<UringDevice> {
    match UringDevice::open(p, size, opts) {
        Ok(d) => Some(d),
        Err(e) => {
            eprintln!(
                "skipping: cannot open {} with O_DIRECT + io_uring: {e}",
                p.display()
            );
            None
        }
    }
}

fn workload(p: PathBuf, shard: u32, opts: UringOptions) -> Model {
    let dev = open(&p, None, opts).unwrap();
    let mut s = Store::mount(dev, shard, StoreConfig::default()).unwrap();
    let mut m = Model::default();
    let mut rng = Rng::new(shard as u64 + 1);
    let t = setup_txn(2);
    m.apply(&t).unwrap();
    s.commit(&t).unwrap();
    // Unaligned Bytes (offset 1 into a Vec) exercise the bounce-buffer path; aligned ones the zero-copy path.
    for i in 0..200u64 {
        let t = random_txn(&mut rng, 2, 8);
        let want = m.apply(&t);
        let got = if i % 3 == 0 {
            s.commit(&t).map(|_| ())
        } else {
            s.queue_transaction(&t).map(|_| ())
        };
        assert_eq!(got.map_err(|e| e.errno()), want);
    }
    let big = {
        let mut v = vec![0u8; (1 << 20) + 1];
        rng.fill(&mut v);
        Bytes::from(v).slice(1..)
    };
    let mut t = Transaction::new();
    t.push(Op::Write {
        cid: cid(0),
        oid: oid(20),
        offset: 0,
        data: big.clone(),
    });
    m.apply(&t).unwrap();
    s.commit(&t).unwrap();
    assert_eq!(s.read(&cid(0), &oid(20), 0, 0).unwrap(), big);
    assert_eq!(dump(&mut s).unwrap(), m);
    let dev = s.umount().unwrap();
    let mut s = Store::mount(dev, shard, StoreConfig::default()).unwrap();
    assert_eq!(dump(&mut s).unwrap(), m);
    let rep = s.fsck().unwrap();
    assert!(rep.errors.is_empty(), "{:?}", rep.errors);
    m
}

fn run(name: &str, opts: UringOptions) {
    let p = path(name);
    let _ = std::fs::remove_file(&p);
    let Some(dev) = open(&p, Some(64 << 20), opts) else {
        return;
    };
    drop(
        mkfs(
            dev,
            &MkfsOptions {
                shards: 2,
                log_bytes: 1 << 20,
                uuid: 42,
                ..Default::default()
            },
        )
        .unwrap(),
    );
    // One thread per shard, as the OSD runs one shard per core; each opens its own ring.
    let hs: Vec<_> = (0..2)
        .map(|sh| {
            let p = p.clone();
            std::thread::spawn(move || workload(p, sh, opts))
        })
        .collect();
    let models: Vec<Model> = hs.into_iter().map(|h| h.join().unwrap()).collect();
    // Remount both shards once more from a fresh open: state survived.
    for (sh, m) in models.iter().enumerate() {
        let mut s = Store::mount(open(&p, None, opts).unwrap(), sh as u32, StoreConfig::default()).unwrap();
        assert_eq!(&dump(&mut s).unwrap(), m);
    }
    let _ = std::fs::remove_file(&p);
}

#[test]
fn uring_file_two_shards_roundtrip_and_remount() {
    run("ferrostore-uring.img", opts(false));
}

#[test]
fn uring_file_dsync_mode() {
    run("ferrostore-uring-dsync.img", opts(true));
}

/// Ordered commits where the file's device has no FUA (data writes plain, the log record's RWF_DSYNC after
/// them); elsewhere the same as dsync mode. The device's counters say which one ran.
#[test]
fn uring_file_ordered_mode() {
    let o = UringOptions {
        ordered_commits: true,
        ..opts(true)
    };
    run("ferrostore-uring-ordered.img", o);
    // One commit at a time: ordered (`ordered_lone_synced` off) and as dsync (on, the default: a lone commit).
    for lone in [false, true] {
        let p = path("ferrostore-uring-ordered-1.img");
        let _ = std::fs::remove_file(&p);
        let Some(dev) = open(&p, Some(16 << 20), o) else {
            return;
        };
        let no_fua = dev.has_fua() == Some(false);
        eprintln!("device FUA: {:?}", dev.has_fua());
        let dev = mkfs(
            dev,
            &MkfsOptions {
                shards: 1,
                log_bytes: 1 << 20,
                uuid: 43,
                ..Default::default()
            },
        )
        .unwrap();
        let cfg = StoreConfig {
            ordered_lone_synced: lone,
            ..StoreConfig::default()
        };
        let mut s = Store::mount(dev, 0, cfg).unwrap();
        s.commit(&setup_txn(1)).unwrap();
        let (d0, r0, l0) = (s.device_stats(), s.stats.log_records, s.stats.ordered_lone_txns);
        for i in 0..20u64 {
            let mut t = Transaction::new();
            t.push(Op::Write {
                cid: cid(0),
                oid: oid(i),
                offset: 0,
                data: Bytes::from(vec![i as u8; 8192]),
            });
            s.commit(&t).unwrap();
        }
        let (d1, r1) = (s.device_stats(), s.stats.log_records);
        let (synced, writes, records) = (
            d1.synced_writes - d0.synced_writes,
            d1.writes - d0.writes,
            r1 - r0,
        );
        assert_eq!(records, 20);
        assert_eq!(writes, 40, "a data write and a log record per commit");
        // Without FUA and ordered, only the log records are RWF_DSYNC; with FUA (or unknown), or alone, every
        // write is.
        let ordered = no_fua && !lone;
        assert_eq!(synced, if ordered { records } else { writes });
        let lone_txns = s.stats.ordered_lone_txns - l0;
        assert_eq!(lone_txns, if no_fua && lone { 20 } else { 0 });
        for i in 0..20u64 {
            assert_eq!(s.read(&cid(0), &oid(i), 0, 0).unwrap(), vec![i as u8; 8192]);
        }
        drop(s.umount().unwrap());
        let _ = std::fs::remove_file(&p);
    }
}

/// Data handed in 512-byte-aligned (as page-aligned network receive buffers are) goes to the device without a
/// copy; unaligned data is copied once into a bounce buffer. Both read back the same.
#[test]
fn aligned_payloads_are_written_without_a_copy() {
    let Some((mut s, p)) = uring_store("ferrostore-uring-align.img", 43, true) else {
        return;
    };
    let len = 64 << 10;
    let raw = Bytes::from(vec![0x5au8; len + 8192]);
    let at = (4096 - raw.as_ptr() as usize % 4096) % 4096;
    let aligned = raw.slice(at..at + len);
    let unaligned = raw.slice(at + 1..at + 1 + len);
    let write = |s: &mut Store<UringDevice>, o: u64, data: &Bytes| {
        let mut t = Transaction::new();
        t.push(Op::Write {
            cid: cid(0),
            oid: oid(o),
            offset: 0,
            data: data.clone(),
        });
        s.commit(&t).unwrap();
    };
    let before = s.device_stats();
    write(&mut s, 1, &aligned);
    let mid = s.device_stats();
    // (each commit also writes its log record, which is built unaligned and copied: less than the data)
    assert!(
        mid.bytes_copied - before.bytes_copied < len as u64,
        "aligned data was copied: {before:?} -> {mid:?}"
    );
    write(&mut s, 2, &unaligned);
    let after = s.device_stats();
    assert!(
        after.bytes_copied - mid.bytes_copied >= len as u64,
        "unaligned data needs the bounce buffer: {mid:?} -> {after:?}"
    );
    assert_eq!(s.read(&cid(0), &oid(1), 0, 0).unwrap(), aligned);
    assert_eq!(s.read(&cid(0), &oid(2), 0, 0).unwrap(), unaligned);
    drop(s);
    let _ = std::fs::remove_file(&p);
}

/// A corrupt block inside a multi-block device read (verified three pages at a time) fails the read with the
/// offset of that very block, through both the blocking and the prefetched path; reads that avoid it still work.
#[test]
fn a_corrupt_block_in_a_long_run_is_caught_at_its_offset() {
    use std::os::unix::fs::FileExt;
    let Some((mut s, p)) = uring_store("ferrostore-uring-corrupt.img", 44, true) else {
        return;
    };
    let len = 64 << 10;
    let mut data = vec![0u8; len];
    Rng::new(7).fill(&mut data);
    let mut t = Transaction::new();
    t.push(Op::Write {
        cid: cid(0),
        oid: oid(1),
        offset: 0,
        data: Bytes::from(data.clone()),
    });
    s.commit(&t).unwrap();
    assert_eq!(s.read(&cid(0), &oid(1), 0, 0).unwrap(), data[..]);
    drop(s.umount().unwrap());
    // Flip one byte of the object's sixth block on the media.
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&p)
        .unwrap();
    let img = std::fs::read(&p).unwrap();
    let at = img
        .windows(64)
        .position(|w| w == &data[5 * 4096..5 * 4096 + 64])
        .unwrap();
    f.write_all_at(&[img[at + 7] ^ 0x10], (at + 7) as u64).unwrap();
    f.sync_all().unwrap();
    drop(f);
    let mut s = Store::mount(open(&p, None, opts(true)).unwrap(), 0, StoreConfig::default()).unwrap();
    let bad = (at / 4096 * 4096) as u64;
    for prefetch in [false, true] {
        let token = prefetch.then(|| s.prefetch(&cid(0), &oid(1), &[(0, len as u64)]).unwrap().unwrap());
        if let Some(t) = token {
            while !s.take_prefetched().iter().any(|(x, _)| *x == t) {
                let mut ev = Vec::new();
                s.wait(&mut ev).unwrap();
            }
        }
        match s.read(&cid(0), &oid(1), 0, len as u64) {
            Err(ferrostore::StoreError::Checksum { offset }) => assert_eq!(offset, bad),
            other => panic!("corrupt block not caught: {:?}", other.map(|b| b.len())),
        }
        if let Some(t) = token {
            s.release_prefetch(t);
        }
    }
    // the blocks around it are intact (a run of five before it, ten after it)
    assert_eq!(s.read(&cid(0), &oid(1), 0, 5 * 4096).unwrap(), data[..5 * 4096]);
    assert_eq!(s.read(&cid(0), &oid(1), 6 * 4096, 0).unwrap(), data[6 * 4096..]);
    assert!(s.stats.csum_errors >= 2);
    let _ = std::fs::remove_file(&p);
}

/// More writes in flight than the completion queue holds: the completions beyond it wait in the kernel's overflow
/// list, and a caller that only ever `poll`s (as the OSD core does before it sleeps) must still get every one.
#[test]
fn polling_alone_gets_completions_beyond_the_completion_queue() {
    use ferrostore::device::{Completion, Device};
    let p = path("overflow.img");
    let _ = std::fs::remove_file(&p);
    let Ok(mut d) = UringDevice::open(
        &p,
        Some(8 << 20),
        UringOptions {
            queue_depth: 4,
            ..Default::default()
        },
    ) else {
        eprintln!("skipping: cannot open {} with O_DIRECT + io_uring", p.display());
        return;
    };
    // 4 submission entries and 8 completion entries; 512 writes leave hundreds in flight at once.
    let n = 512u64;
    let page = Bytes::from(vec![7u8; 4096]);
    let mut got: Vec<Completion> = Vec::new();
    for i in 0..n {
        d.submit_write(i, i * 4096, vec![page.clone()]);
    }
    let start = std::time::Instant::now();
    while (got.len() as u64) < n && start.elapsed() < std::time::Duration::from_secs(10) {
        d.poll(&mut got);
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
    assert_eq!(got.len() as u64, n, "completions lost to the overflow list");
    assert!(got.iter().all(|c| c.result.is_ok()));
    let _ = std::fs::remove_file(&p);
}

/// Reads into registered buffers (`READ_FIXED`) return the bytes on the device, like plain reads, buffers
/// reused from the pool included; beyond the registration budget reads fall back to plain ones.
#[test]
fn fixed_buffer_reads_return_the_device_bytes() {
    use ferrostore::device::{Completion, Device};
    let p = path("fixed.img");
    let _ = std::fs::remove_file(&p);
    let mut rng = Rng::new(9);
    let mut image = vec![0u8; 4 << 20];
    rng.fill(&mut image);
    for fixed in [true, false] {
        let Ok(mut d) = UringDevice::open(
            &p,
            Some(8 << 20),
            UringOptions {
                fixed_buffers: fixed,
                // room for the 4 KiB and 64 KiB buffers, not for the 1 MiB ones
                fixed_buffer_bytes: 512 << 10,
                ..Default::default()
            },
        ) else {
            eprintln!("skipping: cannot open {} with O_DIRECT + io_uring", p.display());
            return;
        };
        let mut got: Vec<Completion> = Vec::new();
        d.submit_write(0, 0, vec![Bytes::from(image.clone())]);
        while got.is_empty() {
            d.wait(&mut got);
        }
        assert!(got.iter().all(|c| c.result.is_ok()));
        let mut tag = 1;
        for round in 0..3u64 {
            for len in [4096usize, 65536, 1 << 20] {
                // several in flight at once, each into its own buffer
                let offs: Vec<u64> = (0..4u64)
                    .map(|i| ((round * 7 + i * 13) * 4096) % (image.len() - len) as u64 / 4096 * 4096)
                    .collect();
                for &o in &offs {
                    d.submit_read(tag, o, len);
                    tag += 1;
                }
                got.clear();
                while got.len() < offs.len() {
                    d.wait(&mut got);
                }
                for c in got.drain(..) {
                    let o = offs[(c.tag - (tag - offs.len() as u64)) as usize] as usize;
                    let b = c.result.unwrap().unwrap();
                    assert_eq!(&b[..], &image[o..o + len], "fixed {fixed}, {len} bytes at {o}");
                }
            }
        }
        let st = d.stats();
        if fixed {
            // 4 KiB and 64 KiB reads (8 buffers, 272 KiB) registered; 1 MiB reads beyond the budget are plain
            assert_eq!(st.reads_fixed, 24, "{st:?}");
        } else {
            assert_eq!(st.reads_fixed, 0, "{st:?}");
        }
        assert_eq!(st.reads, 36);
    }
    let _ = std::fs::remove_file(&p);
}
