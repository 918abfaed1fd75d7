// SPDX-License-Identifier: LGPL-3.0-or-later
#![allow(clippy::unwrap_used)]
//! Defragment on read (`StoreConfig::defrag_extra_reads`): a range read scattered a second time (by default;
//! `defrag_after_reads`), or a first time if it is small (`defrag_eager_blocks`), has its blocks written again
//! as one run, so the next read of the range takes one device read; the content never changes, a change to the
//! range before the rewrite cancels it, shared blocks stay shared, prefetched data stays valid, and a crash at any
//! point of the rewrite recovers the same bytes.

mod common;

use bytes::Bytes;
use ferrostore::rng::Rng;
use ferrostore::{CollectionId, Event, ObjectKey, Op, SimConfig, SimDevice, Store, StoreConfig, Transaction};

const B: usize = 4096;
/// Blocks of the test object (256 KiB).
const N: usize = 64;

fn cid() -> CollectionId {
    CollectionId::new(Bytes::from_static(b"c"))
}

fn oid(i: u64) -> ObjectKey {
    ObjectKey::new(i as u32, Bytes::from(format!("obj{i:04}")))
}

fn pattern(seed: u64, len: usize) -> Vec<u8> {
    let mut v = vec![0u8; len];
    Rng::new(seed).fill(&mut v);
    v
}

fn write(s: &mut Store<SimDevice>, o: u64, off: usize, data: &[u8]) {
    let mut t = Transaction::new();
    t.push(Op::Write {
        cid: cid(),
        oid: oid(o),
        offset: off as u64,
        data: Bytes::copy_from_slice(data),
    });
    s.commit(&t).unwrap();
}

/// Rewrite on the first scattered read (`defrag_after_reads` 1), as most tests here want.
fn first_read() -> StoreConfig {
    StoreConfig {
        defrag_after_reads: 1,
        ..StoreConfig::default()
    }
}

fn store(seed: u64, cfg: StoreConfig) -> Store<SimDevice> {
    let mut s = common::sim_store(seed, 32 << 20, 1 << 20, cfg);
    let mut t = Transaction::new();
    t.push(Op::CreateCollection { cid: cid(), bits: 0 });
    s.commit(&t).unwrap();
    s
}

/// Object 1 written whole, then every other block overwritten with a write to object 2 in between (so the
/// fresh blocks are not next to each other); checkpointed so every read goes to the device. Returns the
/// expected content of object 1.
fn scattered(s: &mut Store<SimDevice>) -> Vec<u8> {
    let mut want = pattern(1, N * B);
    write(s, 1, 0, &want);
    for b in (0..N).step_by(2) {
        let blk = pattern(100 + b as u64, B);
        write(s, 1, b * B, &blk);
        want[b * B..(b + 1) * B].copy_from_slice(&blk);
        write(s, 2, b * B, &pattern(900 + b as u64, B));
    }
    s.checkpoint().unwrap();
    want
}

/// Poll until the store has nothing left to do in the background (bounded).
fn settle(s: &mut Store<SimDevice>) {
    let mut ev = Vec::new();
    for _ in 0..10_000 {
        if s.unacked() == 0 && !s.has_background_work() {
            return;
        }
        ev.clear();
        s.wait(&mut ev).unwrap();
    }
    panic!("the store did not settle");
}

/// A blocking read of object 1 and the device reads it took.
fn read_counted(s: &mut Store<SimDevice>, off: usize, len: usize) -> (Vec<u8>, u64) {
    let before = s.device_stats().reads;
    let got = s.read(&cid(), &oid(1), off as u64, len as u64).unwrap();
    (got.to_vec(), s.device_stats().reads - before)
}

#[test]
fn a_scattered_read_is_rewritten_and_the_next_read_takes_one_device_read() {
    let mut s = store(1, first_read());
    let want = scattered(&mut s);
    let (got, reads) = read_counted(&mut s, 0, N * B);
    assert_eq!(got, want);
    assert!(
        reads >= N as u64 / 2,
        "the object is scattered: {reads} device reads"
    );
    settle(&mut s);
    assert_eq!(s.stats.defrag_txns, 1);
    assert_eq!(s.stats.defrag_blocks, N as u64);
    let (got, reads) = read_counted(&mut s, 0, N * B);
    assert_eq!(got, want);
    assert_eq!(reads, 1, "one run after the rewrite");
    // A part of the range too, and the object stays sound through a checkpoint and a remount.
    let (got, reads) = read_counted(&mut s, 3 * B + 17, 9 * B);
    assert_eq!(got, want[3 * B + 17..12 * B + 17]);
    assert_eq!(reads, 1);
    s.checkpoint().unwrap();
    let rep = s.fsck().unwrap();
    assert!(rep.errors.is_empty(), "{:?}", rep.errors);
    let dev = s.umount().unwrap();
    let mut s = Store::mount(dev, 0, StoreConfig::default()).unwrap();
    let (got, reads) = read_counted(&mut s, 0, N * B);
    assert_eq!(got, want);
    assert_eq!(reads, 1);
    assert_eq!(s.stats.defrag_txns, 0, "nothing left to rewrite");
}

#[test]
fn by_default_a_large_range_is_rewritten_on_its_second_scattered_read() {
    let mut s = store(10, StoreConfig::default());
    assert!(
        N as u64 > StoreConfig::default().defrag_eager_blocks,
        "the object is a large range"
    );
    let want = scattered(&mut s);
    // Cold data read once is left as it is.
    let (got, reads) = read_counted(&mut s, 0, N * B);
    assert_eq!(got, want);
    assert!(reads >= N as u64 / 2);
    settle(&mut s);
    assert_eq!(s.stats.defrag_txns, 0, "the range was read once");
    assert_eq!(s.stats.defrag_deferred, 1);
    // Read again: now it is rewritten, and the next read takes one device read.
    let (got, reads) = read_counted(&mut s, 0, N * B);
    assert_eq!(got, want);
    assert!(reads >= N as u64 / 2);
    settle(&mut s);
    assert_eq!(s.stats.defrag_txns, 1);
    assert_eq!(s.stats.defrag_blocks, N as u64);
    let (got, reads) = read_counted(&mut s, 0, N * B);
    assert_eq!(got, want);
    assert_eq!(reads, 1);
    let rep = s.fsck().unwrap();
    assert!(rep.errors.is_empty(), "{:?}", rep.errors);
}

/// A small range (at most `defrag_eager_blocks`) is rewritten on its first scattered read by default, and
/// waits for its second with `defrag_eager_blocks` 0.
#[test]
fn by_default_a_small_range_is_rewritten_on_its_first_scattered_read() {
    for (eager, rewritten) in [(StoreConfig::default().defrag_eager_blocks, true), (0, false)] {
        let mut s = store(
            11,
            StoreConfig {
                defrag_eager_blocks: eager,
                ..StoreConfig::default()
            },
        );
        let want = scattered(&mut s);
        let (got, reads) = read_counted(&mut s, B, 8 * B);
        assert_eq!((got.as_slice(), reads), (&want[B..9 * B], 8), "eager {eager}");
        settle(&mut s);
        let (got, reads) = read_counted(&mut s, B, 8 * B);
        assert_eq!(got.as_slice(), &want[B..9 * B]);
        if rewritten {
            assert_eq!(
                (
                    s.stats.defrag_txns,
                    s.stats.defrag_blocks,
                    s.stats.defrag_deferred
                ),
                (1, 8, 0)
            );
            assert_eq!(reads, 1, "one run after the rewrite");
        } else {
            assert_eq!(
                (s.stats.defrag_txns, s.stats.defrag_deferred),
                (0, 1),
                "eager 0: read once, left alone"
            );
            assert_eq!(reads, 8);
        }
        let rep = s.fsck().unwrap();
        assert!(rep.errors.is_empty(), "{:?}", rep.errors);
    }
}

#[test]
fn off_or_below_the_threshold_nothing_is_rewritten() {
    let mut s = store(
        2,
        StoreConfig {
            defrag_extra_reads: 0,
            ..first_read()
        },
    );
    let want = scattered(&mut s);
    for _ in 0..2 {
        let (got, reads) = read_counted(&mut s, 0, N * B);
        assert_eq!(got, want);
        assert!(reads >= N as u64 / 2);
        settle(&mut s);
    }
    assert_eq!(s.stats.defrag_txns, 0);

    // Default threshold of ranges larger than `defrag_eager_blocks` (3 extra reads; eager 0 makes every range
    // one): even blocks were overwritten and odd ones not, so every block of a range is its own device read.
    // Ranges of 2 and 3 blocks (1 and 2 extra reads) stay; one of 4 blocks is rewritten.
    let mut s = store(
        3,
        StoreConfig {
            defrag_eager_blocks: 0,
            ..first_read()
        },
    );
    let want = scattered(&mut s);
    let (got, reads) = read_counted(&mut s, B, 2 * B);
    assert_eq!((got.as_slice(), reads), (&want[B..3 * B], 2));
    let (got, reads) = read_counted(&mut s, B, 3 * B);
    assert_eq!((got.as_slice(), reads), (&want[B..4 * B], 3));
    settle(&mut s);
    assert_eq!(
        s.stats.defrag_txns, 0,
        "2 extra reads are below the default threshold"
    );
    let (got, reads) = read_counted(&mut s, B, 4 * B);
    assert_eq!((got.as_slice(), reads), (&want[B..5 * B], 4));
    settle(&mut s);
    assert_eq!(s.stats.defrag_txns, 1);
    let (_, reads) = read_counted(&mut s, B, 4 * B);
    assert_eq!(reads, 1);
}

/// A small range split in two (one extra device read) is rewritten by default on its first read; with
/// `defrag_small_extra_reads` 3 it needs 3 extra reads, as larger ranges do; 0 counts as 1.
#[test]
fn a_small_range_in_two_pieces_is_rewritten() {
    for (small_extra, rewritten) in [
        (StoreConfig::default().defrag_small_extra_reads, true),
        (0, true),
        (3, false),
    ] {
        let mut s = store(
            12,
            StoreConfig {
                defrag_small_extra_reads: small_extra,
                ..StoreConfig::default()
            },
        );
        let want = scattered(&mut s);
        // Blocks 1 and 2: two pieces, two device reads.
        let (got, reads) = read_counted(&mut s, B, 2 * B);
        assert_eq!(
            (got.as_slice(), reads),
            (&want[B..3 * B], 2),
            "small extra {small_extra}"
        );
        settle(&mut s);
        let (got, reads) = read_counted(&mut s, B, 2 * B);
        assert_eq!(got.as_slice(), &want[B..3 * B]);
        assert_eq!(
            (s.stats.defrag_txns, reads),
            if rewritten { (1, 1) } else { (0, 2) },
            "small extra {small_extra}"
        );
        // An unscattered small range is never rewritten, whatever the setting.
        let (_, reads) = read_counted(&mut s, 40 * B + 1, 100);
        assert_eq!(reads, 1);
        settle(&mut s);
        assert_eq!(s.stats.defrag_txns, u64::from(rewritten));
        assert_eq!(s.stats.defrag_skipped, 0, "nothing queued for it either");
        let rep = s.fsck().unwrap();
        assert!(rep.errors.is_empty(), "{:?}", rep.errors);
    }
}

#[test]
fn a_change_before_the_rewrite_cancels_it() {
    let mut s = store(4, first_read());
    let mut want = scattered(&mut s);
    // queue_read leaves the rewrite queued until the next poll; a write lands first.
    let id = s.queue_read(&cid(), &oid(1), 0, (N * B) as u64).unwrap();
    let mut ev = Vec::new();
    let mut done = false;
    for _ in 0..10_000 {
        // Drive the device only (reads complete inside `pump`), never `poll`/`wait`, which would rewrite.
        if s.reads_in_flight() == 0 {
            break;
        }
        let _ = s.read(&cid(), &oid(2), 0, 1).unwrap();
    }
    let blk = pattern(7777, B);
    let mut t = Transaction::new();
    t.push(Op::Write {
        cid: cid(),
        oid: oid(1),
        offset: (5 * B) as u64,
        data: Bytes::copy_from_slice(&blk),
    });
    s.queue_transaction(&t).unwrap();
    want[5 * B..6 * B].copy_from_slice(&blk);
    for _ in 0..10_000 {
        ev.clear();
        s.wait(&mut ev).unwrap();
        for e in ev.drain(..) {
            match e {
                Event::ReadDone(r, res) if r == id => {
                    assert_eq!(res.unwrap().len(), N * B);
                    done = true;
                }
                _ => {}
            }
        }
        if done && s.unacked() == 0 && !s.has_background_work() {
            break;
        }
    }
    assert!(done);
    assert_eq!(s.stats.defrag_txns, 0);
    assert_eq!(s.stats.defrag_skipped, 1, "the range changed after the read");
    let (got, _) = read_counted(&mut s, 0, N * B);
    assert_eq!(got, want);
    let rep = s.fsck().unwrap();
    assert!(rep.errors.is_empty(), "{:?}", rep.errors);
}

#[test]
fn blocks_shared_with_a_clone_stay_shared() {
    let mut s = store(5, first_read());
    let want = scattered(&mut s);
    let mut t = Transaction::new();
    t.push(Op::Clone {
        cid: cid(),
        src: oid(1),
        dst: oid(3),
    });
    s.commit(&t).unwrap();
    s.checkpoint().unwrap();
    let (got, _) = read_counted(&mut s, 0, N * B);
    assert_eq!(got, want);
    settle(&mut s);
    assert_eq!(s.stats.defrag_txns, 0);
    assert_eq!(s.stats.defrag_skipped, 1);
    let rep = s.fsck().unwrap();
    assert!(rep.errors.is_empty(), "{:?}", rep.errors);
    assert_eq!(rep.shared_blocks, N as u64);
}

#[test]
fn prefetched_data_stays_valid_across_the_rewrite() {
    let mut s = store(6, first_read());
    let want = scattered(&mut s);
    let token = s
        .prefetch(&cid(), &oid(1), &[(0, (N * B) as u64)])
        .unwrap()
        .expect("device reads needed");
    let mut ev = Vec::new();
    let mut prefetched = false;
    for _ in 0..10_000 {
        ev.clear();
        s.wait(&mut ev).unwrap();
        prefetched |= ev
            .iter()
            .any(|e| matches!(e, Event::Prefetched(t) if *t == token));
        if prefetched && !s.has_background_work() && s.unacked() == 0 {
            break;
        }
    }
    assert!(prefetched);
    assert_eq!(s.stats.defrag_txns, 1, "the prefetch's read was scattered");
    let before = s.stats.reads_prefetched;
    let (got, reads) = read_counted(&mut s, 0, N * B);
    assert_eq!(got, want);
    assert_eq!(reads, 0, "served from the prefetch");
    assert_eq!(s.stats.reads_prefetched, before + 1);
    s.release_prefetch(token);
}

/// The scenario of the first test with a crash image taken at device completion `at`: whatever the image
/// holds, it mounts to the same content and passes fsck. Returns the completions the whole scenario took.
fn crash_at(at: Option<u64>) -> u64 {
    let mut s = store(8, first_read());
    let want = scattered(&mut s);
    if let Some(k) = at {
        s.device_mut().set_crash_point(k);
    }
    let (got, _) = read_counted(&mut s, 0, N * B);
    assert_eq!(got, want);
    settle(&mut s);
    assert_eq!(s.stats.defrag_txns, 1);
    let events = s.device().events();
    if at.is_some() {
        let (img, _) = s
            .device_mut()
            .take_crash_snapshot()
            .expect("the crash point falls in the scenario");
        let dev = SimDevice::from_image(
            img,
            SimConfig {
                seed: 9,
                reorder: true,
                max_completions_per_poll: 1,
                durable_writes: false,
            },
        );
        let mut r = Store::mount(dev, 0, StoreConfig::default()).unwrap();
        let got = r.read(&cid(), &oid(1), 0, (N * B) as u64).unwrap();
        assert_eq!(got.as_ref(), want.as_slice(), "crash at completion {k:?}", k = at);
        let rep = r.fsck().unwrap();
        assert!(rep.errors.is_empty(), "crash at {at:?}: {:?}", rep.errors);
    }
    events
}

#[test]
fn a_crash_anywhere_in_the_rewrite_keeps_the_content() {
    let mut s = store(8, first_read());
    let _ = scattered(&mut s);
    let start = s.device().events();
    drop(s);
    let end = crash_at(None);
    assert!(end > start + 2);
    for k in start + 1..=end {
        crash_at(Some(k));
    }
}
