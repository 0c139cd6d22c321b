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
