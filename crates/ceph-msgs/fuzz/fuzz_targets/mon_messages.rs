// SPDX-License-Identifier: LGPL-3.0-or-later
//! Every mon-client message decoder on arbitrary bytes: no panic, and whatever decodes re-encodes to bytes that
//! decode to the same value. Input: u16 type selector, u16 header version, then the front segment.
#![no_main]

use bytes::Bytes;
use ceph_msgs::*;
use libfuzzer_sys::fuzz_target;

fn check<T: CephMessage + PartialEq + std::fmt::Debug>(m: &Message) {
    if let Ok(v) = T::from_message(m) {
        let again = v.to_message(u64::MAX);
        let back = T::from_message(&again).expect("our own encoding must decode");
        assert_eq!(back, v);
    }
}

fuzz_target!(|data: &[u8]| {
    if data.len() < 4 {
        return;
    }
    const TYPES: [u16; 13] = [4, 5, 15, 16, 17, 18, 19, 20, 41, 50, 51, 62, 0x704];
    let ty = TYPES[usize::from(data[0]) % TYPES.len()];
    let version = u16::from(data[2] % 6);
    let front = Bytes::copy_from_slice(&data[4..]);
    let m = Message { msg_type: ty, version, compat_version: 1, priority: 127, tid: 1, front: front.clone(), ..Message::default() };
    let _ = MonIncoming::decode(&m);
    match ty {
        4 => check::<MMonMap>(&m),
        5 => check::<MMonGetMap>(&m),
        15 => check::<MMonSubscribe>(&m),
        16 => check::<MMonSubscribeAck>(&m),
        17 => check::<MAuth>(&m),
        18 => check::<MAuthReply>(&m),
        19 => check::<MMonGetVersion>(&m),
        20 => check::<MMonGetVersionReply>(&m),
        41 => check::<MOSDMap>(&m),
        50 => check::<MMonCommand>(&m),
        51 => check::<MMonCommandAck>(&m),
        62 => check::<MConfig>(&m),
        _ => check::<MMgrMap>(&m),
    }
    let _ = monclient::MonMapLite::decode(front.clone());
    let _ = monclient::epoch_map::peek_osdmap_epoch(&front);
});
