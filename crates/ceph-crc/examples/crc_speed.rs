// SPDX-License-Identifier: LGPL-3.0-or-later
//! Cost of one crc pass over a 4 MiB buffer (`one`), of the page-by-page pass msgr2 uses on receive, which also
//! yields every page's crc (`pages`), and of a crc from attached page crcs (`known`). The machine is shared, so
//! measure cycles rather than time: `perf stat -e cycles:u target/release/examples/crc_speed <mode> [rounds]`.
use std::time::Instant;

fn main() {
    let mode = std::env::args().nth(1).unwrap_or_else(|| "one".into());
    let rounds: usize = std::env::args()
        .nth(2)
        .and_then(|r| r.parse().ok())
        .unwrap_or(500);
    let len = 4 << 20;
    let mut v = vec![0u8; len + 4096];
    let pad = v.as_ptr().align_offset(4096);
    for (i, b) in v.iter_mut().enumerate() {
        *b = (i as u8).wrapping_mul(13);
    }
    let buf = bytes::Bytes::from(v).slice(pad..pad + len);
    let (want, att) = ceph_crc::blocks::attach(buf.clone());
    let t = Instant::now();
    let mut x = 0;
    for _ in 0..rounds {
        x ^= match mode.as_str() {
            "pages" => ceph_crc::blocks::crc_by_pages(&buf).0,
            "known" => ceph_crc::blocks::crc32c(&att),
            _ => crc32c::crc32c(&buf),
        };
    }
    assert_eq!(x, if rounds % 2 == 1 { want } else { 0 });
    println!("{mode}: {rounds} x 4 MiB in {:?}", t.elapsed());
}
