// SPDX-License-Identifier: LGPL-3.0-or-later
//! The feature bits the map encodings depend on (`ceph_features.h`). A reused bit counts only together with its
//! incarnation marker, so tests go through [`has`] with the `MASK_*` constants.

const INCARNATION_2: u64 = 1 << 57;
const INCARNATION_3: u64 = (1 << 57) | (1 << 28);

pub const PGID64: u64 = 1 << 9;
pub const PGPOOL3: u64 = 1 << 11;
pub const OSDENC: u64 = 1 << 13;
pub const MONENC: u64 = 1 << 15;
pub const MONNAMES: u64 = 1 << 5;
pub const OSDMAP_ENC: u64 = 1 << 39;
pub const OSD_POOLRESEND: u64 = 1 << 43;
pub const NEW_OSDOP_ENCODING: u64 = 1 << 56;
pub const MSG_ADDR2: u64 = 1 << 59;
/// The "impossible" bit Ceph requires callers that encode new OSDMaps to pass.
pub const RESERVED: u64 = 1 << 62;

pub const MASK_SERVER_LUMINOUS: u64 = (1 << 21) | INCARNATION_2;
pub const MASK_SERVER_MIMIC: u64 = (1 << 28) | INCARNATION_2;
pub const MASK_SERVER_NAUTILUS: u64 = (1 << 2) | INCARNATION_3;
pub const MASK_SERVER_OCTOPUS: u64 = (1 << 16) | INCARNATION_3;
pub const MASK_SERVER_PACIFIC: u64 = (1 << 20) | INCARNATION_3;

/// `OSDMap::SIGNIFICANT_FEATURES`: the bits OSDMap encodings depend on (PGID64, PGPOOL3, OSDENC, OSDMAP_ENC,
/// OSD_POOLRESEND, NEW_OSDOP_ENCODING, MSG_ADDR2, CRUSH_TUNABLES5, CRUSH_CHOOSE_ARGS, SERVER_LUMINOUS/MIMIC/
/// NAUTILUS/OCTOPUS, with their incarnation markers). Monitors encode maps with this subset, masked by
/// `require_osd_release`, and record it in each incremental's `encode_features`.
pub const OSDMAP_SIGNIFICANT: u64 = 0x0f00_0880_1021_2a04;

/// Everything a Ceph 16.2.15 daemon advertises.
pub const PACIFIC: u64 = 0x3f01_cfbd_fffd_ffff;

/// `HAVE_FEATURE(features, mask)`: every bit of the mask (the feature and its incarnation) is present.
pub const fn has(features: u64, mask: u64) -> bool {
    features & mask == mask
}

const _: () =
    assert!(has(PACIFIC, MASK_SERVER_PACIFIC) && has(PACIFIC, MSG_ADDR2) && PACIFIC & RESERVED == 0);
