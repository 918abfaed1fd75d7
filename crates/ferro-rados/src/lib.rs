// SPDX-License-Identifier: MPL-2.0
//! FerroCeph's RADOS client library.
//!
//! [`Cluster::connect`] reads ceph.conf and the keyring as the `ceph` CLI does, hunts for a monitor (msgr2, crc
//! or secure mode, cephx) and keeps the OSDMap current through the MonClient's subscriptions. On top of that:
//! [`Cluster::status`], [`Cluster::pools`], [`Cluster::osd_map`] (the current map), [`Cluster::map_object`]
//! (`ceph osd map`, computed locally from the map) and [`Cluster::mon_command`].

pub mod conf;
pub mod mapping;

use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use cephx::msgr2_auth::{WANT_MON_OSD_MGR, parse_modes};
use monclient::blocking::{BlockingError, BlockingMonClient, DriverConfig};
use monclient::{MonTarget, OsdMapLike};
use osdmap::OsdMap;

pub use conf::ConnectOptions;
pub use mapping::ObjectMapping;

/// Errors, with Ceph's errno where one applies.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("configuration: {0}")]
    Config(String),
    #[error(transparent)]
    ConfigFile(#[from] ceph_config::ConfigError),
    #[error("bad key for {name}: {detail}")]
    Key { name: String, detail: String },
    #[error("monitor session: {0}")]
    Session(#[from] BlockingError),
    #[error("{detail}")]
    Errno { errno: i32, detail: String },
}

impl Error {
    /// The (negative) errno for the process exit code and messages.
    pub fn errno(&self) -> i32 {
        match self {
            Error::Errno { errno, .. } => *errno,
            Error::Session(BlockingError::Timeout(..)) => -110, // ETIMEDOUT
            Error::Session(BlockingError::AuthRejected { errno, .. }) => *errno,
            Error::Session(_) => -107,                      // ENOTCONN
            Error::Key { .. } => -13,                       // EACCES
            Error::Config(_) | Error::ConfigFile(_) => -22, // EINVAL
        }
    }
}

/// Ceph's `(rc, outs, outbl)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MonCommandResult {
    pub rc: i32,
    pub outs: String,
    pub outbl: Bytes,
}

/// A pool as `status` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PoolSummary {
    pub id: i64,
    pub name: String,
    /// "replicated" or "erasure".
    pub kind: &'static str,
    pub size: u32,
    pub pg_num: u32,
}

/// A summary of the cluster as seen through the monitor session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Status {
    pub fsid: String,
    /// `HEALTH_OK`, `HEALTH_WARN` or `HEALTH_ERR` (from the monitor's `health` command).
    pub health: String,
    pub monmap_epoch: u32,
    pub mons: Vec<(String, SocketAddr)>,
    /// The monitor we are talking to.
    pub mon: String,
    pub osdmap_epoch: u32,
    pub num_osds: u32,
    pub num_up_osds: u32,
    pub num_in_osds: u32,
    pub pools: Vec<PoolSummary>,
}

/// A connection to a Ceph cluster.
pub struct Cluster {
    monc: BlockingMonClient<OsdMap>,
    timeout: Duration,
}

fn seed() -> u64 {
    // Only the hunt order and our messenger nonce derive from it: it must differ between processes, nothing more.
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    (t.as_nanos() as u64) ^ (u64::from(std::process::id()) << 32)
}

impl Cluster {
    /// Read the configuration and keyring, and establish an authenticated monitor session.
    pub fn connect(opts: &ConnectOptions) -> Result<Cluster, Error> {
        let cfg = opts.load_config()?;
        let name = cfg.name();
        let mon_host = cfg
            .get("mon_host")
            .ok_or_else(|| Error::Config("no mon_host in the configuration (and no -m)".into()))?;
        let addrs = conf::resolve_mon_host(&conf::parse_mon_host(&mon_host)?)?;
        let fsid = match cfg.get("fsid") {
            Some(f) => Some(
                ceph_msgs::uuid_from_str(&f)
                    .ok_or_else(|| Error::Config(format!("fsid {f:?} is not a uuid")))?,
            ),
            None => None,
        };
        let (path, keyring) = cfg.load_keyring()?;
        let key_b64 = keyring.key_of(&name).map_err(|e| Error::Key {
            name: name.clone(),
            detail: format!("{e} in {}", path.display()),
        })?;
        let key = cephx::CryptoKey::from_base64(key_b64).map_err(|e| Error::Key {
            name: name.clone(),
            detail: e.to_string(),
        })?;
        let modes = parse_modes(
            &cfg.get("ms_mon_client_mode")
                .unwrap_or_else(|| "secure crc".into()),
        );
        if modes.is_empty() {
            return Err(Error::Config(
                "ms_mon_client_mode allows neither secure nor crc".into(),
            ));
        }
        // denc parses `type.id` (Ceph's entity type names); `auth.*` is no principal a client can be.
        let entity = name
            .parse::<cephx::EntityName>()
            .ok()
            .filter(|e| e.ty != cephx::ENTITY_TYPE_AUTH)
            .ok_or_else(|| Error::Config(format!("bad name {name:?} (want type.id, e.g. client.admin)")))?;
        let ty = u8::try_from(entity.ty).map_err(|_| Error::Config(format!("bad name {name:?}")))?;
        let auth = monclient::blocking::cephx_auth(entity, key, WANT_MON_OSD_MGR, modes);
        let mons = addrs
            .into_iter()
            .enumerate()
            .map(|(i, addr)| MonTarget {
                name: format!("noname-{i}"),
                addr,
            })
            .collect();
        // Ceph's MonClient tunables, when the configuration sets them (seconds as floats, as Ceph reads them).
        let secs = |key: &str, default: Duration| {
            cfg.get(key)
                .and_then(|v| v.trim().parse::<f64>().ok())
                .filter(|v| v.is_finite() && *v > 0.0)
                .map(Duration::from_secs_f64)
                .unwrap_or(default)
        };
        let d = monclient::Config::default();
        let core_cfg = monclient::Config {
            hostname: conf::hostname(),
            fsid,
            hunt_parallel: cfg
                .get("mon_client_hunt_parallel")
                .and_then(|v| v.trim().parse().ok())
                .filter(|n: &usize| *n > 0)
                .unwrap_or(d.hunt_parallel),
            hunt_interval: secs("mon_client_hunt_interval", d.hunt_interval),
            ping_interval: secs("mon_client_ping_interval", d.ping_interval),
            ping_timeout: secs("mon_client_ping_timeout", d.ping_timeout),
            // rados_mon_op_timeout 0 (Ceph's default) means no limit; we bound every request by --connect-timeout.
            command_timeout: Some(secs("rados_mon_op_timeout", opts.timeout).min(opts.timeout)),
            ..d
        };
        let driver = DriverConfig {
            msgr: msgr2::connection::Config::new(ty, -1),
            connect_timeout: Duration::from_secs(5).min(opts.timeout),
        };
        let mut monc = BlockingMonClient::new(core_cfg, mons, seed(), driver, auth)?;
        monc.wait_connected(opts.timeout)
            .map_err(|e| match (&e, &monc.seen.last_error) {
                (BlockingError::Timeout(..), Some(last)) => Error::Errno {
                    errno: -110,
                    detail: format!(
                        "no monitor session within {:?} (last error: {last})",
                        opts.timeout
                    ),
                },
                _ => Error::Session(e),
            })?;
        Ok(Cluster {
            monc,
            timeout: opts.timeout,
        })
    }

    /// The monitor client underneath (maps, events, subscriptions).
    pub fn monclient(&mut self) -> &mut BlockingMonClient<OsdMap> {
        &mut self.monc
    }

    /// The current OSDMap: waits until we hold at least the newest epoch the monitors report.
    pub fn osd_map(&mut self) -> Result<&OsdMap, Error> {
        let (newest, _) = self.monc.get_version("osdmap", self.timeout)?;
        let newest = u32::try_from(newest).unwrap_or(u32::MAX);
        Ok(self.monc.wait_osdmap(newest, self.timeout)?)
    }

    /// Pools by id: `(id, name)`.
    pub fn pools(&mut self) -> Result<Vec<(i64, String)>, Error> {
        let m = self.osd_map()?;
        Ok(m.pool_name.iter().map(|(id, n)| (*id, n.clone())).collect())
    }

    /// Where `object` (in namespace `nspace`, "" for the default) of pool `pool` lives: the answer of
    /// `ceph osd map POOL OBJECT [NSPACE]`, computed from our copy of the current OSDMap.
    pub fn map_object(&mut self, pool: &str, object: &str, nspace: &str) -> Result<ObjectMapping, Error> {
        let m = self.osd_map()?;
        map_object_in(m, pool, object, nspace)
    }

    /// Send a mon command (a JSON object) with input bytes; Ceph's `(rc, outs, outbl)`.
    pub fn mon_command(&mut self, json: &str, inbl: Bytes) -> Result<MonCommandResult, Error> {
        let r = self
            .monc
            .mon_command(vec![json.to_string()], inbl, self.timeout)?;
        Ok(MonCommandResult {
            rc: r.rc,
            outs: r.outs,
            outbl: r.outbl,
        })
    }

    /// fsid, map epochs, monitors, OSD counts and pools.
    pub fn status(&mut self) -> Result<Status, Error> {
        let h = self.mon_command(r#"{"prefix": "health", "format": "json"}"#, Bytes::new())?;
        let health = serde_json::from_slice::<serde_json::Value>(&h.outbl)
            .ok()
            .and_then(|v| v["status"].as_str().map(str::to_string))
            .unwrap_or_else(|| "unknown".into());
        self.osd_map()?;
        let monc = &mut self.monc;
        monc.run_until(self.timeout, "waiting for the monmap", |c| {
            c.core().monmap().is_some()
        })?;
        let core = monc.core();
        let monmap = core.monmap().ok_or_else(|| Error::Config("no monmap".into()))?;
        let m = core.osdmap().ok_or_else(|| Error::Config("no osdmap".into()))?;
        let exists: Vec<i32> = (0..m.max_osd).filter(|&o| m.exists(o)).collect();
        Ok(Status {
            fsid: ceph_msgs::uuid_to_string(&monmap.fsid),
            health,
            monmap_epoch: monmap.epoch,
            mons: monmap
                .mons
                .iter()
                .filter_map(|x| x.msgr2_addr().map(|a| (x.name.clone(), a)))
                .collect(),
            mon: core.current_mon().map(|t| t.name.clone()).unwrap_or_default(),
            osdmap_epoch: m.epoch(),
            num_osds: exists.len() as u32,
            num_up_osds: exists.iter().filter(|&&o| m.is_up(o)).count() as u32,
            num_in_osds: exists.iter().filter(|&&o| m.is_in(o)).count() as u32,
            pools: m
                .pools
                .iter()
                .map(|(id, p)| PoolSummary {
                    id: *id,
                    name: m.pool_name.get(id).cloned().unwrap_or_default(),
                    kind: if p.is_erasure() { "erasure" } else { "replicated" },
                    size: u32::from(p.size),
                    pg_num: p.pg_num,
                })
                .collect(),
        })
    }
}

/// `ceph osd map` against a given map (no monitor needed).
pub fn map_object_in(m: &OsdMap, pool: &str, object: &str, nspace: &str) -> Result<ObjectMapping, Error> {
    let pool_id = m.pool_by_name(pool).ok_or_else(|| Error::Errno {
        errno: -2,
        detail: format!("pool {pool} does not exist"),
    })?;
    let loc = denc::ObjectLocator {
        pool: pool_id,
        nspace: Bytes::copy_from_slice(nspace.as_bytes()),
        ..Default::default()
    };
    let placement_err = |e: osdmap::PlacementError| Error::Errno {
        errno: e.errno(),
        detail: e.to_string(),
    };
    let raw = m
        .object_locator_to_pg(object.as_bytes(), &loc)
        .map_err(placement_err)?;
    let pg = m.raw_pg_to_pg(raw).map_err(placement_err)?;
    let ua = m.pg_to_up_acting_osds(raw).map_err(placement_err)?;
    Ok(ObjectMapping {
        epoch: m.epoch,
        pool: pool.to_string(),
        pool_id,
        objname: if nspace.is_empty() {
            object.to_string()
        } else {
            format!("{nspace}/{object}")
        },
        raw_pgid: (raw.pool, raw.seed),
        pgid: (pg.pool, pg.seed),
        up: ua.up,
        up_primary: ua.up_primary,
        acting: ua.acting,
        acting_primary: ua.acting_primary,
    })
}

/// Ceph's short errno names, for "Error ENOENT: ..." messages.
pub fn errno_name(errno: i32) -> String {
    let n = match errno.abs() {
        1 => "EPERM",
        2 => "ENOENT",
        5 => "EIO",
        11 => "EAGAIN",
        13 => "EACCES",
        16 => "EBUSY",
        17 => "EEXIST",
        22 => "EINVAL",
        34 => "ERANGE",
        95 => "EOPNOTSUPP",
        107 => "ENOTCONN",
        110 => "ETIMEDOUT",
        125 => "ECANCELED",
        n => return format!("error {n}"),
    };
    n.to_string()
}

#[cfg(test)]
mod send_check {
    /// A `Cluster` can move to another thread (one thread at a time uses it).
    #[test]
    fn cluster_is_send() {
        fn assert_send<T: Send>() {}
        assert_send::<super::Cluster>();
    }
}
