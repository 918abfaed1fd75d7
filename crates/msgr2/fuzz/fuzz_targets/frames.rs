// SPDX-License-Identifier: LGPL-3.0-or-later
//! The frame decoder (crc and secure mode, arbitrary chunking) and control-payload decoding never panic; any
//! control payload that decodes re-encodes to something that decodes to the same value; any crc frame that
//! decodes re-encodes to the same bytes.

#![no_main]

use bytes::Bytes;
use libfuzzer_sys::fuzz_target;
use msgr2::control::Control;
use msgr2::crypto::default_provider;
use msgr2::frame::{Frame, FrameDecoder, FrameLimits, Role, SecureRx, Tag, concat, encode_frame};

/// Every frame (or the first error) a decoder yields for `rest`, fed by `feed`.
fn frames_of(dec: &mut FrameDecoder, mut feed: impl FnMut(&mut FrameDecoder) -> bool) -> Vec<Result<Frame, ()>> {
    let mut out = Vec::new();
    loop {
        loop {
            match dec.next_frame() {
                Ok(Some(f)) => out.push(Ok(f)),
                Ok(None) => break,
                Err(_) => {
                    out.push(Err(()));
                    return out;
                }
            }
        }
        if !feed(dec) {
            return out;
        }
    }
}

/// Crc mode with receive sinks (large segments into their own buffers, stream receives capped as the reactor
/// caps them) decodes exactly what the plain decoder decodes.
fn sinks_match_plain(ctl: u8, rest: &[u8]) {
    let limits = FrameLimits { max_segment_len: 1 << 16, max_frame_len: 1 << 17 };
    let chunk = usize::from(ctl & 0x1f) * 37 + 1;
    let min = usize::from(ctl & 0x1f) * 13 + 1;
    let mut plain = FrameDecoder::new(limits);
    plain.set_keep_raw(false);
    let mut at = 0;
    let want = frames_of(&mut plain, |d| {
        if at >= rest.len() {
            return false;
        }
        let k = chunk.min(rest.len() - at);
        d.push(&rest[at..at + k]);
        at += k;
        true
    });
    let mut dec = FrameDecoder::new(limits);
    dec.set_keep_raw(false);
    dec.set_direct_min(Some(min));
    let mut at = 0;
    let got = frames_of(&mut dec, |d| {
        if at >= rest.len() {
            return false;
        }
        if let Some(mut sink) = d.take_sink(true) {
            let k = sink.remaining().min(chunk).min(rest.len() - at);
            sink.buf_mut().extend_from_slice(&rest[at..at + k]);
            at += k;
            assert!(d.put_sink(sink).is_ok());
            return true;
        }
        let k = chunk.min(d.stream_limit().unwrap_or(usize::MAX)).min(rest.len() - at);
        assert!(k > 0);
        d.push(&rest[at..at + k]);
        at += k;
        true
    });
    assert_eq!(got, want);
}

fuzz_target!(|data: &[u8]| {
    let Some((&ctl, rest)) = data.split_first() else { return };
    if ctl & 0xc0 == 0x40 {
        sinks_match_plain(ctl, rest);
        return;
    }
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
                        // Descriptors past num_segments are not checked on receipt (Ceph's decoder ignores
                        // them too) but always zero when encoded: only frames with zeroed ones re-encode alike.
                        let unused_zero = raw[2 + 6 * n..2 + 6 * 4].iter().all(|&b| b == 0);
                        if let Some(tag) = f.tag().filter(|_| unused_zero) {
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
