// SPDX-License-Identifier: MPL-2.0
//! `ferro-rados`: a command-line client for a Ceph cluster (Pacific 16.2), reading ceph.conf and the keyring as
//! the `ceph` CLI does.

use std::io::Write;
use std::process::ExitCode;
use std::time::Duration;

use bytes::Bytes;
use clap::{Parser, Subcommand};
use ferro_rados::{Cluster, ConnectOptions, Error, errno_name};

#[derive(Parser)]
#[command(name = "ferro-rados", version, about = "FerroCeph's RADOS client")]
struct Cli {
    /// ceph.conf to use (else $CEPH_CONF, else /etc/ceph/$cluster.conf, ~/.ceph/$cluster.conf, ./$cluster.conf).
    #[arg(short = 'c', long = "conf", global = true)]
    conf: Option<String>,
    /// Cluster name (default "ceph").
    #[arg(long, global = true)]
    cluster: Option<String>,
    /// Entity name, TYPE.ID (default client.admin).
    #[arg(short = 'n', long = "name", global = true)]
    name: Option<String>,
    /// Client id: the name becomes client.ID.
    #[arg(long = "id", alias = "user", global = true)]
    id: Option<String>,
    /// Keyring file (else the `keyring` option and Ceph's default search path).
    #[arg(short = 'k', long = "keyring", global = true)]
    keyring: Option<String>,
    /// Monitor addresses, overriding mon_host.
    #[arg(short = 'm', long = "mon-host", global = true)]
    mon_host: Option<String>,
    /// Seconds to wait for a monitor session and for each answer.
    #[arg(long = "connect-timeout", default_value_t = 30, global = true)]
    timeout_s: u64,
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// fsid, map epochs, monitors, OSD counts and pools.
    Status {
        /// Output format: plain (default) or json.
        #[arg(short = 'f', long = "format", default_value = "plain")]
        format: String,
    },
    /// Pools, as `ceph osd lspools` (`-f json` / `json-pretty` too).
    Lspools {
        /// Output format: plain (default) or json.
        #[arg(short = 'f', long = "format", default_value = "plain")]
        format: String,
    },
    /// Where an object lives, as `ceph osd map POOL OBJECT [NSPACE]` (computed from our copy of the OSDMap).
    OsdMap {
        pool: String,
        object: String,
        /// Namespace (default: the default namespace).
        nspace: Option<String>,
        /// JSON output, as `ceph osd map --format json`.
        #[arg(long)]
        json: bool,
        /// Output format: plain, json or json-pretty.
        #[arg(short = 'f', long = "format")]
        format: Option<String>,
    },
    /// Send a mon command (a JSON object, e.g. '{"prefix": "osd dump", "format": "json"}'); prints the output
    /// bytes to stdout and the status string to stderr; exits with the command's error.
    MonCommand {
        json: String,
        /// File whose bytes are the command's input (`-i` of the ceph CLI).
        #[arg(short = 'i', long = "in-file")]
        in_file: Option<String>,
    },
}

fn fail(e: &Error) -> ExitCode {
    eprintln!("Error {}: {e}", errno_name(e.errno()));
    ExitCode::from(e.errno().unsigned_abs().min(255) as u8)
}

fn main() -> ExitCode {
    // As the ceph CLI: options in $CEPH_ARGS (e.g. "--id bob -k /path") come before those on the command line.
    let mut args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    if let Ok(extra) = std::env::var("CEPH_ARGS") {
        let at = 1.min(args.len());
        args.splice(at..at, extra.split_whitespace().map(std::ffi::OsString::from));
    }
    let cli = Cli::parse_from(args);
    let opts = ConnectOptions {
        conf: cli.conf.clone(),
        cluster: cli.cluster.clone(),
        name: cli.name.clone(),
        id: cli.id.clone(),
        keyring: cli.keyring.clone(),
        mon_host: cli.mon_host.clone(),
        timeout: Duration::from_secs(cli.timeout_s.max(1)),
        ..ConnectOptions::from_env()
    };
    let mut cluster = match Cluster::connect(&opts) {
        Ok(c) => c,
        Err(e) => return fail(&e),
    };
    match run(&mut cluster, cli.cmd) {
        Ok(code) => code,
        Err(e) => fail(&e),
    }
}

fn run(cluster: &mut Cluster, cmd: Cmd) -> Result<ExitCode, Error> {
    let mut out = std::io::stdout().lock();
    let io = |e: std::io::Error| Error::Errno {
        errno: -5,
        detail: format!("writing output: {e}"),
    };
    match cmd {
        Cmd::Status { format } => {
            let s = cluster.status()?;
            if format.starts_with("json") {
                let v = serde_json::json!({
                    "fsid": s.fsid,
                    "health": s.health,
                    "monmap": {"epoch": s.monmap_epoch, "mons": s.mons.iter().map(|(n, a)| serde_json::json!({"name": n, "addr": format!("v2:{a}")})).collect::<Vec<_>>()},
                    "session_mon": s.mon,
                    "osdmap": {"epoch": s.osdmap_epoch, "num_osds": s.num_osds, "num_up_osds": s.num_up_osds, "num_in_osds": s.num_in_osds},
                    "pools": s.pools.iter().map(|p| serde_json::json!({"id": p.id, "name": p.name, "type": p.kind, "size": p.size, "pg_num": p.pg_num})).collect::<Vec<_>>(),
                });
                writeln!(out, "{v}").map_err(io)?;
            } else {
                writeln!(
                    out,
                    "  cluster:\n    id:     {}\n    health: {}",
                    s.fsid, s.health
                )
                .map_err(io)?;
                let mons: Vec<String> = s.mons.iter().map(|(n, a)| format!("{n}=v2:{a}")).collect();
                writeln!(
                    out,
                    "  monmap: epoch {}, {} mons: {} (session with {})",
                    s.monmap_epoch,
                    s.mons.len(),
                    mons.join(", "),
                    s.mon
                )
                .map_err(io)?;
                writeln!(
                    out,
                    "  osdmap: epoch {}, {} osds: {} up, {} in",
                    s.osdmap_epoch, s.num_osds, s.num_up_osds, s.num_in_osds
                )
                .map_err(io)?;
                writeln!(out, "  pools:  {}", s.pools.len()).map_err(io)?;
                for p in &s.pools {
                    writeln!(
                        out,
                        "    {} '{}' {} size {} pg_num {}",
                        p.id, p.name, p.kind, p.size, p.pg_num
                    )
                    .map_err(io)?;
                }
            }
        }
        Cmd::Lspools { format } => {
            let pools = cluster.pools()?;
            let f = if format.starts_with("json") {
                format.as_str()
            } else {
                "plain"
            };
            if f != "plain" {
                // The ceph CLI's blank line before JSON answers.
                writeln!(out).map_err(io)?;
            }
            write!(out, "{}", ferro_rados::mapping::lspools_output(&pools, f)).map_err(io)?;
        }
        Cmd::OsdMap {
            pool,
            object,
            nspace,
            json,
            format,
        } => {
            let m = cluster.map_object(&pool, &object, nspace.as_deref().unwrap_or(""))?;
            if format.as_deref() == Some("json-pretty") {
                write!(out, "\n{}", m.to_json_pretty()).map_err(io)?;
            } else if json || format.as_deref().is_some_and(|f| f.starts_with("json")) {
                // As the ceph CLI prints JSON answers: a blank line first (its "skip the status line" hack), then
                // the monitor's bytes, which for `osd map` end without a newline.
                write!(out, "\n{}", m.to_json()).map_err(io)?;
            } else {
                writeln!(out, "{}", m.to_text()).map_err(io)?;
            }
        }
        Cmd::MonCommand { json, in_file } => {
            let inbl = match in_file {
                Some(p) => Bytes::from(std::fs::read(&p).map_err(|e| Error::Errno {
                    errno: -2,
                    detail: format!("reading {p}: {e}"),
                })?),
                None => Bytes::new(),
            };
            let r = cluster.mon_command(&json, inbl)?;
            out.write_all(&r.outbl).map_err(io)?;
            // As the ceph CLI: the status string goes to stderr, prefixed with the error on failure.
            if r.rc == 0 && !r.outs.is_empty() {
                eprintln!("{}", r.outs);
            }
            if r.rc != 0 {
                return Err(Error::Errno {
                    errno: r.rc,
                    detail: r.outs,
                });
            }
        }
    }
    out.flush().map_err(io)?;
    Ok(ExitCode::SUCCESS)
}
