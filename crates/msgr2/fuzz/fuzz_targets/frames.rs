// SPDX-License-Identifier: LGPL-3.0-or-later
//! The frame decoder (crc and secure mode, arbitrary chunking) and control-payload decoding never panic; any
//! control payload that decodes re-encodes to something that decodes to the same value; any crc frame that
//! decodes re-encodes to the same bytes.

#![no_main]

use bytes::Bytes;
use libfuzzer_sys::fuzz_target;
use msgr2::control::Control;
use msgr2::crypto::default_provider;
use msgr2::frame::{FrameDecoder, FrameLimits, Role, SecureRx, Tag, concat, encode_frame};

fuzz_target!(|data: &[u8]| {
    let Some((&ctl, rest)) = data.split_first() else { return };
    let chunk = usize::from(ctl & 0x3f) + 1;
    let secure = ctl & 0x80 != 0;
    let limits = FrameLimits { max_segment_len: 1 << 16, max_frame_len: 1 << 17 };
    let mut dec = FrameDecoder::new(limits);
    if secure {
        let rx = SecureRx::new(default_provider().as_ref(), &[9u8; 64], Role::Acceptor).unwrap();
        dec.set_secure(Some(rx));
    }
    'outer: for c in rest.chunks(chunk) {
        dec.push(c);
        loop {
            match dec.next_frame() {
                Ok(Some(f)) => {
                    if let Some(raw) = &f.raw {
                        let n = f.preamble.num_segments as usize;
                        let aligns: Vec<u16> = f.preamble.segments[..n].iter().map(|s| s.align).collect();
                        if let Some(tag) = f.tag() {
                            let again = concat(&encode_frame(None, tag, &f.segments[..n], &aligns).unwrap());
                            assert_eq!(&again, raw);
                        }
                    }
                }
                Ok(None) => break,
                Err(_) => break 'outer,
            }
        }
    }
    // Control payloads: every tag over the raw input.
    for t in 1..=20u8 {
        let Some(tag) = Tag::from_u8(t) else { continue };
        if let Ok(c) = Control::decode(tag, Bytes::copy_from_slice(rest)) {
            let enc = c.encode();
            assert_eq!(Control::decode(tag, enc).unwrap(), c);
        }
    }
});
