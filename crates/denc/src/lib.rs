// SPDX-License-Identifier: LGPL-3.0-or-later
//! Ceph's wire encoding (`encoding.h` / `denc.h`), rebuilt for hostile input and zero copies.
//!
//! * [`Decoder`] reads from a shared [`bytes::Bytes`]; byte strings it returns share that buffer.
//! * Every read is bounds-checked and returns [`DecodeError`]; length fields are checked against the remaining
//!   input before anything is allocated, so a hostile length cannot cause a large allocation.
//! * Versioned structs (ENCODE_START/DECODE_START) decode through [`Decoder::start_struct`], which refuses
//!   incompatible versions and confines the body so that newer versions' trailing fields are skipped.
//! * [`Encoder`] carries the peer's feature bits for the few types whose encoding depends on them; the bits are in
//!   [`features`].
//! * [`types`] (re-exported here) holds Ceph's identifier types: `utime_t`, `uuid_d`, entity names and addresses,
//!   `eversion_t`, `osd_reqid_t`, `pg_t`, `spg_t`, `pg_shard_t`, `object_locator_t`, `hobject_t`/`ghobject_t` with
//!   Ceph's bitwise order, `coll_t`, `snapid_t`.

mod decoder;
mod encoder;
mod error;
pub mod features;
mod impls;
pub mod types;

pub use decoder::{Decode, Decoder, LegacyHeader, MAX_ITEM_LEN, StructHeader};
pub use encoder::{Encode, Encoder};
pub use error::{DecodeError, Result};
pub use features::CEPH_FEATURES_ALL;
pub use types::*;

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    #[test]
    fn versioned_struct_skips_newer_trailing_fields() {
        let mut e = Encoder::default();
        e.versioned(3, 1, |e| {
            e.u32(7);
            e.u64(99); // a field a v2 decoder does not know
        });
        e.u8(0xAB);
        let mut d = Decoder::new(e.into_bytes());
        let (h, mut body) = d.start_struct("t", 2).unwrap();
        assert_eq!((h.version, h.compat, h.len), (3, 1, 12));
        assert_eq!(body.u32().unwrap(), 7);
        assert_eq!(
            d.u8().unwrap(),
            0xAB,
            "outer cursor must be past the whole struct"
        );
    }

    #[test]
    fn incompatible_struct_is_refused() {
        let mut e = Encoder::default();
        e.versioned(5, 4, |e| e.u8(1));
        let err = Decoder::new(e.into_bytes()).start_struct("t", 3).unwrap_err();
        assert_eq!(
            err,
            DecodeError::Incompatible {
                type_name: "t",
                compat: 4,
                supported: 3
            }
        );
    }

    #[test]
    fn hostile_lengths_do_not_allocate() {
        // A vector claiming 2^30 elements with 4 bytes of input.
        let mut e = Encoder::default();
        e.u32(1 << 30);
        e.u32(0);
        assert!(matches!(
            Vec::<u64>::decode_all(e.into_bytes()),
            Err(DecodeError::Truncated { .. })
        ));
        // A struct claiming a body longer than the input.
        let r = Decoder::new(Bytes::from_static(&[1, 1, 0xff, 0xff, 0xff, 0xff])).start_struct("t", 1);
        assert!(matches!(r, Err(DecodeError::Truncated { .. })));
    }

    #[test]
    fn legacy_headers() {
        let read = |bytes: &'static [u8], legacy: LegacyHeader| {
            let mut d = Decoder::new(Bytes::from_static(bytes));
            let r = d.decode_struct_legacy("t", 5, legacy, |h, b| Ok((h.version, h.compat, h.len, b.u8()?)));
            (r, d.remaining())
        };
        // v2 < compatv 3: no compat, no length; the body is read unconfined from the same cursor.
        assert_eq!(read(&[2, 7, 9], LegacyHeader::new(3, 3)), (Ok((2, 2, 0, 7)), 1));
        // _32 variant: three filler bytes after an old version.
        assert_eq!(
            read(&[2, 0, 0, 0, 7], LegacyHeader::len32(3, 3)),
            (Ok((2, 2, 0, 7)), 0)
        );
        // _16 variant: one filler byte.
        assert_eq!(read(&[2, 0, 7], LegacyHeader::len16(3, 3)), (Ok((2, 2, 0, 7)), 0));
        // v3: compat and length present; trailing body bytes are skipped.
        assert_eq!(
            read(&[3, 3, 2, 0, 0, 0, 7, 8, 9], LegacyHeader::new(3, 3)),
            (Ok((3, 3, 2, 7)), 1)
        );
        // compat newer than supported
        assert!(matches!(
            read(&[6, 6, 1, 0, 0, 0, 7], LegacyHeader::new(3, 3)).0,
            Err(DecodeError::Incompatible {
                compat: 6,
                supported: 5,
                ..
            })
        ));
        // compat present but length only from v4 (compatv 3, lenv 4)
        assert_eq!(read(&[3, 1, 7], LegacyHeader::new(3, 4)), (Ok((3, 1, 0, 7)), 0));
    }

    #[test]
    fn new_compat_is_patched() {
        let mut e = Encoder::default();
        e.versioned_new_compat(6, 3, |e| {
            e.u8(1);
            6
        });
        assert_eq!(&e.into_bytes()[..], &[6, 6, 1, 0, 0, 0, 1]);
    }

    #[test]
    fn bufferlist_shares_the_input() {
        let input = Bytes::from_static(&[3, 0, 0, 0, b'a', b'b', b'c']);
        let b = Bytes::decode_all(input.clone()).unwrap();
        assert_eq!(&b[..], b"abc");
        assert_eq!(b.as_ptr(), input[4..].as_ptr());
    }

    proptest! {
        #[test]
        fn containers_round_trip(m in proptest::collection::btree_map(".{0,8}", proptest::collection::vec(any::<u32>(), 0..4), 0..8),
                                 o in proptest::option::of(any::<i64>())) {
            let v = (m, o);
            let bytes = v.to_bytes(0);
            prop_assert_eq!(<(BTreeMap<String, Vec<u32>>, Option<i64>)>::decode_all(bytes).unwrap(), v);
        }

        #[test]
        fn arbitrary_bytes_never_panic(data in proptest::collection::vec(any::<u8>(), 0..64)) {
            let _ = <(BTreeMap<String, Vec<u32>>, Option<i64>)>::decode_all(data.clone());
            let _ = Decoder::new(data).start_struct("t", 9);
        }
    }
}
