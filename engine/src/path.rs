//! Request path normalization before routing: `normalize_path` (RFC 3986 dot segments, unreserved escapes, `\` as `/`), `merge_slashes` and `path_with_escaped_slashes_action`, as Envoy 1.40 applies them.
//!
//! Envoy's order (checked side by side with Envoy 1.40): escaped slashes
//! first (`%2F` and `%5C`, either case, in the path part), then the
//! normalization, then merging slashes. The query is never touched. A
//! path left unchanged costs one scan and no allocation.

/// The connection manager's path settings.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PathNormalization {
    /// `normalize_path`.
    pub normalize: bool,
    /// `merge_slashes`.
    pub merge_slashes: bool,
    /// `path_with_escaped_slashes_action`.
    pub escaped_slashes: EscapedSlashes,
}

impl PathNormalization {
    /// Whether any setting can change a path.
    pub fn is_active(&self) -> bool {
        self.normalize || self.merge_slashes || self.escaped_slashes != EscapedSlashes::Keep
    }
}

/// `path_with_escaped_slashes_action`: what a path with `%2F` or `%5C`
/// (either case) gets.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum EscapedSlashes {
    /// `KEEP_UNCHANGED` (and `IMPLEMENTATION_SPECIFIC_DEFAULT`, Envoy's).
    #[default]
    Keep,
    /// `REJECT_REQUEST`: 400.
    Reject,
    /// `UNESCAPE_AND_REDIRECT`: 307 to the normalized path.
    Redirect,
    /// `UNESCAPE_AND_FORWARD`.
    Forward,
}

/// What becomes of a request's path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Normalized {
    Unchanged,
    /// Routed and forwarded with this path (query included).
    Rewritten(String),
    /// Answered 307 with this relative `location` (query included).
    Redirect(String),
    /// Answered 400.
    Reject,
}

/// Applies `cfg` to `path` (`:path`, query included).
pub fn normalize(cfg: &PathNormalization, path: &str) -> Normalized {
    let (bare, query) = path.split_at(path.find('?').unwrap_or(path.len()));
    let mut out = std::borrow::Cow::Borrowed(bare);
    let mut redirect = false;
    if cfg.escaped_slashes != EscapedSlashes::Keep && has_escaped_slash(bare) {
        match cfg.escaped_slashes {
            EscapedSlashes::Reject => return Normalized::Reject,
            EscapedSlashes::Redirect => redirect = true,
            _ => {}
        }
        out = unescape_slashes(bare).into();
    }
    if cfg.normalize && needs_canonical(&out) {
        let c = canonical(&out);
        // An escape kept as written (`%20`) is no change.
        if c != *out {
            out = c.into();
        }
    }
    if cfg.merge_slashes && out.contains("//") {
        out = merge_slashes(&out).into();
    }
    match out {
        std::borrow::Cow::Borrowed(_) => Normalized::Unchanged,
        std::borrow::Cow::Owned(mut p) => {
            p.push_str(query);
            match redirect {
                true => Normalized::Redirect(p),
                false => Normalized::Rewritten(p),
            }
        }
    }
}

/// `%2F`, `%2f`, `%5C` or `%5c`.
fn escaped_slash_at(b: &[u8], i: usize) -> bool {
    b[i] == b'%'
        && matches!(
            (b.get(i + 1), b.get(i + 2)),
            (Some(b'2'), Some(b'F' | b'f')) | (Some(b'5'), Some(b'C' | b'c'))
        )
}

fn has_escaped_slash(path: &str) -> bool {
    let b = path.as_bytes();
    (0..b.len()).any(|i| escaped_slash_at(b, i))
}

fn unescape_slashes(path: &str) -> String {
    let b = path.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if escaped_slash_at(b, i) {
            out.push(if b[i + 1] == b'2' { b'/' } else { b'\\' });
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    // Only ASCII replaced ASCII: still UTF-8.
    String::from_utf8(out).unwrap_or_default()
}

/// Whether [`canonical`] could change the path: a `\`, an escape, or a
/// `.` segment.
fn needs_canonical(path: &str) -> bool {
    path.contains(['\\', '%']) || path.split('/').any(|s| s == "." || s == "..")
}

/// RFC 3986 unreserved characters, which an escape may stand for
/// needlessly.
fn unreserved(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~')
}

fn hex(b: u8) -> Option<u8> {
    (b as char).to_digit(16).map(|d| d as u8)
}

/// The path part canonicalized as Envoy's `normalize_path` does: escapes
/// of unreserved characters decoded (other escapes kept as written), `\`
/// read as `/`, and `.` and `..` segments resolved (never above the root).
fn canonical(path: &str) -> String {
    let b = path.as_bytes();
    let mut decoded = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if c == b'%' {
            if let (Some(h), Some(l)) = (
                b.get(i + 1).and_then(|&x| hex(x)),
                b.get(i + 2).and_then(|&x| hex(x)),
            ) {
                let v = h * 16 + l;
                if unreserved(v) {
                    decoded.push(v);
                    i += 3;
                    continue;
                }
            }
        }
        decoded.push(if c == b'\\' { b'/' } else { c });
        i += 1;
    }
    let decoded = String::from_utf8(decoded).unwrap_or_default();
    remove_dot_segments(&decoded)
}

/// RFC 3986 §5.2.4 on an absolute path.
fn remove_dot_segments(path: &str) -> String {
    let mut segments: Vec<&str> = Vec::new();
    let mut parts = path.split('/').skip(1).peekable();
    let mut trailing_slash = false;
    while let Some(seg) = parts.next() {
        let last = parts.peek().is_none();
        match seg {
            "." => trailing_slash = last,
            ".." => {
                segments.pop();
                trailing_slash = last;
            }
            s => {
                segments.push(s);
                trailing_slash = false;
            }
        }
    }
    let mut out = String::with_capacity(path.len());
    for s in &segments {
        out.push('/');
        out.push_str(s);
    }
    if trailing_slash || out.is_empty() {
        out.push('/');
    }
    out
}

fn merge_slashes(path: &str) -> String {
    let mut out = String::with_capacity(path.len());
    for c in path.chars() {
        if !(c == '/' && out.ends_with('/')) {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(escaped: EscapedSlashes) -> PathNormalization {
        PathNormalization {
            normalize: true,
            merge_slashes: true,
            escaped_slashes: escaped,
        }
    }

    fn path_after(c: &PathNormalization, p: &str) -> String {
        match normalize(c, p) {
            Normalized::Unchanged => p.to_owned(),
            Normalized::Rewritten(n) => n,
            Normalized::Redirect(n) => format!("307 {n}"),
            Normalized::Reject => "400".into(),
        }
    }

    /// Envoy 1.40 with `normalize_path` and `merge_slashes` on, for each
    /// `path_with_escaped_slashes_action` (recorded 2026-11-27): the path
    /// the backend saw, or the answer.
    #[test]
    fn paths_normalize_as_envoy() {
        use EscapedSlashes::*;
        for (path, keep, redirect, forward, reject) in [
            ("/a/../b", "/b", "/b", "/b", "/b"),
            ("/a/./b", "/a/b", "/a/b", "/a/b", "/a/b"),
            ("//a///b", "/a/b", "/a/b", "/a/b", "/a/b"),
            ("/a%2Fb", "/a%2Fb", "307 /a/b", "/a/b", "400"),
            ("/a%2fb", "/a%2fb", "307 /a/b", "/a/b", "400"),
            ("/a/%2e%2e/b", "/b", "/b", "/b", "/b"),
            (
                "/a/b?x=/../y",
                "/a/b?x=/../y",
                "/a/b?x=/../y",
                "/a/b?x=/../y",
                "/a/b?x=/../y",
            ),
            ("/..", "/", "/", "/", "/"),
            ("/a\\b", "/a/b", "/a/b", "/a/b", "/a/b"),
            ("/%7Ea", "/~a", "/~a", "/~a", "/~a"),
            ("/a/b%2F..%2Fc", "/a/b%2F..%2Fc", "307 /a/c", "/a/c", "400"),
            (
                "/a%2Fb?q=1",
                "/a%2Fb?q=1",
                "307 /a/b?q=1",
                "/a/b?q=1",
                "400",
            ),
        ] {
            assert_eq!(path_after(&cfg(Keep), path), keep, "{path} keep");
            assert_eq!(
                path_after(&cfg(Redirect), path),
                redirect,
                "{path} redirect"
            );
            assert_eq!(path_after(&cfg(Forward), path), forward, "{path} forward");
            assert_eq!(path_after(&cfg(Reject), path), reject, "{path} reject");
        }
    }

    #[test]
    fn each_setting_alone() {
        let only = |normalize, merge_slashes, escaped_slashes| PathNormalization {
            normalize,
            merge_slashes,
            escaped_slashes,
        };
        // Unescaping alone resolves no dot segments (Envoy 1.40).
        let forward = only(false, false, EscapedSlashes::Forward);
        assert_eq!(path_after(&forward, "/a/b%2F..%2Fc"), "/a/b/../c");
        let merge = only(false, true, EscapedSlashes::Keep);
        assert_eq!(path_after(&merge, "//a//b/../c"), "/a/b/../c");
        let norm = only(true, false, EscapedSlashes::Keep);
        assert_eq!(path_after(&norm, "//a/./b"), "//a/b");
        assert_eq!(path_after(&norm, "/a/b/."), "/a/b/");
        assert_eq!(path_after(&norm, "/a/b/.."), "/a/");
        assert_eq!(path_after(&norm, "/a/%41%2a"), "/a/A%2a");
        assert_eq!(path_after(&norm, "/a/%zz%4"), "/a/%zz%4");
        assert!(!PathNormalization::default().is_active());
        assert_eq!(normalize(&norm, "/plain/path?x=1"), Normalized::Unchanged);
        assert_eq!(normalize(&norm, "/a%20b"), Normalized::Unchanged);
    }
}
