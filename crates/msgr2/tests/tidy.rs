// SPDX-License-Identifier: LGPL-3.0-or-later
//! The protocol core stays sans-IO: no sockets, clocks, threads, files or randomness outside `blocking.rs`.
#![allow(clippy::unwrap_used)] // test code: a panic is the failure report

#[test]
fn core_modules_do_no_io() {
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let banned = [
        "Instant::now",
        "SystemTime",
        "std::thread",
        "std::fs",
        "TcpStream",
        "TcpListener",
        "UdpSocket",
        "std::process",
        "rand::",
        "getrandom",
    ];
    let mut checked = 0;
    for entry in std::fs::read_dir(&src).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if name == "blocking.rs" || !name.ends_with(".rs") {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        for (i, line) in text.lines().enumerate() {
            let code = line.split("//").next().unwrap_or("");
            for b in banned {
                assert!(
                    !code.contains(b),
                    "{name}:{}: `{b}` in a sans-IO module: {line}",
                    i + 1
                );
            }
        }
        checked += 1;
    }
    assert!(checked >= 8, "checked {checked} files");
}
