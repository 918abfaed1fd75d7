// SPDX-License-Identifier: LGPL-3.0-or-later
//! Builders of client ops (`OSDOp`) shared by the tests.

use std::collections::BTreeMap;

use bytes::Bytes;
use ceph_msgs::osd_op::{OSDOp, WatchArgs, XattrArgs, op};
use denc::{Encode, Encoder};

/// The placement hash the tests give an object name (any fixed function will do: one PG holds everything).
pub fn name_hash(name: &str) -> u32 {
    ceph_crc::ceph_crc32c(0, name.as_bytes()).wrapping_mul(2_654_435_761)
}

pub fn write(off: u64, data: &[u8]) -> OSDOp {
    OSDOp::new(op::WRITE)
        .with_extent(off, data.len() as u64)
        .with_indata(Bytes::copy_from_slice(data))
}
pub fn writefull(data: &[u8]) -> OSDOp {
    OSDOp::new(op::WRITEFULL)
        .with_extent(0, data.len() as u64)
        .with_indata(Bytes::copy_from_slice(data))
}
pub fn read(off: u64, len: u64) -> OSDOp {
    OSDOp::new(op::READ).with_extent(off, len)
}
pub fn xattr_op(code: u16, name: &str, val: &[u8]) -> OSDOp {
    let mut d = name.as_bytes().to_vec();
    d.extend_from_slice(val);
    let mut o = OSDOp::new(code).with_indata(d);
    o.set_xattr(XattrArgs {
        name_len: name.len() as u32,
        value_len: val.len() as u32,
        ..Default::default()
    });
    o
}
pub fn cmpxattr_op(name: &str, val: &[u8], cmp_op: u8, mode: u8) -> OSDOp {
    let mut o = xattr_op(op::CMPXATTR, name, val);
    let mut a = o.xattr();
    a.cmp_op = cmp_op;
    a.cmp_mode = mode;
    o.set_xattr(a);
    o
}
pub fn enc<T: Encode>(v: &T) -> Bytes {
    v.to_bytes(u64::MAX)
}
pub fn call(class: &str, method: &str, input: Bytes) -> OSDOp {
    let mut d = class.as_bytes().to_vec();
    d.extend_from_slice(method.as_bytes());
    d.extend_from_slice(&input);
    let mut o = OSDOp::new(op::CALL).with_indata(d);
    o.set_cls(ceph_msgs::osd_op::ClsArgs {
        class_len: class.len() as u8,
        method_len: method.len() as u8,
        argc: 0,
        indata_len: input.len() as u32,
    });
    o
}

pub fn omap_set(kv: &[(&str, &str)]) -> OSDOp {
    let m: BTreeMap<Bytes, Bytes> = kv
        .iter()
        .map(|(k, v)| {
            (
                Bytes::copy_from_slice(k.as_bytes()),
                Bytes::copy_from_slice(v.as_bytes()),
            )
        })
        .collect();
    OSDOp::new(op::OMAPSETVALS).with_indata(enc(&m))
}
pub fn omap_get_vals(after: &str, max: u64, prefix: &str) -> OSDOp {
    let mut e = Encoder::new(0);
    e.string(after);
    e.u64(max);
    e.string(prefix);
    OSDOp::new(op::OMAPGETVALS).with_indata(e.into_bytes())
}
pub fn watch_op_(cookie: u64, wop: u8, timeout: u32) -> OSDOp {
    let mut o = OSDOp::new(op::WATCH);
    o.set_watch(WatchArgs {
        cookie,
        ver: 0,
        op: wop,
        generation: 0,
        timeout,
    });
    o
}
