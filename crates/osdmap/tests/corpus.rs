// SPDX-License-Identifier: LGPL-3.0-or-later
//! Every corpus sample decodes; Pacific samples re-encode byte-identically with Pacific features.

use ceph_corpus::{PACIFIC_FEATURES, check_type};
use denc::{Decode, Decoder, Encode, Encoder};
use osdmap::PgPool;

#[test]
fn pg_pool_t() {
    let s = check_type::<PgPool>("pg_pool_t", PACIFIC_FEATURES);
    if !s.skipped {
        let t = s.total();
        assert_eq!(t.decoded, t.samples, "every pg_pool_t sample must decode: {t:?}");
    }
}

#[test]
fn osdmap() {
    let s = check_type::<osdmap::OsdMap>("OSDMap", PACIFIC_FEATURES);
    if !s.skipped {
        let t = s.total();
        assert_eq!(t.decoded, t.samples, "every OSDMap sample must decode: {t:?}");
    }
}

/// An incremental re-encoded the way the monitor encoded it: with the `encode_features` it records.
#[derive(Debug)]
struct AsEncoded(osdmap::Incremental);

impl Decode for AsEncoded {
    fn decode(d: &mut Decoder) -> denc::Result<Self> {
        osdmap::Incremental::decode(d).map(AsEncoded)
    }
}
impl Encode for AsEncoded {
    fn encode(&self, e: &mut Encoder) {
        e.raw(&self.0.to_bytes(self.0.encode_features));
    }
}

#[test]
fn osdmap_incremental() {
    let s = check_type::<AsEncoded>("OSDMap::Incremental", PACIFIC_FEATURES);
    if !s.skipped {
        let t = s.total();
        assert_eq!(
            t.decoded, t.samples,
            "every Incremental sample must decode: {t:?}"
        );
    }
}
