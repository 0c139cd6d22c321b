//! The Prometheus text format's two pieces every `/stats` writer shares: a metric's `# HELP` / `# TYPE` lines and a label value's escaping.

use std::fmt::Write as _;

/// A metric's `# HELP` and `# TYPE` lines.
pub(super) fn metric(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
}

/// A Prometheus label value: `\\`, `\"` and `\n` escaped.
pub(super) fn escape(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '\\' => o.push_str("\\\\"),
            '"' => o.push_str("\\\""),
            '\n' => o.push_str("\\n"),
            c => o.push(c),
        }
    }
    o
}
