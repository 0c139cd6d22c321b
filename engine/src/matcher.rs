//! How a header's (or a certificate name's) value is matched: exact, prefix, suffix, contains, regex, present, range, as Envoy's header and string matchers say.

use regex::Regex;

#[derive(Debug, Clone)]
pub enum HeaderMatchKind {
    Exact(String),
    Prefix(String),
    Suffix(String),
    Contains(String),
    Regex(Regex),
    /// `present_match: true|false`.
    Present(bool),
    /// `range_match`: `start <= value < end` for an integer value.
    Range {
        start: i64,
        end: i64,
    },
}

/// Config equality: a regex is its pattern.
impl PartialEq for HeaderMatchKind {
    fn eq(&self, other: &Self) -> bool {
        use HeaderMatchKind as K;
        match (self, other) {
            (K::Exact(a), K::Exact(b))
            | (K::Prefix(a), K::Prefix(b))
            | (K::Suffix(a), K::Suffix(b))
            | (K::Contains(a), K::Contains(b)) => a == b,
            (K::Regex(a), K::Regex(b)) => a.as_str() == b.as_str(),
            (K::Present(a), K::Present(b)) => a == b,
            (K::Range { start, end }, K::Range { start: s2, end: e2 }) => start == s2 && end == e2,
            _ => false,
        }
    }
}

impl Eq for HeaderMatchKind {}

impl HeaderMatchKind {
    /// Whether a present value matches (`Present(want)`: whether `want`).
    pub fn matches(&self, v: &str) -> bool {
        match self {
            HeaderMatchKind::Present(want) => *want,
            HeaderMatchKind::Exact(e) => v == e,
            HeaderMatchKind::Prefix(p) => v.starts_with(p.as_str()),
            HeaderMatchKind::Suffix(s) => v.ends_with(s.as_str()),
            HeaderMatchKind::Contains(c) => v.contains(c.as_str()),
            HeaderMatchKind::Regex(re) => re.is_match(v),
            HeaderMatchKind::Range { start, end } => {
                v.parse::<i64>().is_ok_and(|n| *start <= n && n < *end)
            }
        }
    }
}
