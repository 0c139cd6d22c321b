//! A route's (or virtual host's) `retry_policy`: on what an attempt is retried, how often, after how long, and on which host.

use std::time::Duration;

/// Envoy's default `retry_back_off.base_interval`.
pub const DEFAULT_RETRY_BASE_INTERVAL: Duration = Duration::from_millis(25);

/// The `retry_on` conditions, one bit each.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RetryOn(u32);

impl RetryOn {
    pub const FIVE_XX: Self = Self(1);
    pub const GATEWAY_ERROR: Self = Self(1 << 1);
    pub const RESET: Self = Self(1 << 2);
    pub const CONNECT_FAILURE: Self = Self(1 << 3);
    pub const RETRIABLE_4XX: Self = Self(1 << 4);
    pub const REFUSED_STREAM: Self = Self(1 << 5);
    pub const RETRIABLE_STATUS_CODES: Self = Self(1 << 6);
    pub const RESET_BEFORE_REQUEST: Self = Self(1 << 7);
    pub const GRPC_CANCELLED: Self = Self(1 << 8);
    pub const GRPC_DEADLINE_EXCEEDED: Self = Self(1 << 9);
    pub const GRPC_INTERNAL: Self = Self(1 << 10);
    pub const GRPC_RESOURCE_EXHAUSTED: Self = Self(1 << 11);
    pub const GRPC_UNAVAILABLE: Self = Self(1 << 12);
    pub const RETRIABLE_HEADERS: Self = Self(1 << 13);

    /// Envoy's names for the conditions (`x-envoy-retry-on`,
    /// `x-envoy-retry-grpc-on`).
    pub const NAMES: [(&'static str, Self); 14] = [
        ("5xx", Self::FIVE_XX),
        ("gateway-error", Self::GATEWAY_ERROR),
        ("reset", Self::RESET),
        ("connect-failure", Self::CONNECT_FAILURE),
        ("retriable-4xx", Self::RETRIABLE_4XX),
        ("refused-stream", Self::REFUSED_STREAM),
        ("retriable-status-codes", Self::RETRIABLE_STATUS_CODES),
        ("reset-before-request", Self::RESET_BEFORE_REQUEST),
        ("retriable-headers", Self::RETRIABLE_HEADERS),
        ("cancelled", Self::GRPC_CANCELLED),
        ("deadline-exceeded", Self::GRPC_DEADLINE_EXCEEDED),
        ("internal", Self::GRPC_INTERNAL),
        ("resource-exhausted", Self::GRPC_RESOURCE_EXHAUSTED),
        ("unavailable", Self::GRPC_UNAVAILABLE),
    ];

    pub fn by_name(name: &str) -> Option<Self> {
        Self::NAMES
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, c)| *c)
    }

    pub fn contains(self, other: Self) -> bool {
        self.0 & other.0 == other.0
    }

    /// Whether any of `other`'s conditions is set.
    pub fn intersects(self, other: Self) -> bool {
        self.0 & other.0 != 0
    }

    pub fn is_empty(self) -> bool {
        self.0 == 0
    }
}

impl std::ops::BitOr for RetryOn {
    type Output = Self;
    fn bitor(self, rhs: Self) -> Self {
        Self(self.0 | rhs.0)
    }
}

impl std::ops::BitOrAssign for RetryOn {
    fn bitor_assign(&mut self, rhs: Self) {
        self.0 |= rhs.0;
    }
}

/// `retry_policy` (`RetryPolicy`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetryPolicy {
    pub retry_on: RetryOn,
    /// `num_retries` (default 1): retries after the first attempt.
    pub num_retries: u32,
    /// `per_try_timeout`: how long one attempt may wait for its response
    /// head (the route timeout still bounds them all).
    pub per_try_timeout: Option<Duration>,
    /// `retriable_status_codes`, for `retriable-status-codes`.
    pub retriable_status_codes: Vec<u16>,
    /// `retry_back_off.base_interval` (25 ms).
    pub base_interval: Duration,
    /// `retry_back_off.max_interval` (10 × the base).
    pub max_interval: Duration,
    /// `retry_host_predicate` `envoy.retry_host_predicates.previous_hosts`:
    /// a retry avoids the hosts already tried.
    pub previous_hosts: bool,
    /// `host_selection_retry_max_attempts` (default 1): picks per retry
    /// when a pick lands on a host the predicate refuses.
    pub host_selection_max_attempts: u32,
    /// `retriable_headers`, for `retriable-headers`: an answer any of
    /// them matches (`:status` included) is retried.
    pub retriable_headers: Vec<super::HeaderMatcher>,
    /// `retriable_request_headers`: when set, only a request one of them
    /// matches is retried at all.
    pub retriable_request_headers: Vec<super::HeaderMatcher>,
    /// `per_try_idle_timeout`: an attempt whose upstream sends nothing for
    /// this long (from the request's end and its connection, then between
    /// any of its answer's bytes) is given up.
    pub per_try_idle_timeout: Option<Duration>,
}

/// An internal request's retry headers, as Envoy's router reads them.
#[derive(Debug, Clone, Copy, Default)]
pub struct RetryHeaders<'a> {
    /// `x-envoy-retry-on`.
    pub retry_on: Option<&'a str>,
    /// `x-envoy-retry-grpc-on`.
    pub retry_grpc_on: Option<&'a str>,
    /// `x-envoy-max-retries`.
    pub max_retries: Option<&'a str>,
    /// `x-envoy-retriable-status-codes`.
    pub status_codes: Option<&'a str>,
    /// `x-envoy-retriable-header-names`: presence matchers added to the
    /// policy's `retriable_headers`.
    pub header_names: Option<&'a str>,
}

impl RetryHeaders<'_> {
    /// The policy for a request with these headers on a route with
    /// `route` (Envoy's rules): the headers' conditions added to the
    /// route's, `x-envoy-max-retries` replacing `num_retries`, the status
    /// codes added to the route's. `None` when nothing changes (no
    /// header with a known condition, code or count). A request without
    /// a policy gets one only from a retry condition; unknown tokens are
    /// ignored, as Envoy ignores them.
    pub fn policy(&self, route: Option<&RetryPolicy>) -> Option<RetryPolicy> {
        let mut on = RetryOn::default();
        let tokens = |v: Option<&str>| {
            v.into_iter()
                .flat_map(|v| v.split(','))
                .filter_map(|t| RetryOn::by_name(t.trim()))
                .collect::<Vec<_>>()
        };
        for c in tokens(self.retry_on)
            .into_iter()
            .chain(tokens(self.retry_grpc_on))
        {
            on |= c;
        }
        let max = self.max_retries.and_then(|v| v.trim().parse::<u32>().ok());
        let codes: Vec<u16> = self
            .status_codes
            .into_iter()
            .flat_map(|v| v.split(','))
            .filter_map(|c| c.trim().parse::<u16>().ok())
            .filter(|c| (100..=599).contains(c))
            .collect();
        if route.is_none() && on.is_empty() {
            return None;
        }
        let names: Vec<String> = self
            .header_names
            .into_iter()
            .flat_map(|v| v.split(','))
            .map(|n| n.trim().to_ascii_lowercase())
            .filter(|n| !n.is_empty())
            .collect();
        if on.is_empty() && max.is_none() && codes.is_empty() && names.is_empty() {
            return None;
        }
        let mut p = route.cloned().unwrap_or_else(|| RetryPolicy {
            retry_on: RetryOn::default(),
            num_retries: 1,
            per_try_timeout: None,
            retriable_status_codes: Vec::new(),
            base_interval: DEFAULT_RETRY_BASE_INTERVAL,
            max_interval: DEFAULT_RETRY_BASE_INTERVAL * 10,
            previous_hosts: false,
            host_selection_max_attempts: 1,
            retriable_headers: Vec::new(),
            retriable_request_headers: Vec::new(),
            per_try_idle_timeout: None,
        });
        p.retry_on |= on;
        p.retriable_headers
            .extend(names.into_iter().map(|name| super::HeaderMatcher {
                name,
                kind: super::HeaderMatchKind::Present(true),
                invert: false,
            }));
        if let Some(n) = max {
            p.num_retries = n;
        }
        p.retriable_status_codes.extend(codes);
        Some(p)
    }
}

#[cfg(test)]
mod header_tests {
    use super::*;

    #[test]
    fn retry_headers_add_to_the_route_policy() {
        let none = RetryHeaders::default();
        assert_eq!(none.policy(None), None);
        let on = RetryHeaders {
            retry_on: Some("5xx, bogus"),
            max_retries: Some("2"),
            ..none
        };
        let p = on.policy(None).expect("a policy from the header");
        assert!(p.retry_on.contains(RetryOn::FIVE_XX));
        assert_eq!(p.num_retries, 2);
        // A count alone makes no policy where there is none.
        let count = RetryHeaders {
            max_retries: Some("3"),
            ..none
        };
        assert_eq!(count.policy(None), None);
        let mut route = p.clone();
        route.retry_on = RetryOn::RESET;
        route.num_retries = 1;
        let merged = count.policy(Some(&route)).expect("merged");
        assert_eq!((merged.retry_on, merged.num_retries), (RetryOn::RESET, 3));
        let grpc = RetryHeaders {
            retry_grpc_on: Some("unavailable"),
            status_codes: Some("409,x,700"),
            ..none
        };
        let merged = grpc.policy(Some(&route)).expect("merged");
        assert!(merged
            .retry_on
            .contains(RetryOn::GRPC_UNAVAILABLE | RetryOn::RESET));
        assert_eq!(merged.retriable_status_codes, [409]);
    }

    #[test]
    fn retriable_header_names_add_presence_matchers() {
        let none = RetryHeaders::default();
        let names = RetryHeaders {
            retry_on: Some("retriable-headers"),
            header_names: Some("X-Foo, ,x-bar"),
            ..none
        };
        let p = names.policy(None).expect("a policy");
        let got: Vec<_> = p
            .retriable_headers
            .iter()
            .map(|h| h.name.as_str())
            .collect();
        assert_eq!(got, ["x-foo", "x-bar"]);
        assert!(p.headers_retriable(|n| (n == "x-bar").then_some("")));
        assert!(!p.headers_retriable(|_| None));
        // Names alone add to a route's policy.
        let route = p.clone();
        let alone = RetryHeaders {
            header_names: Some("x-baz"),
            ..none
        };
        assert_eq!(
            alone.policy(Some(&route)).unwrap().retriable_headers.len(),
            3
        );
    }
}
