// SPDX-License-Identifier: LGPL-3.0-or-later
//! OSD capabilities (`osd '...'` in a cephx key's caps): the grammar and the check of Ceph's OSDCap.
//!
//! ```text
//! osdcap  := grant ((';' | ',') grant)*
//! grant   := 'allow' capspec match | 'allow' match capspec | 'profile' name ['pool' ['='] P ['namespace' ['='] N]]
//! match   := ['pool' ['='] P] ['namespace' ['='] N['*']] ['object_prefix' X] | 'tag' app key '=' value
//! capspec := '*' | 'all' | [r][w][x] ['class-read'] ['class-write'] | 'class' NAME [METHOD]
//! ```
//! An op is allowed if one grant whose match covers (pool, namespace, object) allows what the op needs (read,
//! write) and, for class calls, each called method is allowed by some matching grant.

/// Bits of a grant (`OSD_CAP_*`).
pub const CAP_R: u8 = 1 << 1;
pub const CAP_W: u8 = 1 << 2;
pub const CAP_CLS_R: u8 = 1 << 3;
pub const CAP_CLS_W: u8 = 1 << 4;
pub const CAP_X: u8 = CAP_CLS_R | CAP_CLS_W;
pub const CAP_ANY: u8 = 0xff;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("bad osd cap at byte {at}: {what} (in {text:?})")]
pub struct CapParseError {
    pub at: usize,
    pub what: &'static str,
    pub text: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CapMatch {
    pub pool: Option<String>,
    pub namespace: Option<String>,
    pub namespace_wildcard: bool,
    pub object_prefix: Option<String>,
    /// `tag app key=value`.
    pub tag: Option<(String, String, String)>,
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CapSpec {
    pub allow: u8,
    pub class_name: Option<String>,
    pub method_name: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CapGrant {
    pub m: CapMatch,
    pub spec: CapSpec,
}

/// A class method an op calls, with what the method does (from the class's registration).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClassCall {
    pub class: String,
    pub method: String,
    pub read: bool,
    pub write: bool,
    /// In `osd_class_default_list` (default `*`: every class).
    pub allowed: bool,
}

/// What an op needs (Ceph's OpInfo: `need_read_cap`, `need_write_cap`, classes).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CapNeed {
    pub read: bool,
    pub write: bool,
    pub classes: Vec<ClassCall>,
}

/// Parsed OSD caps: a list of grants (profiles already expanded).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct OsdCap {
    pub grants: Vec<CapGrant>,
}

impl OsdCap {
    /// Everything allowed (`allow *`), e.g. for OSD-internal use and tests.
    pub fn allow_all() -> Self {
        OsdCap {
            grants: vec![CapGrant {
                m: CapMatch::default(),
                spec: CapSpec {
                    allow: CAP_ANY,
                    ..Default::default()
                },
            }],
        }
    }

    /// Parse Ceph's OSD cap text. The empty string is valid and allows nothing.
    pub fn parse(text: &str) -> Result<Self, CapParseError> {
        let mut p = Parser { s: text, i: 0 };
        let mut grants = Vec::new();
        p.blanks();
        if p.at_end() {
            return Ok(OsdCap { grants });
        }
        loop {
            p.blanks();
            p.grant(&mut grants)?;
            p.blanks();
            if p.at_end() {
                break;
            }
            if !(p.eat(";") || p.eat(",")) {
                return Err(p.err("expected ';' or ','"));
            }
        }
        Ok(OsdCap { grants })
    }

    /// Ceph's `OSDCap::is_capable` for an object `object` (its name, or its locator key when it has one) in
    /// namespace `ns` of pool `pool_name`.
    pub fn is_capable(
        &self,
        pool_name: &str,
        ns: &[u8],
        apps: &[String],
        object: &[u8],
        need: &CapNeed,
    ) -> bool {
        let mut class_allowed = vec![false; need.classes.len()];
        self.grants
            .iter()
            .any(|g| g.is_capable(pool_name, ns, apps, object, need, &mut class_allowed))
    }
}

impl CapMatch {
    fn is_match(&self, pool_name: &str, ns: &[u8], apps: &[String], object: &[u8]) -> bool {
        if let Some(p) = &self.pool
            && p != pool_name
        {
            return false;
        }
        if let Some(n) = &self.namespace {
            let ok = if self.namespace_wildcard {
                ns.starts_with(n.as_bytes())
            } else {
                ns == n.as_bytes()
            };
            if !ok {
                return false;
            }
        }
        if let Some((app, _, _)) = &self.tag
            && !apps.iter().any(|a| a == app)
        {
            return false;
        }
        if let Some(pre) = &self.object_prefix
            && !object.starts_with(pre.as_bytes())
        {
            return false;
        }
        true
    }
}

impl CapGrant {
    fn is_capable(
        &self,
        pool_name: &str,
        ns: &[u8],
        apps: &[String],
        object: &[u8],
        need: &CapNeed,
        class_allowed: &mut [bool],
    ) -> bool {
        if !self.m.is_match(pool_name, ns, apps, object) {
            return false;
        }
        let allow = self.spec.allow;
        if (need.read && allow & CAP_R == 0) || (need.write && allow & CAP_W == 0) {
            return false;
        }
        if need.classes.is_empty() {
            return true;
        }
        if allow == CAP_ANY {
            return true;
        }
        for (i, c) in need.classes.iter().enumerate() {
            if let Some(cn) = &self.spec.class_name
                && *cn == c.class
                && self.spec.method_name.as_ref().is_none_or(|m| *m == c.method)
            {
                class_allowed[i] = true;
                continue;
            }
            if !c.allowed {
                continue;
            }
            if (c.read && allow & CAP_CLS_R == 0) || (c.write && allow & CAP_CLS_W == 0) {
                continue;
            }
            class_allowed[i] = true;
        }
        class_allowed.iter().all(|&a| a)
    }
}

struct Parser<'a> {
    s: &'a str,
    i: usize,
}

impl<'a> Parser<'a> {
    fn err(&self, what: &'static str) -> CapParseError {
        CapParseError {
            at: self.i,
            what,
            text: self.s.to_string(),
        }
    }
    fn rest(&self) -> &'a str {
        let s: &'a str = self.s;
        s.get(self.i..).unwrap_or("")
    }
    fn at_end(&self) -> bool {
        self.i >= self.s.len()
    }
    fn blanks(&mut self) -> bool {
        let n = self.rest().len() - self.rest().trim_start().len();
        self.i += n;
        n > 0
    }
    fn eat(&mut self, t: &str) -> bool {
        if self.rest().starts_with(t) {
            self.i += t.len();
            true
        } else {
            false
        }
    }
    /// A keyword followed by a non-word character (or the end).
    fn keyword(&mut self, kw: &str) -> bool {
        let r = self.rest();
        if r.starts_with(kw)
            && r[kw.len()..]
                .chars()
                .next()
                .is_none_or(|c| !(c.is_ascii_alphanumeric() || c == '_' || c == '-'))
        {
            self.i += kw.len();
            true
        } else {
            false
        }
    }
    /// Lookahead: after blanks, does `kw` follow?
    fn peek_keyword(&self, kw: &str) -> bool {
        let mut q = Parser { s: self.s, i: self.i };
        q.blanks();
        q.keyword(kw)
    }
    /// A quoted or bare string (`[A-Za-z0-9_.\-/*:@]+`).
    fn string(&mut self) -> Result<String, CapParseError> {
        let r = self.rest();
        for q in ['"', '\''] {
            if let Some(body) = r.strip_prefix(q) {
                let end = body.find(q).ok_or_else(|| self.err("unterminated quote"))?;
                let v = body[..end].to_string();
                self.i += end + 2;
                return Ok(v);
            }
        }
        let n = r
            .char_indices()
            .find(|(_, c)| {
                !(c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-' | '/' | '*' | ':' | '@'))
            })
            .map_or(r.len(), |(i, _)| i);
        if n == 0 {
            return Err(self.err("expected a name"));
        }
        self.i += n;
        Ok(r[..n].to_string())
    }
    /// `'=' | spaces` between a keyword and its value.
    fn eq_or_space(&mut self) -> Result<(), CapParseError> {
        let sp = self.blanks();
        if self.eat("=") {
            self.blanks();
            Ok(())
        } else if sp {
            Ok(())
        } else {
            Err(self.err("expected '=' or a space"))
        }
    }

    fn grant(&mut self, out: &mut Vec<CapGrant>) -> Result<(), CapParseError> {
        if self.keyword("profile") {
            self.eq_or_space()?;
            let name = self.string()?;
            let mut pool = None;
            let mut ns = None;
            if self.peek_keyword("pool") {
                self.blanks();
                self.keyword("pool");
                self.eq_or_space()?;
                pool = Some(self.string()?);
            }
            if self.peek_keyword("namespace") {
                self.blanks();
                self.keyword("namespace");
                self.eq_or_space()?;
                ns = Some(self.string()?);
            }
            self.skip_network()?;
            expand_profile(&name, pool, ns, out);
            return Ok(());
        }
        if !self.keyword("allow") {
            return Err(self.err("expected 'allow' or 'profile'"));
        }
        // capspec and match in either order
        let mut m = CapMatch::default();
        let mut spec: Option<CapSpec> = None;
        let mut any_match = false;
        loop {
            let save = self.i;
            self.blanks();
            if self.at_end() || self.rest().starts_with([';', ',']) {
                self.i = save;
                break;
            }
            if self.keyword("pool") {
                self.eq_or_space()?;
                m.pool = Some(self.string()?);
                any_match = true;
            } else if self.keyword("namespace") {
                self.eq_or_space()?;
                let r = self.rest();
                if r.starts_with('*') {
                    // `namespace=*`: any namespace
                    self.i += 1;
                    m.namespace = Some(String::new());
                    m.namespace_wildcard = true;
                } else if r.starts_with([' ', ';', ',']) || r.is_empty() {
                    m.namespace = Some(String::new());
                } else {
                    let mut n = self.string()?;
                    if let Some(stripped) = n.strip_suffix('*') {
                        n = stripped.to_string();
                        m.namespace_wildcard = true;
                    }
                    m.namespace = Some(n);
                }
                any_match = true;
            } else if self.keyword("object_prefix") {
                self.blanks();
                m.object_prefix = Some(self.string()?);
                any_match = true;
            } else if self.keyword("tag") {
                self.blanks();
                let app = self.string()?;
                self.blanks();
                let k = self.string()?;
                let (k, v) = if let Some((k, v)) = k.split_once('=') {
                    (k.to_string(), v.to_string())
                } else {
                    self.eq_or_space()?;
                    (k, self.string()?)
                };
                m.tag = Some((app, k, v));
                any_match = true;
            } else if self.keyword("network") {
                self.blanks();
                self.string()?;
            } else if spec.is_none() {
                spec = Some(self.capspec()?);
            } else {
                return Err(self.err("unexpected token"));
            }
        }
        let _ = any_match;
        let spec = spec.ok_or_else(|| self.err("missing capability (r, w, x, *, class ...)"))?;
        out.push(CapGrant { m, spec });
        Ok(())
    }

    fn skip_network(&mut self) -> Result<(), CapParseError> {
        if self.peek_keyword("network") {
            self.blanks();
            self.keyword("network");
            self.blanks();
            self.string()?;
        }
        Ok(())
    }

    fn capspec(&mut self) -> Result<CapSpec, CapParseError> {
        if self.eat("*") || self.keyword("all") {
            return Ok(CapSpec {
                allow: CAP_ANY,
                ..Default::default()
            });
        }
        if self.keyword("class") {
            self.blanks();
            let c = self.string()?;
            let mut method = None;
            let save = self.i;
            self.blanks();
            let r = self.rest();
            let next_is_kw = ["pool", "namespace", "object_prefix", "tag", "network"]
                .iter()
                .any(|k| self.peek_keyword(k));
            if !r.is_empty() && !r.starts_with([';', ',']) && !next_is_kw {
                method = Some(self.string()?);
            } else {
                self.i = save;
            }
            return Ok(CapSpec {
                allow: 0,
                class_name: Some(c),
                method_name: method,
            });
        }
        let mut allow = 0u8;
        let mut any = false;
        // [r][w][x] as one word
        let r = self.rest();
        let word_len = r
            .char_indices()
            .find(|(_, c)| !c.is_ascii_alphanumeric() && *c != '-')
            .map_or(r.len(), |(i, _)| i);
        let word = &r[..word_len];
        if !word.is_empty() && word.chars().all(|c| matches!(c, 'r' | 'w' | 'x')) {
            for c in word.chars() {
                allow |= match c {
                    'r' => CAP_R,
                    'w' => CAP_W,
                    _ => CAP_X,
                };
            }
            self.i += word_len;
            any = true;
        }
        loop {
            let save = self.i;
            self.blanks();
            if self.keyword("class-read") {
                allow |= CAP_CLS_R;
                any = true;
            } else if self.keyword("class-write") {
                allow |= CAP_CLS_W;
                any = true;
            } else {
                self.i = save;
                break;
            }
        }
        if !any {
            return Err(self.err("expected r, w, x, *, class-read, class-write or class"));
        }
        Ok(CapSpec {
            allow,
            ..Default::default()
        })
    }
}

fn expand_profile(name: &str, pool: Option<String>, ns: Option<String>, out: &mut Vec<CapGrant>) {
    let pool_ns = CapMatch {
        pool: pool.clone(),
        namespace: ns,
        ..Default::default()
    };
    let spec = |allow| CapSpec {
        allow,
        ..Default::default()
    };
    let on_object = |o: &str| CapMatch {
        object_prefix: Some(o.to_string()),
        ..Default::default()
    };
    let rbd_metadata_list = CapGrant {
        m: CapMatch {
            pool: pool.clone(),
            ..Default::default()
        },
        spec: CapSpec {
            allow: 0,
            class_name: Some("rbd".into()),
            method_name: Some("metadata_list".into()),
        },
    };
    match name {
        "osd" | "mgr" => out.push(CapGrant {
            m: CapMatch::default(),
            spec: spec(CAP_ANY),
        }),
        "read-only" => out.push(CapGrant {
            m: pool_ns,
            spec: spec(CAP_R),
        }),
        "read-write" => out.push(CapGrant {
            m: pool_ns,
            spec: spec(CAP_R | CAP_W),
        }),
        "rbd" => {
            out.push(CapGrant {
                m: on_object("rbd_info"),
                spec: spec(CAP_R),
            });
            out.push(CapGrant {
                m: on_object("rbd_children"),
                spec: spec(CAP_CLS_R),
            });
            out.push(CapGrant {
                m: on_object("rbd_mirroring"),
                spec: spec(CAP_CLS_R),
            });
            out.push(rbd_metadata_list);
            out.push(CapGrant {
                m: pool_ns,
                spec: spec(CAP_R | CAP_W | CAP_X),
            });
        }
        "rbd-read-only" => {
            out.push(rbd_metadata_list);
            out.push(CapGrant {
                m: pool_ns,
                spec: spec(CAP_R | CAP_CLS_R),
            });
        }
        // Unknown profiles grant nothing, as in Ceph.
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn need(read: bool, write: bool) -> CapNeed {
        CapNeed {
            read,
            write,
            classes: vec![],
        }
    }

    #[test]
    fn parse_and_check() {
        let c = OsdCap::parse("allow r pool=x").unwrap();
        assert!(c.is_capable("x", b"", &[], b"o", &need(true, false)));
        assert!(!c.is_capable("x", b"", &[], b"o", &need(true, true)));
        assert!(!c.is_capable("y", b"", &[], b"o", &need(true, false)));

        let c = OsdCap::parse("allow *").unwrap();
        assert!(c.is_capable("y", b"ns", &[], b"o", &need(true, true)));

        let c = OsdCap::parse("allow rw pool foo namespace=bar, allow r").unwrap();
        assert!(c.is_capable("foo", b"bar", &[], b"o", &need(true, true)));
        assert!(!c.is_capable("foo", b"baz", &[], b"o", &need(true, true)));
        assert!(c.is_capable("foo", b"baz", &[], b"o", &need(true, false)));

        let c = OsdCap::parse("allow rwx object_prefix rbd_data.; allow r").unwrap();
        assert!(c.is_capable("p", b"", &[], b"rbd_data.1", &need(false, true)));
        assert!(!c.is_capable("p", b"", &[], b"other", &need(false, true)));

        let c = OsdCap::parse("allow pool=foo rw").unwrap();
        assert!(c.is_capable("foo", b"", &[], b"o", &need(true, true)));

        let c = OsdCap::parse("allow rw namespace=a*").unwrap();
        assert!(c.is_capable("p", b"abc", &[], b"o", &need(true, true)));
        assert!(!c.is_capable("p", b"b", &[], b"o", &need(true, true)));
        assert!(OsdCap::parse("").unwrap().grants.is_empty());
        assert!(OsdCap::parse("allow").is_err());
        assert!(OsdCap::parse("deny r").is_err());
    }

    #[test]
    fn class_calls() {
        let lock = ClassCall {
            class: "lock".into(),
            method: "lock".into(),
            read: true,
            write: true,
            allowed: true,
        };
        let n = CapNeed {
            read: false,
            write: false,
            classes: vec![lock],
        };
        assert!(
            !OsdCap::parse("allow r")
                .unwrap()
                .is_capable("p", b"", &[], b"o", &n)
        );
        assert!(
            !OsdCap::parse("allow rw")
                .unwrap()
                .is_capable("p", b"", &[], b"o", &n)
        );
        assert!(
            OsdCap::parse("allow rwx")
                .unwrap()
                .is_capable("p", b"", &[], b"o", &n)
        );
        assert!(
            OsdCap::parse("allow r class-read class-write")
                .unwrap()
                .is_capable("p", b"", &[], b"o", &n)
        );
        assert!(
            OsdCap::parse("allow class lock")
                .unwrap()
                .is_capable("p", b"", &[], b"o", &n)
        );
        assert!(
            !OsdCap::parse("allow class lock unlock")
                .unwrap()
                .is_capable("p", b"", &[], b"o", &n)
        );
    }

    #[test]
    fn profiles() {
        let c = OsdCap::parse("profile rbd pool=rbd").unwrap();
        assert!(c.is_capable("rbd", b"", &[], b"x", &need(true, true)));
        assert!(!c.is_capable("other", b"", &[], b"x", &need(true, true)));
        assert!(c.is_capable("other", b"", &[], b"rbd_info", &need(true, false)));
        let c = OsdCap::parse("profile read-only").unwrap();
        assert!(c.is_capable("any", b"", &[], b"x", &need(true, false)));
        assert!(!c.is_capable("any", b"", &[], b"x", &need(false, true)));
    }

    proptest::proptest! {
        #[test]
        fn any_text_parses_or_errors(s in ".{0,60}") {
            let _ = OsdCap::parse(&s);
        }
        #[test]
        fn grammar_words_never_panic(words in proptest::collection::vec(
            proptest::sample::select(vec!["allow", "profile", "r", "rw", "rwx", "*", "pool=p", "pool", "p",
                "namespace=n*", "object_prefix", "class", "lock", "class-read", ";", ",", "=", "tag", "a", "k=v", "rbd"]), 0..8)) {
            let _ = OsdCap::parse(&words.join(" "));
        }
    }
}
