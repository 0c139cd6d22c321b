//! Envoy's `AccessLogFilter`: which finished (or locally answered) requests a rule takes, by status, duration, response flags, request headers, gRPC status, sampling, and their `and` / `or`; decided from a [`FilterInput`] with the RNG's value passed in.

use std::time::Duration;

use crate::config::{Fraction, HeaderMatcher};
use crate::route::header_value_matches;

/// `ComparisonFilter.op`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Comparison {
    Eq,
    Ge,
    Le,
    Ne,
}

impl Comparison {
    fn holds(self, value: u64, configured: u64) -> bool {
        match self {
            Comparison::Eq => value == configured,
            Comparison::Ge => value >= configured,
            Comparison::Le => value <= configured,
            Comparison::Ne => value != configured,
        }
    }
}

/// One `AccessLogFilter`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LogFilter {
    /// `status_code_filter` (the runtime key's default value).
    Status(Comparison, u32),
    /// `duration_filter`, in milliseconds.
    Duration(Comparison, u32),
    /// `not_health_check_filter`: no request is a health check the
    /// gateway answers itself (there is no health check filter), so all
    /// pass.
    NotHealthCheck,
    /// `traceable_filter`: no request is traced (no tracing), so none
    /// pass.
    Traceable,
    /// `runtime_filter`: a sample (the runtime key's default; there is no
    /// runtime).
    Sampled(Fraction),
    And(Vec<LogFilter>),
    Or(Vec<LogFilter>),
    /// `header_filter`: on the request's fields.
    Header(HeaderMatcher),
    /// `response_flag_filter`: any of these flags (empty: any flag at all).
    Flags(Vec<String>),
    /// `grpc_status_filter`: the response's gRPC status (a local reply's
    /// from its HTTP status) is one of `statuses`, or with `exclude` none.
    GrpcStatus {
        statuses: Vec<u32>,
        exclude: bool,
    },
}

/// What a filter sees of a request (`'r`: what the request's fields are
/// read from, which may outlive the lookup itself).
pub struct FilterInput<'a, 'r> {
    pub status: u16,
    pub duration: Duration,
    /// Envoy's response flags, comma-separated (empty: none).
    pub flags: &'a str,
    /// A request field's value by lowercase name (pseudo-headers too).
    pub request: &'a dyn Fn(&str) -> Option<&'r str>,
    pub grpc_status: Option<u32>,
    /// A uniformly random value, for sampling.
    pub random: u64,
}

impl LogFilter {
    /// The request fields its `header_filter`s read, once each.
    pub fn fields(&self) -> Vec<String> {
        let mut names = Vec::new();
        self.collect_fields(&mut names);
        names
    }

    fn collect_fields(&self, names: &mut Vec<String>) {
        match self {
            LogFilter::Header(h) if !names.contains(&h.name) => names.push(h.name.clone()),
            LogFilter::And(all) | LogFilter::Or(all) => {
                for f in all {
                    f.collect_fields(names);
                }
            }
            _ => {}
        }
    }

    /// Whether the request passes.
    pub fn matches(&self, r: &FilterInput<'_, '_>) -> bool {
        match self {
            LogFilter::Status(op, v) => op.holds(r.status.into(), (*v).into()),
            LogFilter::Duration(op, ms) => {
                let took = u64::try_from(r.duration.as_millis()).unwrap_or(u64::MAX);
                op.holds(took, (*ms).into())
            }
            LogFilter::NotHealthCheck => true,
            LogFilter::Traceable => false,
            LogFilter::Sampled(share) => share.includes(r.random),
            LogFilter::And(all) => all.iter().all(|f| f.matches(r)),
            LogFilter::Or(any) => any.iter().any(|f| f.matches(r)),
            LogFilter::Header(h) => header_value_matches(h, (r.request)(&h.name)),
            LogFilter::Flags(want) => {
                let mut set = r.flags.split(',').filter(|f| !f.is_empty());
                match want.is_empty() {
                    true => set.next().is_some(),
                    false => set.any(|f| want.iter().any(|w| w == f)),
                }
            }
            LogFilter::GrpcStatus { statuses, exclude } => {
                let found = r.grpc_status.is_some_and(|s| statuses.contains(&s));
                found != *exclude
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::matcher::HeaderMatchKind;

    fn input<'a>(
        status: u16,
        flags: &'a str,
        request: &'a dyn Fn(&str) -> Option<&'a str>,
    ) -> FilterInput<'a, 'a> {
        FilterInput {
            status,
            duration: Duration::from_millis(250),
            flags,
            request,
            grpc_status: None,
            random: 7,
        }
    }

    #[test]
    fn comparisons_flags_and_combinations_decide_as_envoys() {
        let none = |_: &str| None;
        let nr = input(404, "NR", &none);
        let uf = input(503, "UF", &none);
        let ok = input(200, "", &none);
        let ge500 = LogFilter::Status(Comparison::Ge, 500);
        assert!(!ge500.matches(&nr) && ge500.matches(&uf));
        assert!(LogFilter::Status(Comparison::Ne, 404).matches(&uf));
        assert!(LogFilter::Status(Comparison::Le, 404).matches(&nr));
        assert!(LogFilter::Duration(Comparison::Ge, 250).matches(&ok));
        assert!(!LogFilter::Duration(Comparison::Ge, 251).matches(&ok));
        let flag = |f: &str| LogFilter::Flags(vec![f.to_string()]);
        assert!(flag("NR").matches(&nr) && !flag("NR").matches(&uf));
        // No flags listed: any flag.
        assert!(LogFilter::Flags(vec![]).matches(&uf));
        assert!(!LogFilter::Flags(vec![]).matches(&ok));
        let both = LogFilter::And(vec![ge500.clone(), flag("UF")]);
        let either = LogFilter::Or(vec![ge500, flag("NR")]);
        assert!(both.matches(&uf) && !both.matches(&nr));
        assert!(either.matches(&uf) && either.matches(&nr) && !either.matches(&ok));
        let half = LogFilter::Sampled(Fraction {
            numerator: 50,
            denominator: 100,
        });
        assert!(half.matches(&ok));
        assert!(!half.matches(&FilterInput { random: 57, ..ok }));
    }

    #[test]
    fn the_fields_header_filters_read_are_listed_once() {
        let h = |n: &str| {
            LogFilter::Header(HeaderMatcher {
                name: n.into(),
                kind: HeaderMatchKind::Present(true),
                invert: false,
            })
        };
        let f = LogFilter::Or(vec![
            h("x-a"),
            LogFilter::And(vec![h("x-b"), h("x-a"), LogFilter::Traceable]),
        ]);
        assert_eq!(f.fields(), ["x-a", "x-b"]);
    }

    #[test]
    fn header_and_grpc_status_filters() {
        let yes = |n: &str| (n == "x-test").then_some("yes");
        let with = input(404, "NR", &yes);
        let none = |_: &str| None;
        let without = input(404, "NR", &none);
        let h = LogFilter::Header(HeaderMatcher {
            name: "x-test".into(),
            kind: HeaderMatchKind::Exact("yes".into()),
            invert: false,
        });
        assert!(h.matches(&with) && !h.matches(&without));
        let unavailable = LogFilter::GrpcStatus {
            statuses: vec![14],
            exclude: false,
        };
        let fourteen = FilterInput {
            grpc_status: Some(14),
            ..input(503, "UF", &none)
        };
        assert!(unavailable.matches(&fourteen) && !unavailable.matches(&without));
        let not_unavailable = LogFilter::GrpcStatus {
            statuses: vec![14],
            exclude: true,
        };
        assert!(!not_unavailable.matches(&fourteen) && not_unavailable.matches(&without));
    }
}
