// SPDX-License-Identifier: LGPL-3.0-or-later
//! Apply a monitor's stored incrementals to its first full map and check every step against the stored full
//! maps: `cargo run -p osdmap --example apply_chain -- DIR FIRST LAST` with DIR/full<N> and DIR/inc<N> files
//! (from `ceph-kvstore-tool rocksdb STORE get osdmap full_N|N out FILE`).
use denc::Decode;
use osdmap::{CrcCheck, Incremental, OsdMap};
fn main() {
    let a: Vec<String> = std::env::args().collect();
    let (Some(dir), Some(first), Some(last)) = (a.get(1), a.get(2), a.get(3)) else {
        eprintln!("usage: apply_chain DIR FIRST LAST");
        return;
    };
    let (first, last): (u32, u32) = (first.parse().unwrap_or(1), last.parse().unwrap_or(1));
    let read = |n: String| std::fs::read(format!("{dir}/{n}")).unwrap_or_default();
    let mut m = match OsdMap::decode_all(read(format!("full{first}"))) {
        Ok(m) => m,
        Err(e) => return eprintln!("full{first}: {e}"),
    };
    for e in first + 1..=last {
        let inc = match Incremental::decode_all(read(format!("inc{e}"))) {
            Ok(i) => i,
            Err(err) => return eprintln!("inc{e}: {err}"),
        };
        let r = m.apply_incremental(&inc);
        let full = read(format!("full{e}"));
        let same = m.raw.as_deref() == Some(&full[..]);
        println!("epoch {e}: {r:?} raw==stored full: {same}");
        if !matches!(r, Ok(CrcCheck::Match)) {
            if let Ok(want) = OsdMap::decode_all(full) {
                let ours = format!("{m:?}");
                let theirs = format!("{want:?}");
                if let Some(i) = ours.bytes().zip(theirs.bytes()).position(|(x, y)| x != y) {
                    let lo = i.saturating_sub(200);
                    println!("  ours:   {}", &ours[lo..(i + 100).min(ours.len())]);
                    println!("  theirs: {}", &theirs[lo..(i + 100).min(theirs.len())]);
                }
            }
            return;
        }
    }
}
