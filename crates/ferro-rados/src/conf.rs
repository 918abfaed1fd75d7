// SPDX-License-Identifier: MPL-2.0
//! How the client finds its cluster, the way the `ceph` CLI does: `-c/--conf` or `$CEPH_CONF` or the default
//! search path, `--cluster`, `--id`/`--name`, `--keyring`, `-m/--mon-host`; then `mon_host`, `fsid`,
//! `ms_mon_client_mode` and the keyring from the file (crate `ceph-config`).

use std::net::{SocketAddr, ToSocketAddrs};
use std::time::Duration;

use ceph_config::{ConfSource, Config};

use crate::Error;

/// The msgr2 port monitors listen on (`CEPH_MON_PORT_IANA`).
pub const MON_PORT_V2: u16 = 3300;
/// The legacy msgr1 monitor port.
pub const MON_PORT_LEGACY: u16 = 6789;

/// Everything `Cluster::connect` needs to know, as given on a command line.
#[derive(Debug, Clone)]
pub struct ConnectOptions {
    /// `-c/--conf PATH` (else `$CEPH_CONF`, else `/etc/ceph/$cluster.conf`, `~/.ceph/$cluster.conf`,
    /// `./$cluster.conf`).
    pub conf: Option<String>,
    /// `--cluster NAME` (default `ceph`, or the stem of `-c NAME.conf`).
    pub cluster: Option<String>,
    /// `-n/--name TYPE.ID` (default `client.admin`).
    pub name: Option<String>,
    /// `--id ID` (`--user`): the name becomes `client.ID`.
    pub id: Option<String>,
    /// `-k/--keyring PATH`.
    pub keyring: Option<String>,
    /// `-m/--mon-host ADDRS`, overriding `mon_host`.
    pub mon_host: Option<String>,
    /// `$CEPH_CONF` (set by [`ConnectOptions::from_env`]).
    pub env_ceph_conf: Option<String>,
    /// Bound on connecting and on each request.
    pub timeout: Duration,
}

impl Default for ConnectOptions {
    fn default() -> Self {
        ConnectOptions {
            conf: None,
            cluster: None,
            name: None,
            id: None,
            keyring: None,
            mon_host: None,
            env_ceph_conf: None,
            timeout: Duration::from_secs(30),
        }
    }
}

impl ConnectOptions {
    /// Options with `$CEPH_CONF` taken from the environment.
    pub fn from_env() -> Self {
        ConnectOptions {
            env_ceph_conf: std::env::var("CEPH_CONF").ok().filter(|s| !s.is_empty()),
            ..Default::default()
        }
    }

    /// The entity name: `--name`, else `client.<--id>`, else `client.admin`.
    pub fn entity_name(&self) -> String {
        if let Some(n) = &self.name {
            return n.clone();
        }
        format!("client.{}", self.id.as_deref().unwrap_or("admin"))
    }

    /// Find and parse ceph.conf for our entity, with the command-line overrides applied.
    pub fn load_config(&self) -> Result<Config, Error> {
        let src = ConfSource {
            explicit: self.conf.clone(),
            cluster: self.cluster.clone(),
            env_ceph_conf: self.env_ceph_conf.clone(),
            home: std::env::var("HOME").ok(),
        };
        let host = hostname();
        let mut c = src.load(&self.entity_name(), &host)?;
        if let Some(k) = &self.keyring {
            c.overrides.insert("keyring".into(), k.clone());
        }
        if let Some(m) = &self.mon_host {
            c.overrides.insert("mon_host".into(), m.clone());
        }
        Ok(c)
    }
}

/// The short host name (`$host`), from the kernel.
pub fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().split('.').next().unwrap_or("").to_string())
        .unwrap_or_default()
}

/// One monitor address from `mon_host`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MonHostEntry {
    /// `Some(2)` for `v2:`, `Some(1)` for `v1:`, `None` untyped.
    pub version: Option<u8>,
    pub host: String,
    pub port: Option<u16>,
}

/// Split `mon_host` (`"v2:1.2.3.4:3300"`, `"[v2:h:3300,v1:h:6789] h2"`, `"h1,h2:3300"`, `"[::1]:3300"`) into
/// entries, keeping the addresses inside `[...]` address vectors.
pub fn parse_mon_host(s: &str) -> Result<Vec<MonHostEntry>, Error> {
    let mut out = Vec::new();
    let mut depth = 0usize;
    let mut cur = String::new();
    let mut items = Vec::new();
    for ch in s.chars() {
        match ch {
            '[' => {
                depth += 1;
                cur.push(ch);
            }
            ']' => {
                depth = depth.saturating_sub(1);
                cur.push(ch);
            }
            ',' | ';' | ' ' | '\t' if depth == 0 => items.push(std::mem::take(&mut cur)),
            _ => cur.push(ch),
        }
    }
    items.push(cur);
    for item in items.iter().map(|i| i.trim()).filter(|i| !i.is_empty()) {
        // An address vector: `[v2:...,v1:...]` (but not a bare IPv6 literal such as `[::1]:3300`).
        if let Some(inner) = item.strip_prefix('[').and_then(|r| r.strip_suffix(']'))
            && (inner.starts_with("v1:") || inner.starts_with("v2:") || inner.starts_with("any:"))
        {
            out.extend(parse_mon_host(&inner.replace(',', " "))?);
            continue;
        }
        out.push(parse_entry(item)?);
    }
    if out.is_empty() {
        return Err(Error::Config(format!("mon_host {s:?} names no monitor")));
    }
    Ok(out)
}

fn parse_entry(item: &str) -> Result<MonHostEntry, Error> {
    let (version, rest) = if let Some(r) = item.strip_prefix("v2:") {
        (Some(2), r)
    } else if let Some(r) = item.strip_prefix("v1:") {
        (Some(1), r)
    } else if let Some(r) = item.strip_prefix("any:") {
        (None, r)
    } else {
        (None, item)
    };
    // Drop a `/nonce` suffix (`v2:1.2.3.4:3300/0`).
    let rest = rest.split('/').next().unwrap_or(rest);
    let bad = || Error::Config(format!("bad mon address {item:?}"));
    let (host, port) = if let Some(v6) = rest.strip_prefix('[') {
        let (h, after) = v6.split_once(']').ok_or_else(bad)?;
        let port = match after.strip_prefix(':') {
            Some(p) => Some(p.parse().map_err(|_| bad())?),
            None if after.is_empty() => None,
            None => return Err(bad()),
        };
        (h.to_string(), port)
    } else if rest.matches(':').count() > 1 {
        (rest.to_string(), None) // a bare IPv6 address
    } else if let Some((h, p)) = rest.rsplit_once(':') {
        (h.to_string(), Some(p.parse().map_err(|_| bad())?))
    } else {
        (rest.to_string(), None)
    };
    if host.is_empty() {
        return Err(bad());
    }
    Ok(MonHostEntry { version, host, port })
}

/// The msgr2 addresses to hunt over. We speak only msgr2: `v1:` entries are skipped, and an untyped entry on
/// the legacy port 6789 is tried on 3300 instead (Pacific monitors bind both by default).
pub fn resolve_mon_host(entries: &[MonHostEntry]) -> Result<Vec<SocketAddr>, Error> {
    let mut out: Vec<SocketAddr> = Vec::new();
    for e in entries {
        let port = match (e.version, e.port) {
            (Some(1), _) => continue,
            (_, None) => MON_PORT_V2,
            (None, Some(MON_PORT_LEGACY)) => MON_PORT_V2,
            (_, Some(p)) => p,
        };
        let addrs = (e.host.as_str(), port)
            .to_socket_addrs()
            .map_err(|err| Error::Config(format!("cannot resolve mon host {}: {err}", e.host)))?;
        for a in addrs {
            if !out.contains(&a) {
                out.push(a);
            }
        }
    }
    if out.is_empty() {
        return Err(Error::Config("mon_host has no msgr2 (v2) monitor address".into()));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn e(version: Option<u8>, host: &str, port: Option<u16>) -> MonHostEntry {
        MonHostEntry {
            version,
            host: host.into(),
            port,
        }
    }

    #[test]
    fn mon_host_forms() {
        assert_eq!(
            parse_mon_host("v2:127.0.0.1:44591").unwrap(),
            [e(Some(2), "127.0.0.1", Some(44591))]
        );
        assert_eq!(
            parse_mon_host("[v2:10.0.0.1:3300/0,v1:10.0.0.1:6789/0] 10.0.0.2,10.0.0.3:6789").unwrap(),
            [
                e(Some(2), "10.0.0.1", Some(3300)),
                e(Some(1), "10.0.0.1", Some(6789)),
                e(None, "10.0.0.2", None),
                e(None, "10.0.0.3", Some(6789)),
            ]
        );
        assert_eq!(
            parse_mon_host("[::1]:3300").unwrap(),
            [e(None, "::1", Some(3300))]
        );
        assert!(parse_mon_host(" , ").is_err());
        assert!(parse_mon_host("v2:host:notaport").is_err());
    }

    #[test]
    fn resolution_keeps_msgr2_only() {
        let v = resolve_mon_host(
            &parse_mon_host("[v2:127.0.0.1:3301,v1:127.0.0.1:6789] 127.0.0.2:6789 127.0.0.3").unwrap(),
        )
        .unwrap();
        let want: Vec<SocketAddr> = ["127.0.0.1:3301", "127.0.0.2:3300", "127.0.0.3:3300"]
            .iter()
            .map(|s| s.parse().unwrap())
            .collect();
        assert_eq!(v, want);
        assert!(resolve_mon_host(&parse_mon_host("v1:127.0.0.1:6789").unwrap()).is_err());
    }

    /// A throwaway directory with a ceph.conf and keyrings, as the ceph CLI would find them.
    fn setup(tag: &str) -> std::path::PathBuf {
        let d = std::env::temp_dir().join(format!("ferro-rados-conf-{}-{tag}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        let conf = format!(
            "[global]\n\tfsid = d298bafc-f546-4b02-8ab9-022c21a1a86c\n\tmon host = v2:127.0.0.1:3300\n             [client]\n\tkeyring = {0}/client.keyring\n[client.bob]\n\tkeyring = {0}/bob.keyring\n             \tms mon client mode = crc\n",
            d.display()
        );
        std::fs::write(d.join("mycluster.conf"), conf).unwrap();
        std::fs::write(
            d.join("client.keyring"),
            "[client.admin]\n\tkey = AQAAAAAAAAAAABAAAAAAAAAAAAAAAAAAAAAAAA==\n",
        )
        .unwrap();
        std::fs::write(
            d.join("bob.keyring"),
            "[client.bob]\n\tkey = AQAAAAAAAAAAABAAAQEBAQEBAQEBAQEBAQEBAQ==\n",
        )
        .unwrap();
        d
    }

    #[test]
    fn finds_conf_and_keyring_like_the_ceph_cli() {
        let d = setup("a");
        let conf = d.join("mycluster.conf").display().to_string();
        // -c FILE: cluster name from the file's stem, [client] keyring, mon_host and fsid from [global].
        let o = ConnectOptions {
            conf: Some(conf.clone()),
            ..ConnectOptions::default()
        };
        let c = o.load_config().unwrap();
        assert_eq!(
            (c.cluster.as_str(), c.name().as_str()),
            ("mycluster", "client.admin")
        );
        assert_eq!(c.get("mon_host").as_deref(), Some("v2:127.0.0.1:3300"));
        let (path, k) = c.load_keyring().unwrap();
        assert_eq!(path, d.join("client.keyring"));
        assert!(k.key_of("client.admin").is_ok());
        // $CEPH_CONF when there is no -c; --id picks [client.bob] settings; -m overrides mon_host.
        let o = ConnectOptions {
            env_ceph_conf: Some(conf.clone()),
            id: Some("bob".into()),
            mon_host: Some("10.0.0.1".into()),
            ..ConnectOptions::default()
        };
        let c = o.load_config().unwrap();
        assert_eq!(c.name(), "client.bob");
        assert_eq!(c.load_keyring().unwrap().0, d.join("bob.keyring"));
        assert_eq!(c.get("ms_mon_client_mode").as_deref(), Some("crc"));
        assert_eq!(c.get("mon_host").as_deref(), Some("10.0.0.1"));
        // --keyring wins over the file; --cluster names the cluster.
        let o = ConnectOptions {
            conf: Some(conf),
            keyring: Some(d.join("bob.keyring").display().to_string()),
            cluster: Some("other".into()),
            ..ConnectOptions::default()
        };
        let c = o.load_config().unwrap();
        assert_eq!(c.cluster, "other");
        assert_eq!(c.load_keyring().unwrap().0, d.join("bob.keyring"));
        // No file anywhere: a clear error.
        let o = ConnectOptions {
            conf: Some(d.join("absent.conf").display().to_string()),
            ..ConnectOptions::default()
        };
        assert!(matches!(
            o.load_config(),
            Err(Error::ConfigFile(ceph_config::ConfigError::NoConfig { .. }))
        ));
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn entity_names() {
        let mut o = ConnectOptions::default();
        assert_eq!(o.entity_name(), "client.admin");
        o.id = Some("bob".into());
        assert_eq!(o.entity_name(), "client.bob");
        o.name = Some("client.x".into());
        assert_eq!(o.entity_name(), "client.x");
    }
}
