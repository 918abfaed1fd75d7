// SPDX-License-Identifier: LGPL-3.0-or-later
//! `--mkfs`: the files ceph-osd writes in its data directory, plus a ferrostore on the block device.

use std::fs;
use std::path::{Path, PathBuf};

use ferrostore::uring::{UringDevice, UringOptions};

use crate::args::OsdOptions;

/// `magic` as ceph-osd writes it.
pub const OSD_MAGIC: &str = "ceph osd volume v026";
/// `type`: the object store.
pub const STORE_TYPE: &str = "ferrostore";

/// What is read back from the data directory at start.
#[derive(Debug, Clone)]
pub struct DataDir {
    pub whoami: u32,
    pub osd_fsid: [u8; 16],
    pub cluster_fsid: [u8; 16],
    pub device: PathBuf,
    pub shards: u32,
}

fn write_file(dir: &Path, name: &str, text: &str) -> Result<(), String> {
    let p = dir.join(name);
    fs::write(&p, text).map_err(|e| format!("writing {}: {e}", p.display()))
}

fn read_file(dir: &Path, name: &str) -> Result<String, String> {
    let p = dir.join(name);
    fs::read_to_string(&p)
        .map(|s| s.trim().to_string())
        .map_err(|e| format!("reading {}: {e}", p.display()))
}

fn parse_uuid(s: &str) -> Result<[u8; 16], String> {
    s.parse::<denc::Uuid>()
        .map(|u| u.0)
        .map_err(|_| format!("bad uuid {s:?}"))
}

fn random_uuid() -> [u8; 16] {
    let mut b = [0u8; 16];
    if let Ok(mut f) = fs::File::open("/dev/urandom") {
        use std::io::Read;
        let _ = f.read_exact(&mut b);
    }
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    b
}

/// Create the OSD: data directory files and the ferrostore. `osd_uuid` from `--osd-uuid` (random otherwise).
pub fn mkfs(opts: &OsdOptions, osd_uuid: Option<&str>) -> Result<DataDir, String> {
    let dir = &opts.osd_data;
    fs::create_dir_all(dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
    let cluster_fsid = opts
        .fsid
        .ok_or("mkfs needs the cluster fsid (`fsid` in ceph.conf)")?;
    let osd_fsid = match osd_uuid {
        Some(u) => parse_uuid(u)?,
        None => random_uuid(),
    };
    let device = opts.device.clone().unwrap_or_else(|| dir.join("block"));
    let shards = if opts.shards == 0 {
        std::thread::available_parallelism()
            .map_or(1, |n| n.get() as u32)
            .min(8)
    } else {
        opts.shards
    };
    let size = if device.exists() && !device.metadata().map(|m| m.is_file()).unwrap_or(false) {
        None // a block device: its own size
    } else {
        Some(opts.device_size)
    };
    let dev = UringDevice::open(&device, size, UringOptions::default())
        .map_err(|e| format!("opening {}: {e}", device.display()))?;
    let uuid = u64::from_le_bytes(osd_fsid[..8].try_into().unwrap_or([0; 8]));
    ferrostore::mkfs(
        dev,
        &ferrostore::MkfsOptions {
            shards,
            log_bytes: 0,
            uuid,
        },
    )
    .map_err(|e| format!("ferrostore mkfs on {}: {e}", device.display()))?;
    write_file(dir, "type", &format!("{STORE_TYPE}\n"))?;
    write_file(dir, "magic", &format!("{OSD_MAGIC}\n"))?;
    write_file(dir, "whoami", &format!("{}\n", opts.id))?;
    write_file(dir, "fsid", &format!("{}\n", denc::Uuid(osd_fsid)))?;
    write_file(dir, "ceph_fsid", &format!("{}\n", denc::Uuid(cluster_fsid)))?;
    write_file(dir, "ferro_shards", &format!("{shards}\n"))?;
    if opts.device.is_some() {
        write_file(dir, "ferro_device", &format!("{}\n", device.display()))?;
    }
    write_file(dir, "ready", "ready\n")?;
    Ok(DataDir {
        whoami: opts.id,
        osd_fsid,
        cluster_fsid,
        device,
        shards,
    })
}

/// Read the data directory written by [`mkfs`], checking it belongs to `opts.id` and is a ferrostore OSD.
pub fn open(opts: &OsdOptions) -> Result<DataDir, String> {
    let dir = &opts.osd_data;
    let ty = read_file(dir, "type")?;
    if ty != STORE_TYPE {
        return Err(format!(
            "{}: object store type is {ty:?}, not {STORE_TYPE}",
            dir.display()
        ));
    }
    let whoami: u32 = read_file(dir, "whoami")?.parse().map_err(|_| "bad whoami file")?;
    if whoami != opts.id {
        return Err(format!(
            "{} belongs to osd.{whoami}, not osd.{}",
            dir.display(),
            opts.id
        ));
    }
    if read_file(dir, "ready")? != "ready" {
        return Err(format!("{}: mkfs did not finish", dir.display()));
    }
    let device = match read_file(dir, "ferro_device") {
        Ok(p) => PathBuf::from(p),
        Err(_) => opts.device.clone().unwrap_or_else(|| dir.join("block")),
    };
    Ok(DataDir {
        whoami,
        osd_fsid: parse_uuid(&read_file(dir, "fsid")?)?,
        cluster_fsid: parse_uuid(&read_file(dir, "ceph_fsid")?)?,
        device,
        shards: read_file(dir, "ferro_shards")?
            .parse()
            .map_err(|_| "bad ferro_shards")?,
    })
}
