// SPDX-License-Identifier: LGPL-3.0-or-later
//! Ceph's small value types with their exact byte images, text forms and (where Ceph relies on one) sort orders.
//!
//! Names follow Ceph's in CamelCase without the `_t` suffix; see docs/denc.md for the table. Object-name strings
//! (`object_t`, keys, namespaces) are kept as [`bytes::Bytes`]: RADOS names are arbitrary bytes, and decoding them
//! shares the input buffer.

mod entity;
mod hobject;
mod osd;
mod time;

pub use entity::{
    ENTITY_TYPE_ANY, ENTITY_TYPE_AUTH, ENTITY_TYPE_CLIENT, ENTITY_TYPE_MDS, ENTITY_TYPE_MGR, ENTITY_TYPE_MON,
    ENTITY_TYPE_OSD, EntityAddr, EntityAddrvec, EntityInst, EntityName, EntityNameT, ParseAddrError,
    entity_type_from_name, entity_type_name,
};
pub use hobject::{GHObject, HObject, NO_GEN};
pub use osd::{
    Coll, CollType, Eversion, ObjectLocator, ObjectName, OsdReqId, ParseIdError, PgId, PgShard, SObject,
    ShardId, SnapId, SpgId, ceph_stable_mod,
};
pub use time::{Timespan, Utime, Uuid};
