// SPDX-License-Identifier: LGPL-3.0-or-later
//! Test-only access to Ceph's object corpus: real encodings of Ceph types, produced by Ceph 16.2 to 20.3 builds.
//!
//! Layout (read in place, never copied into the repository):
//! `<corpus>/<VERSION>/objects/<TYPE>/<HASH>` is one encoded instance of `TYPE` (Ceph's spelling, e.g. `pg_t`,
//! `OSDMap::Incremental`), and `<corpus>/<VERSION>/forward_incompat/<TYPE>` marks types whose encoding in that
//! version decoders older than it must refuse.
//!
//! The corpus lives at `<workspace>/../shared/corpus`, or wherever `FERRO_CORPUS` points. When it is absent every
//! helper returns nothing and [`check_type`] prints a "skipping" line instead of failing, so tests stay green on
//! machines without it.
//!
//! Typical use, from a crate's integration test (`tests/corpus.rs`; a unit test inside the crate under test would
//! see a second copy of the `denc` traits):
//!
//! ```no_run
//! # use denc::{Decode, Encode};
//! # #[derive(Debug)] struct PgT; impl Decode for PgT { fn decode(_: &mut denc::Decoder) -> denc::Result<Self> { Ok(PgT) } }
//! # impl Encode for PgT { fn encode(&self, _: &mut denc::Encoder) {} }
//! ceph_corpus::check_type::<PgT>("pg_t", ceph_corpus::PACIFIC_FEATURES);
//! ```

use std::cmp::Ordering;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};

use bytes::Bytes;
use denc::{Decode, DecodeError, Decoder, Encode};

/// The feature mask a Ceph 16.2.15 daemon advertises (`CEPH_FEATURES_ALL` for Pacific). Re-encoding with it gives
/// the bytes a Pacific peer would produce for another Pacific peer.
pub const PACIFIC_FEATURES: u64 = 0x3f01_cfbd_fffd_ffff;

/// The Ceph release whose encodings we emit: corpus versions `16.2.*` must re-encode byte-identically.
pub const OUR_RELEASE: (u32, u32) = (16, 2);

/// The corpus root: `$FERRO_CORPUS` if set, else `<workspace>/../shared/corpus`; `None` if that is not a directory.
pub fn root() -> Option<PathBuf> {
    let dir = match std::env::var_os("FERRO_CORPUS") {
        Some(p) => PathBuf::from(p),
        // crates/ceph-corpus -> workspace root is two levels up; the corpus sits next to the workspace.
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/corpus"),
    };
    dir.is_dir().then_some(dir)
}

/// `(major, minor, patch)` of a corpus version directory name such as `19.2.0-404-g78ddc7f9027`.
pub fn parse_version(version: &str) -> Option<(u32, u32, u32)> {
    let base = version.split('-').next()?;
    let mut it = base.split('.').map(|p| p.parse::<u32>().ok());
    Some((it.next()??, it.next()??, it.next().flatten().unwrap_or(0)))
}

/// Whether a corpus version is our own release (its samples must re-encode identically).
pub fn is_our_release(version: &str) -> bool {
    parse_version(version).is_some_and(|(a, b, _)| (a, b) == OUR_RELEASE)
}

fn version_order(a: &str, b: &str) -> Ordering {
    parse_version(a).cmp(&parse_version(b)).then_with(|| a.cmp(b))
}

/// A corpus directory. The free functions use the default one ([`root`]); tests of the harness itself, or of
/// synthetic samples, can point a [`Corpus`] anywhere.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Corpus {
    pub root: PathBuf,
}

impl Corpus {
    /// The default corpus, if present.
    pub fn open() -> Option<Corpus> {
        root().map(|root| Corpus { root })
    }

    pub fn at(root: impl Into<PathBuf>) -> Corpus {
        Corpus { root: root.into() }
    }

    /// The versions present, oldest first.
    pub fn versions(&self) -> Vec<String> {
        let mut v: Vec<String> = list_dir(&self.root)
            .into_iter()
            .filter(|name| self.root.join(name).join("objects").is_dir())
            .collect();
        v.sort_by(|a, b| version_order(a, b));
        v
    }

    /// The type names with samples in `version`.
    pub fn types(&self, version: &str) -> Vec<String> {
        let mut v = list_dir(&self.root.join(version).join("objects"));
        v.sort();
        v
    }

    /// Every sample of `type_name` in `version`, sorted by file name, as shared buffers.
    pub fn samples(&self, version: &str, type_name: &str) -> Vec<(PathBuf, Bytes)> {
        let dir = self.root.join(version).join("objects").join(type_name);
        let mut names = list_dir(&dir);
        names.sort();
        names
            .into_iter()
            .filter_map(|n| {
                let p = dir.join(n);
                std::fs::read(&p).ok().map(|b| (p, Bytes::from(b)))
            })
            .collect()
    }

    /// See [`is_forward_incompat`].
    pub fn is_forward_incompat(&self, version: &str, type_name: &str) -> bool {
        let Some(sample_v) = parse_version(version) else {
            return false;
        };
        self.versions().iter().any(|v| {
            parse_version(v).is_some_and(|pv| (pv.0, pv.1) > OUR_RELEASE && pv <= sample_v)
                && self
                    .root
                    .join(v)
                    .join("forward_incompat")
                    .join(type_name)
                    .exists()
        })
    }
}

/// The corpus versions present, oldest first. Empty when the corpus is absent.
pub fn versions() -> Vec<String> {
    Corpus::open().map(|c| c.versions()).unwrap_or_default()
}

/// The type names with samples in `version`.
pub fn types(version: &str) -> Vec<String> {
    Corpus::open().map(|c| c.types(version)).unwrap_or_default()
}

/// Every sample of `type_name` in `version`, sorted by file name, as shared buffers.
pub fn samples(version: &str, type_name: &str) -> Vec<(PathBuf, Bytes)> {
    Corpus::open()
        .map(|c| c.samples(version, type_name))
        .unwrap_or_default()
}

/// Whether samples of `type_name` from `version` use an encoding a 16.2 decoder cannot read even though Ceph did
/// not raise the compat version: listed in the `forward_incompat/` of any corpus version newer than our release and
/// not newer than `version` (an incompatible change stays incompatible in later versions).
pub fn is_forward_incompat(version: &str, type_name: &str) -> bool {
    Corpus::open().is_some_and(|c| c.is_forward_incompat(version, type_name))
}

fn list_dir(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .filter_map(|e| e.file_name().into_string().ok())
                .filter(|n| !n.starts_with('.'))
                .collect()
        })
        .unwrap_or_default()
}

/// Types ceph-dencoder registers as "stray data okay" (`TYPE_*_STRAYDATA`): their corpus samples may carry bytes
/// after the encoded value. [`Check::new`] allows trailing data for them.
pub const CEPH_STRAYDATA_TYPES: &[&str] = &["OSDMap", "OSDMap::Incremental", "SnapServer"];

/// Types ceph-dencoder registers as non-deterministic (`TYPE_*_NONDETERMINISTIC`): re-encoding need not reproduce
/// the sample's bytes (hash-ordered containers). [`Check::new`] checks them with [`Reencode::Stable`].
pub const CEPH_NONDETERMINISTIC_TYPES: &[&str] = &[
    "ExplicitHashHitSet",
    "ExplicitObjectHitSet",
    "HitSet",
    "PGMapDigest",
    "PGMap",
];

/// Per-version counts from one [`Check`] run.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct VersionSummary {
    pub version: String,
    pub samples: usize,
    /// Decoded without error (and consumed the sample, unless trailing data is allowed).
    pub decoded: usize,
    /// Re-encoded to exactly the sample's bytes (counted for every version, required for our release).
    pub identical: usize,
    /// Refused cleanly: `Incompatible` (compat newer than we support) or, for forward-incompatible types, any error.
    pub refused: usize,
}

/// The result of checking one type against the whole corpus.
#[derive(Debug, Clone, Default)]
pub struct Summary {
    pub type_name: String,
    pub versions: Vec<VersionSummary>,
    /// True when the corpus was absent and nothing was checked.
    pub skipped: bool,
}

impl Summary {
    pub fn total(&self) -> VersionSummary {
        let mut t = VersionSummary {
            version: "all".into(),
            ..Default::default()
        };
        for v in &self.versions {
            t.samples += v.samples;
            t.decoded += v.decoded;
            t.identical += v.identical;
            t.refused += v.refused;
        }
        t
    }
}

/// How a check treats bytes left after the decoded value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Trailing {
    /// The value must consume the sample exactly (the default, and what ceph-dencoder requires for most types).
    Forbid,
    /// Ceph's dencoder registers some types as "stray data okay"; their samples may carry extra bytes.
    Allow,
}

/// What re-encoding a decoded 16.2 sample must give.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reencode {
    /// Exactly the sample's bytes (the default).
    Identical,
    /// Something that decodes and re-encodes to itself (for types whose byte image is not canonical, e.g. one built
    /// from an unordered map). Ceph's own corpus test compares only JSON dumps, so this is its level of checking.
    Stable,
}

/// A configurable corpus check for one type. [`check_type`] is the common case.
pub struct Check<'a> {
    corpus: Option<Corpus>,
    type_name: &'a str,
    features: u64,
    trailing: Trailing,
    reencode: Reencode,
}

/// Check every corpus sample of `type_name` with the defaults of [`Check::new`]: exact consumption (unless Ceph allows
/// stray data), byte-identical re-encoding of 16.2 samples with `features_for_reencode` (unless Ceph marks the type
/// non-deterministic), decoding or clean refusal of newer samples. Panics (it is a
/// test helper) with every failure listed; prints a per-version summary; skips when the corpus is absent.
pub fn check_type<T: Decode + Encode>(type_name: &str, features_for_reencode: u64) -> Summary {
    Check::new(type_name).features(features_for_reencode).run::<T>()
}

enum Outcome {
    Decoded { identical: bool },
    Refused,
}

impl<'a> Check<'a> {
    /// Defaults: Pacific features; trailing data only for [`CEPH_STRAYDATA_TYPES`]; byte-identical re-encoding
    /// except for [`CEPH_NONDETERMINISTIC_TYPES`].
    pub fn new(type_name: &'a str) -> Self {
        Check {
            corpus: Corpus::open(),
            type_name,
            features: PACIFIC_FEATURES,
            trailing: if CEPH_STRAYDATA_TYPES.contains(&type_name) {
                Trailing::Allow
            } else {
                Trailing::Forbid
            },
            reencode: if CEPH_NONDETERMINISTIC_TYPES.contains(&type_name) {
                Reencode::Stable
            } else {
                Reencode::Identical
            },
        }
    }

    /// The feature bits to re-encode with (the peer's features in Ceph's `encode(x, bl, features)`).
    pub fn features(mut self, features: u64) -> Self {
        self.features = features;
        self
    }

    /// Check against another corpus directory (same layout) instead of the default one.
    pub fn corpus(mut self, corpus: Corpus) -> Self {
        self.corpus = Some(corpus);
        self
    }

    pub fn trailing(mut self, t: Trailing) -> Self {
        self.trailing = t;
        self
    }

    pub fn reencode(mut self, r: Reencode) -> Self {
        self.reencode = r;
        self
    }

    /// Run the check; panics listing every failing sample.
    pub fn run<T: Decode + Encode>(&self) -> Summary {
        let mut summary = Summary {
            type_name: self.type_name.to_string(),
            ..Default::default()
        };
        let Some(corpus) = &self.corpus else {
            eprintln!(
                "skipping corpus check of {}: ../shared/corpus not found (set FERRO_CORPUS to override)",
                self.type_name
            );
            summary.skipped = true;
            return summary;
        };
        let mut failures = Vec::new();
        // A line of its own, so the table is readable after the test harness's "test x ... ".
        eprintln!();
        for version in corpus.versions() {
            let ours = is_our_release(&version);
            let incompat_listed = corpus.is_forward_incompat(&version, self.type_name);
            let mut vs = VersionSummary {
                version: version.clone(),
                ..Default::default()
            };
            for (path, bytes) in corpus.samples(&version, self.type_name) {
                vs.samples += 1;
                match self.check_sample::<T>(&bytes, ours, incompat_listed) {
                    Ok(Outcome::Decoded { identical }) => {
                        vs.decoded += 1;
                        vs.identical += identical as usize;
                    }
                    Ok(Outcome::Refused) => vs.refused += 1,
                    Err(msg) => failures.push(format!("{}: {msg}", path.display())),
                }
            }
            eprintln!(
                "corpus {:<28} {:<24} samples {:>3}  decoded {:>3}  identical {:>3}  refused {:>3}{}",
                self.type_name,
                version,
                vs.samples,
                vs.decoded,
                vs.identical,
                vs.refused,
                if incompat_listed {
                    "  (forward_incompat)"
                } else {
                    ""
                }
            );
            summary.versions.push(vs);
        }
        assert!(
            failures.is_empty(),
            "{} corpus failures for {}:\n{}",
            failures.len(),
            self.type_name,
            failures.join("\n")
        );
        summary
    }

    fn check_sample<T: Decode + Encode>(
        &self,
        sample: &Bytes,
        ours: bool,
        incompat_listed: bool,
    ) -> Result<Outcome, String> {
        let decoded = guarded("decode", || {
            let mut d = Decoder::new(sample.clone());
            let v = T::decode(&mut d)?;
            Ok::<_, DecodeError>((v, d.remaining()))
        })?;
        let (value, left) = match decoded {
            Ok(v) => v,
            // A newer version whose compat we do not support: refusing it is the correct outcome.
            Err(DecodeError::Incompatible { .. }) if !ours => return Ok(Outcome::Refused),
            // Ceph changed this type incompatibly without raising compat; any clean error is acceptable.
            Err(_) if incompat_listed => return Ok(Outcome::Refused),
            Err(e) => return Err(format!("decode failed: {e}")),
        };
        if left != 0 && self.trailing == Trailing::Forbid {
            return Err(format!(
                "{left} trailing bytes after decoding {} of {} bytes",
                sample.len() - left,
                sample.len()
            ));
        }
        let consumed = sample.slice(..sample.len() - left);
        let first = guarded("encode", || value.to_bytes(self.features))?;
        let identical = first == consumed;
        if ours && self.reencode == Reencode::Identical && !identical {
            return Err(format!(
                "re-encoding differs\n  sample:    {}\n  reencoded: {}",
                hex(&consumed),
                hex(&first)
            ));
        }
        // Whatever we emit must itself decode, completely, and be a fixed point of decode+encode.
        let again = guarded("re-decode", || T::decode_all(first.clone()))?
            .map_err(|e| format!("our own re-encoding does not decode: {e}\n  {}", hex(&first)))?;
        let second = guarded("re-encode", || again.to_bytes(self.features))?;
        if second != first {
            return Err(format!(
                "decode/encode is not stable\n  first:  {}\n  second: {}",
                hex(&first),
                hex(&second)
            ));
        }
        Ok(Outcome::Decoded { identical })
    }
}

/// Run `f`, turning a panic into a failure message (a decoder must never panic on any input).
fn guarded<R>(what: &str, f: impl FnOnce() -> R) -> Result<R, String> {
    catch_unwind(AssertUnwindSafe(f)).map_err(|p| {
        let msg = p
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| p.downcast_ref::<String>().cloned())
            .unwrap_or_default();
        format!("{what} panicked: {msg}")
    })
}

/// Lower-case hex, for failure messages.
pub fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_parse_and_sort() {
        assert_eq!(parse_version("16.2.0-90-g50f1821b4c"), Some((16, 2, 0)));
        assert_eq!(parse_version("18.2.0"), Some((18, 2, 0)));
        assert_eq!(parse_version("objects"), None);
        assert_eq!(version_order("9.0.0", "16.2.0"), Ordering::Less);
        assert!(is_our_release("16.2.0-90-g50f1821b4c"));
        assert!(!is_our_release("18.2.0"));
    }

    #[test]
    fn corpus_is_readable_when_present() {
        let Some(_) = root() else {
            eprintln!("skipping: ../shared/corpus not found");
            return;
        };
        let vs = versions();
        assert!(vs.iter().any(|v| is_our_release(v)), "{vs:?}");
        let s = samples(&vs[0], "pg_t");
        assert!(!s.is_empty());
        assert!(s.iter().all(|(_, b)| !b.is_empty()));
        // 19.2 lists CrushWrapper; 16.2 samples are never forward-incompatible for us.
        let squid = vs.iter().find(|v| v.starts_with("19.")).cloned();
        if let Some(squid) = squid {
            assert!(is_forward_incompat(&squid, "CrushWrapper"));
            assert!(!is_forward_incompat(&vs[0], "CrushWrapper"));
        }
    }

    /// A one-byte payload in a versioned envelope that this decoder supports up to compat 1.
    #[derive(Debug)]
    struct V1(u8);
    impl Decode for V1 {
        fn decode(d: &mut Decoder) -> denc::Result<Self> {
            d.decode_struct("x_t", 1, |_, d| Ok(V1(d.u8()?)))
        }
    }
    impl Encode for V1 {
        fn encode(&self, e: &mut denc::Encoder) {
            e.versioned(1, 1, |e| e.u8(self.0))
        }
    }

    fn synthetic(tag: &str, files: &[(&str, &[u8])]) -> Corpus {
        let dir = std::env::temp_dir().join(format!("ceph-corpus-test-{}-{tag}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        for (path, bytes) in files {
            let p = dir.join(path);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(&p, bytes).unwrap();
        }
        Corpus::at(dir)
    }

    #[test]
    fn refusals_are_counted_per_version() {
        let c = synthetic(
            "refusals",
            &[
                ("16.2.0/objects/x_t/a", &[1, 1, 1, 0, 0, 0, 7]),
                // newer, compatible: an extra trailing field is skipped
                ("18.2.0/objects/x_t/b", &[2, 1, 2, 0, 0, 0, 7, 8]),
                // newer, compat 2: must be refused cleanly
                ("18.2.0/objects/x_t/c", &[2, 2, 1, 0, 0, 0, 7]),
                // listed forward-incompatible in 19.2: garbage counts as refused there
                ("19.2.0/forward_incompat/x_t", &[]),
                ("19.2.0/objects/x_t/d", &[9]),
            ],
        );
        assert!(c.is_forward_incompat("19.2.0", "x_t"));
        assert!(c.is_forward_incompat("20.1.0", "x_t"));
        assert!(!c.is_forward_incompat("18.2.0", "x_t"));
        let s = Check::new("x_t").corpus(c.clone()).run::<V1>();
        let counts: Vec<_> = s
            .versions
            .iter()
            .map(|v| (v.version.as_str(), v.samples, v.decoded, v.identical, v.refused))
            .collect();
        assert_eq!(
            counts,
            vec![
                ("16.2.0", 1, 1, 1, 0),
                ("18.2.0", 2, 1, 0, 1),
                ("19.2.0", 1, 0, 0, 1)
            ]
        );
        // The same garbage outside a forward-incompatible version is a failure.
        let bad = synthetic("bad", &[("18.2.0/objects/x_t/d", &[9])]);
        assert!(catch_unwind(|| Check::new("x_t").corpus(bad.clone()).run::<V1>()).is_err());
        // Trailing bytes after a 16.2 sample fail unless allowed.
        let trailing = synthetic("trailing", &[("16.2.0/objects/x_t/a", &[1, 1, 1, 0, 0, 0, 7, 0])]);
        assert!(catch_unwind(|| Check::new("x_t").corpus(trailing.clone()).run::<V1>()).is_err());
        let s = Check::new("x_t")
            .corpus(trailing.clone())
            .trailing(Trailing::Allow)
            .run::<V1>();
        assert_eq!(s.total().identical, 1);
        for c in [c, bad, trailing] {
            let _ = std::fs::remove_dir_all(c.root);
        }
    }

    /// A deliberately wrong decoder must make the check fail (the harness is not a rubber stamp).
    #[test]
    fn a_wrong_decoder_is_caught() {
        if root().is_none() {
            eprintln!("skipping: ../shared/corpus not found");
            return;
        }
        struct FirstByte(u8);
        impl Decode for FirstByte {
            fn decode(d: &mut Decoder) -> denc::Result<Self> {
                Ok(FirstByte(d.u8()?))
            }
        }
        impl Encode for FirstByte {
            fn encode(&self, e: &mut denc::Encoder) {
                e.u8(self.0)
            }
        }
        let r = catch_unwind(|| check_type::<FirstByte>("pg_t", PACIFIC_FEATURES));
        assert!(r.is_err(), "a decoder that reads 1 of 17 bytes must fail");
    }
}
