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
    if let Some(sz) = size
        && opts.device_zero_fill
    {
        zero_fill(&device, sz, &mut |done, total| {
            eprintln!(
                "ferro-osd: zero-filling {}: {} of {} MiB ({}%)",
                device.display(),
                done >> 20,
                total >> 20,
                done * 100 / total.max(1)
            );
        })?;
    }
    let dev = UringDevice::open(&device, size, UringOptions::default())
        .map_err(|e| format!("opening {}: {e}", device.display()))?;
    let uuid = u64::from_le_bytes(osd_fsid[..8].try_into().unwrap_or([0; 8]));
    ferrostore::mkfs(
        dev,
        &ferrostore::MkfsOptions {
            shards,
            log_bytes: 0,
            uuid,
            ..Default::default()
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

/// Bytes written per zero-fill request.
const ZERO_CHUNK: usize = 4 << 20;

/// Create (or extend) the regular file `path` to `size` bytes and write zeros over all of it, with `O_DIRECT`
/// (no page cache), then `fdatasync`. A sparse file — and a `fallocate`d one, whose extents stay "unwritten" —
/// makes the file system allocate or convert blocks on the first write to each place, and every such write
/// costs a journal commit when it is made durable; ferrostore writes new places all the time (log-structured),
/// so on ext4 a sparse device file made commits several times slower (docs/benchmarks.md, "QD1 write latency").
/// `progress(done, total)` is called about every 10 %.
pub fn zero_fill(path: &Path, size: u64, progress: &mut dyn FnMut(u64, u64)) -> Result<(), String> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let err = |e: std::io::Error| format!("zero-filling {}: {e}", path.display());
    let mut f = fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .custom_flags(libc::O_DIRECT)
        .open(path)
        .map_err(err)?;
    if !f.metadata().map_err(err)?.is_file() {
        return Err(format!("zero-filling {}: not a regular file", path.display()));
    }
    if !size.is_multiple_of(4096) {
        return Err(format!(
            "zero-filling {}: size {size} is not a multiple of 4096",
            path.display()
        ));
    }
    // O_DIRECT needs an aligned buffer: a 4 MiB zeroed allocation aligned to 4 KiB.
    let layout = std::alloc::Layout::from_size_align(ZERO_CHUNK, 4096).map_err(|e| e.to_string())?;
    // SAFETY: the layout has a non-zero size; the pointer is checked for null and freed below with the same
    // layout.
    let ptr = unsafe { std::alloc::alloc_zeroed(layout) };
    if ptr.is_null() {
        return Err("zero-filling: out of memory".into());
    }
    // SAFETY: ptr points to ZERO_CHUNK initialized (zeroed) bytes owned by this function until dealloc.
    let buf = unsafe { std::slice::from_raw_parts(ptr, ZERO_CHUNK) };
    let step = (size / 10).max(1);
    let mut next_report = step;
    let mut done = 0u64;
    let res = (|| -> Result<(), String> {
        while done < size {
            let n = (size - done).min(ZERO_CHUNK as u64) as usize;
            f.write_all(&buf[..n]).map_err(err)?;
            done += n as u64;
            if done >= next_report || done == size {
                progress(done, size);
                next_report = done + step;
            }
        }
        f.sync_data().map_err(err)
    })();
    // SAFETY: allocated above with this layout and not freed elsewhere; `buf` is not used after this.
    unsafe { std::alloc::dealloc(ptr, layout) };
    res
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zero_fill_allocates_every_block() {
        use std::os::unix::fs::MetadataExt;
        let p = std::env::temp_dir().join(format!("ferro-osd-zero-fill-{}", std::process::id()));
        let _ = fs::remove_file(&p);
        // A sparse start: the fill must allocate all of it, not just extend the length.
        fs::File::create(&p).unwrap().set_len(1 << 20).unwrap();
        let size = 12 << 20;
        let mut calls = Vec::new();
        let r = zero_fill(&p, size, &mut |d, t| calls.push((d, t)));
        if let Err(e) = &r
            && e.contains("Invalid argument")
        {
            // A file system without O_DIRECT (tmpfs): nothing to check here.
            eprintln!("skipping: {e}");
            let _ = fs::remove_file(&p);
            return;
        }
        r.unwrap();
        let md = fs::metadata(&p).unwrap();
        assert_eq!(md.len(), size);
        assert!(
            md.blocks() * 512 >= size,
            "{} blocks of 512 for {size} bytes",
            md.blocks()
        );
        assert!(fs::read(&p).unwrap().iter().all(|&b| b == 0));
        assert_eq!(calls.last(), Some(&(size, size)));
        assert!(calls.len() >= 3 && calls.len() <= 11, "{calls:?}");
        assert!(zero_fill(&p, 4097, &mut |_, _| {}).is_err());
        let _ = fs::remove_file(&p);
    }
}
