// SPDX-License-Identifier: LGPL-3.0-or-later
//! Plain-text keyrings (`src/auth/KeyRing.cc`): one section per entity, `key = <base64 CryptoKey>` and
//! `caps <service> = "<caps>"` lines.

use std::collections::BTreeMap;

use crate::ConfigError;
use crate::parse::ConfFile;

/// One entity in a keyring.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct KeyringEntry {
    /// `client.admin`, `osd.0`, `mon.`.
    pub name: String,
    /// The base64 key as written (decode it with `cephx::CryptoKey::from_base64`).
    pub key: String,
    /// Caps by service (`mon`, `osd`, `mgr`, `mds`).
    pub caps: BTreeMap<String, String>,
}

/// A keyring: entries by entity name.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Keyring {
    pub entries: BTreeMap<String, KeyringEntry>,
}

impl Keyring {
    pub fn parse(text: &str, source_name: &str) -> Result<Self, ConfigError> {
        let conf = ConfFile::parse(text, source_name)?;
        let mut entries = BTreeMap::new();
        for section in conf.section_names() {
            let Some(kv) = conf.section(section) else {
                continue;
            };
            if section == "global" && kv.is_empty() {
                continue;
            }
            let mut e = KeyringEntry {
                name: section.to_string(),
                ..Default::default()
            };
            for (k, v) in kv {
                if k == "key" {
                    e.key = v.clone();
                } else if let Some(service) = k.strip_prefix("caps_") {
                    e.caps.insert(service.to_string(), v.clone());
                }
                // Other keys (auid, ...) are ignored, as Ceph ignores retired fields.
            }
            entries.insert(e.name.clone(), e);
        }
        Ok(Keyring { entries })
    }

    pub fn get(&self, name: &str) -> Option<&KeyringEntry> {
        self.entries.get(name)
    }

    /// The base64 key of `name`.
    pub fn key_of(&self, name: &str) -> Result<&str, ConfigError> {
        self.entries
            .get(name)
            .map(|e| e.key.as_str())
            .filter(|k| !k.is_empty())
            .ok_or_else(|| ConfigError::NoEntry(name.to_string()))
    }
}
