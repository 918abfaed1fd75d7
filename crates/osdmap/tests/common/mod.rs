// SPDX-License-Identifier: LGPL-3.0-or-later
//! Compare a decoded [`OsdMap`] with Ceph's own JSON dump of the same map (`osdmaptool --dump json`,
//! `ceph osd dump --format json`): every field both sides show must agree.

#![allow(clippy::unwrap_used, dead_code)] // test helpers

use osdmap::OsdMap;
use osdmap::map::DEFAULT_PRIMARY_AFFINITY;
use osdmap::pool::PoolOptValue;
use serde_json::Value;

fn u(v: &Value) -> u64 {
    v.as_u64()
        .or_else(|| v.as_str().and_then(|s| s.parse().ok()))
        .unwrap_or_else(|| panic!("not an unsigned number: {v}"))
}
fn i(v: &Value) -> i64 {
    v.as_i64()
        .or_else(|| v.as_str().and_then(|s| s.parse().ok()))
        .unwrap_or_else(|| panic!("not a number: {v}"))
}
fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-5 * b.abs().max(1.0)
}

/// Panics with the first disagreement; returns how many values were compared.
pub fn compare_with_dump(m: &OsdMap, d: &Value) -> usize {
    let mut n = 0;
    let mut eq = |what: String, ours: String, theirs: String| {
        assert_eq!(ours, theirs, "{what}");
        n += 1;
    };
    eq("epoch".into(), m.epoch.to_string(), u(&d["epoch"]).to_string());
    eq(
        "fsid".into(),
        m.fsid.to_string(),
        d["fsid"].as_str().unwrap().to_string(),
    );
    eq(
        "flags".into(),
        m.flags.to_string(),
        u(&d["flags_num"]).to_string(),
    );
    eq(
        "crush_version".into(),
        m.crush_version.to_string(),
        i(&d["crush_version"]).to_string(),
    );
    eq(
        "pool_max".into(),
        m.pool_max.to_string(),
        i(&d["pool_max"]).to_string(),
    );
    eq(
        "max_osd".into(),
        m.max_osd.to_string(),
        i(&d["max_osd"]).to_string(),
    );
    for (name, ours) in [
        ("full_ratio", m.full_ratio),
        ("backfillfull_ratio", m.backfillfull_ratio),
        ("nearfull_ratio", m.nearfull_ratio),
    ] {
        let theirs = d[name].as_f64().unwrap();
        assert!(close(f64::from(ours), theirs), "{name}: {ours} vs {theirs}");
    }

    let pools = d["pools"].as_array().unwrap();
    eq(
        "pool count".into(),
        m.pools.len().to_string(),
        pools.len().to_string(),
    );
    for jp in pools {
        let id = i(&jp["pool"]);
        let p = &m.pools[&id];
        let w = |f: &str| format!("pool {id} {f}");
        eq(
            w("name"),
            m.pool_name[&id].clone(),
            jp["pool_name"].as_str().unwrap().into(),
        );
        for (f, ours) in [
            ("flags", p.flags),
            ("type", u64::from(p.type_)),
            ("size", u64::from(p.size)),
            ("min_size", u64::from(p.min_size)),
            ("crush_rule", u64::from(p.crush_rule)),
            ("object_hash", u64::from(p.object_hash)),
            ("pg_num", u64::from(p.pg_num)),
            ("pg_placement_num", u64::from(p.pgp_num)),
            ("pg_num_target", u64::from(p.pg_num_target)),
            ("pg_placement_num_target", u64::from(p.pgp_num_target)),
            ("pg_num_pending", u64::from(p.pg_num_pending)),
            ("last_change", u64::from(p.last_change)),
            ("last_force_op_resend", u64::from(p.last_force_op_resend)),
            ("snap_seq", p.snap_seq),
            ("snap_epoch", u64::from(p.snap_epoch)),
            ("quota_max_bytes", p.quota_max_bytes),
            ("quota_max_objects", p.quota_max_objects),
            ("stripe_width", u64::from(p.stripe_width)),
            ("expected_num_objects", p.expected_num_objects),
            ("hit_set_period", u64::from(p.hit_set_period)),
            ("hit_set_count", u64::from(p.hit_set_count)),
            ("target_max_bytes", p.target_max_bytes),
            ("cache_min_flush_age", u64::from(p.cache_min_flush_age)),
        ] {
            eq(w(f), ours.to_string(), u(&jp[f]).to_string());
        }
        for (f, ours) in [
            ("tier_of", p.tier_of),
            ("read_tier", p.read_tier),
            ("write_tier", p.write_tier),
        ] {
            eq(w(f), ours.to_string(), i(&jp[f]).to_string());
        }
        eq(
            w("fast_read"),
            p.fast_read.to_string(),
            jp["fast_read"].as_bool().unwrap().to_string(),
        );
        eq(
            w("erasure_code_profile"),
            p.erasure_code_profile.clone(),
            jp["erasure_code_profile"].as_str().unwrap().into(),
        );
        eq(
            w("pool_snaps"),
            p.snaps.len().to_string(),
            jp["pool_snaps"].as_array().unwrap().len().to_string(),
        );
        let apps = jp["application_metadata"].as_object().unwrap();
        eq(
            w("applications"),
            p.application_metadata.len().to_string(),
            apps.len().to_string(),
        );
        for (app, kv) in &p.application_metadata {
            for (k, v) in kv {
                eq(
                    w(&format!("app {app} {k}")),
                    v.clone(),
                    apps[app][k].as_str().unwrap().into(),
                );
            }
        }
        // Options appear by name; compare the count and each value's rendering.
        let opts = jp["options"].as_object().unwrap();
        eq(
            w("options"),
            p.opts.opts.len().to_string(),
            opts.len().to_string(),
        );
        for v in p.opts.opts.values() {
            let found = opts.values().any(|j| match v {
                PoolOptValue::Str(s) => j.as_str() == Some(s.as_str()),
                PoolOptValue::Int(x) => j.as_i64() == Some(*x),
                PoolOptValue::Double(x) => j.as_f64().is_some_and(|y| close(*x, y)),
            });
            assert!(found, "pool {id}: option value {v:?} not in {opts:?}");
        }
    }

    let osds = d["osds"].as_array().unwrap();
    let exists = (0..m.max_osd).filter(|o| m.exists(*o)).count();
    eq("osd count".into(), exists.to_string(), osds.len().to_string());
    for jo in osds {
        let o = i(&jo["osd"]) as i32;
        let ix = o as usize;
        let w = |f: &str| format!("osd.{o} {f}");
        eq(
            w("uuid"),
            m.osd_uuid[ix].to_string(),
            jo["uuid"].as_str().unwrap().into(),
        );
        eq(
            w("up"),
            u64::from(m.is_up(o)).to_string(),
            u(&jo["up"]).to_string(),
        );
        eq(
            w("in"),
            u64::from(m.is_in(o)).to_string(),
            u(&jo["in"]).to_string(),
        );
        let weight = f64::from(m.weight(o)) / f64::from(0x10000);
        assert!(close(weight, jo["weight"].as_f64().unwrap()), "osd.{o} weight");
        let aff = m
            .osd_primary_affinity
            .as_ref()
            .map_or(DEFAULT_PRIMARY_AFFINITY, |a| a[ix]);
        assert!(
            close(
                f64::from(aff) / f64::from(0x10000),
                jo["primary_affinity"].as_f64().unwrap()
            ),
            "osd.{o} primary_affinity"
        );
        let info = &m.osd_info[ix];
        for (f, ours) in [
            ("up_from", info.up_from),
            ("up_thru", info.up_thru),
            ("down_at", info.down_at),
            ("last_clean_begin", info.last_clean_begin),
            ("last_clean_end", info.last_clean_end),
            ("lost_at", info.lost_at),
        ] {
            eq(w(f), ours.to_string(), u(&jo[f]).to_string());
        }
        for (f, ours) in [
            ("public_addrs", &m.client_addrs[ix]),
            ("cluster_addrs", &m.cluster_addrs[ix]),
            ("heartbeat_back_addrs", &m.hb_back_addrs[ix]),
            ("heartbeat_front_addrs", &m.hb_front_addrs[ix]),
        ] {
            let theirs: Vec<String> = jo[f]["addrvec"]
                .as_array()
                .unwrap()
                .iter()
                .map(|a| {
                    format!(
                        "{}:{}/{}",
                        a["type"].as_str().unwrap(),
                        a["addr"].as_str().unwrap(),
                        u(&a["nonce"])
                    )
                })
                .collect();
            let ours: Vec<String> = ours.0.iter().map(|a| a.to_string()).collect();
            eq(w(f), ours.join(","), theirs.join(","));
        }
    }
    for jx in d["osd_xinfo"].as_array().unwrap() {
        let o = i(&jx["osd"]) as usize;
        let x = &m.osd_xinfo[o];
        eq(
            format!("osd.{o} features"),
            x.features.to_string(),
            u(&jx["features"]).to_string(),
        );
        eq(
            format!("osd.{o} old_weight"),
            x.old_weight.to_string(),
            u(&jx["old_weight"]).to_string(),
        );
        eq(
            format!("osd.{o} laggy_interval"),
            x.laggy_interval.to_string(),
            u(&jx["laggy_interval"]).to_string(),
        );
        eq(
            format!("osd.{o} dead_epoch"),
            x.dead_epoch.to_string(),
            u(&jx["dead_epoch"]).to_string(),
        );
    }

    let pgs = |v: &Value| -> Vec<i64> { v.as_array().unwrap().iter().map(i).collect() };
    let up = d["pg_upmap"].as_array().unwrap();
    eq(
        "pg_upmap count".into(),
        m.pg_upmap.len().to_string(),
        up.len().to_string(),
    );
    for e in up {
        let pg = e["pgid"].as_str().unwrap();
        let ours = m.pg_upmap.iter().find(|(k, _)| k.to_string() == pg).unwrap().1;
        eq(
            format!("pg_upmap {pg}"),
            format!("{ours:?}"),
            format!("{:?}", pgs(&e["osds"])),
        );
    }
    let items = d["pg_upmap_items"].as_array().unwrap();
    eq(
        "pg_upmap_items count".into(),
        m.pg_upmap_items.len().to_string(),
        items.len().to_string(),
    );
    for e in items {
        let pg = e["pgid"].as_str().unwrap();
        let ours = m
            .pg_upmap_items
            .iter()
            .find(|(k, _)| k.to_string() == pg)
            .unwrap()
            .1;
        let theirs: Vec<(i64, i64)> = e["mappings"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| (i(&x["from"]), i(&x["to"])))
            .collect();
        let ours: Vec<(i64, i64)> = ours.iter().map(|(a, b)| (i64::from(*a), i64::from(*b))).collect();
        eq(
            format!("pg_upmap_items {pg}"),
            format!("{ours:?}"),
            format!("{theirs:?}"),
        );
    }
    let temp = d["pg_temp"].as_array().unwrap();
    eq(
        "pg_temp count".into(),
        m.pg_temp.len().to_string(),
        temp.len().to_string(),
    );
    for e in temp {
        let pg = e["pgid"].as_str().unwrap();
        let ours = m.pg_temp.iter().find(|(k, _)| k.to_string() == pg).unwrap().1;
        eq(
            format!("pg_temp {pg}"),
            format!("{ours:?}"),
            format!("{:?}", pgs(&e["osds"])),
        );
    }
    // primary_temp is dumped as a flat list: pgid, osd, pgid, osd, ...
    let pt = d["primary_temp"].as_array().unwrap();
    eq(
        "primary_temp".into(),
        (m.primary_temp.len() * 2).to_string(),
        pt.len().to_string(),
    );
    for (k, v) in &m.primary_temp {
        let at = pt
            .iter()
            .position(|x| x.as_str() == Some(&k.to_string()))
            .unwrap();
        eq(
            format!("primary_temp {k}"),
            v.to_string(),
            i(&pt[at + 1]).to_string(),
        );
    }
    eq(
        "blocklist".into(),
        m.blocklist.len().to_string(),
        d["blocklist"].as_object().unwrap().len().to_string(),
    );
    let ecp = d["erasure_code_profiles"].as_object().unwrap();
    eq(
        "ec profiles".into(),
        m.erasure_code_profiles.len().to_string(),
        ecp.len().to_string(),
    );
    for (name, kv) in &m.erasure_code_profiles {
        for (k, v) in kv {
            eq(
                format!("ec profile {name} {k}"),
                v.clone(),
                ecp[name][k].as_str().unwrap().into(),
            );
        }
    }
    n
}
