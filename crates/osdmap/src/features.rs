// SPDX-License-Identifier: LGPL-3.0-or-later
//! The feature bits the map encodings depend on, from `denc::features` (`ceph_features.h`), plus the OSDMap's own
//! "significant features" set. A reused bit counts only together with its incarnation marker, so tests go through
//! [`has`] with the `MASK_*` constants.

pub use denc::features::{
    MASK_SERVER_LUMINOUS, MASK_SERVER_MIMIC, MASK_SERVER_NAUTILUS, MASK_SERVER_OCTOPUS, MASK_SERVER_PACIFIC,
    MONENC, MONNAMES, MSG_ADDR2, NEW_OSDOP_ENCODING, OSD_POOLRESEND, OSDENC, OSDMAP_ENC, PGID64, PGPOOL3,
    RESERVED, has,
};

/// `OSDMap::SIGNIFICANT_FEATURES`: the bits OSDMap encodings depend on (PGID64, PGPOOL3, OSDENC, OSDMAP_ENC,
/// OSD_POOLRESEND, NEW_OSDOP_ENCODING, MSG_ADDR2, CRUSH_TUNABLES5, CRUSH_CHOOSE_ARGS, SERVER_LUMINOUS/MIMIC/
/// NAUTILUS/OCTOPUS, with their incarnation markers). Monitors encode maps with this subset, masked by
/// `require_osd_release`, and record it in each incremental's `encode_features`.
pub const OSDMAP_SIGNIFICANT: u64 = 0x0f00_0880_1021_2a04;

/// Everything a Ceph 16.2.15 daemon advertises.
pub const PACIFIC: u64 = denc::CEPH_FEATURES_ALL;

const _: () =
    assert!(has(PACIFIC, MASK_SERVER_PACIFIC) && has(PACIFIC, MSG_ADDR2) && PACIFIC & RESERVED == 0);
const _: () = assert!(PACIFIC & OSDMAP_SIGNIFICANT == OSDMAP_SIGNIFICANT);
