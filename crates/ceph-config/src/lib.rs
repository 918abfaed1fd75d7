// SPDX-License-Identifier: LGPL-3.0-or-later
//! `ceph.conf` and keyring files, read the way Ceph 16.2 reads them.
//!
//! Behaviour checked against Ceph 16.2.15's `ceph-conf` (see the tests):
//! * INI sections (`[global]`, `[osd]`, `[osd.3]`, `[client.admin]`); keys before any section belong to `global`.
//! * Comments start with `#` or `;` outside quotes; a value may be double-quoted (`\"` escapes a quote; a quoted
//!   value cannot hold `#` or `;` and nothing but a comment may follow it); `\` escapes a character in an unquoted
//!   value and `\` at the end of a line continues it; later assignments win.
//! * Key names in the file: surrounding whitespace is trimmed and each run of inner whitespace becomes `_`
//!   (`mon  host` is `mon_host`). Dashes and case are *not* normalised in the file (`ms-bind-msgr1 = false` is
//!   ignored by Ceph). Names asked for through [`Config::get`] may use spaces or dashes (`ms-bind-msgr1`), as
//!   Ceph's option lookup does.
//! * Lookup order for entity `osd.3`: `[osd.3]`, `[osd]`, `[global]`, then built-in defaults.
//! * Metavariables: `$cluster`, `$type`, `$id`, `$name`, `$host` and `$`/`${}` references to other options
//!   (e.g. `$osd_data`); unknown ones stay literally.
//! * The cluster name defaults to `ceph`, or to the file's stem when `-c` names a file ending in `.conf`.
//! * Search: `-c` path, else `$CEPH_CONF`, else the first existing of `/etc/ceph/$cluster.conf`,
//!   `~/.ceph/$cluster.conf`, `./$cluster.conf`.
//! * Keyrings: the `keyring` option (a list separated by `,`, `;` or whitespace), by default
//!   `/etc/ceph/$cluster.$name.keyring,/etc/ceph/$cluster.keyring,/etc/ceph/keyring,/etc/ceph/keyring.bin`, or
//!   `$osd_data/keyring` / `$mds_data/keyring` for OSDs and MDSs; the first that exists is used.

mod keyring;
mod parse;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

pub use keyring::{Keyring, KeyringEntry};
pub use parse::ConfFile;

/// Errors reading configuration.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("parse error in {source_name} line {line}: {detail}")]
    Parse {
        source_name: String,
        line: usize,
        detail: String,
    },
    #[error("cannot read {path}: {err}")]
    Io { path: PathBuf, err: std::io::Error },
    #[error("no config file found (tried {tried:?})")]
    NoConfig { tried: Vec<PathBuf> },
    #[error("no keyring found (tried {tried:?})")]
    NoKeyring { tried: Vec<PathBuf> },
    #[error("entity name {0:?} is not TYPE.ID")]
    BadName(String),
    #[error("keyring has no entry for {0}")]
    NoEntry(String),
    #[error("binary keyrings are not supported: {0}")]
    BinaryKeyring(PathBuf),
}

/// The name of an option as Ceph's option table spells it: whitespace and dashes become `_`.
pub fn normalize_option_name(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    let mut prev_space = false;
    for c in name.trim().chars() {
        if c.is_whitespace() {
            if !prev_space {
                out.push('_');
            }
            prev_space = true;
            continue;
        }
        prev_space = false;
        out.push(if c == '-' { '_' } else { c });
    }
    out
}

/// Built-in defaults that matter for paths (Ceph 16.2.15, `ceph-conf --show-config-value`).
fn builtin_default(key: &str, entity_type: &str) -> Option<&'static str> {
    Some(match key {
        "run_dir" => "/var/run/ceph",
        "admin_socket" => "$run_dir/$cluster-$name.asok",
        "log_file" => "/var/log/ceph/$cluster-$name.log",
        "osd_data" => "/var/lib/ceph/osd/$cluster-$id",
        "mon_data" => "/var/lib/ceph/mon/$cluster-$id",
        "mds_data" => "/var/lib/ceph/mds/$cluster-$id",
        "mgr_data" => "/var/lib/ceph/mgr/$cluster-$id",
        "keyring" => match entity_type {
            "osd" => "$osd_data/keyring",
            "mds" => "$mds_data/keyring",
            _ => {
                "/etc/ceph/$cluster.$name.keyring,/etc/ceph/$cluster.keyring,/etc/ceph/keyring,/etc/ceph/keyring.bin,"
            }
        },
        _ => return None,
    })
}

/// A parsed configuration seen from one entity (`osd.3`, `client.admin`) in one cluster.
#[derive(Debug, Clone)]
pub struct Config {
    pub conf: ConfFile,
    pub cluster: String,
    pub entity_type: String,
    pub entity_id: String,
    /// `$host`: the short host name.
    pub host: String,
    /// Values that win over the file (command-line `--key value`).
    pub overrides: BTreeMap<String, String>,
    /// Where the file came from, if any.
    pub path: Option<PathBuf>,
}

/// Depth limit for `$option` references (Ceph stops at a fixed depth too; this also breaks cycles).
const MAX_EXPANSION_DEPTH: usize = 16;
/// Bound on substitutions per lookup, so `a = $a$a$a…` cannot blow up exponentially.
const MAX_EXPANSIONS: usize = 1000;

impl Config {
    /// `name` is `TYPE.ID` (`client.admin`, `osd.3`, `mon.a`).
    pub fn new(conf: ConfFile, cluster: &str, name: &str) -> Result<Self, ConfigError> {
        let (t, id) = name
            .split_once('.')
            .ok_or_else(|| ConfigError::BadName(name.to_string()))?;
        if t.is_empty() {
            return Err(ConfigError::BadName(name.to_string()));
        }
        Ok(Config {
            conf,
            cluster: cluster.to_string(),
            entity_type: t.to_string(),
            entity_id: id.to_string(),
            host: String::new(),
            overrides: BTreeMap::new(),
            path: None,
        })
    }

    pub fn name(&self) -> String {
        format!("{}.{}", self.entity_type, self.entity_id)
    }

    /// The sections consulted, most specific first.
    pub fn sections(&self) -> [String; 3] {
        [self.name(), self.entity_type.clone(), "global".to_string()]
    }

    /// The raw (unexpanded) value of an option: override, then the sections in order, then a built-in default.
    pub fn get_raw(&self, key: &str) -> Option<String> {
        let key = normalize_option_name(key);
        if let Some(v) = self.overrides.get(&key) {
            return Some(v.clone());
        }
        for s in self.sections() {
            if let Some(v) = self.conf.get(&s, &key) {
                return Some(v.to_string());
            }
        }
        builtin_default(&key, &self.entity_type).map(str::to_string)
    }

    /// The value of an option with metavariables expanded.
    pub fn get(&self, key: &str) -> Option<String> {
        self.get_raw(key)
            .map(|v| self.expand(&v, 0, &mut MAX_EXPANSIONS.clone()))
    }

    /// Expand `$cluster`, `$type`, `$id`, `$name`, `$host` and `$option` / `${option}` in `value`.
    pub fn expand_meta(&self, value: &str) -> String {
        self.expand(value, 0, &mut MAX_EXPANSIONS.clone())
    }

    fn expand(&self, value: &str, depth: usize, budget: &mut usize) -> String {
        let mut out = String::with_capacity(value.len());
        let mut rest = value;
        while let Some(pos) = rest.find('$') {
            out.push_str(&rest[..pos]);
            let after = &rest[pos + 1..];
            let (var, consumed) = if let Some(body) = after.strip_prefix('{') {
                match body.find('}') {
                    Some(end) => (&body[..end], end + 2),
                    None => ("", 0),
                }
            } else {
                let end = after
                    .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                    .unwrap_or(after.len());
                (&after[..end], end)
            };
            match (!var.is_empty() && *budget > 0)
                .then(|| {
                    *budget -= 1;
                    self.meta_value(var, depth, budget)
                })
                .flatten()
            {
                Some(v) => {
                    out.push_str(&v);
                    rest = &after[consumed..];
                }
                None => {
                    out.push('$');
                    rest = after;
                }
            }
        }
        out.push_str(rest);
        out
    }

    fn meta_value(&self, var: &str, depth: usize, budget: &mut usize) -> Option<String> {
        Some(match var {
            "cluster" => self.cluster.clone(),
            "type" => self.entity_type.clone(),
            "id" => self.entity_id.clone(),
            "name" => self.name(),
            "host" => self.host.clone(),
            _ if depth < MAX_EXPANSION_DEPTH => {
                let raw = self.get_raw(var)?;
                self.expand(&raw, depth + 1, budget)
            }
            _ => return None,
        })
    }

    /// The keyring files to try, in order (the expanded `keyring` option).
    pub fn keyring_search_paths(&self) -> Vec<PathBuf> {
        self.get("keyring")
            .map(|v| {
                v.split(|c: char| c == ',' || c == ';' || c.is_whitespace())
                    .filter(|s| !s.is_empty())
                    .map(PathBuf::from)
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Load the first keyring that exists (binary `.bin` keyrings are not supported).
    pub fn load_keyring(&self) -> Result<(PathBuf, Keyring), ConfigError> {
        let tried = self.keyring_search_paths();
        for p in &tried {
            if p.is_file() {
                if p.extension().is_some_and(|e| e == "bin") {
                    return Err(ConfigError::BinaryKeyring(p.clone()));
                }
                let text = read(p)?;
                return Ok((p.clone(), Keyring::parse(&text, &p.display().to_string())?));
            }
        }
        Err(ConfigError::NoKeyring { tried })
    }
}

impl Config {
    /// This entity's base64 secret, found the way Ceph's `KeyRing::from_ceph_context` finds it: the `keyfile`
    /// option (a file holding just the key), else the `key` option, else the entity's entry in the first keyring
    /// on the search path. Returns the key and where it came from.
    pub fn entity_key(&self) -> Result<(String, String), ConfigError> {
        if let Some(path) = self.get("keyfile").filter(|p| !p.is_empty()) {
            let text = read(Path::new(&path))?;
            return Ok((text.trim().to_string(), path));
        }
        if let Some(key) = self.get("key").filter(|k| !k.is_empty()) {
            return Ok((key, "the key option".to_string()));
        }
        let (path, keyring) = self.load_keyring()?;
        let key = keyring.key_of(&self.name())?.to_string();
        Ok((key, path.display().to_string()))
    }
}

fn read(p: &Path) -> Result<String, ConfigError> {
    std::fs::read_to_string(p).map_err(|err| ConfigError::Io {
        path: p.to_path_buf(),
        err,
    })
}

/// Where a configuration comes from: `-c`, `--cluster`, `$CEPH_CONF`, `$HOME`.
#[derive(Debug, Clone, Default)]
pub struct ConfSource {
    /// `-c PATH` (may be a comma-separated list; the first existing file is used).
    pub explicit: Option<String>,
    /// `--cluster NAME`.
    pub cluster: Option<String>,
    /// `$CEPH_CONF`.
    pub env_ceph_conf: Option<String>,
    /// `$HOME`, for `~/.ceph/$cluster.conf`.
    pub home: Option<String>,
}

impl ConfSource {
    /// Read `$CEPH_CONF` and `$HOME` from the environment.
    pub fn from_env() -> Self {
        ConfSource {
            env_ceph_conf: std::env::var("CEPH_CONF").ok(),
            home: std::env::var("HOME").ok(),
            ..Default::default()
        }
    }

    /// The cluster name: `--cluster`, else the stem of an explicit `*.conf`, else `ceph`.
    pub fn cluster_name(&self) -> String {
        if let Some(c) = &self.cluster {
            return c.clone();
        }
        let stem = self
            .explicit
            .as_deref()
            .and_then(|e| e.split(',').next())
            .and_then(|first| {
                Path::new(first.trim())
                    .file_name()
                    .and_then(|f| f.to_str())
                    .and_then(|f| f.strip_suffix(".conf"))
                    .filter(|s| !s.is_empty())
                    .map(str::to_string)
            });
        if let Some(stem) = stem {
            return stem;
        }
        "ceph".to_string()
    }

    /// The candidate files, in order.
    pub fn search_paths(&self) -> Vec<PathBuf> {
        let cluster = self.cluster_name();
        let list = self
            .explicit
            .clone()
            .or_else(|| self.env_ceph_conf.clone())
            .unwrap_or_else(|| {
                let mut v = vec![format!("/etc/ceph/{cluster}.conf")];
                if let Some(h) = &self.home {
                    v.push(format!("{h}/.ceph/{cluster}.conf"));
                }
                v.push(format!("{cluster}.conf"));
                v.join(",")
            });
        list.split([',', ';'])
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(PathBuf::from)
            .collect()
    }

    /// Find and parse the configuration for entity `name`, with `$host` set to `host`.
    pub fn load(&self, name: &str, host: &str) -> Result<Config, ConfigError> {
        let tried = self.search_paths();
        let path = tried
            .iter()
            .find(|p| p.is_file())
            .cloned()
            .ok_or_else(|| ConfigError::NoConfig { tried: tried.clone() })?;
        let conf = ConfFile::parse(&read(&path)?, &path.display().to_string())?;
        let mut c = Config::new(conf, &self.cluster_name(), name)?;
        c.host = host.to_string();
        c.path = Some(path);
        Ok(c)
    }
}
