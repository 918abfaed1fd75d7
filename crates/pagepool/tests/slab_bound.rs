// SPDX-License-Identifier: LGPL-3.0-or-later
//! The huge-page slab's bound (its own process: the slab is global): past it blocks are refused and receive
//! sinks fall back to the heap; freed blocks are served again.

use pagepool::contig::{self, Block, CHUNK};

#[test]
fn a_full_slab_refuses_blocks_and_sinks_fall_back_to_the_heap() {
    if !contig::enabled() {
        return;
    }
    contig::set_max_slab_bytes(CHUNK);
    let size = 64 << 10;
    let blocks: Vec<Block> = std::iter::from_fn(|| Block::alloc(size)).take(1000).collect();
    // One chunk of 64 KiB blocks, then nothing: the bound holds.
    assert_eq!(blocks.len(), CHUNK / size);
    assert_eq!(contig::slab_bytes(), CHUNK);
    assert!(Block::alloc(size).is_none());
    // Another class would need a second chunk: refused too.
    assert!(Block::alloc(32 << 10).is_none());

    // A receive sink of that size is then a heap buffer, and still works.
    let pool = pagepool::PagePool::new(8 << 20);
    let mut sink = pool.alloc(size, 0);
    assert!(!sink.is_slab() && !sink.is_pooled());
    sink.extend_from_slice(&vec![5u8; size]);
    assert!(sink.freeze().iter().all(|&x| x == 5));

    // A freed block is served again; the chunk count does not grow.
    let freed = blocks[0].as_ptr() as usize;
    drop(blocks);
    let again = Block::alloc(size).expect("a freed block");
    assert!(again.as_ptr() as usize / CHUNK == freed / CHUNK);
    assert_eq!(contig::slab_bytes(), CHUNK);
    let sink = pool.alloc(size, 0);
    assert!(sink.is_slab());
}
