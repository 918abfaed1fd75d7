// SPDX-License-Identifier: LGPL-3.0-or-later
//! `watch_info_t`: one watch registered on an object (kept in `object_info_t::watchers`).

use bytes::Bytes;
use denc::{Decode, DecodeError, Decoder, Encode, Encoder, EntityAddr, LegacyHeader};

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct WatchInfo {
    pub cookie: u64,
    pub timeout_seconds: u32,
    pub addr: EntityAddr,
}

impl Encode for WatchInfo {
    fn encode(&self, e: &mut Encoder) {
        e.versioned(4, 3, |e| {
            e.u64(self.cookie);
            e.u32(self.timeout_seconds);
            e.encode(&self.addr);
        })
    }
}

impl Decode for WatchInfo {
    fn decode(d: &mut Decoder) -> Result<Self, DecodeError> {
        d.decode_struct_legacy("watch_info_t", 4, LegacyHeader::new(3, 3), |h, d| {
            let cookie = d.u64()?;
            if h.version < 2 {
                d.u64()?; // ver, retired
            }
            let timeout_seconds = d.u32()?;
            let addr = if h.version >= 4 {
                d.decode()?
            } else {
                EntityAddr::default()
            };
            Ok(WatchInfo {
                cookie,
                timeout_seconds,
                addr,
            })
        })
    }
}

/// `watch_item_t`: a watcher as `list-watchers` reports it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct WatchItem {
    pub name: denc::EntityNameT,
    pub cookie: u64,
    pub timeout_seconds: u32,
    pub addr: EntityAddr,
}

impl Encode for WatchItem {
    fn encode(&self, e: &mut Encoder) {
        e.versioned(2, 1, |e| {
            e.encode(&self.name);
            e.u64(self.cookie);
            e.u32(self.timeout_seconds);
            e.encode(&self.addr);
        })
    }
}

impl Decode for WatchItem {
    fn decode(d: &mut Decoder) -> Result<Self, DecodeError> {
        d.decode_struct("watch_item_t", 2, |h, d| {
            let name = d.decode()?;
            let cookie = d.u64()?;
            let timeout_seconds = d.u32()?;
            let addr = if h.version >= 2 {
                d.decode()?
            } else {
                EntityAddr::default()
            };
            Ok(WatchItem {
                name,
                cookie,
                timeout_seconds,
                addr,
            })
        })
    }
}

/// `obj_list_watch_response_t`: the outdata of LIST_WATCHERS.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ObjListWatchResponse {
    pub entries: Vec<WatchItem>,
}

impl Encode for ObjListWatchResponse {
    fn encode(&self, e: &mut Encoder) {
        e.versioned(1, 1, |e| e.encode(&self.entries))
    }
}

impl Decode for ObjListWatchResponse {
    fn decode(d: &mut Decoder) -> Result<Self, DecodeError> {
        d.decode_struct("obj_list_watch_response_t", 1, |_, d| {
            Ok(ObjListWatchResponse { entries: d.decode()? })
        })
    }
}

/// One entry of a PGNLS listing (`librados::ListObjectImpl`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ListObject {
    pub nspace: Bytes,
    pub oid: Bytes,
    pub locator: Bytes,
}

/// `pg_nls_response_t`: the outdata of PGNLS: the cursor to continue from and the entries.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PgNlsResponse {
    pub handle: denc::HObject,
    pub entries: Vec<ListObject>,
}

impl Encode for PgNlsResponse {
    fn encode(&self, e: &mut Encoder) {
        e.versioned(1, 1, |e| {
            e.encode(&self.handle);
            e.u32(self.entries.len() as u32);
            for x in &self.entries {
                e.bytes(&x.nspace);
                e.bytes(&x.oid);
                e.bytes(&x.locator);
            }
        })
    }
}

impl Decode for PgNlsResponse {
    fn decode(d: &mut Decoder) -> Result<Self, DecodeError> {
        d.decode_struct("pg_nls_response_t", 1, |_, d| {
            let handle = d.decode()?;
            let n = d.length("pg_nls_response_t entries", 12)?;
            let mut entries = Vec::with_capacity(n.min(4096));
            for _ in 0..n {
                entries.push(ListObject {
                    nspace: d.bufferlist()?,
                    oid: d.bufferlist()?,
                    locator: d.bufferlist()?,
                });
            }
            Ok(PgNlsResponse { handle, entries })
        })
    }
}
