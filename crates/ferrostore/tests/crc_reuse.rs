// SPDX-License-Identifier: LGPL-3.0-or-later
#![allow(clippy::unwrap_used)]
//! Block crcs the messenger attached to received data (`ceph_crc::blocks`) are written as the blocks' crcs
//! instead of a second pass: the media is byte for byte what computing them gives, and the blocks read back
//! verified. Blocks that do not sit on an attached page (other phase, a copy, partial blocks) are computed.

mod common;

use bytes::Bytes;
use common::*;
use ferrostore::{MkfsOptions, Op, SimConfig, SimDevice, Store, StoreConfig, mkfs};

const PAGE: usize = 4096;

fn fresh() -> Store<SimDevice> {
    let dev = mkfs(
        SimDevice::from_image(
            vec![0u8; 8 << 20],
            SimConfig {
                seed: 5,
                reorder: true,
                max_completions_per_poll: 2,
                durable_writes: false,
            },
        ),
        &MkfsOptions {
            shards: 1,
            log_bytes: 256 << 10,
            uuid: 42,
            ..Default::default()
        },
    )
    .unwrap();
    let mut s = Store::mount(dev, 0, StoreConfig::default()).unwrap();
    s.commit(&setup_txn(1)).unwrap();
    s
}

/// `len` bytes whose first byte sits `in_page` bytes past a page boundary (as a receive sink places them).
fn placed(len: usize, in_page: usize, seed: u64) -> Bytes {
    let mut v = vec![0u8; len + 2 * PAGE];
    let pad = (v.as_ptr().align_offset(PAGE) + in_page) % PAGE;
    ferrostore::rng::Rng::new(seed).fill(&mut v[pad..pad + len]);
    Bytes::from(v).slice(pad..pad + len)
}

fn write(s: &mut Store<SimDevice>, obj: u64, offset: u64, data: Bytes) {
    let mut t = ferrostore::Transaction::new();
    t.push(Op::Write {
        cid: cid(0),
        oid: oid(obj),
        offset,
        data,
    });
    s.commit(&t).unwrap();
}

/// Writes whose object offset and memory phase agree (the client's data_off), at several offsets and sizes.
const CASES: [(u64, usize); 4] = [
    (0, 64 << 10),
    (1000, 5 * PAGE + 77),
    (8192, 4 * PAGE),
    (300, 3 * PAGE),
];

#[test]
fn attached_block_crcs_are_used_and_the_media_is_unchanged() {
    let mut with = fresh();
    let mut without = fresh();
    let mut expect_reused = 0;
    let mut written = Vec::new();
    for (i, &(off, len)) in CASES.iter().enumerate() {
        let data = placed(len, off as usize % PAGE, i as u64);
        written.push(data.clone());
        let (_, attached) = ceph_crc::blocks::attach(data.clone());
        let head = (PAGE - off as usize % PAGE) % PAGE;
        expect_reused += (len - head.min(len)) / PAGE;
        write(&mut with, i as u64, off, attached);
        // the same bytes, copied: nothing attached
        write(&mut without, i as u64, off, Bytes::copy_from_slice(&data));
    }
    assert_eq!(with.stats.crc_blocks_reused as usize, expect_reused);
    assert_eq!(without.stats.crc_blocks_reused, 0);
    // read back verified (the read path checks every block's crc), before and after a remount
    for s in [&mut with, &mut without] {
        for (i, &(off, len)) in CASES.iter().enumerate() {
            assert_eq!(
                s.read(&cid(0), &oid(i as u64), off, len as u64).unwrap(),
                written[i]
            );
        }
        assert_eq!(s.stats.csum_errors, 0);
    }
    let dev_with = with.umount().unwrap();
    let dev_without = without.umount().unwrap();
    // the on-disk format does not change: the two media are identical
    assert!(
        dev_with.durable_image() == dev_without.durable_image(),
        "media differ"
    );
    let mut s = Store::mount(dev_with, 0, StoreConfig::default()).unwrap();
    for (i, &(off, len)) in CASES.iter().enumerate() {
        assert_eq!(
            s.read(&cid(0), &oid(i as u64), off, len as u64).unwrap(),
            written[i]
        );
    }
    assert!(s.fsck().unwrap().errors.is_empty());
}

#[test]
fn blocks_off_the_attached_pages_are_computed() {
    let mut s = fresh();
    // memory phase 1000, object offset 0: no object block is an attached page
    let data = placed(6 * PAGE, 1000, 9);
    let (_, attached) = ceph_crc::blocks::attach(data.clone());
    write(&mut s, 1, 0, attached.clone());
    // a slice of the same buffer at a matching offset does use them
    let part = attached.slice(PAGE - 1000..PAGE - 1000 + 2 * PAGE);
    write(&mut s, 2, 4 * PAGE as u64, part.clone());
    assert_eq!(s.stats.crc_blocks_reused, 2);
    assert_eq!(s.read(&cid(0), &oid(1), 0, 6 * PAGE as u64).unwrap(), data);
    assert_eq!(
        s.read(&cid(0), &oid(2), 4 * PAGE as u64, 2 * PAGE as u64)
            .unwrap(),
        part
    );
    assert_eq!(s.stats.csum_errors, 0);
    assert!(s.fsck().unwrap().errors.is_empty());
}

/// A read from the io_uring device (page-aligned buffers) hands out its just-verified block crcs with the data,
/// so a read reply's segment crc needs no second pass; they are the blocks' real crcs.
#[test]
fn verified_reads_carry_their_block_crcs() {
    let Some((mut s, p)) = uring_store("ferrostore-crc-reuse.img", 44, false) else {
        return;
    };
    let data = placed(64 << 10, 0, 11);
    let mut t = ferrostore::Transaction::new();
    t.push(Op::Write {
        cid: cid(0),
        oid: oid(1),
        offset: 0,
        data: Bytes::copy_from_slice(&data),
    });
    s.commit(&t).unwrap();
    // whole object, and a part starting inside a block
    for (off, len) in [(0u64, 64usize << 10), (100, 40_000)] {
        let got = s.read(&cid(0), &oid(1), off, len as u64).unwrap();
        assert_eq!(got, data.slice(off as usize..off as usize + len));
        let pc = ceph_crc::blocks::page_crcs(&got).expect("verified read carries crcs");
        let head = (PAGE - off as usize % PAGE) % PAGE;
        for blk in got[head..].chunks_exact(PAGE) {
            assert_eq!(pc.get(blk), Some(crc32c::crc32c(blk)));
        }
        assert_eq!(
            ceph_crc::blocks::ceph_segment_crc(&got),
            ceph_crc::ceph_crc32c(u32::MAX, &got)
        );
    }
    drop(s);
    let _ = std::fs::remove_file(&p);
}
