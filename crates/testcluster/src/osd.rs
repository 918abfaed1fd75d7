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
