// SPDX-License-Identifier: LGPL-3.0-or-later
//! ceph.conf and keyring parsing, with expectations taken from Ceph 16.2.15's `ceph-conf`, plus a differential
//! test against `ceph-conf` itself when it is installed.

#![allow(clippy::unwrap_used)] // test helpers outside #[test] fns

use std::path::{Path, PathBuf};
use std::process::Command;

use ceph_config::*;

fn conf(text: &str, name: &str) -> Config {
    let mut c = Config::new(ConfFile::parse(text, "test").unwrap(), "ceph", name).unwrap();
    c.host = "vm".into();
    c
}

#[test]
fn syntax_matches_ceph() {
    let c = conf(
        "top = t\n[global]\nfoo bar = \"x y\" ; c\nunq = x y # c\nesc = x\\#y\nquoted = \"x \\\" y\"\n\
         two  spaces = a\ncont = a \\\n  b\ndup = a\ndup = b\nempty =\n; comment\n# comment\n",
        "osd.3",
    );
    assert_eq!(
        c.get("top").as_deref(),
        Some("t"),
        "keys before any section are global"
    );
    assert_eq!(c.get("foo_bar").as_deref(), Some("x y"));
    assert_eq!(c.get("foo bar").as_deref(), Some("x y"));
    assert_eq!(
        c.get("foo-bar").as_deref(),
        Some("x y"),
        "option lookups accept dashes"
    );
    assert_eq!(c.get("unq").as_deref(), Some("x y"));
    assert_eq!(c.get("esc").as_deref(), Some("x#y"));
    assert_eq!(c.get("quoted").as_deref(), Some("x \" y"));
    assert_eq!(c.get("two_spaces").as_deref(), Some("a"));
    assert_eq!(c.get("cont").as_deref(), Some("a   b"));
    assert_eq!(c.get("dup").as_deref(), Some("b"));
    assert_eq!(c.get("empty").as_deref(), Some(""));
    for bad in [
        "[global]\nfoo = \"x ; y\"\n",
        "[global]\nfoo = \"a\"b\n",
        "[global\n",
        "[global]\njunk\n",
    ] {
        assert!(ConfFile::parse(bad, "t").is_err(), "{bad:?} must not parse");
    }
}

#[test]
fn dashes_in_the_file_are_not_normalised() {
    // Ceph ignores `ms-bind-msgr1 = false` in a file (checked with ceph-conf --show-config-value).
    let c = conf(
        "[global]\nms-bind-msgr1 = false\nms bind msgr2 = false\n",
        "osd.0",
    );
    assert_eq!(c.get("ms_bind_msgr1"), None);
    assert_eq!(c.get("ms-bind-msgr2").as_deref(), Some("false"));
}

#[test]
fn section_order_and_metavariables() {
    let text = "[global]\nfoo = a\n[client]\nfoo = c\n[client.admin]\nfoo = d\n[osd]\nosd data = /x/$cluster-$id\n\
                p = $cluster-$id-$name-$type-${cluster}x-$host-$nonexist-$osd_data\nloop = $loop\n";
    assert_eq!(conf(text, "client.admin").get("foo").as_deref(), Some("d"));
    assert_eq!(conf(text, "client.x").get("foo").as_deref(), Some("c"));
    assert_eq!(conf(text, "osd.1").get("foo").as_deref(), Some("a"));
    let osd = conf(text, "osd.3");
    assert_eq!(
        osd.get("p").as_deref(),
        Some("ceph-3-osd.3-osd-cephx-vm-$nonexist-/x/ceph-3")
    );
    assert_eq!(osd.get("keyring").as_deref(), Some("/x/ceph-3/keyring"));
    assert!(osd.get("loop").is_some(), "self-reference terminates");
    let bomb = conf(&format!("[global]\na = {}\n", "$a".repeat(50)), "osd.1");
    assert!(bomb.get("a").is_some(), "exponential self-reference is bounded");
    let client = conf(text, "client.admin");
    assert_eq!(
        client.keyring_search_paths(),
        [
            "/etc/ceph/ceph.client.admin.keyring",
            "/etc/ceph/ceph.keyring",
            "/etc/ceph/keyring",
            "/etc/ceph/keyring.bin"
        ]
        .map(PathBuf::from)
    );
    assert_eq!(
        conf("", "osd.7").get("admin_socket").as_deref(),
        Some("/var/run/ceph/ceph-osd.7.asok")
    );
    assert_eq!(
        conf("", "mds.a").get("keyring").as_deref(),
        Some("/var/lib/ceph/mds/ceph-a/keyring")
    );
}

#[test]
fn search_paths_and_cluster_name() {
    let s = ConfSource {
        explicit: Some("/tmp/t.conf".into()),
        ..Default::default()
    };
    assert_eq!(
        s.cluster_name(),
        "t",
        "Ceph names the cluster after an explicit *.conf"
    );
    let s = ConfSource {
        explicit: Some("/tmp/t.cfg".into()),
        ..Default::default()
    };
    assert_eq!(s.cluster_name(), "ceph");
    let s = ConfSource {
        env_ceph_conf: Some("/e/x.conf".into()),
        ..Default::default()
    };
    assert_eq!(s.search_paths(), vec![PathBuf::from("/e/x.conf")]);
    let s = ConfSource {
        cluster: Some("prod".into()),
        home: Some("/root".into()),
        ..Default::default()
    };
    assert_eq!(
        s.search_paths(),
        ["/etc/ceph/prod.conf", "/root/.ceph/prod.conf", "prod.conf"].map(PathBuf::from)
    );
}

fn captures() -> Option<PathBuf> {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/captures");
    p.is_dir().then_some(p)
}

#[test]
fn capture_configs_and_keyrings() {
    let Some(dir) = captures() else {
        eprintln!("skipping: ../shared/captures not found");
        return;
    };
    for mode in ["crc", "secure"] {
        let src = ConfSource {
            explicit: Some(dir.join(mode).join("ceph.conf").display().to_string()),
            ..Default::default()
        };
        let c = src.load("osd.0", "vm").unwrap();
        assert_eq!(c.get("auth_cluster_required").as_deref(), Some("cephx"));
        assert_eq!(c.get("ms_mon_client_mode").as_deref(), Some(mode));
        assert!(c.get("mon_host").unwrap().starts_with("v2:127.0.0.1:"));
        let text = std::fs::read_to_string(dir.join(mode).join("keyring.admin-and-mon")).unwrap();
        let k = Keyring::parse(&text, "keyring").unwrap();
        assert_eq!(
            k.get("client.admin").unwrap().caps.get("osd").map(String::as_str),
            Some("allow *")
        );
        assert_eq!(
            k.get("mon.").unwrap().caps.get("mon").map(String::as_str),
            Some("allow *")
        );
        assert_eq!(k.key_of("client.admin").unwrap().len(), 40);
        let text = std::fs::read_to_string(dir.join(mode).join("keyring.osd.0")).unwrap();
        assert!(Keyring::parse(&text, "k").unwrap().key_of("osd.0").is_ok());
    }
}

fn have(tool: &str) -> bool {
    Command::new(tool)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

/// Differential: `ceph-authtool` writes keyrings, we read them back and list the same entries.
#[test]
fn keyrings_written_by_ceph_authtool() {
    if !have("ceph-authtool") {
        eprintln!("skipping: ceph-authtool not installed");
        return;
    }
    let dir = std::env::temp_dir().join(format!("ceph-config-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let k = dir.join("k");
    let run = |args: &[&str]| {
        assert!(
            Command::new("ceph-authtool")
                .args(args)
                .output()
                .unwrap()
                .status
                .success()
        )
    };
    run(&[
        "--create-keyring",
        k.to_str().unwrap(),
        "--gen-key",
        "-n",
        "client.x",
        "--cap",
        "osd",
        "allow rw pool=a",
        "--cap",
        "mon",
        "allow r",
    ]);
    run(&[k.to_str().unwrap(), "--gen-key", "-n", "osd.12"]);
    let kr = Keyring::parse(&std::fs::read_to_string(&k).unwrap(), "k").unwrap();
    let printed = |n: &str| {
        let o = Command::new("ceph-authtool")
            .args([k.to_str().unwrap(), "-p", "-n", n])
            .output()
            .unwrap();
        String::from_utf8(o.stdout).unwrap().trim().to_string()
    };
    assert_eq!(kr.key_of("client.x").unwrap(), printed("client.x"));
    assert_eq!(kr.key_of("osd.12").unwrap(), printed("osd.12"));
    assert_eq!(
        kr.get("client.x").unwrap().caps.get("osd").unwrap(),
        "allow rw pool=a"
    );
    assert_eq!(kr.get("client.x").unwrap().caps.get("mon").unwrap(), "allow r");
    // The `key` and `keyfile` options win over keyrings.
    let keyfile = dir.join("kf");
    std::fs::write(&keyfile, format!("{}\n", printed("osd.12"))).unwrap();
    let c = conf(
        &format!("[client]\nkeyfile = {}\n", keyfile.display()),
        "client.x",
    );
    assert_eq!(c.entity_key().unwrap().0, printed("osd.12"));
    let c = conf("[client.x]\nkey = AQAAAA==\n", "client.x");
    assert_eq!(c.entity_key().unwrap().0, "AQAAAA==");
    let c = conf(&format!("[client]\nkeyring = {}\n", k.display()), "client.x");
    assert_eq!(c.entity_key().unwrap().0, printed("client.x"));
    let c = conf(&format!("[client]\nkeyring = {}\n", k.display()), "client.nobody");
    assert!(matches!(c.entity_key(), Err(ConfigError::NoEntry(_))));
    // And the keyring is found through the `keyring` option with metavariables.
    let c = conf(
        &format!(
            "[client]\nkeyring = {}/$cluster.$name.nope, {}\n",
            dir.display(),
            k.display()
        ),
        "client.x",
    );
    let (path, found) = c.load_keyring().unwrap();
    assert_eq!(path, k);
    assert_eq!(found, kr);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Differential: our lookups agree with `ceph-conf --show-config-value` / `--lookup` on the same files.
#[test]
fn agrees_with_ceph_conf() {
    if !have("ceph-conf") {
        eprintln!("skipping: ceph-conf not installed");
        return;
    }
    let dir = std::env::temp_dir().join(format!("ceph-config-diff-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("zz.conf");
    let text = "[global]\nfoo bar = \"x y\" ; c\nunq = x\\#y # c\nms-bind-msgr1 = false\nms  bind  msgr2 = false\n\
                cont = a \\\n  b\n[osd]\nosd data = /srv/$cluster-$id\nfoo = $name/$type/${cluster}x\n[osd.3]\nfoo = three\n\
                [client]\nfoo = c\n";
    std::fs::write(&path, text).unwrap();
    let ours = ConfSource {
        explicit: Some(path.display().to_string()),
        ..Default::default()
    };
    let mut checked = 0;
    for name in ["osd.3", "osd.4", "client.admin", "mon.a"] {
        let mut c = ours.load(name, "").unwrap();
        c.host = String::new();
        for (key, how) in [
            ("foo_bar", "--lookup"),
            ("unq", "--lookup"),
            ("cont", "--lookup"),
            ("foo", "--lookup"),
            ("osd_data", "--show-config-value"),
            ("keyring", "--show-config-value"),
            ("ms_bind_msgr1", "--show-config-value"),
            ("ms_bind_msgr2", "--show-config-value"),
            ("admin_socket", "--show-config-value"),
        ] {
            let o = Command::new("ceph-conf")
                .args(["-c", path.to_str().unwrap(), "-n", name, how, key])
                .output()
                .unwrap();
            let theirs = o.status.success().then(|| {
                String::from_utf8_lossy(&o.stdout)
                    .trim_end_matches('\n')
                    .to_string()
            });
            let mine = c.get(key);
            let mine = match (key, mine) {
                // Booleans we do not model: Ceph's default for both is true.
                ("ms_bind_msgr1" | "ms_bind_msgr2", None) => Some("true".to_string()),
                (_, m) => m,
            };
            assert_eq!(mine, theirs, "{name} {key}");
            checked += 1;
        }
    }
    eprintln!("ceph-conf agreement: {checked} lookups");
    std::fs::remove_dir_all(&dir).unwrap();
}

mod prop {
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn arbitrary_text_never_panics(text in "[\\[\\]=#;\"\\\\ a-z$.{}\n\t-]{0,200}") {
            if let Ok(c) = ceph_config::ConfFile::parse(&text, "p")
                .and_then(|f| ceph_config::Config::new(f, "ceph", "osd.1"))
            {
                let _ = c.get("a");
                let _ = c.keyring_search_paths();
            }
            let _ = ceph_config::Keyring::parse(&text, "p");
        }
    }
}
