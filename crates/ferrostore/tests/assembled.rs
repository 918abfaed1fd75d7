// SPDX-License-Identifier: LGPL-3.0-or-later
#![allow(clippy::unwrap_used)]
//! Reads assembled from several device reads, memory and holes: their buffers come from a pool and may hold an
//! earlier read's bytes, so every byte handed out must be written again (a hole as zeroes).

mod common;

use bytes::Bytes;
use ferrostore::rng::Rng;
use ferrostore::{CollectionId, ObjectKey, Op, StoreConfig, Transaction};

const B: usize = 4096;
const N: usize = 64;

fn oid(i: u64) -> ObjectKey {
    ObjectKey::new(i as u32, Bytes::from(format!("obj{i:04}")))
}

fn pattern(seed: u64, len: usize) -> Vec<u8> {
    let mut v = vec![0u8; len];
    Rng::new(seed).fill(&mut v);
    v
}

/// A block-aligned assembled read carries the crc of every page (device blocks and holes alike), so the reply's
/// segment crc needs no second pass; each must be the crc of the bytes handed out.
fn assert_page_crcs(got: &Bytes, what: &str) {
    let pc = ceph_crc::blocks::page_crcs(got).unwrap_or_else(|| panic!("{what}: no page crcs attached"));
    for (i, page) in got.chunks(B).enumerate() {
        assert_eq!(pc.get(page), Some(crc32c::crc32c(page)), "{what}: page {i}");
    }
}

#[test]
fn holes_in_a_recycled_buffer_read_as_zeroes() {
    let cid = CollectionId::new(Bytes::from_static(b"c"));
    let cfg = StoreConfig {
        defrag_extra_reads: 0,
        ..StoreConfig::default()
    };
    let mut s = common::sim_store(4, 32 << 20, 1 << 20, cfg);
    let write = |s: &mut ferrostore::Store<ferrostore::SimDevice>, o: u64, off: usize, data: &[u8]| {
        let mut t = Transaction::new();
        if off == usize::MAX {
            t.push(Op::CreateCollection {
                cid: cid.clone(),
                bits: 0,
            });
        } else {
            t.push(Op::Write {
                cid: cid.clone(),
                oid: oid(o),
                offset: off as u64,
                data: Bytes::copy_from_slice(data),
            });
        }
        s.commit(&t).unwrap();
    };
    write(&mut s, 0, usize::MAX, &[]);
    // Object 1: scattered, so a whole read is assembled from many device reads.
    let mut full = pattern(1, N * B);
    write(&mut s, 1, 0, &full);
    for b in (0..N).step_by(2) {
        let blk = pattern(100 + b as u64, B);
        write(&mut s, 1, b * B, &blk);
        full[b * B..(b + 1) * B].copy_from_slice(&blk);
        write(&mut s, 3, b * B, &blk);
    }
    // Object 2: its first and last blocks only, a hole between them.
    let (head, tail) = (pattern(7, B), pattern(8, B));
    write(&mut s, 2, 0, &head);
    write(&mut s, 2, (N - 1) * B, &tail);
    s.checkpoint().unwrap();
    let mut sparse = vec![0u8; N * B];
    sparse[..B].copy_from_slice(&head);
    sparse[(N - 1) * B..].copy_from_slice(&tail);
    for round in 0..4 {
        // Each read drops its buffer back to the pool before the next one takes it.
        let got = s.read(&cid, &oid(1), 0, (N * B) as u64).unwrap();
        assert_eq!(&got[..], &full[..], "round {round}: scattered object");
        assert_page_crcs(&got, "scattered object");
        drop(got);
        let got = s.read(&cid, &oid(2), 0, (N * B) as u64).unwrap();
        assert_eq!(&got[..], &sparse[..], "round {round}: sparse object");
        assert_page_crcs(&got, "sparse object");
        drop(got);
        // Unaligned ranges too.
        let (off, len) = (B / 2 + 3, (N - 2) * B);
        let got = s.read(&cid, &oid(2), off as u64, len as u64).unwrap();
        assert_eq!(&got[..], &sparse[off..off + len], "round {round}: part");
    }
    assert!(s.stats.reads_assembled >= 12, "{}", s.stats.reads_assembled);
    // Each read gives its buffer back before the next takes one: only the first comes from new memory.
    assert_eq!(s.stats.assembled_buf_misses, 1);
}
