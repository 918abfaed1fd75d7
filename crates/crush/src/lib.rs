// SPDX-License-Identifier: LGPL-3.0-or-later
//! CRUSH as Ceph 16.2.15 (Pacific) runs it.
//!
//! * [`CrushMap`]: the `CrushWrapper` encoding, decoded from hostile input without panics and re-encoded
//!   byte-identically (feature-aware, as Ceph's encoder is).
//! * [`CrushMap::do_rule`]: `crush_do_rule` with every Pacific step and bucket algorithm, bit-exact with
//!   `crushtool --test` and an OSD's placement.
//! * [`hash`]: CRUSH's rjenkins1 hashes plus the object-name hashes and `ceph_stable_mod` that map objects to PGs.
//!
//! The crate is sans-IO: bytes in, values out.

pub mod hash;
mod ln;
mod ln_table;
mod map;
mod mapper;

pub use ln::crush_ln;
pub use map::{
    Bucket, BucketKind, CRUSH_BUCKET_LIST, CRUSH_BUCKET_STRAW, CRUSH_BUCKET_STRAW2, CRUSH_BUCKET_TREE,
    CRUSH_BUCKET_UNIFORM, CRUSH_MAGIC, ChooseArg, ChooseArgMap, CrushMap, DEFAULT_CHOOSE_ARGS,
    FEATURE_CRUSH_TUNABLES5, FEATUREMASK_SERVER_LUMINOUS, RULE_TYPE_ERASURE, RULE_TYPE_REPLICATED, Rule,
    RuleStep, Tunables, op,
};
pub use mapper::{CRUSH_ITEM_NONE, CRUSH_ITEM_UNDEF, WEIGHT_IN};
