// SPDX-License-Identifier: LGPL-3.0-or-later
//! Hostile input: arbitrary bytes never panic any decoder, and whatever does decode survives
//! decode -> encode -> decode unchanged (the same property the fuzz target checks, at proptest scale).

use std::fmt::Debug;

use bytes::Bytes;
use denc::*;
use proptest::prelude::*;

fn round_trip<T: Decode + Encode + PartialEq + Debug>(data: &[u8]) -> Result<(), TestCaseError> {
    let mut d = Decoder::new(Bytes::copy_from_slice(data));
    let Ok(v) = T::decode(&mut d) else {
        return Ok(());
    };
    let enc = v.to_bytes(CEPH_FEATURES_ALL);
    match T::decode_all(enc.clone()) {
        Ok(back) => prop_assert_eq!(&back, &v),
        Err(e) => prop_assert!(
            false,
            "{:?} re-encoded as {:02x?} does not decode: {}",
            v,
            &enc[..],
            e
        ),
    }
    // The legacy (no MSG_ADDR2) encoding may lose information but must decode.
    let legacy = v.to_bytes(0);
    prop_assert!(
        T::decode_all(legacy).is_ok(),
        "{:?}: legacy encoding does not decode",
        v
    );
    Ok(())
}

fn all_types(data: &[u8]) -> Result<(), TestCaseError> {
    round_trip::<Utime>(data)?;
    round_trip::<Uuid>(data)?;
    round_trip::<EntityNameT>(data)?;
    round_trip::<EntityName>(data)?;
    round_trip::<EntityAddr>(data)?;
    round_trip::<EntityAddrvec>(data)?;
    round_trip::<EntityInst>(data)?;
    round_trip::<Eversion>(data)?;
    round_trip::<OsdReqId>(data)?;
    round_trip::<PgId>(data)?;
    round_trip::<SpgId>(data)?;
    round_trip::<PgShard>(data)?;
    round_trip::<ObjectLocator>(data)?;
    round_trip::<ObjectName>(data)?;
    round_trip::<SObject>(data)?;
    round_trip::<HObject>(data)?;
    round_trip::<GHObject>(data)?;
    round_trip::<Coll>(data)?;
    Ok(())
}

/// Inputs that look like the real thing: a plausible struct header followed by random bytes, so decoders get
/// past their first checks.
fn framed() -> impl Strategy<Value = Vec<u8>> {
    (
        0u8..8,
        0u8..8,
        prop::collection::vec(any::<u8>(), 0..96),
        prop::sample::select(vec![0u8, 1, 2, 3]),
    )
        .prop_map(|(v, c, body, marker)| {
            let mut out = Vec::new();
            if marker < 3 {
                out.push(marker);
            }
            out.push(v);
            out.push(c);
            out.extend_from_slice(&(body.len() as u32).to_le_bytes());
            out.extend_from_slice(&body);
            out
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn random_bytes(data in prop::collection::vec(any::<u8>(), 0..160)) {
        all_types(&data)?;
    }

    #[test]
    fn framed_bytes(data in framed()) {
        all_types(&data)?;
    }
}

#[test]
fn huge_lengths_are_refused_without_allocating() {
    // A string length of 4 GiB - 1 with nothing behind it, in every string-bearing type.
    let mut e = Encoder::default();
    e.versioned(6, 3, |e| e.u32(u32::MAX));
    let b = e.into_bytes();
    assert!(matches!(
        GHObject::decode_all(b.clone()),
        Err(DecodeError::Truncated { .. } | DecodeError::TooLong { .. })
    ));
    assert!(HObject::decode_all(b.clone()).is_err());
    assert!(ObjectLocator::decode_all(b).is_err());
    let vec_bomb = Bytes::from_static(&[2, 0xff, 0xff, 0xff, 0x3f]);
    assert!(matches!(
        EntityAddrvec::decode_all(vec_bomb),
        Err(DecodeError::Truncated { .. })
    ));
}

#[test]
fn struct_length_past_end_is_truncated() {
    // spg_t header claiming 1000 body bytes
    let b = Bytes::from_static(&[1, 1, 0xe8, 0x03, 0, 0, 1]);
    assert!(matches!(SpgId::decode_all(b), Err(DecodeError::Truncated { .. })));
}

#[test]
fn newer_compatible_versions_skip_trailing_fields() {
    // A hypothetical spg_t v3 (compat 1) with 5 extra bytes: decodes, and the outer cursor lands after it.
    let mut e = Encoder::default();
    e.versioned(3, 1, |e| {
        PgId::new(7, 3).encode(e);
        e.i8(2);
        e.raw(&[9; 5]);
    });
    e.u8(0xAA);
    let mut d = Decoder::new(e.into_bytes());
    assert_eq!(
        SpgId::decode(&mut d).unwrap(),
        SpgId::new(PgId::new(7, 3), ShardId(2))
    );
    assert_eq!(d.u8().unwrap(), 0xAA);
}

#[test]
fn incompatible_versions_are_refused() {
    let mut e = Encoder::default();
    e.versioned(2, 2, |e| {
        PgId::new(7, 3).encode(e);
        e.i8(2);
    });
    assert_eq!(
        SpgId::decode_all(e.into_bytes()).unwrap_err(),
        DecodeError::Incompatible {
            type_name: "spg_t",
            compat: 2,
            supported: 1
        }
    );
}
