// SPDX-License-Identifier: LGPL-3.0-or-later
//! Detaching long-lived values from the buffers they were decoded from.
//!
//! Decoding is zero-copy: a name inside a decoded `hobject_t` is a `Bytes` slice of the message or store buffer
//! it came from, and that slice keeps the whole buffer alive (a 64 KiB receive buffer for a 40-byte object name).
//! Values that outlive their message (PG log entries, dups, cached object infos, watches) copy their few small
//! byte fields into allocations of their own with [`Owned::own_buffers`]. Payload-sized fields (op returns of a
//! write are at most 64 bytes; omap values, object data) are not held by such values.

use bytes::Bytes;
use denc::{HObject, ObjectLocator, ObjectName};

use crate::pg_missing::PgMissing;
use crate::{ObjectInfo, ObjectModDesc, OpReturnItem, PgLogDup, PgLogEntry};

/// `b` in an allocation of its own (nothing for an empty one).
pub fn own(b: &Bytes) -> Bytes {
    if b.is_empty() {
        Bytes::new()
    } else {
        Bytes::copy_from_slice(b)
    }
}

/// Copy the byte fields of a value into allocations of its own, so it no longer shares (and keeps alive) the
/// buffer it was decoded from.
pub trait Owned {
    fn own_buffers(&mut self);
}

impl Owned for Bytes {
    fn own_buffers(&mut self) {
        *self = own(self);
    }
}

impl Owned for HObject {
    fn own_buffers(&mut self) {
        self.oid = ObjectName(own(&self.oid.0));
        self.key.own_buffers();
        self.nspace.own_buffers();
    }
}

impl Owned for ObjectLocator {
    fn own_buffers(&mut self) {
        self.key.own_buffers();
        self.nspace.own_buffers();
    }
}

impl Owned for OpReturnItem {
    fn own_buffers(&mut self) {
        self.bl.own_buffers();
    }
}

impl Owned for ObjectModDesc {
    fn own_buffers(&mut self) {
        self.bl.own_buffers();
    }
}

impl<T: Owned> Owned for Vec<T> {
    fn own_buffers(&mut self) {
        for x in self.iter_mut() {
            x.own_buffers();
        }
    }
}

impl Owned for PgLogEntry {
    fn own_buffers(&mut self) {
        self.soid.own_buffers();
        self.snaps.own_buffers();
        self.mod_desc.own_buffers();
        self.op_returns.own_buffers();
        self.op_returns.shrink_to_fit();
        self.extra_reqids.shrink_to_fit();
    }
}

impl Owned for PgLogDup {
    fn own_buffers(&mut self) {
        self.op_returns.own_buffers();
        self.op_returns.shrink_to_fit();
    }
}

impl Owned for ObjectInfo {
    fn own_buffers(&mut self) {
        self.soid.own_buffers();
        self.oloc.own_buffers();
        self.manifest.own_buffers();
    }
}

impl Owned for PgMissing {
    fn own_buffers(&mut self) {
        self.missing = std::mem::take(&mut self.missing)
            .into_iter()
            .map(|(mut o, i)| {
                o.own_buffers();
                (o, i)
            })
            .collect();
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use denc::{Decode, Encode, SnapId};

    /// Every byte field of a decoded entry points into the buffer it was decoded from before, and outside it
    /// after `own_buffers` (the values unchanged).
    #[test]
    fn decoded_entry_leaves_its_buffer() {
        let mut e = PgLogEntry {
            op: crate::log_op::MODIFY,
            soid: HObject::new("obj-name", "loc", SnapId::NOSNAP, 7, 1, "ns"),
            snaps: Bytes::from_static(b"\x01\x00\x00\x00\x05\x00\x00\x00\x00\x00\x00\x00"),
            op_returns: vec![OpReturnItem {
                rval: 3,
                bl: Bytes::from_static(b"out"),
            }],
            ..Default::default()
        };
        e.mod_desc.bl = Bytes::from_static(b"rollback");
        let mut wire = bytes::BytesMut::from(&e.to_bytes(u64::MAX)[..]);
        wire.resize(65536, 0); // a big receive buffer with the entry at its start
        let wire = wire.freeze();
        let range = wire.as_ptr_range();
        let inside = |b: &Bytes| !b.is_empty() && range.contains(&b.as_ptr());
        let mut d = PgLogEntry::decode_all(wire.slice(..e.to_bytes(u64::MAX).len())).unwrap();
        assert_eq!(d, e);
        let fields = |d: &PgLogEntry| {
            vec![
                d.soid.oid.0.clone(),
                d.soid.key.clone(),
                d.soid.nspace.clone(),
                d.snaps.clone(),
                d.mod_desc.bl.clone(),
                d.op_returns[0].bl.clone(),
            ]
        };
        assert!(fields(&d).iter().all(inside), "decoding is zero-copy");
        d.own_buffers();
        assert_eq!(d, e);
        assert!(
            !fields(&d).iter().any(inside),
            "no field points into the receive buffer any more"
        );
    }
}
