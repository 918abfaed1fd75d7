// SPDX-License-Identifier: LGPL-3.0-or-later
//! OSD kinds. The cluster does what every OSD needs (an id from `ceph osd new`, a cephx key, a data
//! directory, pid tracking, waiting for `up`); a launcher does what is specific to its kind (mkfs, the
//! daemon's command line). Adding the FerroCeph OSD means writing one more [`OsdLauncher`].

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use crate::error::Result;

/// What a launcher knows about the OSD it prepares and starts.
#[derive(Debug, Clone)]
pub struct OsdContext {
    /// The id the monitors assigned (`ceph osd new`).
    pub id: u32,
    /// The OSD's uuid, as registered with the monitors.
    pub uuid: String,
    /// The cluster's fsid.
    pub fsid: String,
    /// `<cluster dir>/osd.<id>`, already created, holding `keyring`.
    pub data_dir: PathBuf,
    /// `<data_dir>/keyring`: the OSD's cephx key (entity `osd.<id>`).
    pub keyring: PathBuf,
    /// The cluster's ceph.conf.
    pub conf: PathBuf,
    /// The `v2:127.0.0.1:PORT` address of the monitor.
    pub mon_host: String,
    /// Where the daemon's log should go (`<cluster dir>/log/osd.<id>.log`).
    pub log_file: PathBuf,
}

/// One kind of OSD daemon.
pub trait OsdLauncher {
    /// A short name for messages, e.g. `classic` or `ferro`.
    fn kind(&self) -> &str;

    /// Formats the data directory (run to completion before [`OsdLauncher::command`]).
    fn prepare(&self, ctx: &OsdContext) -> Result<()>;

    /// The daemon's command line, running in the foreground. The cluster sets stdin, stdout, stderr and
    /// the environment marker that lets it find and stop the process later.
    fn command(&self, ctx: &OsdContext) -> Command;

    /// How long the daemon may take from spawn to `up` in the OSD map.
    fn up_timeout(&self) -> Duration {
        Duration::from_secs(90)
    }
}

/// Ceph's own `ceph-osd` with BlueStore on a sparse file in the data directory (size from the conf).
#[derive(Debug, Clone, Default)]
pub struct ClassicOsd;

impl OsdLauncher for ClassicOsd {
    fn kind(&self) -> &str {
        "classic"
    }

    fn prepare(&self, ctx: &OsdContext) -> Result<()> {
        let mut cmd = Command::new("ceph-osd");
        cmd.arg("-c")
            .arg(&ctx.conf)
            .args(["-i", &ctx.id.to_string(), "--mkfs", "--osd-uuid", &ctx.uuid]);
        crate::process::run(&mut cmd, Duration::from_secs(120)).map(|_| ())
    }

    fn command(&self, ctx: &OsdContext) -> Command {
        let mut cmd = Command::new("ceph-osd");
        cmd.arg("-f")
            .arg("-c")
            .arg(&ctx.conf)
            .args(["-i", &ctx.id.to_string()]);
        cmd
    }
}

/// FerroCeph's `ferro-osd` with ferrostore on a sparse block file in the data directory.
#[derive(Debug, Clone)]
pub struct FerroOsd {
    /// The `ferro-osd` binary.
    pub binary: PathBuf,
    /// Size of the block file `--mkfs` creates.
    pub device_size_bytes: u64,
    /// ferrostore shards (one reactor core each); 0 = one per core.
    pub shards: u32,
    /// Pin each core's thread to a CPU (`ferro_osd_pin_cores`). Off by default here: test machines are shared,
    /// and a pinned core waits behind whatever else runs on its CPU (docs/reactor.md, "Numbers").
    pub pin_cores: bool,
    /// CRUSH device class set at start (`crush_device_class`); `ferro` by default so that pools can be placed
    /// on ferro-osd OSDs only with a class rule.
    pub device_class: String,
    /// Extra command-line arguments for the daemon (e.g. `--debug-ms 1`).
    pub extra_args: Vec<String>,
}

impl FerroOsd {
    /// `binary`: path of the built `ferro-osd` (tests use `env!("CARGO_BIN_EXE_ferro-osd")`).
    pub fn new(binary: impl Into<PathBuf>) -> Self {
        FerroOsd {
            binary: binary.into(),
            device_size_bytes: 2 << 30,
            shards: 2,
            pin_cores: false,
            device_class: "ferro".into(),
            extra_args: Vec::new(),
        }
    }

    /// Finds `ferro-osd` next to the running executable or in `target/{release,debug}` of the workspace.
    pub fn find() -> Option<Self> {
        let exe = std::env::current_exe().ok()?;
        let mut cands = Vec::new();
        if let Some(dir) = exe.parent() {
            cands.push(dir.join("ferro-osd"));
            if let Some(up) = dir.parent() {
                cands.push(up.join("ferro-osd"));
            }
        }
        let ws = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
        cands.push(ws.join("target/release/ferro-osd"));
        cands.push(ws.join("target/debug/ferro-osd"));
        cands.into_iter().find(|p| p.is_file()).map(FerroOsd::new)
    }

    fn base(&self, ctx: &OsdContext) -> Command {
        let mut cmd = Command::new(&self.binary);
        cmd.arg("-c")
            .arg(&ctx.conf)
            .args(["-i", &ctx.id.to_string()])
            .arg("--osd-data")
            .arg(&ctx.data_dir)
            .arg("--keyring")
            .arg(&ctx.keyring)
            .args(["--ferro-osd-shards", &self.shards.to_string()])
            .args(["--ferro-osd-device-size", &self.device_size_bytes.to_string()])
            .args([
                "--ferro-osd-pin-cores",
                if self.pin_cores { "true" } else { "false" },
            ])
            .args(["--crush-device-class", &self.device_class])
            .arg("--log-file")
            .arg(&ctx.log_file);
        cmd
    }
}

impl OsdLauncher for FerroOsd {
    fn kind(&self) -> &str {
        "ferro"
    }

    fn prepare(&self, ctx: &OsdContext) -> Result<()> {
        let mut cmd = self.base(ctx);
        cmd.args(["--mkfs", "--osd-uuid", &ctx.uuid]);
        crate::process::run(&mut cmd, Duration::from_secs(120)).map(|_| ())
    }

    fn command(&self, ctx: &OsdContext) -> Command {
        let mut cmd = self.base(ctx);
        cmd.arg("-f").args(&self.extra_args);
        cmd
    }

    fn up_timeout(&self) -> Duration {
        Duration::from_secs(60)
    }
}
