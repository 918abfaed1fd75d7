// SPDX-License-Identifier: LGPL-3.0-or-later
//! OMAP tests through python3-rados (fio has no OMAP workload). The script is written to the cluster
//! directory and run with `/usr/bin/python3` (the distribution's interpreter, which has `rados`).
//!
//! Objects `omap.0 .. omap.15` get `keys` keys each in the prefill (`prep`); `set` adds new keys, `get` reads
//! one existing key by name, `scan` lists 16 keys after a random existing key. Every operation is
//! synchronous (queue depth 1) and timed individually; the script prints one JSON line.

use serde_json::Value;

use crate::error::{Result, bad};
use crate::report::Measurement;

/// The client script: `python3 SCRIPT CONF POOL MODE SECONDS KEYS`.
pub const OMAP_SCRIPT: &str = r#"
import atexit, json, random, sys, time
import rados

conf, pool, mode, seconds, keys = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4]), int(sys.argv[5])
OBJECTS = 16
VALUE = b"v" * 100
cluster = rados.Rados(conffile=conf, name="client.admin")
cluster.connect(timeout=30)
io = cluster.open_ioctx(pool)
# python3-rados never shuts librados down itself; exiting with its threads running can crash the process (SIGSEGV
# in safe_timer) after the result was printed. atexit covers every way out.
atexit.register(lambda: (io.close(), cluster.shutdown()))
rng = random.Random(7)

def key(i):
    return "key%08d" % i

if mode == "prep":
    for o in range(OBJECTS):
        for start in range(0, keys, 256):
            ks = tuple(key(i) for i in range(start, min(keys, start + 256)))
            with rados.WriteOpCtx() as op:
                io.set_omap(op, ks, tuple(VALUE for _ in ks))
                io.operate_write_op(op, "omap.%d" % o)
    print(json.dumps({"ok": True}))
    sys.exit(0)

lat = []
seq = keys
deadline = time.monotonic() + seconds
t0 = time.monotonic()
while True:
    now = time.monotonic()
    if now >= deadline:
        break
    obj = "omap.%d" % rng.randrange(OBJECTS)
    if mode == "set":
        seq += 1
        with rados.WriteOpCtx() as op:
            io.set_omap(op, (key(seq),), (VALUE,))
            io.operate_write_op(op, obj)
        got = 1
    elif mode == "get":
        with rados.ReadOpCtx() as op:
            it, ret = io.get_omap_vals_by_keys(op, (key(rng.randrange(keys)),))
            io.operate_read_op(op, obj)
            got = len(list(it))
    elif mode == "scan":
        with rados.ReadOpCtx() as op:
            # Start early enough that 16 keys follow even on an object the set test did not touch.
            it, ret = io.get_omap_vals(op, key(rng.randrange(max(1, keys - 16))), "", 16)
            io.operate_read_op(op, obj)
            got = len(list(it))
    else:
        raise SystemExit("unknown mode " + mode)
    if got == 0:
        raise SystemExit("omap %s on %s returned nothing" % (mode, obj))
    lat.append(time.monotonic() - now)
elapsed = time.monotonic() - t0
lat.sort()
def pct(p):
    return lat[min(len(lat) - 1, int(p / 100.0 * len(lat)))] * 1e6 if lat else 0.0
print(json.dumps({"ops": len(lat), "seconds": elapsed, "bytes": len(lat) * len(VALUE),
                  "p50_us": pct(50), "p99_us": pct(99)}))
"#;

/// Parses the script's last JSON line.
pub fn parse_omap_json(text: &str) -> Result<Measurement> {
    let line = text
        .lines()
        .rev()
        .find(|l| l.trim_start().starts_with('{'))
        .ok_or_else(|| bad("omap script", "no JSON line in output"))?;
    let v: Value = serde_json::from_str(line).map_err(|e| bad("omap script", e.to_string()))?;
    let num = |k: &str| {
        v[k].as_f64()
            .ok_or_else(|| bad("omap script", format!("missing {k}")))
    };
    let ops = v["ops"]
        .as_u64()
        .ok_or_else(|| bad("omap script", "missing ops"))?;
    let secs = num("seconds")?;
    if ops == 0 || secs <= 0.0 {
        return Err(bad("omap script", "no operation completed"));
    }
    Ok(Measurement {
        ops,
        runtime_s: secs,
        iops: ops as f64 / secs,
        mb_per_s: num("bytes")? / secs / 1e6,
        lat_p50_us: num("p50_us")?,
        lat_p99_us: num("p99_us")?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_last_json_line() {
        let m = parse_omap_json(
            "noise\n{\"ok\": true}\n{\"ops\": 200, \"seconds\": 2.0, \"bytes\": 20000, \"p50_us\": 400.5, \"p99_us\": 2000}\n",
        )
        .unwrap();
        assert_eq!(m.ops, 200);
        assert!((m.iops - 100.0).abs() < 1e-9);
        assert!((m.mb_per_s - 0.01).abs() < 1e-12);
        assert!((m.lat_p50_us - 400.5).abs() < 1e-9);
        assert!(
            parse_omap_json("{\"ops\": 0, \"seconds\": 1, \"bytes\": 0, \"p50_us\": 0, \"p99_us\": 0}")
                .is_err()
        );
        assert!(parse_omap_json("nothing").is_err());
        assert!(parse_omap_json("{\"ops\": 3}").is_err());
    }
}
