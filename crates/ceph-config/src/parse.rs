// SPDX-License-Identifier: LGPL-3.0-or-later
//! The INI dialect of `ceph.conf` and keyrings (`src/common/ConfUtils.cc`).

use std::collections::BTreeMap;

use crate::ConfigError;

/// A parsed file: section → (normalised key → value). Later assignments replace earlier ones.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ConfFile {
    sections: BTreeMap<String, BTreeMap<String, String>>,
}

/// Key names as stored: trimmed, each run of whitespace replaced by one `_` (ConfFile::normalize_key_name).
pub fn normalize_key(key: &str) -> String {
    let mut out = String::with_capacity(key.len());
    let mut prev_space = false;
    for c in key.trim().chars() {
        if c.is_whitespace() {
            if !prev_space {
                out.push('_');
            }
            prev_space = true;
        } else {
            prev_space = false;
            out.push(c);
        }
    }
    out
}

impl ConfFile {
    /// Parse `text`; `source_name` only labels errors.
    pub fn parse(text: &str, source_name: &str) -> Result<Self, ConfigError> {
        let err = |line: usize, detail: &str| ConfigError::Parse {
            source_name: source_name.to_string(),
            line,
            detail: detail.to_string(),
        };
        let mut f = ConfFile::default();
        let mut section = "global".to_string();
        // Join continuation lines (a trailing backslash), remembering the first line number of each.
        let mut logical: Vec<(usize, String)> = Vec::new();
        let mut pending: Option<(usize, String)> = None;
        for (i, raw) in text.lines().enumerate() {
            let raw = raw.strip_suffix('\r').unwrap_or(raw);
            let (start, mut acc) = pending.take().unwrap_or((i + 1, String::new()));
            match raw.strip_suffix('\\').filter(|s| !s.ends_with('\\')) {
                Some(head) => {
                    acc.push_str(head);
                    pending = Some((start, acc));
                }
                None => {
                    acc.push_str(raw);
                    logical.push((start, acc));
                }
            }
        }
        if let Some(p) = pending {
            logical.push(p);
        }
        for (line_no, line) in logical {
            let trimmed = line.trim();
            if trimmed.is_empty() || trimmed.starts_with('#') || trimmed.starts_with(';') {
                continue;
            }
            if let Some(body) = trimmed.strip_prefix('[') {
                let end = body.find(']').ok_or_else(|| err(line_no, "missing ']'"))?;
                let after = body[end + 1..].trim();
                if !(after.is_empty() || after.starts_with('#') || after.starts_with(';')) {
                    return Err(err(line_no, "text after section header"));
                }
                let name = body[..end].trim();
                if name.is_empty() {
                    return Err(err(line_no, "empty section name"));
                }
                section = name.to_string();
                f.sections.entry(section.clone()).or_default();
                continue;
            }
            let eq = trimmed
                .find('=')
                .ok_or_else(|| err(line_no, "expected 'key = value'"))?;
            let key = normalize_key(&trimmed[..eq]);
            if key.is_empty() {
                return Err(err(line_no, "empty key"));
            }
            let value = parse_value(&trimmed[eq + 1..]).map_err(|d| err(line_no, &d))?;
            f.sections.entry(section.clone()).or_default().insert(key, value);
        }
        Ok(f)
    }

    /// The value of `key` (any spelling with spaces/underscores) in `section`.
    pub fn get(&self, section: &str, key: &str) -> Option<&str> {
        self.sections
            .get(section)?
            .get(&normalize_key(key))
            .map(String::as_str)
    }

    pub fn section(&self, name: &str) -> Option<&BTreeMap<String, String>> {
        self.sections.get(name)
    }

    pub fn section_names(&self) -> impl Iterator<Item = &str> {
        self.sections.keys().map(String::as_str)
    }
}

/// A value: quoted (`"..."` with `\"`, no `#`/`;` inside, only a comment after) or unquoted (up to a comment,
/// trimmed, `\x` is a literal x).
fn parse_value(v: &str) -> Result<String, String> {
    let v = v.trim_start();
    if let Some(body) = v.strip_prefix('"') {
        let mut out = String::new();
        let mut chars = body.char_indices();
        while let Some((i, c)) = chars.next() {
            match c {
                '\\' => match chars.next() {
                    Some((_, n)) => out.push(n),
                    None => return Err("unterminated quote".into()),
                },
                '"' => {
                    let after = body[i + 1..].trim();
                    if after.is_empty() || after.starts_with('#') || after.starts_with(';') {
                        return Ok(out);
                    }
                    return Err("text after closing quote".into());
                }
                '#' | ';' => return Err("comment character inside quotes".into()),
                c => out.push(c),
            }
        }
        return Err("unterminated quote".into());
    }
    let mut out = String::new();
    let mut chars = v.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                if let Some(n) = chars.next() {
                    out.push(n);
                }
            }
            '#' | ';' => break,
            c => out.push(c),
        }
    }
    Ok(out.trim_end().to_string())
}
