// SPDX-License-Identifier: LGPL-3.0-or-later
//! Where the reactor cores run: an operator's CPU list (`ferro_osd_cpus`), or, when pinning by default, the
//! allowed CPUs with those that take the OSD device's interrupts first.
//!
//! Why the interrupt CPUs: a read completes in the device's interrupt handler; a core sleeping on another CPU is
//! then woken by an inter-processor interrupt. On the 2-vCPU test VM (one virtio queue, its interrupt on CPU1
//! only) the reactor pinned to CPU0 cost more OSD CPU per QD1 disk op than pinned to CPU1 in 21 of 21 pairs
//! (median ratio 1.2-1.5x; docs/benchmarks.md, "reactor placement and the disk interrupt"); a read served from
//! the cache (OMAP get) follows its client's CPU instead. Devices with one queue per CPU (NVMe) interrupt on
//! every CPU, and then the order stays as it was.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::args::parse_cpu_list;

/// How the runtime places its cores.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placement {
    pub pin: bool,
    /// CPUs in core order (core i on `cpus[i % len]`); empty with `pin`: the allowed CPUs ascending.
    pub cpus: Vec<usize>,
    /// An operator's list: a CPU the kernel refuses fails the start.
    pub strict: bool,
    /// For the log: why these CPUs.
    pub why: String,
}

/// Decide the placement from the options, the CPUs this process may run on and the CPUs that take the device's
/// interrupts (`None`: not found).
pub fn choose(pin_cores: bool, listed: &[usize], allowed: &[usize], irq_cpus: Option<&[usize]>) -> Placement {
    if !listed.is_empty() {
        return Placement {
            pin: true,
            cpus: listed.to_vec(),
            strict: true,
            why: "ferro_osd_cpus".into(),
        };
    }
    if !pin_cores {
        return Placement {
            pin: false,
            cpus: Vec::new(),
            strict: false,
            why: "ferro_osd_pin_cores = false".into(),
        };
    }
    let (cpus, why) = match irq_cpus {
        Some(irq) => (
            prefer(allowed, irq),
            format!("allowed CPUs, those taking the device's interrupts ({irq:?}) first"),
        ),
        None => (
            allowed.to_vec(),
            "allowed CPUs (device interrupts not found)".into(),
        ),
    };
    Placement {
        pin: true,
        cpus,
        strict: false,
        why,
    }
}

/// `allowed` with the CPUs also in `preferred` first, each part in `allowed`'s order.
pub fn prefer(allowed: &[usize], preferred: &[usize]) -> Vec<usize> {
    let (mut first, rest): (Vec<usize>, Vec<usize>) = allowed.iter().partition(|c| preferred.contains(c));
    first.extend(rest);
    first
}

/// Interrupt counts per IRQ number from a `/proc/interrupts` text (summed over CPUs); lines of named
/// interrupts (`LOC:`, `NMI:`) are skipped.
pub fn parse_interrupts(text: &str) -> BTreeMap<u32, u64> {
    let mut out = BTreeMap::new();
    let ncpus = text.lines().next().map_or(0, |h| {
        h.split_whitespace().filter(|w| w.starts_with("CPU")).count()
    });
    for line in text.lines().skip(1) {
        let Some((irq, rest)) = line.trim_start().split_once(':') else {
            continue;
        };
        let Ok(irq) = irq.parse::<u32>() else {
            continue;
        };
        let total = rest
            .split_whitespace()
            .take(ncpus)
            .map_while(|w| w.parse::<u64>().ok())
            .sum();
        out.insert(irq, total);
    }
    out
}

/// The sysfs directory of the disk that holds `path` (a block device, or a file on a file system); a partition
/// resolves to its disk.
pub fn disk_dir(path: &Path) -> Option<PathBuf> {
    use std::os::unix::fs::{FileTypeExt, MetadataExt};
    let md = std::fs::metadata(path).ok()?;
    let dev = if md.file_type().is_block_device() {
        md.rdev()
    } else {
        md.dev()
    };
    let (major, minor) = (libc::major(dev), libc::minor(dev));
    let dir = std::fs::canonicalize(format!("/sys/dev/block/{major}:{minor}")).ok()?;
    Some(whole_disk(dir))
}

/// A partition's sysfs directory sits inside its disk's.
fn whole_disk(dir: PathBuf) -> PathBuf {
    match dir.parent() {
        Some(p) if dir.join("partition").exists() => p.to_path_buf(),
        _ => dir,
    }
}

/// The disks under `path`: [`disk_dir`], and for a device-mapper or md device the disks under it (`slaves/`).
pub fn disk_dirs(path: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    if let Some(dir) = disk_dir(path) {
        leaf_disks(dir, 0, &mut out);
    }
    out
}

fn leaf_disks(dir: PathBuf, depth: u32, out: &mut Vec<PathBuf>) {
    let dir = whole_disk(dir);
    let slaves: Vec<PathBuf> = std::fs::read_dir(dir.join("slaves"))
        .map(|rd| {
            rd.flatten()
                .filter_map(|e| std::fs::canonicalize(e.path()).ok())
                .collect()
        })
        .unwrap_or_default();
    // Stacked devices nest a few levels at most (dm on md on partitions); the bound keeps a cycle finite.
    if slaves.is_empty() || depth >= 4 {
        if !out.contains(&dir) {
            out.push(dir);
        }
        return;
    }
    for s in slaves {
        leaf_disks(s, depth + 1, out);
    }
}

/// The IRQs of the bus device behind a disk's sysfs directory: the MSI/MSI-X vectors (`msi_irqs/`) or the
/// legacy `irq` of the nearest ancestor of `device` that has them.
fn disk_irqs(disk: &Path) -> Vec<u32> {
    let Ok(mut dev) = std::fs::canonicalize(disk.join("device")) else {
        return Vec::new();
    };
    for _ in 0..8 {
        if let Ok(rd) = std::fs::read_dir(dev.join("msi_irqs")) {
            let irqs: Vec<u32> = rd
                .flatten()
                .filter_map(|e| e.file_name().to_str()?.parse().ok())
                .collect();
            if !irqs.is_empty() {
                return irqs;
            }
        }
        if let Some(irq) = std::fs::read_to_string(dev.join("irq"))
            .ok()
            .and_then(|s| s.trim().parse::<u32>().ok())
            .filter(|&i| i > 0)
        {
            return vec![irq];
        }
        if !dev.pop() || dev == Path::new("/sys/devices") {
            break;
        }
    }
    Vec::new()
}

/// The CPUs that take the interrupts of the disk(s) under `path`: the effective affinity of those of the
/// device's IRQs that have fired (a device's configuration vector seldom does). `None` when nothing is found
/// (a RAM disk, a network file system, no sysfs): the caller falls back to its plain order.
pub fn device_irq_cpus(path: &Path) -> Option<Vec<usize>> {
    let counts = parse_interrupts(&std::fs::read_to_string("/proc/interrupts").ok()?);
    let mut cpus: Vec<usize> = Vec::new();
    for disk in disk_dirs(path) {
        for irq in disk_irqs(&disk) {
            if counts.get(&irq).copied().unwrap_or(0) == 0 {
                continue;
            }
            let list = std::fs::read_to_string(format!("/proc/irq/{irq}/effective_affinity_list"))
                .or_else(|_| std::fs::read_to_string(format!("/proc/irq/{irq}/smp_affinity_list")));
            for c in list
                .ok()
                .and_then(|l| parse_cpu_list(&l).ok())
                .unwrap_or_default()
            {
                if !cpus.contains(&c) {
                    cpus.push(c);
                }
            }
        }
    }
    cpus.sort_unstable();
    (!cpus.is_empty()).then_some(cpus)
}

#[cfg(test)]
mod tests {
    use super::*;

    const INTERRUPTS: &str = "           CPU0       CPU1       \n \
         35:          0          1 PCI-MSIX-0000:00:02.0   0-edge      virtio1-config\n \
         36:          0   18701420 PCI-MSIX-0000:00:02.0   1-edge      virtio1-req.0\n \
         37:          5          0 PCI-MSIX-0000:00:03.0   0-edge      virtio2-config\n\
        NMI:          0          0   Non-maskable interrupts\n\
        LOC:    7509168    5854804   Local timer interrupts\n\
        ERR:          0\n";

    #[test]
    fn interrupt_counts_sum_the_cpu_columns_only() {
        let c = parse_interrupts(INTERRUPTS);
        assert_eq!(c.get(&35), Some(&1));
        assert_eq!(c.get(&36), Some(&18_701_420));
        assert_eq!(c.get(&37), Some(&5), "the `0-edge` column is not a count");
        assert_eq!(c.len(), 3, "named lines skipped");
        assert!(parse_interrupts("").is_empty());
        assert!(
            parse_interrupts("garbage\n 1: x y\n")
                .get(&1)
                .is_some_and(|&n| n == 0)
        );
    }

    #[test]
    fn interrupt_cpus_go_first() {
        assert_eq!(prefer(&[0, 1], &[1]), vec![1, 0]);
        assert_eq!(prefer(&[0, 1, 2, 3], &[3, 1]), vec![1, 3, 0, 2]);
        assert_eq!(
            prefer(&[0, 1], &[0, 1]),
            vec![0, 1],
            "every CPU takes interrupts: order kept"
        );
        assert_eq!(
            prefer(&[0, 1], &[5]),
            vec![0, 1],
            "interrupts on CPUs we may not use: order kept"
        );
    }

    #[test]
    fn an_operator_list_wins_then_pinning_prefers_interrupt_cpus() {
        let p = choose(false, &[1], &[0, 1], Some(&[0]));
        assert_eq!((p.pin, p.cpus, p.strict), (true, vec![1], true));
        let p = choose(false, &[], &[0, 1], Some(&[1]));
        assert!(!p.pin && p.cpus.is_empty());
        let p = choose(true, &[], &[0, 1], Some(&[1]));
        assert_eq!((p.pin, p.cpus, p.strict), (true, vec![1, 0], false));
        let p = choose(true, &[], &[0, 1], None);
        assert_eq!((p.pin, p.cpus, p.strict), (true, vec![0, 1], false));
    }

    #[test]
    fn the_device_of_a_file_resolves_to_a_disk_or_to_nothing() {
        // Whatever the machine: no panic, and CPUs found are CPUs that exist.
        let here = std::env::temp_dir();
        eprintln!(
            "{}: disks {:?}, interrupt CPUs {:?}",
            here.display(),
            disk_dirs(&here),
            device_irq_cpus(&here)
        );
        if let Some(cpus) = device_irq_cpus(&here) {
            let n = std::thread::available_parallelism().map_or(1, |n| n.get());
            assert!(cpus.iter().all(|&c| c < 1024), "{cpus:?} of {n} CPUs");
        }
        assert_eq!(device_irq_cpus(Path::new("/nonexistent/block")), None);
        for d in disk_dirs(&here) {
            assert!(d.starts_with("/sys/devices"), "{}", d.display());
            assert!(
                !d.join("partition").exists(),
                "a disk, not a partition: {}",
                d.display()
            );
        }
    }
}
