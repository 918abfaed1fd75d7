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
