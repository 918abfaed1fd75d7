// SPDX-License-Identifier: MPL-2.0
//! Object placement answers in the exact formats of `ceph osd map POOL OBJECT [NSPACE]` (text and
//! `--format json`), as Pacific's OSDMonitor prints them.

/// `CRUSH_ITEM_NONE`: an empty slot of an erasure-coded PG's OSD vector.
pub const CRUSH_ITEM_NONE: i32 = 0x7fff_ffff;

/// Where an object lives: the fields of `ceph osd map`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectMapping {
    pub epoch: u32,
    pub pool: String,
    pub pool_id: i64,
    /// `nspace/name`, or just `name` in the default namespace.
    pub objname: String,
    /// The object's full hash as a PG id, e.g. `2.7fc1f406`.
    pub raw_pgid: (u64, u32),
    /// The PG after folding by pg_num, e.g. `2.6`.
    pub pgid: (u64, u32),
    pub up: Vec<i32>,
    pub up_primary: i32,
    pub acting: Vec<i32>,
    pub acting_primary: i32,
}

fn pg_str(pg: (u64, u32)) -> String {
    format!("{}.{:x}", pg.0, pg.1)
}

/// Ceph's `pg_vector_string`: `[1,2,NONE]`.
fn osd_vec_str(v: &[i32]) -> String {
    let items: Vec<String> = v
        .iter()
        .map(|&o| {
            if o == CRUSH_ITEM_NONE {
                "NONE".to_owned()
            } else {
                o.to_string()
            }
        })
        .collect();
    format!("[{}]", items.join(","))
}

fn json_str(s: &str) -> String {
    serde_json::Value::String(s.to_owned()).to_string()
}

fn json_ints(v: &[i32]) -> String {
    let items: Vec<String> = v.iter().map(|o| o.to_string()).collect();
    format!("[{}]", items.join(","))
}

impl ObjectMapping {
    /// The text line (`ceph osd map` prints it followed by a newline).
    pub fn to_text(&self) -> String {
        format!(
            "osdmap e{} pool '{}' ({}) object '{}' -> pg {} ({}) -> up ({}, p{}) acting ({}, p{})",
            self.epoch,
            self.pool,
            self.pool_id,
            self.objname,
            pg_str(self.raw_pgid),
            pg_str(self.pgid),
            osd_vec_str(&self.up),
            self.up_primary,
            osd_vec_str(&self.acting),
            self.acting_primary
        )
    }

    /// Compact JSON with Ceph's key order (`ceph osd map --format json` prints it without a trailing newline).
    pub fn to_json(&self) -> String {
        format!(
            "{{\"epoch\":{},\"pool\":{},\"pool_id\":{},\"objname\":{},\"raw_pgid\":{},\"pgid\":{},\"up\":{},\"up_primary\":{},\"acting\":{},\"acting_primary\":{}}}",
            self.epoch,
            json_str(&self.pool),
            self.pool_id,
            json_str(&self.objname),
            json_str(&pg_str(self.raw_pgid)),
            json_str(&pg_str(self.pgid)),
            json_ints(&self.up),
            self.up_primary,
            json_ints(&self.acting),
            self.acting_primary
        )
    }
}

/// Ceph's `json-pretty` layout for an array of OSD ids at nesting level 1 (4-space indent; `[]` when empty).
fn pretty_ints(v: &[i32]) -> String {
    if v.is_empty() {
        return "[]".into();
    }
    let items: Vec<String> = v.iter().map(|o| format!("        {o}")).collect();
    format!("[\n{}\n    ]", items.join(",\n"))
}

impl ObjectMapping {
    /// `--format json-pretty`, in Ceph's JSONFormatter layout (the monitor's bytes end with a newline).
    pub fn to_json_pretty(&self) -> String {
        let fields = [
            ("epoch", self.epoch.to_string()),
            ("pool", json_str(&self.pool)),
            ("pool_id", self.pool_id.to_string()),
            ("objname", json_str(&self.objname)),
            ("raw_pgid", json_str(&pg_str(self.raw_pgid))),
            ("pgid", json_str(&pg_str(self.pgid))),
            ("up", pretty_ints(&self.up)),
            ("up_primary", self.up_primary.to_string()),
            ("acting", pretty_ints(&self.acting)),
            ("acting_primary", self.acting_primary.to_string()),
        ];
        let body: Vec<String> = fields.iter().map(|(k, v)| format!("    \"{k}\": {v}")).collect();
        format!("{{\n{}\n}}\n", body.join(",\n"))
    }
}

/// `ceph osd lspools` answers: plain, compact JSON or json-pretty (the monitor's bytes, ending with a newline).
pub fn lspools_output(pools: &[(i64, String)], format: &str) -> String {
    match format {
        "json" => {
            let items: Vec<String> = pools
                .iter()
                .map(|(id, n)| format!(r#"{{"poolnum":{id},"poolname":{}}}"#, json_str(n)))
                .collect();
            format!("[{}]\n", items.join(","))
        }
        "json-pretty" => {
            if pools.is_empty() {
                return "[]\n".into();
            }
            let items: Vec<String> = pools
                .iter()
                .map(|(id, n)| {
                    format!(
                        "    {{\n        \"poolnum\": {id},\n        \"poolname\": {}\n    }}",
                        json_str(n)
                    )
                })
                .collect();
            format!("[\n{}\n]\n", items.join(",\n"))
        }
        _ => pools.iter().map(|(id, n)| format!("{id} {n}\n")).collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> ObjectMapping {
        ObjectMapping {
            epoch: 15,
            pool: "rbd".into(),
            pool_id: 2,
            objname: "foo".into(),
            raw_pgid: (2, 0x7fc1f406),
            pgid: (2, 6),
            up: vec![1],
            up_primary: 1,
            acting: vec![1],
            acting_primary: 1,
        }
    }

    /// Outputs of Ceph 16.2.15's `ceph osd map rbd foo` on a live cluster.
    #[test]
    fn matches_ceph_text_and_json() {
        let m = sample();
        assert_eq!(
            m.to_text(),
            "osdmap e15 pool 'rbd' (2) object 'foo' -> pg 2.7fc1f406 (2.6) -> up ([1], p1) acting ([1], p1)"
        );
        assert_eq!(
            m.to_json(),
            r#"{"epoch":15,"pool":"rbd","pool_id":2,"objname":"foo","raw_pgid":"2.7fc1f406","pgid":"2.6","up":[1],"up_primary":1,"acting":[1],"acting_primary":1}"#
        );
    }

    /// `ceph osd map rbd foo -f json-pretty` and `ceph osd lspools -f json-pretty` from Ceph 16.2.15 (the
    /// monitor's bytes, without the CLI's leading blank line).
    #[test]
    fn matches_ceph_json_pretty() {
        let m = ObjectMapping {
            epoch: 27,
            ..sample()
        };
        assert_eq!(
            m.to_json_pretty(),
            "{\n    \"epoch\": 27,\n    \"pool\": \"rbd\",\n    \"pool_id\": 2,\n    \"objname\": \"foo\",\n    \"raw_pgid\": \"2.7fc1f406\",\n    \"pgid\": \"2.6\",\n    \"up\": [\n        1\n    ],\n    \"up_primary\": 1,\n    \"acting\": [\n        1\n    ],\n    \"acting_primary\": 1\n}\n"
        );
        let pools = [(1, "device_health_metrics".to_string()), (3, "ec21".to_string())];
        assert_eq!(
            lspools_output(&pools, "json-pretty"),
            "[\n    {\n        \"poolnum\": 1,\n        \"poolname\": \"device_health_metrics\"\n    },\n    {\n        \"poolnum\": 3,\n        \"poolname\": \"ec21\"\n    }\n]\n"
        );
        assert_eq!(
            lspools_output(&pools, "json"),
            "[{\"poolnum\":1,\"poolname\":\"device_health_metrics\"},{\"poolnum\":3,\"poolname\":\"ec21\"}]\n"
        );
        assert_eq!(
            lspools_output(&pools, "plain"),
            "1 device_health_metrics\n3 ec21\n"
        );
    }

    #[test]
    fn ec_holes_print_as_none_in_text_and_as_numbers_in_json() {
        let m = ObjectMapping {
            up: vec![0, CRUSH_ITEM_NONE, 2],
            acting: vec![0, CRUSH_ITEM_NONE, 2],
            up_primary: 0,
            acting_primary: 0,
            objname: "ns1/foo".into(),
            ..sample()
        };
        assert!(m.to_text().contains("object 'ns1/foo'"));
        assert!(
            m.to_text()
                .ends_with("up ([0,NONE,2], p0) acting ([0,NONE,2], p0)")
        );
        assert!(m.to_json().contains(r#""up":[0,2147483647,2]"#));
        let v: serde_json::Value = serde_json::from_str(&m.to_json()).unwrap();
        assert_eq!(v["objname"], "ns1/foo");
    }
}
