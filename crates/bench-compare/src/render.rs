// SPDX-License-Identifier: LGPL-3.0-or-later
//! Human output: a Markdown table (for docs/benchmarks.md and the terminal) and an SVG chart written by
//! hand (no plotting dependency): IOPS per test and group on a log scale, with the ratio beside each test.

use std::fmt::Write as _;

use crate::report::{GroupReport, GroupStatus, RawCell, Report, Row, geomean};

fn num(x: f64) -> String {
    if !x.is_finite() {
        "–".into()
    } else if x >= 100.0 {
        format!("{x:.0}")
    } else if x >= 10.0 {
        format!("{x:.1}")
    } else {
        format!("{x:.2}")
    }
}

fn ratio(x: f64) -> String {
    if x.is_finite() {
        format!("{x:.2}")
    } else {
        "–".into()
    }
}

/// The Markdown block: a header (date, commit, machine, setup), skipped groups with their reason, and one
/// table with every test, both groups and the ratios (with geometric means in the last row).
pub fn markdown_table(r: &Report) -> String {
    let m = &r.meta;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{} · commit {} · {} · kernel {} · {}",
        m.date_utc, m.commit, m.machine, m.kernel, m.ceph_version
    );
    let _ = writeln!(s);
    let _ = writeln!(
        s,
        "{} OSD(s) per kind on {} GiB {}files, pool size {}, {} objects of 4 MiB per pool, {} s per test and kind{}.",
        m.osds_per_group,
        m.device_size_bytes >> 30,
        if m.device_files.is_empty() {
            String::new()
        } else {
            format!("{} ", m.device_files)
        },
        m.pool_size,
        m.objects,
        m.runtime_s,
        if m.quick {
            " (quick mode: smoke test, not a measurement)"
        } else {
            ""
        }
    );
    if let Some(n) = m.ferro_shards {
        let _ = writeln!(
            s,
            "ferro-osd: {n} reactor core(s) (ferrostore shards) per OSD; options: {}.",
            if m.ferro_conf.is_empty() {
                "defaults".to_string()
            } else {
                m.ferro_conf
                    .iter()
                    .map(|c| format!("`{c}`"))
                    .collect::<Vec<_>>()
                    .join(", ")
            }
        );
    }
    let classes: Vec<String> = r
        .groups
        .iter()
        .filter(|g| !g.sched.is_empty())
        .map(|g| {
            let who = if g.kind == "ferro" {
                "reactor threads"
            } else {
                "threads"
            };
            format!("{} {who} {}", g.label, g.sched)
        })
        .collect();
    if !classes.is_empty() {
        let _ = writeln!(
            s,
            "Thread scheduling after boot (`/proc`): {}.",
            classes.join("; ")
        );
    }
    if !m.cpu_idle.is_empty() {
        let _ = writeln!(s, "Idle CPUs: {}.", m.cpu_idle);
    }
    if r.groups.iter().any(|g| g.kind == "classic") {
        let _ = writeln!(s, "{}", bluestore_profile_line(m));
    }
    if !m.load_start.is_empty() || !m.load_end.is_empty() {
        let _ = writeln!(
            s,
            "Load average (1/5/15 min) at start {}, at end {}.",
            m.load_start, m.load_end
        );
    }
    if m.rounds > 1 {
        let _ = writeln!(
            s,
            "{} rounds of the matrix: every number below is the median of that number over the rounds; \
             each round's ratios follow the table.",
            m.rounds
        );
    }
    if let Some(p) = m.cpu_steal_percent {
        let _ = writeln!(
            s,
            "CPU time stolen by the host over the run (`/proc/stat` steal): {p:.1} % of the vCPUs' time."
        );
    }
    for g in &r.groups {
        if let GroupStatus::Skipped(why) = &g.status {
            let _ = writeln!(
                s,
                "\n**{} side skipped:** {}",
                g.label,
                why.lines().next().unwrap_or("")
            );
        }
    }
    let _ = writeln!(s);
    let mut head = String::from("| test |");
    let mut align = String::from("|---|");
    for g in &r.groups {
        for col in ["IOPS", "MB/s", "p50 µs", "p99 µs", "CPU µs/op", "RSS MiB"] {
            let _ = write!(head, " {} {col} |", g.label);
            align.push_str("---:|");
        }
    }
    let two = r.groups.len() >= 2;
    if two {
        let lab = format!("{}/{}", r.groups[1].label, r.groups[0].label);
        for col in ["IOPS", "p99", "CPU/op"] {
            let _ = write!(head, " {lab} {col} |");
            align.push_str("---:|");
        }
    }
    let _ = writeln!(s, "{head}\n{align}");
    for (i, t) in r.tests.iter().enumerate() {
        let _ = write!(s, "| {} |", t.title);
        for res in &t.results {
            match res {
                Ok(row) => {
                    let _ = write!(
                        s,
                        " {} | {} | {} | {} | {} | {} |",
                        num(row.m.iops),
                        num(row.m.mb_per_s),
                        num(row.m.lat_p50_us),
                        num(row.m.lat_p99_us),
                        num(row.osd_cpu_us_per_op),
                        row.osd_rss_bytes >> 20
                    );
                }
                Err(_) => s.push_str(" – | – | – | – | – | – |"),
            }
        }
        if two {
            match r.ratios(i) {
                Some(q) => {
                    let _ = write!(
                        s,
                        " {} | {} | {} |",
                        ratio(q.iops),
                        ratio(q.lat_p99),
                        ratio(q.osd_cpu_per_op)
                    );
                }
                None => s.push_str(" – | – | – |"),
            }
        }
        s.push('\n');
    }
    if two && let Some(g) = r.geomean_ratios() {
        let _ = write!(s, "| **geometric mean** |");
        for _ in &r.groups {
            s.push_str(" | | | | | |");
        }
        let _ = writeln!(
            s,
            " **{}** | **{}** | **{}** |",
            ratio(g.iops),
            ratio(g.lat_p99),
            ratio(g.osd_cpu_per_op)
        );
    }
    rounds_table(r, &mut s);
    raw_table(r, &mut s);
    osd_latency_table(r, &mut s);
    osd_read_latency_table(r, &mut s);
    ctxt_table(r, &mut s);
    runq_table(r, &mut s);
    device_table(r, &mut s);
    s
}

/// What settings the classic OSDs ran with, and why it matters on this disk.
fn bluestore_profile_line(m: &crate::report::Meta) -> String {
    let disk = match m.disk_rotational {
        Some(true) => "the disk under the cluster says it is rotational",
        Some(false) => "the disk under the cluster says it is not rotational",
        None => "no block device found under the cluster",
    };
    let ran = match (m.bluestore_profile.as_str(), m.disk_rotational) {
        ("ssd", _) => "its SSD settings (`bluestore debug enforce settings = ssd`)",
        ("hdd", _) => "its HDD settings (`bluestore debug enforce settings = hdd`)",
        (_, Some(true)) => {
            "its HDD settings (Ceph's default for such a disk: overwrites under 64 KiB deferred)"
        }
        (_, Some(false)) => "its SSD settings (Ceph's default for such a disk)",
        (_, None) => "the settings Ceph picked",
    };
    format!(
        "Classic OSDs' profile `{}`: {disk}; BlueStore ran with {ran}.",
        if m.bluestore_profile.is_empty() {
            "auto"
        } else {
            &m.bluestore_profile
        }
    )
}

/// With several rounds: each round's ratios per test (IOPS × / p99 × / CPU/op ×) and each round's geometric
/// means, so the medians' spread is in sight.
fn rounds_table(r: &Report, s: &mut String) {
    let n = r.rounds_kept();
    if n == 0 || r.groups.len() < 2 {
        return;
    }
    let lab = format!("{}/{}", r.groups[1].label, r.groups[0].label);
    let _ = write!(
        s,
        "\nEach round alone — {lab} IOPS × / p99 × / CPU/op × (the median table above takes each number's median \
         over these rounds):\n\n| test |"
    );
    let mut align = String::from("|---|");
    for k in 0..n {
        let _ = write!(s, " round {} |", k + 1);
        align.push_str("---:|");
    }
    let _ = writeln!(s, "\n{align}");
    let cell = |q: Option<crate::report::Ratios>| match q {
        Some(q) => format!(
            " {} / {} / {} |",
            ratio(q.iops),
            ratio(q.lat_p99),
            ratio(q.osd_cpu_per_op)
        ),
        None => " – |".into(),
    };
    for (i, t) in r.tests.iter().enumerate() {
        let _ = write!(s, "| {} |", t.title);
        for k in 0..n {
            s.push_str(&cell(r.round_ratios(i, k)));
        }
        s.push('\n');
    }
    s.push_str("| **geometric mean** |");
    for k in 0..n {
        match r.round_geomean_ratios(k) {
            Some(g) => {
                let _ = write!(
                    s,
                    " **{} / {} / {}** |",
                    ratio(g.iops),
                    ratio(g.lat_p99),
                    ratio(g.osd_cpu_per_op)
                );
            }
            None => s.push_str(" – |"),
        }
    }
    s.push('\n');
}

/// The raw reference per test: its numbers, each group's share of it, and (with two groups) the best ratio of
/// the second to the first that the device leaves attainable, with a note where a target is out of reach.
fn raw_table(r: &Report, s: &mut String) {
    let Some(setup) = &r.meta.raw else {
        return;
    };
    let two = r.groups.len() >= 2;
    let _ = write!(
        s,
        "\nDevice ceiling — raw fio on {} {} file(s) of {} GiB beside the OSDs' device files (`ioengine={}`, \
         O_DIRECT, O_DSYNC writes), over the first {} MiB (the pool's data set); at pool size N the write-only \
         tests run N jobs in parallel, one per file, and a client op is N device writes. Shares are kind / raw{}:\n\n\
         | test | raw IOPS | raw MB/s | raw p50 µs | raw p99 µs | raw fio CPU µs/op |",
        setup.files,
        setup.prepared,
        setup.file_size_bytes >> 30,
        setup.engine,
        setup.region_bytes >> 20,
        if two {
            format!(
                "; attainable = the best {0}/{1} ratio the device allows if an OSD cannot beat the raw files \
                 (IOPS ≤ raw / {1}, p99 ≥ raw / {1})",
                r.groups[1].label, r.groups[0].label
            )
        } else {
            String::new()
        }
    );
    let mut align = String::from("|---|---:|---:|---:|---:|---:|");
    for g in &r.groups {
        let _ = write!(s, " {}/raw IOPS | {}/raw p99 |", g.label, g.label);
        align.push_str("---:|---:|");
    }
    if two {
        let lab = format!("{}/{}", r.groups[1].label, r.groups[0].label);
        let _ = write!(s, " attainable {lab} IOPS ≤ | attainable {lab} p99 ≥ | note |");
        align.push_str("---:|---:|---|");
    }
    let _ = writeln!(s, "\n{align}");
    for (i, t) in r.tests.iter().enumerate() {
        let _ = write!(s, "| {} |", t.title);
        let na = matches!(t.raw, Some(RawCell::NotApplicable(_)));
        let dash = if na { " n/a |" } else { " – |" };
        match r.raw_row(i) {
            Some(x) => {
                let _ = write!(
                    s,
                    " {} | {} | {} | {} | {} |",
                    num(x.m.iops),
                    num(x.m.mb_per_s),
                    num(x.m.lat_p50_us),
                    num(x.m.lat_p99_us),
                    num(x.fio_cpu_us_per_op)
                );
            }
            None => s.push_str(&dash.repeat(5)),
        }
        for gi in 0..r.groups.len() {
            match r.raw_share(i, gi) {
                Some(sh) => {
                    let _ = write!(s, " {} | {} |", ratio(sh.iops), ratio(sh.lat_p99));
                }
                None => s.push_str(&dash.repeat(2)),
            }
        }
        if two {
            let note = match (&t.raw, r.attainable(i)) {
                (Some(RawCell::NotApplicable(why)), _) => format!("not applicable: {why}"),
                (Some(RawCell::Failed(why)), _) => {
                    format!("raw failed: {}", why.lines().next().unwrap_or(""))
                }
                (_, Some(_)) => r.raw_note(i),
                _ => String::new(),
            };
            match r.attainable(i) {
                Some(a) => {
                    let _ = write!(s, " {} | {} | {note} |", ratio(a.iops_max), ratio(a.lat_p99_min));
                }
                None => {
                    let _ = write!(s, "{dash}{dash} {note} |");
                }
            }
        }
        s.push('\n');
    }
    let have: Vec<usize> = (0..r.tests.len()).filter(|i| r.raw_row(*i).is_some()).collect();
    if have.is_empty() {
        return;
    }
    let _ = write!(s, "| **geometric mean** (tests with a raw row) | | | | | |");
    for gi in 0..r.groups.len() {
        let sh: Vec<_> = have.iter().filter_map(|i| r.raw_share(*i, gi)).collect();
        let _ = write!(
            s,
            " **{}** | **{}** |",
            ratio(geomean(sh.iter().map(|x| x.iops))),
            ratio(geomean(sh.iter().map(|x| x.lat_p99)))
        );
    }
    if two && let Some(a) = r.geomean_attainable() {
        let _ = write!(
            s,
            " **{}** | **{}** | {} |",
            ratio(a.iops_max),
            ratio(a.lat_p99_min),
            a.note()
        );
    }
    s.push('\n');
}

/// The header of a per-group table after its `| test |` cell: `<label> <column>` for each group and column, then
/// the alignment row.
fn group_columns(r: &Report, s: &mut String, cols: impl Fn(&GroupReport) -> Vec<&'static str>) {
    let mut align = String::from("|---|");
    for g in &r.groups {
        for col in cols(g) {
            let _ = write!(s, " {} {col} |", g.label);
            align.push_str("---:|");
        }
    }
    let _ = writeln!(s, "\n{align}");
}

/// Run-queue waits of each group's OSD threads (`schedstat`): per client op, per timeslice (each time a thread
/// was put on a CPU, mostly a wake-up), timeslices per op; for ferro-osd also its reactor threads alone. On a
/// shared machine these waits, not the OSD's own work, set most of the p99.
fn runq_table(r: &Report, s: &mut String) {
    if !r.tests.iter().any(|t| t.results.iter().any(|x| x.is_ok())) {
        return;
    }
    let _ = write!(
        s,
        "\nRun-queue wait of the OSD threads (`/proc/<pid>/task/*/schedstat`: time runnable but not running), per op \
         and per timeslice, timeslices per op; reactor = ferro-osd's `ferro-core-*` threads alone:\n\n| test |"
    );
    group_columns(r, s, |g| {
        let mut cols = vec!["wait µs/op", "wait µs/slice", "slices/op"];
        if g.kind == "ferro" {
            cols.push("reactor wait µs/slice");
        }
        cols
    });
    for t in &r.tests {
        let _ = write!(s, "| {} |", t.title);
        for (g, res) in r.groups.iter().zip(&t.results) {
            let ferro = g.kind == "ferro";
            match res {
                Ok(row) => {
                    let _ = write!(
                        s,
                        " {} | {} | {:.2} |",
                        num(row.osd_wait_us_per_op()),
                        num(row.osd_sched.wait_us_per_slice()),
                        row.osd_sched.slices as f64 / row.m.ops.max(1) as f64
                    );
                    if ferro {
                        let _ = write!(
                            s,
                            " {} |",
                            row.reactor_sched
                                .map_or("–".into(), |x| num(x.wait_us_per_slice()))
                        );
                    }
                }
                Err(_) => s.push_str(if ferro {
                    " – | – | – | – |"
                } else {
                    " – | – | – |"
                }),
            }
        }
        s.push('\n');
    }
}

/// The disk under the OSDs' files during each group's test: its reads, writes and cache flushes per client op,
/// their average service times, and the KiB written per op. A row that collapsed with long service times waited for the disk (on a VM,
/// the host's); with short ones and few IOs, the OSD stopped asking.
fn device_table(r: &Report, s: &mut String) {
    let ms = |v: Option<f64>| v.map_or("–".to_string(), |x| format!("{x:.2}"));
    perf_counter_table(
        r,
        s,
        "The disk under the OSDs' files during each test (`/sys/dev/block/*/stat` of the device holding the \
         cluster: all its IO, the idle group's and the mon's included): reads, writes and cache flushes it completed \
         per client op, and their average service time in ms; KiB it wrote per client op; the wait before the test for the disk to go quiet, s \
         (`*`: it did not within 20 s)",
        &[
            "reads/op",
            "read ms",
            "writes/op",
            "write ms",
            "write KiB/op",
            "flushes/op",
            "flush ms",
            "settle s",
        ],
        |row| row.device.is_some(),
        |row| match row.device {
            Some(d) => {
                let per_op = |n: u64| n as f64 / row.m.ops.max(1) as f64;
                let [rd, wr, fl] = d.avg_ms();
                let settle = row.settle.map_or("–".to_string(), |w| {
                    format!("{:.1}{}", w.waited_s, if w.quiet { "" } else { "*" })
                });
                format!(
                    " {:.2} | {} | {:.2} | {} | {:.1} | {:.2} | {} | {settle} |",
                    per_op(d.reads),
                    ms(rd),
                    per_op(d.writes),
                    ms(wr),
                    per_op(d.write_sectors) / 2.0,
                    per_op(d.flushes),
                    ms(fl)
                )
            }
            None => " – |".repeat(8),
        },
    );
}

/// Context switches per op of each group's OSD threads: how often the OSDs slept and woke (voluntary) or were
/// preempted (involuntary) for one client op; the busiest OSD thread's share of a CPU (near 100 %: the row is
/// bound by that thread) and the client's CPU per op (fio shares the machine's CPUs with the OSDs).
fn ctxt_table(r: &Report, s: &mut String) {
    if !r.tests.iter().any(|t| t.results.iter().any(|x| x.is_ok())) {
        return;
    }
    let _ = write!(
        s,
        "\nOSD context switches per op (all threads of the group's OSDs, `/proc/<pid>/task/*/status`), the busiest OSD thread's CPU share over the test, client (fio) CPU per op, busy CPU of the whole machine per op (kernel threads included):\n\n| test |"
    );
    group_columns(r, s, |_| {
        vec![
            "voluntary",
            "involuntary",
            "busiest thread",
            "client CPU µs/op",
            "machine CPU µs/op",
        ]
    });
    for t in &r.tests {
        let _ = write!(s, "| {} |", t.title);
        for res in &t.results {
            match res {
                Ok(row) => {
                    let busy = row.osd_busiest_thread.map_or("–".to_string(), |(n, u)| {
                        format!("{} {:.0} %", n.as_str(), u * 100.0)
                    });
                    let _ = write!(
                        s,
                        " {:.2} | {:.2} | {busy} | {} | {} |",
                        row.osd_ctxt_vol_per_op,
                        row.osd_ctxt_invol_per_op,
                        num(row.client_cpu_us_per_op),
                        num(row.machine_cpu_us_per_op)
                    );
                }
                Err(_) => s.push_str(" – | – | – | – | – |"),
            }
        }
        s.push('\n');
    }
}

/// Where writes spent their time inside the OSDs (averages of their perf counters over each test): only the
/// tests that wrote, and only if some OSD answered.
fn osd_latency_table(r: &Report, s: &mut String) {
    let ms = |v: Option<f64>| v.map_or("–".to_string(), |x| format!("{x:.1}"));
    perf_counter_table(
        r,
        s,
        "OSD-side write latency, ms (perf counters averaged over each test: primary `op_w_latency`, replica \
         sub-op write latency, object store commit)",
        &["op_w", "subop_w", "commit"],
        |row| row.osd_lat.op_w_ms.is_some(),
        |row| {
            let l = row.osd_lat;
            format!(" {} | {} | {} |", ms(l.op_w_ms), ms(l.subop_ms), ms(l.commit_ms))
        },
    );
}

/// Reads: the OSDs' `op_r_latency` and, by Little's law (IOPS × latency), how many of the test's ops were inside
/// the OSDs on average; the rest of the queue depth was in the client, on the wire or in a socket.
fn osd_read_latency_table(r: &Report, s: &mut String) {
    perf_counter_table(
        r,
        s,
        "OSD-side read latency, ms (perf counter `op_r_latency` averaged over each test: the op's arrival to its \
         reply) and the reads inside the OSDs on average (IOPS × that latency, Little's law; the rest of the queue \
         depth is in the client, on the wire or in a socket)",
        &["op_r", "ops in OSD"],
        |row| row.osd_lat.op_r_ms.is_some(),
        |row| match row.osd_lat.op_r_ms {
            Some(ms) => format!(" {ms:.2} | {:.1} |", row.m.iops * ms / 1000.0),
            None => " – | – |".to_string(),
        },
    );
}

/// A table of per-group columns from the OSDs' counters: the tests where `has` holds for some group's row, each
/// group's cells from `cells` (dashes for a group without a row).
fn perf_counter_table(
    r: &Report,
    s: &mut String,
    caption: &str,
    cols: &[&'static str],
    has: impl Fn(&Row) -> bool,
    cells: impl Fn(&Row) -> String,
) {
    let rows: Vec<_> = r
        .tests
        .iter()
        .filter(|t| t.results.iter().any(|x| x.as_ref().is_ok_and(&has)))
        .collect();
    if rows.is_empty() {
        return;
    }
    let _ = write!(s, "\n{caption}:\n\n| test |");
    group_columns(r, s, |_| cols.to_vec());
    let dashes = " – |".repeat(cols.len());
    for t in rows {
        let _ = write!(s, "| {} |", t.title);
        for res in &t.results {
            match res {
                Ok(row) => s.push_str(&cells(row)),
                Err(_) => s.push_str(&dashes),
            }
        }
        s.push('\n');
    }
}

fn esc(t: &str) -> String {
    t.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;")
}

const COLORS: [&str; 4] = ["#4e79a7", "#e15759", "#59a14f", "#f28e2b"];
/// The raw reference's bars.
const RAW_COLOR: &str = "#9c9c9c";

/// The SVG chart (a complete document).
pub fn svg_chart(r: &Report) -> String {
    let with_raw = r.meta.raw.is_some();
    let groups = r.groups.len().max(1);
    let bars = groups + usize::from(with_raw);
    let bar_h = 12.0;
    let row_h = bar_h * bars as f64 + 10.0;
    let (left, plot_w, right) = (250.0, 520.0, 130.0);
    let top = 50.0;
    let height = top + row_h * r.tests.len() as f64 + 40.0;
    let width = left + plot_w + right;
    // Log10 axis over the decades that hold every IOPS value.
    let vals: Vec<f64> = r
        .tests
        .iter()
        .flat_map(|t| t.results.iter().filter_map(|x| x.as_ref().ok()).map(|x| x.m.iops))
        .chain((0..r.tests.len()).filter_map(|i| r.raw_row(i)).map(|x| x.m.iops))
        .filter(|v| *v > 0.0 && v.is_finite())
        .collect();
    let lo = vals.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = vals.iter().copied().fold(0.0, f64::max);
    let (d0, d1) = if vals.is_empty() {
        (0.0, 1.0)
    } else {
        (
            lo.log10().floor(),
            (hi.log10().ceil()).max(lo.log10().floor() + 1.0),
        )
    };
    let x = |v: f64| left + (v.log10() - d0) / (d1 - d0) * plot_w;
    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif" font-size="11">"#
    );
    let _ = writeln!(s, r#"<rect width="100%" height="100%" fill="white"/>"#);
    let _ = writeln!(
        s,
        r#"<text x="10" y="18" font-size="14" font-weight="bold">IOPS per test (log scale) · {} · {}</text>"#,
        esc(&r.meta.date_utc),
        esc(&r.meta.commit)
    );
    for (gi, g) in r.groups.iter().enumerate() {
        let lx = 10.0 + 160.0 * gi as f64;
        let note = match &g.status {
            GroupStatus::Ran => String::new(),
            GroupStatus::Skipped(_) => " (skipped)".into(),
        };
        let _ = writeln!(
            s,
            r#"<rect x="{lx}" y="28" width="10" height="10" fill="{}"/><text x="{}" y="37">{}{}</text>"#,
            COLORS[gi % COLORS.len()],
            lx + 14.0,
            esc(&g.label),
            note
        );
    }
    if with_raw {
        let lx = 10.0 + 160.0 * r.groups.len() as f64;
        let _ = writeln!(
            s,
            r#"<rect x="{lx}" y="28" width="10" height="10" fill="{RAW_COLOR}"/><text x="{}" y="37">raw (device ceiling)</text>"#,
            lx + 14.0
        );
    }
    if groups >= 2 {
        let _ = writeln!(
            s,
            r#"<text x="{}" y="37">{}/{} IOPS</text>"#,
            left + plot_w + 8.0,
            esc(&r.groups[1].label),
            esc(&r.groups[0].label)
        );
    }
    let mut d = d0;
    while d <= d1 + 1e-9 {
        let gx = x(10f64.powf(d));
        let _ = writeln!(
            s,
            r#"<line x1="{gx:.1}" y1="{top}" x2="{gx:.1}" y2="{:.1}" stroke="lightgray"/><text x="{gx:.1}" y="{:.1}" text-anchor="middle">{}</text>"#,
            height - 30.0,
            height - 16.0,
            num(10f64.powf(d))
        );
        d += 1.0;
    }
    for (i, t) in r.tests.iter().enumerate() {
        let y0 = top + row_h * i as f64;
        let _ = writeln!(
            s,
            r#"<text x="{}" y="{:.1}" text-anchor="end">{}</text>"#,
            left - 6.0,
            y0 + row_h / 2.0 + 3.0,
            esc(&t.title)
        );
        for (gi, res) in t.results.iter().enumerate() {
            let by = y0 + 5.0 + bar_h * gi as f64;
            match res {
                Ok(row) if row.m.iops > 0.0 => {
                    let w = (x(row.m.iops) - left).max(1.0);
                    let _ = writeln!(
                        s,
                        r#"<rect x="{left}" y="{by:.1}" width="{w:.1}" height="{:.1}" fill="{}"><title>{}: {} IOPS</title></rect>"#,
                        bar_h - 2.0,
                        COLORS[gi % COLORS.len()],
                        esc(&r.groups.get(gi).map_or(String::new(), |g| g.label.clone())),
                        num(row.m.iops)
                    );
                    let _ = writeln!(
                        s,
                        r#"<text x="{:.1}" y="{:.1}" font-size="9">{}</text>"#,
                        left + w + 3.0,
                        by + bar_h - 3.0,
                        num(row.m.iops)
                    );
                }
                _ => {
                    let _ = writeln!(
                        s,
                        r#"<text x="{}" y="{:.1}" fill="gray">no result</text>"#,
                        left + 4.0,
                        by + bar_h - 3.0
                    );
                }
            }
        }
        if with_raw {
            let by = y0 + 5.0 + bar_h * r.groups.len() as f64;
            match (r.raw_row(i), &t.raw) {
                (Some(row), _) if row.m.iops > 0.0 => {
                    let w = (x(row.m.iops) - left).max(1.0);
                    let _ = writeln!(
                        s,
                        r#"<rect x="{left}" y="{by:.1}" width="{w:.1}" height="{:.1}" fill="{RAW_COLOR}"><title>raw: {} IOPS</title></rect>"#,
                        bar_h - 2.0,
                        num(row.m.iops)
                    );
                    let _ = writeln!(
                        s,
                        r#"<text x="{:.1}" y="{:.1}" font-size="9">{}</text>"#,
                        left + w + 3.0,
                        by + bar_h - 3.0,
                        num(row.m.iops)
                    );
                }
                (_, cell) => {
                    let what = if matches!(cell, Some(RawCell::NotApplicable(_))) {
                        "raw: not applicable"
                    } else {
                        "raw: no result"
                    };
                    let _ = writeln!(
                        s,
                        r#"<text x="{}" y="{:.1}" fill="gray" font-size="9">{what}</text>"#,
                        left + 4.0,
                        by + bar_h - 3.0
                    );
                }
            }
        }
        if let Some(q) = r.ratios(i) {
            let _ = writeln!(
                s,
                r#"<text x="{}" y="{:.1}">{}×</text>"#,
                left + plot_w + 8.0,
                y0 + row_h / 2.0 + 3.0,
                ratio(q.iops)
            );
        }
    }
    if let Some(g) = r.geomean_ratios() {
        let _ = writeln!(
            s,
            r#"<text x="{}" y="{:.1}" font-weight="bold">geomean {}×</text>"#,
            left + plot_w + 8.0,
            height - 16.0,
            ratio(g.iops)
        );
    }
    s.push_str("</svg>\n");
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::tests::{row, sample_report};

    /// The rows of the markdown tables in `s` (header included, alignment rows not).
    fn table_rows(s: &str) -> usize {
        s.lines().filter(|l| l.starts_with("| ")).count()
    }

    /// A per-group table of the two-test sample report: its header, one expected row, and no other rows.
    fn assert_two_test_table(table: &str, header: &str, row: &str) {
        assert!(table.contains(header), "{table}");
        assert!(table.contains(row), "{table}");
        assert_eq!(table_rows(table), 1 + 2, "{table}");
    }

    #[test]
    fn table_has_every_test_ratios_and_geomean() {
        let r = sample_report(Ok(()));
        let t = markdown_table(&r);
        assert!(t.contains("commit abc1234"));
        assert!(t.contains("| 4k-randread-qd16 | 1000 |"), "{t}");
        assert!(t.contains("ferro/bluestore IOPS"));
        assert!(t.contains("| 2.00 |"), "{t}");
        assert!(t.contains("**geometric mean**"));
        assert!(t.contains("**1.00**"));
        let (main, lat) = t
            .split_once("OSD-side write latency")
            .expect("the OSD latency table");
        let rows = table_rows(main);
        assert_eq!(rows, 1 + 2 + 1, "header, two tests, geomean:\n{t}");
        assert!(
            lat.contains("| bluestore op_w | bluestore subop_w | bluestore commit |"),
            "{lat}"
        );
        let (lat, rd) = lat
            .split_once("OSD-side read latency")
            .expect("the OSD read latency table");
        let (rd, ctxt) = rd
            .split_once("OSD context switches per op")
            .expect("the context switch table");
        assert!(
            rd.contains("| bluestore op_r | bluestore ops in OSD | ferro op_r | ferro ops in OSD |"),
            "{rd}"
        );
        assert_eq!(table_rows(rd), 1 + 2, "{rd}");
        assert!(rd.contains(" 0.50 | 0.5 |"), "1000 IOPS × 0.5 ms: {rd}");
        assert!(lat.contains(" 2.0 | – | 1.0 |"), "{lat}");
        assert_eq!(table_rows(lat), 1 + 2, "{lat}");
        assert!(
            ctxt.contains("| bluestore voluntary | bluestore involuntary | bluestore busiest thread | bluestore client CPU µs/op | bluestore machine CPU µs/op | ferro voluntary |"),
            "{ctxt}"
        );
        assert!(
            ctxt.contains(" 2.00 | 0.50 | ferro-core-0 42 % | 33.0 | 150 |"),
            "{ctxt}"
        );
        let (ctxt, runq) = ctxt.split_once("Run-queue wait").expect("the run-queue table");
        let (runq, disk) = runq
            .split_once("The disk under the OSDs' files")
            .expect("the device table");
        // bluestore: 2000 ops, ferro: 4000; each saw 8000 writes of 0.5 ms (32 MiB) and 4000 flushes of 0.5 ms, no
        // reads, after a wait of 1.5 s for the disk to go quiet.
        assert_two_test_table(
            disk,
            "| bluestore reads/op | bluestore read ms | bluestore writes/op | bluestore write ms | bluestore write KiB/op |",
            "| 4k-randread-qd16 | 0.00 | – | 4.00 | 0.50 | 16.0 | 2.00 | 0.50 | 1.5 | 0.00 | – | 2.00 | 0.50 | 8.0 | 1.00 | 0.50 | 1.5 |",
        );
        // bluestore: 2000 ops, 3 ms waited over 1000 slices; ferro: 4000 ops; reactor 1 ms over 500 slices.
        assert_two_test_table(
            runq,
            "| bluestore wait µs/op | bluestore wait µs/slice | bluestore slices/op | ferro wait µs/op | ferro wait µs/slice | ferro slices/op | ferro reactor wait µs/slice |",
            "| 4k-randread-qd16 | 1.50 | 3.00 | 0.50 | 0.75 | 3.00 | 0.25 | 2.00 |",
        );
        assert!(t.contains("Thread scheduling after boot (`/proc`): bluestore threads SCHED_OTHER nice 0 slice 1400 µs (×1); ferro reactor threads SCHED_OTHER"), "{t}");
        assert!(
            t.contains("Idle CPUs: cpuidle driver haltpoll, governor haltpoll, guest_halt_poll_ns 0."),
            "{t}"
        );
        // Classic OSDs' settings: what was asked and what the disk says.
        let mut m = r.meta.clone();
        assert_eq!(
            bluestore_profile_line(&m),
            "Classic OSDs' profile `auto`: no block device found under the cluster; BlueStore ran with the settings Ceph picked."
        );
        m.disk_rotational = Some(true);
        assert!(bluestore_profile_line(&m).ends_with(
            "ran with its HDD settings (Ceph's default for such a disk: overwrites under 64 KiB deferred)."
        ));
        m.bluestore_profile = "ssd".into();
        assert_eq!(
            bluestore_profile_line(&m),
            "Classic OSDs' profile `ssd`: the disk under the cluster says it is rotational; BlueStore ran with its SSD settings (`bluestore debug enforce settings = ssd`)."
        );
        assert!(
            t.contains("stolen by the host over the run (`/proc/stat` steal): 12.5 %"),
            "{t}"
        );
        assert_eq!(table_rows(ctxt), 1 + 2, "{ctxt}");
    }

    /// [`sample_report`] as a 3-round run: test 0's rounds put ferro at 2×, 1× and 3× BlueStore's 1000 IOPS,
    /// test 1's at 0.5× each; round 3 of test 1 failed on ferro.
    fn three_round_report() -> Report {
        let mut r = sample_report(Ok(()));
        r.meta.rounds = 3;
        r.tests[0].rounds = vec![
            vec![Ok(row(1000.0, 50.0)); 3],
            vec![
                Ok(row(2000.0, 25.0)),
                Ok(row(1000.0, 50.0)),
                Ok(row(3000.0, 10.0)),
            ],
        ];
        r.tests[1].rounds = vec![
            vec![Ok(row(400.0, 50.0)); 3],
            vec![
                Ok(row(200.0, 25.0)),
                Ok(row(200.0, 25.0)),
                Err("fio: timeout".into()),
            ],
        ];
        for t in &mut r.tests {
            t.results = t.rounds.iter().map(|g| crate::rounds::combine(g)).collect();
        }
        r
    }

    #[test]
    fn rounds_show_medians_and_every_round() {
        let r = three_round_report();
        assert_eq!(r.rounds_kept(), 3);
        // The median row: 2000 IOPS at 25 µs/op.
        assert!((r.ratios(0).unwrap().iops - 2.0).abs() < 1e-12);
        assert!((r.ratios(0).unwrap().osd_cpu_per_op - 0.5).abs() < 1e-12);
        let t = markdown_table(&r);
        assert!(
            t.contains("3 rounds of the matrix: every number below is the median"),
            "{t}"
        );
        let (_, rounds) = t.split_once("Each round alone").expect("the rounds table");
        let (rounds, _) = rounds.split_once("OSD-side write latency").unwrap();
        assert!(
            rounds.contains("| test | round 1 | round 2 | round 3 |"),
            "{rounds}"
        );
        // p99 ratio of a row(2000) against row(1000): 2000/1000 µs → 0.50; CPU 25/50.
        assert!(
            rounds.contains(
                "| 4k-randread-qd16 | 2.00 / 0.50 / 0.50 | 1.00 / 1.00 / 1.00 | 3.00 / 0.33 / 0.20 |"
            ),
            "{rounds}"
        );
        assert!(
            rounds.contains("| 4k-randwrite-qd1 | 0.50 / 2.00 / 0.50 | 0.50 / 2.00 / 0.50 | – |"),
            "{rounds}"
        );
        // Round 3's geomean has test 0 only.
        assert!(rounds.contains("| **geometric mean** | **1.00 / 1.00 / 0.50** | **0.71 / 1.41 / 0.71** | **3.00 / 0.33 / 0.20** |"), "{rounds}");
        assert_eq!(table_rows(rounds), 1 + 2 + 1, "{rounds}");

        let j = r.to_json();
        assert_eq!(j["meta"]["rounds"], 3);
        let f = &j["tests"][0]["results"]["ferro"];
        assert_eq!(f["iops"], 2000.0);
        assert_eq!(f["rounds"].as_array().unwrap().len(), 3);
        assert_eq!(f["rounds"][2]["iops"], 3000.0);
        // row(): 8000 device writes over 2 s of ops.
        assert_eq!(f["rounds"][2]["device_writes_per_op"], 8000.0 / 6000.0);
        assert_eq!(f["rounds"][2]["device_reads_per_op"], 0.0);
        assert_eq!(
            j["tests"][1]["results"]["ferro"]["rounds"][2]["error"],
            "fio: timeout"
        );
        assert_eq!(j["tests"][0]["round_ratios"][2]["iops"], 3.0);
        assert!(j["tests"][1]["round_ratios"][2].is_null());
        assert_eq!(j["geomean_ratio_by_round"].as_array().unwrap().len(), 3);
        assert!((j["geomean_ratio_by_round"][2]["iops"].as_f64().unwrap() - 3.0).abs() < 1e-9);

        // One round: none of it.
        let one = sample_report(Ok(()));
        let t = markdown_table(&one);
        assert!(
            !t.contains("Each round alone") && !t.contains("rounds of the matrix"),
            "{t}"
        );
        let j = one.to_json();
        assert!(j["geomean_ratio_by_round"].is_null() && j["tests"][0]["round_ratios"].is_null());
        assert!(j["tests"][0]["results"]["ferro"].get("rounds").is_none());
        assert_eq!(j["meta"]["rounds"], 1);
    }

    #[test]
    fn skipped_side_is_stated_not_invented() {
        let r = sample_report(Err("ferro-osd failed to boot: x".into()));
        let t = markdown_table(&r);
        assert!(t.contains("**ferro side skipped:** ferro-osd failed to boot: x"));
        assert!(t.contains("| – | – | – | – | – | – |"));
        assert!(!t.contains("geometric mean"));
        let svg = svg_chart(&r);
        assert!(svg.contains("ferro (skipped)"));
        assert!(svg.contains("no result"));
    }

    #[test]
    fn device_ceiling_table_and_bars() {
        let r = crate::report::tests::sample_report_with_raw();
        let t = markdown_table(&r);
        let (_, dev) = t.split_once("Device ceiling").expect("the raw table");
        let dev = dev.split("OSD-side write latency").next().unwrap();
        assert!(dev.contains("1 zero-filled file(s) of 4 GiB"), "{dev}");
        assert!(
            dev.contains("`ioengine=io_uring`") && dev.contains("first 1024 MiB"),
            "{dev}"
        );
        assert!(
            dev.contains("| test | raw IOPS | raw MB/s | raw p50 µs | raw p99 µs | raw fio CPU µs/op | bluestore/raw IOPS | bluestore/raw p99 | ferro/raw IOPS | ferro/raw p99 | attainable ferro/bluestore IOPS ≤ | attainable ferro/bluestore p99 ≥ | note |"),
            "{dev}"
        );
        // Test 0: raw 1500 IOPS, p99 3000 µs; bluestore 1000 / 4000 µs; ferro 2000 / 2000 µs.
        assert!(
            dev.contains("| 4k-randread-qd16 | 1500 | 6.14 | 750 | 3000 | 12.5 | 0.67 | 1.33 | 1.33 | 0.67 | 1.50 | 0.75 | device-bound: ferro at 133 % of raw IOPS; 2× IOPS out of reach (≤ 1.50×); 0.4× p99 out of reach (≥ 0.75×) |"),
            "{dev}"
        );
        assert!(dev.contains("| 4k-randwrite-qd1 | 4000 |"), "{dev}");
        assert!(
            dev.contains(" 10.00 | 0.10 |  |"),
            "no note when both targets are in reach: {dev}"
        );
        assert!(
            dev.contains("| omap-set-qd1 | n/a | n/a | n/a | n/a | n/a | n/a | n/a | n/a | n/a | n/a | n/a | not applicable: no raw analogue |"),
            "{dev}"
        );
        assert!(
            dev.contains("| **geometric mean** (tests with a raw row) |"),
            "{dev}"
        );
        assert!(dev.contains("**3.87** | **0.27** |"), "{dev}");
        assert_eq!(table_rows(dev), 1 + 3 + 1, "{dev}");
        // Without the raw kind there is no such table.
        assert!(!markdown_table(&sample_report(Ok(()))).contains("Device ceiling"));

        let svg = svg_chart(&r);
        assert_eq!(svg.matches("<title>raw: ").count(), 2, "{svg}");
        assert!(svg.contains("raw: not applicable") && svg.contains("raw (device ceiling)"));
        assert!(!svg.contains("NaN"));
    }

    #[test]
    fn svg_is_well_formed_enough() {
        let svg = svg_chart(&sample_report(Ok(())));
        assert!(svg.starts_with("<svg ") && svg.ends_with("</svg>\n"));
        assert_eq!(svg.matches("<title>").count(), 4, "one bar per test and group");
        assert!(svg.contains("2.00×") && svg.contains("0.50×") && svg.contains("geomean 1.00×"));
        assert!(!svg.contains("NaN"));
    }
}
