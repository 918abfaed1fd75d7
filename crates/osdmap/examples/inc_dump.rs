// SPDX-License-Identifier: LGPL-3.0-or-later
//! Print a summary of OSDMap / Incremental files: `cargo run -p osdmap --example inc_dump -- FILE...`
//! (VERBOSE=1 adds the per-OSD changes of incrementals).
use denc::Decode;
fn main() {
    for p in std::env::args().skip(1) {
        let Ok(b) = std::fs::read(&p) else { continue };
        match osdmap::Incremental::decode_all(b.clone()) {
            Ok(i) => {
                println!(
                    "inc {p}: epoch {} req_osd {} req_client {} flags {} fullmap {} crush {} feat {:#x} full_crc {:#x}",
                    i.epoch,
                    i.new_require_osd_release,
                    i.new_require_min_compat_client,
                    i.new_flags,
                    i.fullmap.len(),
                    i.crush.len(),
                    i.encode_features,
                    i.full_crc
                );
                if std::env::var_os("VERBOSE").is_some() {
                    println!(
                        "  max_osd {} state {:?} weight {:?} up {:?} uuid {:?} xinfo {:?}",
                        i.new_max_osd,
                        i.new_state,
                        i.new_weight,
                        i.new_up_client.keys().collect::<Vec<_>>(),
                        i.new_uuid.keys().collect::<Vec<_>>(),
                        i.new_xinfo.keys().collect::<Vec<_>>()
                    );
                }
            }
            Err(_) => match osdmap::OsdMap::decode_all(b) {
                Ok(m) => println!(
                    "map {p}: epoch {} max_osd {} pools {} req_osd {} flags {:#x} crc {:#x}",
                    m.epoch,
                    m.max_osd,
                    m.pools.len(),
                    m.require_osd_release,
                    m.flags,
                    m.crc
                ),
                Err(e) => println!("{p}: {e}"),
            },
        }
    }
}
