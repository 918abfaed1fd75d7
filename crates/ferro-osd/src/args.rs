// SPDX-License-Identifier: LGPL-3.0-or-later
//! The command line, as `ceph-osd` takes it, and the options the daemon reads from ceph.conf.

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr};
use std::path::PathBuf;

/// Command-line flags (ceph-osd's spellings).
#[derive(Debug, Clone, Default)]
pub struct Args {
    pub id: Option<u32>,
    pub conf: Option<String>,
    pub cluster: Option<String>,
    pub keyring: Option<String>,
    pub osd_data: Option<String>,
    pub osd_uuid: Option<String>,
    pub mkfs: bool,
    pub mkkey: bool,
    /// `-f`: foreground. `-d`: foreground, log to stderr.
    pub foreground: bool,
    pub debug_stderr: bool,
    /// Any other `--key value` / `--key=value`: config overrides, as Ceph takes them.
    pub overrides: BTreeMap<String, String>,
    pub help: bool,
    pub version: bool,
}

pub const USAGE: &str = "usage: ferro-osd -i <ID> [flags]
  --conf/-c FILE    read configuration from the given configuration file
  --cluster NAME    set cluster name (default: ceph)
  --id/-i ID        set ID portion of my name
  --keyring FILE    the OSD's keyring
  --osd-data PATH   the OSD's data directory
  --osd-uuid UUID   uuid to set on --mkfs
  --mkfs            create a new OSD (superblock files and a ferrostore on the block file)
  -f                run in foreground
  -d                run in foreground, log to stderr
  --setuser/--setgroup NAME   accepted; ignored (ferro-osd runs as the invoking user)
  --ferro-osd-cpus LIST   run reactor core i on the i-th CPU of LIST (e.g. 1 or 0-3,8)
  --<option> VALUE  set any configuration option
";

/// Parse `argv[1..]`.
pub fn parse(argv: &[String]) -> Result<Args, String> {
    let mut a = Args::default();
    let mut i = 0;
    let val = |i: &mut usize, flag: &str| -> Result<String, String> {
        *i += 1;
        argv.get(*i).cloned().ok_or(format!("{flag} needs a value"))
    };
    while i < argv.len() {
        let arg = argv[i].clone();
        let (flag, inline) = match arg.split_once('=') {
            Some((f, v)) if f.starts_with("--") => (f.to_string(), Some(v.to_string())),
            _ => (arg.clone(), None),
        };
        let take = |i: &mut usize| -> Result<String, String> {
            match &inline {
                Some(v) => Ok(v.clone()),
                None => val(i, &flag),
            }
        };
        match flag.as_str() {
            "-i" | "--id" => {
                let v = take(&mut i)?;
                let v = v.strip_prefix("osd.").unwrap_or(&v).to_string();
                a.id = Some(v.parse().map_err(|_| format!("bad OSD id {v:?}"))?);
            }
            "-n" | "--name" => {
                let v = take(&mut i)?;
                let id = v.strip_prefix("osd.").ok_or(format!("name {v:?} is not osd.N"))?;
                a.id = Some(id.parse().map_err(|_| format!("bad OSD id {id:?}"))?);
            }
            "-c" | "--conf" => a.conf = Some(take(&mut i)?),
            "--cluster" => a.cluster = Some(take(&mut i)?),
            "-k" | "--keyring" => a.keyring = Some(take(&mut i)?),
            "--osd-data" | "--osd_data" => a.osd_data = Some(take(&mut i)?),
            "--osd-uuid" | "--osd_uuid" => a.osd_uuid = Some(take(&mut i)?),
            "--mkfs" => a.mkfs = true,
            "--mkkey" => a.mkkey = true,
            "-f" | "--foreground" => a.foreground = true,
            "-d" => {
                a.foreground = true;
                a.debug_stderr = true;
            }
            "--setuser" | "--setgroup" => {
                take(&mut i)?;
            }
            "-h" | "--help" => a.help = true,
            "-v" | "--version" => a.version = true,
            f if f.starts_with("--") => {
                let key = ceph_config::normalize_option_name(&f[2..]);
                let v = take(&mut i)?;
                a.overrides.insert(key, v);
            }
            other => return Err(format!("unexpected argument {other:?}")),
        }
        i += 1;
    }
    Ok(a)
}

/// Everything the daemon takes from its configuration.
#[derive(Debug, Clone)]
pub struct OsdOptions {
    pub id: u32,
    pub cluster: String,
    pub fsid: Option<[u8; 16]>,
    pub osd_data: PathBuf,
    pub keyring_key: Option<String>,
    pub mon_hosts: Vec<std::net::SocketAddr>,
    pub public_ip: IpAddr,
    pub cluster_ip: IpAddr,
    pub bind_port_min: u16,
    pub bind_port_max: u16,
    pub admin_socket: Option<PathBuf>,
    pub log_file: Option<PathBuf>,
    /// `ferro_osd_device`: a device (or file) to use instead of `$osd_data/block`.
    pub device: Option<PathBuf>,
    /// `ferro_osd_device_size` (bytes) for a block file created by --mkfs.
    pub device_size: u64,
    /// `ferro_osd_device_zero_fill` (default false): `--mkfs` writes zeros over the whole block file, so that
    /// later writes land in allocated blocks (see [`crate::mkfs::zero_fill`]).
    pub device_zero_fill: bool,
    /// `ferro_osd_shards` (0 = one per core, capped by the shard count mkfs chose).
    pub shards: u32,
    /// `ferro_osd_pin_cores`: pin each core's thread to a CPU (default true; pinning pays when the OSD owns its
    /// CPUs, see docs/reactor.md).
    pub pin_cores: bool,
    /// `ferro_osd_cpus`: CPUs for the reactor cores in cpuset list form (`1`, `0-3,8`): core i runs on the i-th
    /// listed CPU (wrapping around when there are more cores). Empty (default): `pin_cores` decides. A listed
    /// CPU the OSD may not run on fails the start.
    pub cpus: Vec<usize>,
    /// `ferrostore_cache_bytes`: metadata cache budget of each ferrostore shard (tree nodes; see
    /// `ferrostore::StoreConfig::cache_bytes`). Default [`default_cache_bytes`] of the shard count.
    pub cache_bytes: Option<u64>,
    /// `ferrostore_read_pool_bytes`: idle read buffers kept per shard (default 64 MiB).
    pub read_pool_bytes: Option<u64>,
    /// `ferrostore_log_data_max_bytes` (or the environment's `FERROSTORE_LOG_DATA_MAX`): journal writes of up to
    /// this many bytes in their log record (`ferrostore::StoreConfig::log_data_max_bytes`; 0 = never). Unset:
    /// [`DEFAULT_LOG_DATA_MAX_BYTES`] where a durable write costs a cache flush (RWF_DSYNC writes on a device
    /// without FUA), else 0 (with FUA a durable write is one write already; docs/benchmarks.md, "journaled small
    /// writes").
    pub log_data_max_bytes: Option<u64>,
    /// `ferrostore_defrag_extra_reads` (or the environment's `FERROSTORE_DEFRAG_EXTRA_READS`): a read that took
    /// this many device reads more than one contiguous range would have its blocks rewritten as one run
    /// (`ferrostore::StoreConfig::defrag_extra_reads`; 0 = never). Unset: the engine's default, 3.
    pub defrag_extra_reads: Option<u32>,
    /// `ferrostore_defrag_after_reads` (or the environment's `FERROSTORE_DEFRAG_AFTER_READS`): a scattered
    /// range is rewritten on this scattered read of it (`ferrostore::StoreConfig::defrag_after_reads`; 1 = the
    /// first). Unset: the engine's default, 2.
    pub defrag_after_reads: Option<u32>,
    /// `ferrostore_defrag_eager_bytes` (or the environment's `FERROSTORE_DEFRAG_EAGER_BYTES`): scattered ranges
    /// of at most this many bytes are rewritten on their first scattered read
    /// (`ferrostore::StoreConfig::defrag_eager_blocks`: rounded down to whole 4 KiB blocks, so under 4 KiB is 0 =
    /// every range waits for `ferrostore_defrag_after_reads`). Unset: the engine's default, 64 KiB.
    pub defrag_eager_bytes: Option<u64>,
    /// `ferrostore_defrag_small_extra_reads`: ranges of at most `ferrostore_defrag_eager_bytes` are rewritten once
    /// they took this many device reads more than one contiguous range would have
    /// (`ferrostore::StoreConfig::defrag_small_extra_reads`; at least 1). Unset: the engine's default, 1.
    pub defrag_small_extra_reads: Option<u32>,
    /// `ferro_osd_busy_poll` (default false): while device IO is in flight, poll the ferrostore device ring on
    /// every loop turn instead of sleeping until it has completions (for CPUs dedicated to the OSD).
    pub busy_poll: bool,
    /// Large receive buffers and malloc: `ferro_rx_buffer_pool_bytes`, `ferro_osd_malloc_mmap_threshold`,
    /// `ferro_osd_malloc_arena_max`, `ferro_osd_mem_trim_interval`, `ferro_osd_malloc_trim` (see
    /// [`crate::memory::MemoryOptions`]).
    pub memory: crate::memory::MemoryOptions,
    /// Reactor thread scheduling: `ferro_reactor_sched_slice_us`, `ferro_reactor_nice`,
    /// `ferro_reactor_sched_policy`, `ferro_reactor_sched_priority` (see [`crate::sched`]).
    pub reactor_sched: crate::sched::ReactorSched,
    /// The PGs' Ceph options (osd_id is set per shard): `osd_min_pg_log_entries`, `osd_max_pg_log_entries`,
    /// `osd_pg_log_trim_min`, `osd_pg_log_dups_tracked`, `osd_pg_object_context_cache_count`.
    pub pg: pg::PgConfig,
    pub beacon_interval_s: u64,
    /// `osd_heartbeat_interval`, `osd_heartbeat_grace`, `osd_heartbeat_min_peers`, `osd_heartbeat_min_size`.
    pub heartbeat_interval_s: u64,
    pub heartbeat_grace_s: u64,
    pub heartbeat_min_peers: u64,
    pub heartbeat_min_size: u64,
    pub mon_report_interval_s: u64,
    pub crush_update_on_start: bool,
    pub crush_location: Option<String>,
    pub initial_weight: Option<f64>,
    pub device_class: String,
    pub hostname: String,
    /// All options as seen (for `config show`).
    pub all: BTreeMap<String, String>,
}

/// `ferrostore_log_data_max_bytes` when unset, on a device without FUA: writes of up to 16 KiB are journaled.
pub const DEFAULT_LOG_DATA_MAX_BYTES: u64 = 16 << 10;

/// The default `ferrostore_cache_bytes` per shard: 256 MiB for the whole OSD split over its shards, 16–128 MiB per
/// shard. A quarter of it is the dirty budget that starts a checkpoint: at 128 MiB a shard under random 4K writes
/// checkpoints a few times a minute instead of every ~0.4 s, which cut the 4K write QD16 p99 by 19–32 % and write
/// CPU per op by 2–10 % for +3 MiB RSS (docs/benchmarks.md, session 8).
pub fn default_cache_bytes(shards: u32) -> u64 {
    let per = (256u64 << 20) / u64::from(shards.max(1));
    per.clamp(16 << 20, 128 << 20)
}

/// Parse a CPU list as cpuset(7) writes it (`ferro_osd_cpus`, like Crimson's `crimson_seastar_cpu_cores`):
/// comma-separated CPUs and inclusive ranges, e.g. `1`, `0-3,8`. The order is kept (core i gets the i-th CPU).
/// Empty input is an empty list; a CPU beyond the kernel's CPU set size, a reversed range or a CPU listed
/// twice is an error.
pub fn parse_cpu_list(s: &str) -> Result<Vec<usize>, String> {
    let max = libc::CPU_SETSIZE as usize;
    let cpu = |t: &str| -> Result<usize, String> {
        let c: usize = t
            .trim()
            .parse()
            .map_err(|_| format!("{t:?} is not a CPU number"))?;
        if c >= max {
            return Err(format!("CPU {c} is beyond the largest CPU number ({})", max - 1));
        }
        Ok(c)
    };
    let mut out: Vec<usize> = Vec::new();
    if s.trim().is_empty() {
        return Ok(out);
    }
    for item in s.split(',') {
        let (lo, hi) = match item.split_once('-') {
            Some((a, b)) => (cpu(a)?, cpu(b)?),
            None => {
                let c = cpu(item)?;
                (c, c)
            }
        };
        if lo > hi {
            return Err(format!("range {:?} runs backwards", item.trim()));
        }
        for c in lo..=hi {
            if out.contains(&c) {
                return Err(format!("CPU {c} is listed twice"));
            }
            out.push(c);
        }
    }
    Ok(out)
}

/// The PG options Ceph operators set in ceph.conf; a value that is not a number fails the start, as ceph-osd
/// refuses a malformed option.
fn pg_config(get: impl Fn(&str) -> Option<String>) -> Result<pg::PgConfig, String> {
    let mut c = pg::PgConfig::default();
    let set = |k: &str, slot: &mut usize| -> Result<(), String> {
        if let Some(v) = get(k) {
            *slot = v
                .trim()
                .parse()
                .map_err(|_| format!("{k}: {v:?} is not a non-negative integer"))?;
        }
        Ok(())
    };
    set("osd_min_pg_log_entries", &mut c.osd_min_pg_log_entries)?;
    set("osd_max_pg_log_entries", &mut c.osd_max_pg_log_entries)?;
    set("osd_pg_log_trim_min", &mut c.osd_pg_log_trim_min)?;
    set("osd_pg_log_dups_tracked", &mut c.osd_pg_log_dups_tracked)?;
    set(
        "osd_pg_object_context_cache_count",
        &mut c.osd_pg_object_context_cache_count,
    )?;
    Ok(c)
}

fn parse_bool(s: &str) -> bool {
    matches!(
        s.trim().to_ascii_lowercase().as_str(),
        "true" | "1" | "yes" | "on"
    )
}

/// Parse a size with Ceph's suffixes (K, M, G, T; KiB etc.).
pub fn parse_size(s: &str) -> Option<u64> {
    let s = s.trim();
    let digits: String = s.chars().take_while(|c| c.is_ascii_digit()).collect();
    let n: u64 = digits.parse().ok()?;
    let suffix = s[digits.len()..].trim().to_ascii_uppercase();
    let mul: u64 = match suffix.trim_end_matches("IB").trim_end_matches('B') {
        "" => 1,
        "K" => 1 << 10,
        "M" => 1 << 20,
        "G" => 1 << 30,
        "T" => 1 << 40,
        _ => return None,
    };
    n.checked_mul(mul)
}

/// Parse `mon host` (`v2:1.2.3.4:3300`, `[v2:...,v1:...]`, plain `host:port`, separated by `,` ` ` or `;`).
pub fn parse_mon_host(s: &str) -> Vec<std::net::SocketAddr> {
    let mut out = Vec::new();
    for tok in s.split([',', ' ', ';']) {
        let t = tok.trim().trim_matches(['[', ']']);
        if t.is_empty() || t.starts_with("v1:") {
            continue;
        }
        let t = t.strip_prefix("v2:").unwrap_or(t);
        let t = t.split('/').next().unwrap_or(t);
        if let Ok(a) = t.parse() {
            out.push(a);
        } else if let Ok(ip) = t.parse::<IpAddr>() {
            out.push(std::net::SocketAddr::new(ip, 3300));
        }
    }
    out
}

/// The short host name (`$host`).
pub fn hostname() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: buf is valid for its length; gethostname NUL-terminates within it on success.
    let r = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    if r != 0 {
        return "localhost".into();
    }
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    let full = String::from_utf8_lossy(&buf[..end]).to_string();
    full.split('.').next().unwrap_or("localhost").to_string()
}

/// Load ceph.conf for `osd.<id>` and collect the options.
pub fn load(args: &Args) -> Result<(OsdOptions, ceph_config::Config), String> {
    let id = args.id.ok_or("missing -i <id>")?;
    let src = ceph_config::ConfSource {
        explicit: args.conf.clone(),
        cluster: args.cluster.clone(),
        ..ceph_config::ConfSource::from_env()
    };
    let host = hostname();
    let mut cfg = src.load(&format!("osd.{id}"), &host).map_err(|e| e.to_string())?;
    for (k, v) in &args.overrides {
        cfg.overrides.insert(k.clone(), v.clone());
    }
    if let Some(k) = &args.keyring {
        cfg.overrides.insert("keyring".into(), k.clone());
    }
    if let Some(d) = &args.osd_data {
        cfg.overrides.insert("osd_data".into(), d.clone());
    }
    let get = |k: &str| cfg.get(k).filter(|v| !v.is_empty());
    let fsid = get("fsid")
        .and_then(|f| f.parse::<denc::Uuid>().ok())
        .map(|u| u.0);
    let osd_data = PathBuf::from(get("osd_data").ok_or("no osd data directory")?);
    let mon_hosts = parse_mon_host(&get("mon_host").unwrap_or_default());
    let ip = |k: &str| -> IpAddr {
        get(k)
            .and_then(|v| v.split([':', '/']).next().and_then(|s| s.parse().ok()))
            .unwrap_or(IpAddr::V4(Ipv4Addr::LOCALHOST))
    };
    let public_ip = ip("public_addr");
    let cluster_ip = match get("cluster_addr") {
        Some(_) => ip("cluster_addr"),
        None => public_ip,
    };
    let num = |k: &str, d: u64| get(k).and_then(|v| v.trim().parse().ok()).unwrap_or(d);
    // FerroCeph's own sizes and counts: a value that does not parse refuses the start, as pg_config does,
    // rather than running with the engine's default unnoticed.
    let size = |k: &str| -> Result<Option<u64>, String> {
        get(k)
            .map(|v| {
                parse_size(&v)
                    .ok_or_else(|| format!("{k}: {v:?} is not a size (bytes, or with a K/M/G/T suffix)"))
            })
            .transpose()
    };
    let count = |k: &str| -> Result<Option<u32>, String> {
        get(k)
            .map(|v| {
                v.trim()
                    .parse()
                    .map_err(|_| format!("{k}: {v:?} is not a non-negative integer"))
            })
            .transpose()
    };
    let mut all = BTreeMap::new();
    for s in cfg.sections() {
        if let Some(sec) = cfg.conf.section(&s) {
            for k in sec.keys() {
                if let Some(v) = cfg.get(k) {
                    all.entry(k.clone()).or_insert(v);
                }
            }
        }
    }
    for (k, v) in &cfg.overrides {
        all.insert(k.clone(), v.clone());
    }
    let opts = OsdOptions {
        id,
        cluster: cfg.cluster.clone(),
        fsid,
        keyring_key: None,
        mon_hosts,
        public_ip,
        cluster_ip,
        bind_port_min: num("ms_bind_port_min", 6800) as u16,
        bind_port_max: num("ms_bind_port_max", 7300) as u16,
        admin_socket: get("admin_socket").map(PathBuf::from),
        log_file: get("log_file").map(PathBuf::from),
        device: get("ferro_osd_device").map(PathBuf::from),
        device_size: size("ferro_osd_device_size")?.unwrap_or(10 << 30),
        device_zero_fill: get("ferro_osd_device_zero_fill").is_some_and(|v| parse_bool(&v)),
        shards: num("ferro_osd_shards", 1) as u32,
        pin_cores: get("ferro_osd_pin_cores").is_none_or(|v| parse_bool(&v)),
        cpus: parse_cpu_list(&get("ferro_osd_cpus").unwrap_or_default())
            .map_err(|e| format!("ferro_osd_cpus: {e}"))?,
        cache_bytes: size("ferrostore_cache_bytes")?,
        read_pool_bytes: size("ferrostore_read_pool_bytes")?,
        log_data_max_bytes: size("ferrostore_log_data_max_bytes")?
            .or_else(|| ferrostore::store::env_u64(ferrostore::store::LOG_DATA_MAX_ENV)),
        defrag_extra_reads: count("ferrostore_defrag_extra_reads")?.or_else(|| {
            ferrostore::store::env_u64(ferrostore::store::DEFRAG_EXTRA_READS_ENV)
                .and_then(|v| u32::try_from(v).ok())
        }),
        defrag_after_reads: count("ferrostore_defrag_after_reads")?.or_else(|| {
            ferrostore::store::env_u64(ferrostore::store::DEFRAG_AFTER_READS_ENV)
                .and_then(|v| u32::try_from(v).ok())
        }),
        defrag_eager_bytes: size("ferrostore_defrag_eager_bytes")?
            .or_else(|| ferrostore::store::env_u64(ferrostore::store::DEFRAG_EAGER_BYTES_ENV)),
        defrag_small_extra_reads: count("ferrostore_defrag_small_extra_reads")?,
        busy_poll: get("ferro_osd_busy_poll").is_some_and(|v| parse_bool(&v)),
        memory: {
            let d = crate::memory::MemoryOptions::default();
            crate::memory::MemoryOptions {
                rx_buffer_pool_bytes: size("ferro_rx_buffer_pool_bytes")?.unwrap_or(d.rx_buffer_pool_bytes),
                io_buffer_slab_bytes: size("ferro_io_buffer_slab_bytes")?.unwrap_or(d.io_buffer_slab_bytes),
                malloc_mmap_threshold: size("ferro_osd_malloc_mmap_threshold")?
                    .filter(|&t| t > 0)
                    .or(d.malloc_mmap_threshold),
                malloc_arena_max: get("ferro_osd_malloc_arena_max")
                    .and_then(|s| s.trim().parse().ok())
                    .filter(|&n| n > 0)
                    .or(d.malloc_arena_max),
                trim_interval_s: num("ferro_osd_mem_trim_interval", d.trim_interval_s),
                malloc_trim: get("ferro_osd_malloc_trim").map_or(d.malloc_trim, |v| parse_bool(&v)),
            }
        },
        reactor_sched: {
            let (s, warnings) = crate::sched::ReactorSched::from_options(get);
            for w in warnings {
                eprintln!("ferro-osd: WARNING: {w}");
            }
            s
        },
        pg: pg_config(get)?,
        beacon_interval_s: num("osd_beacon_report_interval", 300),
        heartbeat_interval_s: num("osd_heartbeat_interval", 6),
        heartbeat_grace_s: num("osd_heartbeat_grace", 20),
        heartbeat_min_peers: num("osd_heartbeat_min_peers", 10),
        heartbeat_min_size: num("osd_heartbeat_min_size", 2000),
        mon_report_interval_s: num("osd_mon_report_interval", 5),
        crush_update_on_start: get("osd_crush_update_on_start").is_none_or(|v| parse_bool(&v)),
        crush_location: get("crush_location"),
        initial_weight: get("osd_crush_initial_weight").and_then(|v| v.parse().ok()),
        device_class: get("crush_device_class").unwrap_or_else(|| "ssd".into()),
        hostname: host,
        all,
        osd_data: osd_data.clone(),
    };
    Ok((opts, cfg))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(s: &str) -> Vec<String> {
        s.split_whitespace().map(str::to_string).collect()
    }

    #[test]
    fn ceph_osd_flags_parse() {
        let a = parse(&argv(
            "-i 3 -c /etc/ceph/x.conf --cluster x --keyring /k --osd-data /d --osd-uuid u --mkfs -d \
             --setuser ceph --setgroup ceph --debug-osd 20 --ferro_osd_shards=4",
        ))
        .unwrap();
        assert_eq!(a.id, Some(3));
        assert_eq!(a.conf.as_deref(), Some("/etc/ceph/x.conf"));
        assert_eq!(a.cluster.as_deref(), Some("x"));
        assert_eq!(a.keyring.as_deref(), Some("/k"));
        assert_eq!(a.osd_data.as_deref(), Some("/d"));
        assert_eq!(a.osd_uuid.as_deref(), Some("u"));
        assert!(a.mkfs && a.foreground && a.debug_stderr);
        assert_eq!(a.overrides.get("debug_osd").map(String::as_str), Some("20"));
        assert_eq!(a.overrides.get("ferro_osd_shards").map(String::as_str), Some("4"));
        assert_eq!(parse(&argv("--id osd.7 -f")).unwrap().id, Some(7));
        assert!(parse(&argv("-i")).is_err());
        assert!(parse(&argv("-i x")).is_err());
        assert!(parse(&argv("stray")).is_err());
    }

    #[test]
    fn cpu_lists_parse_in_order_and_refuse_bad_input() {
        assert_eq!(parse_cpu_list("1"), Ok(vec![1]));
        assert_eq!(parse_cpu_list(" 0-3, 8 "), Ok(vec![0, 1, 2, 3, 8]));
        assert_eq!(parse_cpu_list("3,1"), Ok(vec![3, 1]));
        assert_eq!(parse_cpu_list("5-5"), Ok(vec![5]));
        assert_eq!(parse_cpu_list(""), Ok(vec![]));
        for bad in [
            "x",
            "1,",
            ",1",
            "-1",
            "1-",
            "3-1",
            "1,1",
            "0-2,2",
            "1.5",
            "0x1",
            "1 2",
            "1024",
            "99999999999999999999",
        ] {
            assert!(parse_cpu_list(bad).is_err(), "{bad:?} must be refused");
        }
    }

    /// A ceph.conf in a fresh temporary directory whose `[osd]` section has `osd data = /d` and `osd_lines`.
    fn temp_conf(tag: &str, osd_lines: &str) -> (std::path::PathBuf, std::path::PathBuf) {
        let dir = std::env::temp_dir().join(format!("ferro-osd-args-{tag}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let conf = dir.join("ceph.conf");
        let text = format!(
            "[global]\nfsid = 7b1c1a3e-56a7-4a4e-8f0a-123456789abc\n[osd]\nosd data = /d\n{osd_lines}"
        );
        std::fs::write(&conf, text).unwrap();
        (dir, conf)
    }

    #[test]
    fn cpu_list_from_flag_and_conf() {
        let load_with = |conf: &std::path::Path, extra: &str| {
            load(&parse(&argv(&format!("-i 1 -c {} {extra}", conf.display()))).unwrap())
        };
        let (dir, conf) = temp_conf("cpus", "ferro osd cpus = 0-1\n");
        assert_eq!(load_with(&conf, "").unwrap().0.cpus, vec![0, 1]);
        assert_eq!(load_with(&conf, "--ferro-osd-cpus 1").unwrap().0.cpus, vec![1]);
        let e = load_with(&conf, "--ferro_osd_cpus=2-1").unwrap_err();
        assert!(e.contains("ferro_osd_cpus") && e.contains("backwards"), "{e}");
        let _ = std::fs::remove_dir_all(&dir);
        let (dir, conf) = temp_conf("cpus-default", "");
        assert!(
            load_with(&conf, "").unwrap().0.cpus.is_empty(),
            "default: no list"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn pg_options_from_conf_and_flags() {
        let load_with = |conf: &std::path::Path, extra: &str| {
            load(&parse(&argv(&format!("-i 1 -c {} {extra}", conf.display()))).unwrap())
        };
        let (dir, conf) = temp_conf(
            "pg",
            "osd min pg log entries = 500\nosd_pg_log_dups_tracked = 10\n",
        );
        let pg = load_with(&conf, "--osd_pg_log_trim_min=1").unwrap().0.pg;
        assert_eq!(
            (
                pg.osd_min_pg_log_entries,
                pg.osd_max_pg_log_entries,
                pg.osd_pg_log_trim_min,
                pg.osd_pg_log_dups_tracked
            ),
            (500, 10_000, 1, 10)
        );
        let e = load_with(&conf, "--osd_max_pg_log_entries=lots").unwrap_err();
        assert!(e.contains("osd_max_pg_log_entries"), "{e}");
        let _ = std::fs::remove_dir_all(&dir);
        let (dir, conf) = temp_conf("pg-default", "");
        let pg = load_with(&conf, "").unwrap().0.pg;
        assert_eq!(pg.osd_pg_log_trim_min, 100);
        assert_eq!(pg.osd_pg_object_context_cache_count, 256);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn defrag_eager_bytes_from_conf_and_flags() {
        let load_with = |conf: &std::path::Path, extra: &str| {
            load(&parse(&argv(&format!("-i 1 -c {} {extra}", conf.display()))).unwrap())
        };
        let (dir, conf) = temp_conf("defrag", "ferrostore defrag eager bytes = 128K\n");
        assert_eq!(
            load_with(&conf, "").unwrap().0.defrag_eager_bytes,
            Some(128 << 10)
        );
        let o = load_with(&conf, "--ferrostore_defrag_eager_bytes=0").unwrap().0;
        assert_eq!(o.defrag_eager_bytes, Some(0), "the flag wins over the file");
        assert_eq!(o.defrag_small_extra_reads, None, "unset: the engine's default");
        let o = load_with(&conf, "--ferrostore_defrag_small_extra_reads=3")
            .unwrap()
            .0;
        assert_eq!(o.defrag_small_extra_reads, Some(3));
        // A value that is not a size or a count refuses the start, naming the option.
        for bad in [
            "--ferrostore_defrag_eager_bytes=lots",
            "--ferrostore_defrag_small_extra_reads=two",
            "--ferrostore_cache_bytes=1X",
            "--ferrostore_defrag_after_reads=-1",
            "--ferro_osd_device_size=big",
        ] {
            let e = load_with(&conf, bad).unwrap_err();
            let name = bad.trim_start_matches("--").split('=').next().unwrap();
            assert!(e.contains(name), "{bad}: {e}");
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn memory_options_from_ceph_conf() {
        let dir = std::env::temp_dir().join(format!("ferro-osd-args-mem-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let conf = dir.join("ceph.conf");
        std::fs::write(
            &conf,
            "[global]\nfsid = 7b1c1a3e-56a7-4a4e-8f0a-123456789abc\n[osd]\nosd data = /d\n\
             ferro_rx_buffer_pool_bytes = 8M\nferro_osd_malloc_trim = false\nferro_io_buffer_slab_bytes = 16M\n",
        )
        .unwrap();
        let a = parse(&argv(&format!(
            "-i 1 -c {} --ferro_osd_malloc_mmap_threshold=256K --ferro_osd_mem_trim_interval=0",
            conf.display()
        )))
        .unwrap();
        let (o, _) = load(&a).unwrap();
        assert_eq!(
            o.memory,
            crate::memory::MemoryOptions {
                rx_buffer_pool_bytes: 8 << 20,
                io_buffer_slab_bytes: 16 << 20,
                malloc_mmap_threshold: Some(256 << 10),
                malloc_arena_max: None,
                trim_interval_s: 0,
                malloc_trim: false,
            }
        );
        let a = parse(&argv(&format!(
            "-i 1 -c {} --ferro_rx_buffer_pool_bytes=0",
            conf.display()
        )))
        .unwrap();
        let (o, _) = load(&a).unwrap();
        assert_eq!(o.memory.rx_buffer_pool_bytes, 0);
        assert_eq!(o.memory.trim_interval_s, 1);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn reactor_sched_options_from_ceph_conf_and_flags() {
        let dir = std::env::temp_dir().join(format!("ferro-osd-args-sched-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let conf = dir.join("ceph.conf");
        std::fs::write(
            &conf,
            "[global]\nfsid = 7b1c1a3e-56a7-4a4e-8f0a-123456789abc\n[osd]\nosd data = /d\n\
             ferro reactor sched slice us = 250\n",
        )
        .unwrap();
        let a = parse(&argv(&format!(
            "-i 1 -c {} --ferro-reactor-nice=-3 --ferro_reactor_sched_priority 7",
            conf.display()
        )))
        .unwrap();
        let (o, _) = load(&a).unwrap();
        assert_eq!(
            o.reactor_sched,
            crate::sched::ReactorSched {
                slice_us: 250,
                nice: Some(-3),
                policy: crate::sched::Policy::Other,
                priority: 7,
            }
        );
        // A bad value is a warning and the default, never a failed start.
        let a = parse(&argv(&format!(
            "-i 1 -c {} --ferro_reactor_sched_policy=idle",
            conf.display()
        )))
        .unwrap();
        let (o, _) = load(&a).unwrap();
        assert_eq!(o.reactor_sched.policy, crate::sched::Policy::Other);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn cache_budget_per_shard() {
        assert_eq!(default_cache_bytes(1), 128 << 20);
        assert_eq!(default_cache_bytes(2), 128 << 20);
        assert_eq!(default_cache_bytes(4), 64 << 20);
        assert_eq!(default_cache_bytes(8), 32 << 20);
        assert_eq!(default_cache_bytes(32), 16 << 20);
    }

    #[test]
    fn sizes_and_mon_hosts() {
        assert_eq!(parse_size("10G"), Some(10 << 30));
        assert_eq!(parse_size("512MiB"), Some(512 << 20));
        assert_eq!(parse_size("4096"), Some(4096));
        assert_eq!(parse_size("1X"), None);
        assert_eq!(parse_size("99999999999999T"), None);
        let m = parse_mon_host("[v2:127.0.0.1:3300/0,v1:127.0.0.1:6789/0] v2:10.0.0.2:3300, 10.0.0.3");
        let want: Vec<std::net::SocketAddr> = vec![
            "127.0.0.1:3300".parse().unwrap(),
            "10.0.0.2:3300".parse().unwrap(),
            "10.0.0.3:3300".parse().unwrap(),
        ];
        assert_eq!(m, want);
    }
}
