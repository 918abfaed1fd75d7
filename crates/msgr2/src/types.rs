// SPDX-License-Identifier: LGPL-3.0-or-later
//! Small identity types msgr2 needs: entity types and the auth entity name.

use denc::{Decoder, Encoder};

pub const ENTITY_TYPE_MON: u8 = 0x01;
pub const ENTITY_TYPE_MDS: u8 = 0x02;
pub const ENTITY_TYPE_OSD: u8 = 0x04;
pub const ENTITY_TYPE_CLIENT: u8 = 0x08;
pub const ENTITY_TYPE_MGR: u8 = 0x10;
pub const ENTITY_TYPE_AUTH: u8 = 0x20;
pub const ENTITY_TYPE_ANY: u8 = 0xFF;

/// Text name of an entity type ("osd", "client", ...).
pub fn entity_type_name(t: u8) -> &'static str {
    match t {
        ENTITY_TYPE_MON => "mon",
        ENTITY_TYPE_MDS => "mds",
        ENTITY_TYPE_OSD => "osd",
        ENTITY_TYPE_CLIENT => "client",
        ENTITY_TYPE_MGR => "mgr",
        ENTITY_TYPE_AUTH => "auth",
        _ => "unknown",
    }
}

/// Ceph's `EntityName` (`src/common/entity_name.h`): the auth identity, e.g. `osd.0` = (OSD, "0").
/// Encoded as `le32 type` + string id.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct EntityName {
    pub ty: u32,
    pub id: String,
}

impl EntityName {
    pub fn new(ty: u8, id: impl Into<String>) -> Self {
        EntityName {
            ty: u32::from(ty),
            id: id.into(),
        }
    }

    pub fn encode_to(&self, e: &mut Encoder) {
        e.u32(self.ty);
        e.string(&self.id);
    }

    pub fn decode_from(d: &mut Decoder) -> denc::Result<Self> {
        let ty = d.u32()?;
        let id = d.string()?;
        Ok(EntityName { ty, id })
    }
}

impl std::fmt::Display for EntityName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let t = u8::try_from(self.ty).map(entity_type_name).unwrap_or("unknown");
        write!(f, "{t}.{}", self.id)
    }
}
