// SPDX-License-Identifier: LGPL-3.0-or-later
//! `object_stat_sum_t`: per-PG object, byte and I/O counters (the sum in `pg_stat_t`).

use denc::{Decode, DecodeError, Decoder, Encode, Encoder};

macro_rules! stat_sum {
    ($($name:ident: $t:ident),* $(,)?) => {
        /// Fields in Ceph's declaration order, which is also the encoding order.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
        pub struct ObjectStatSum {
            $(pub $name: $t,)*
        }
        impl ObjectStatSum {
            fn encode_fields(&self, e: &mut Encoder) {
                $(e.$t(self.$name);)*
            }
            /// Decode as many fields as the body holds (older versions have fewer).
            fn decode_fields(d: &mut Decoder) -> Result<Self, DecodeError> {
                let mut s = ObjectStatSum::default();
                $(
                    if d.remaining() == 0 {
                        return Ok(s);
                    }
                    s.$name = d.$t()?;
                )*
                Ok(s)
            }
        }
    };
}

stat_sum! {
    num_bytes: i64,
    num_objects: i64,
    num_object_clones: i64,
    num_object_copies: i64,
    num_objects_missing_on_primary: i64,
    num_objects_degraded: i64,
    num_objects_unfound: i64,
    num_rd: i64,
    num_rd_kb: i64,
    num_wr: i64,
    num_wr_kb: i64,
    num_scrub_errors: i64,
    num_objects_recovered: i64,
    num_bytes_recovered: i64,
    num_keys_recovered: i64,
    num_shallow_scrub_errors: i64,
    num_deep_scrub_errors: i64,
    num_objects_dirty: i64,
    num_whiteouts: i64,
    num_objects_omap: i64,
    num_objects_hit_set_archive: i64,
    num_objects_misplaced: i64,
    num_bytes_hit_set_archive: i64,
    num_flush: i64,
    num_flush_kb: i64,
    num_evict: i64,
    num_evict_kb: i64,
    num_promote: i64,
    num_flush_mode_high: i32,
    num_flush_mode_low: i32,
    num_evict_mode_some: i32,
    num_evict_mode_full: i32,
    num_objects_pinned: i64,
    num_objects_missing: i64,
    num_legacy_snapsets: i64,
    num_large_omap_objects: i64,
    num_objects_manifest: i64,
    num_omap_bytes: i64,
    num_omap_keys: i64,
    num_objects_repaired: i64,
}

impl Encode for ObjectStatSum {
    fn encode(&self, e: &mut Encoder) {
        e.versioned(20, 14, |e| self.encode_fields(e))
    }
}

impl Decode for ObjectStatSum {
    fn decode(d: &mut Decoder) -> Result<Self, DecodeError> {
        d.decode_struct("object_stat_sum_t", 20, |_, d| ObjectStatSum::decode_fields(d))
    }
}
