// SPDX-License-Identifier: LGPL-3.0-or-later
//! Identity types msgr2 needs, from the shared `denc` crate: entity types and the auth entity name
//! (`EntityName`, `le32 type` + string id, e.g. `osd.0`).

pub use denc::{
    ENTITY_TYPE_ANY, ENTITY_TYPE_AUTH, ENTITY_TYPE_CLIENT, ENTITY_TYPE_MDS, ENTITY_TYPE_MGR, ENTITY_TYPE_MON,
    ENTITY_TYPE_OSD, EntityName,
};

/// Text name of an entity type ("osd", "client", ...).
pub fn entity_type_name(t: u8) -> &'static str {
    denc::entity_type_name(u32::from(t))
}
