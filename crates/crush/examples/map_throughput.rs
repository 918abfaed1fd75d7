// SPDX-License-Identifier: LGPL-3.0-or-later
//! Mapping throughput on the test map: `cargo run --release -p crush --example map_throughput [N]`.
//! Reference in the same run: `crushtool -i crates/crush/testdata/mixed.bin --test --rule R --num-rep 3
//! --min-x 0 --max-x N-1` (which also computes statistics).

use std::time::Instant;

use crush::CrushMap;

fn main() {
    let n: u32 = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(1_000_000);
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/testdata/mixed.bin");
    let map = CrushMap::decode_bytes(std::fs::read(path).expect("read mixed.bin")).expect("decode");
    let weights = vec![0x10000u32; map.max_devices as usize];
    for (rule, what) in [
        (0usize, "rep_host (straw2 root, mixed hosts)"),
        (2, "ec_host (chooseleaf indep)"),
    ] {
        let start = Instant::now();
        let mut sum = 0i64;
        for x in 0..n {
            let out = map.do_rule(rule, x, 3, &weights, Some(-1));
            sum += i64::from(out[0]);
        }
        let secs = start.elapsed().as_secs_f64();
        println!(
            "rule {rule} {what}: {n} mappings in {secs:.3} s = {:.0} mappings/s (checksum {sum})",
            f64::from(n) / secs
        );
    }
}
