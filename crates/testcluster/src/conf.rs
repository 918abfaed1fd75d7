// SPDX-License-Identifier: LGPL-3.0-or-later
//! The cluster's ceph.conf: everything inside the cluster directory, loopback only, tuned to start in seconds
//! and to run in little memory on a 2-core machine.

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::path::Path;

/// Inputs of [`render`].
pub(crate) struct ConfParams<'a> {
    pub dir: &'a Path,
    pub fsid: &'a str,
    pub mon_addr: SocketAddr,
    pub osd_block_size_bytes: u64,
    /// `(section, key, value)` lines added after the defaults, so they override them.
    pub extra: &'a [(String, String, String)],
}

pub(crate) fn render(p: &ConfParams<'_>) -> String {
    let d = p.dir.display();
    let mut sections: Vec<(&str, Vec<(String, String)>)> = vec![
        (
            "global",
            vec![
                kv("fsid", p.fsid),
                kv("mon host", format!("v2:{}", p.mon_addr)),
                // Loopback only: every daemon binds and advertises 127.0.0.1.
                kv("public addr", "127.0.0.1"),
                kv("cluster addr", "127.0.0.1"),
                kv("ms bind msgr1", "false"),
                kv("ms bind msgr2", "true"),
                kv("ms bind ipv6", "false"),
                kv("auth cluster required", "cephx"),
                kv("auth service required", "cephx"),
                kv("auth client required", "cephx"),
                // Keeps `ceph -s` at HEALTH_OK (the reclaim warning is about old clients we never run).
                kv("auth allow insecure global id reclaim", "false"),
                kv("osd pool default size", "1"),
                kv("osd pool default min size", "1"),
                // Tests ask for exact pg_num values; the autoscaler would change them behind their back.
                kv("osd pool default pg autoscale mode", "off"),
                kv("osd crush chooseleaf type", "0"),
                kv("mon allow pool delete", "true"),
                kv("mon warn on pool no redundancy", "false"),
                kv("mon max pg per osd", "1000"),
                kv("run dir", format!("{d}/run")),
                kv("admin socket", format!("{d}/run/$cluster-$name.asok")),
                kv("log file", format!("{d}/log/$name.log")),
                kv("mon cluster log file", format!("{d}/log/cluster.log")),
                kv("crash dir", format!("{d}/crash")),
                kv("exporter sock dir", format!("{d}/run")),
            ],
        ),
        (
            "mon",
            vec![
                kv("mon data", format!("{d}/$name")),
                kv("keyring", format!("{d}/$name/keyring")),
                // The build disk is often fuller than the default 30 % threshold; that is not a cluster problem.
                kv("mon data avail warn", "2"),
                kv("mon data avail crit", "1"),
                // A taken port must fail fast so we retry with another one (the default retries for 15 s).
                kv("ms bind retry count", "1"),
                kv("ms bind retry delay", "1"),
            ],
        ),
        (
            "mgr",
            vec![
                kv("mgr data", format!("{d}/$name")),
                kv("keyring", format!("{d}/$name/keyring")),
                // Only the always-on modules: fewer Python modules, faster start.
                kv("mgr initial modules", ""),
            ],
        ),
        (
            "osd",
            vec![
                kv("osd data", format!("{d}/$name")),
                kv("keyring", format!("{d}/$name/keyring")),
                kv("osd objectstore", "bluestore"),
                kv("bluestore block create", "true"),
                kv("bluestore block size", p.osd_block_size_bytes.to_string()),
                kv("bluestore block db create", "false"),
                kv("bluestore block wal create", "false"),
                kv("bluestore fsck on mkfs", "false"),
                // Small memory: the 896 MiB floor Ceph accepts, and a fixed small cache instead of autotuning.
                kv("osd memory target", "939524096"),
                kv("bluestore cache autotune", "false"),
                kv("bluestore cache size", "134217728"),
                kv("osd op num shards", "2"),
                kv("osd op num threads per shard", "1"),
            ],
        ),
        (
            "client",
            vec![kv("keyring", format!("{d}/ceph.client.admin.keyring"))],
        ),
    ];
    for (section, key, value) in p.extra {
        match sections.iter_mut().find(|(s, _)| *s == section) {
            Some((_, lines)) => lines.push((key.clone(), value.clone())),
            None => sections.push((section.as_str(), vec![(key.clone(), value.clone())])),
        }
    }
    let mut out = String::from("# Written by FerroCeph's testcluster; throwaway cluster.\n");
    for (section, lines) in sections {
        let _ = writeln!(out, "[{section}]");
        for (k, v) in lines {
            let _ = writeln!(out, "\t{k} = {v}");
        }
    }
    out
}

fn kv(k: &str, v: impl Into<String>) -> (String, String) {
    (k.to_owned(), v.into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn extra_lines_land_in_their_section_after_the_defaults() {
        let extra = vec![
            ("osd".to_owned(), "debug osd".to_owned(), "20".to_owned()),
            ("client.foo".to_owned(), "keyring".to_owned(), "/k".to_owned()),
        ];
        let text = render(&ConfParams {
            dir: Path::new("/tmp/c"),
            fsid: "f",
            mon_addr: "127.0.0.1:4000".parse().unwrap(),
            osd_block_size_bytes: 1 << 30,
            extra: &extra,
        });
        assert!(text.contains("\tmon host = v2:127.0.0.1:4000\n"));
        assert!(text.contains("\tbluestore block size = 1073741824\n"));
        let osd = text.find("[osd]").unwrap();
        let client = text.find("[client]").unwrap();
        let dbg = text.find("debug osd = 20").unwrap();
        assert!(osd < dbg && dbg < client, "extra osd line must be inside [osd]");
        assert!(text.ends_with("[client.foo]\n\tkeyring = /k\n"));
    }
}
