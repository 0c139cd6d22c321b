//! Whether an attempt that failed is retried under a route's `retry_policy`, and after how long: Envoy's router rules, pure (the random value is a parameter).

use std::time::Duration;

use crate::config::{RetryOn, RetryPolicy};

/// How an attempt ended without an answer the client can have.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AttemptEnd {
    /// A response head came: its status, and its `grpc-status` when it
    /// carries one (a gRPC trailers-only answer).
    Response {
        status: u16,
        grpc_status: Option<u32>,
        /// One of the policy's `retriable_headers` matches it.
        headers: bool,
    },
    /// The upstream reset the stream or its connection died, before a
    /// response head.
    Reset,
    /// No connection could be had.
    ConnectFailure,
    /// The upstream refused the stream before processing it.
    RefusedStream,
}

impl RetryPolicy {
    /// Whether `end` is one of the policy's `retry_on` conditions.
    pub fn retries(&self, end: AttemptEnd) -> bool {
        let on = self.retry_on;
        // 5xx and gateway-error cover every way of not answering.
        let any_failure = RetryOn::FIVE_XX | RetryOn::GATEWAY_ERROR | RetryOn::RESET;
        let any = |c: RetryOn| on.intersects(c);
        match end {
            AttemptEnd::Response {
                status,
                grpc_status,
                headers,
            } => {
                (on.contains(RetryOn::RETRIABLE_HEADERS) && headers)
                    || (on.contains(RetryOn::FIVE_XX) && status >= 500)
                    || (on.contains(RetryOn::GATEWAY_ERROR) && matches!(status, 502..=504))
                    || (on.contains(RetryOn::RETRIABLE_4XX) && status == 409)
                    || (on.contains(RetryOn::RETRIABLE_STATUS_CODES)
                        && self.retriable_status_codes.contains(&status))
                    || grpc_status.is_some_and(|g| grpc_retries(on, g))
            }
            AttemptEnd::Reset => any(any_failure),
            AttemptEnd::ConnectFailure => {
                any(any_failure | RetryOn::CONNECT_FAILURE | RetryOn::RESET_BEFORE_REQUEST)
            }
            AttemptEnd::RefusedStream => {
                any(any_failure | RetryOn::REFUSED_STREAM | RetryOn::RESET_BEFORE_REQUEST)
            }
        }
    }

    /// Whether answers of any status may be retried (listed codes, or
    /// header matchers), not only 5xx, 409 and gRPC ones.
    pub fn any_status(&self) -> bool {
        !self.retriable_status_codes.is_empty() || !self.retriable_headers.is_empty()
    }

    /// Whether an answer whose fields `get` reads (lowercase names,
    /// `:status` included) matches one of `retriable_headers` (any).
    pub fn headers_retriable<'a>(&self, get: impl Fn(&str) -> Option<&'a str>) -> bool {
        self.retriable_headers
            .iter()
            .any(|h| crate::route::header_value_matches(h, get(&h.name)))
    }

    /// Whether a request whose fields `get` reads may be retried at all:
    /// one of `retriable_request_headers` matches it, or there are none.
    pub fn request_retriable<'a>(&self, get: impl Fn(&str) -> Option<&'a str>) -> bool {
        self.retriable_request_headers.is_empty()
            || self
                .retriable_request_headers
                .iter()
                .any(|h| crate::route::header_value_matches(h, get(&h.name)))
    }

    /// How long retry `n` (1 for the first) waits: Envoy's fully jittered
    /// exponential back-off, `random % ((2^n - 1) × base)`, at most
    /// `max_interval`.
    pub fn back_off(&self, n: u32, random: u64) -> Duration {
        let base = self.base_interval.as_millis().max(1) as u64;
        let max = self.max_interval.as_millis() as u64;
        let multiplier = (1u64 << n.clamp(1, 32)) - 1;
        let upper = multiplier.saturating_mul(base).min(max.max(1));
        Duration::from_millis((random % upper).min(max))
    }
}

/// The gRPC conditions, on a `grpc-status` value.
fn grpc_retries(on: RetryOn, status: u32) -> bool {
    let cond = match status {
        1 => RetryOn::GRPC_CANCELLED,
        4 => RetryOn::GRPC_DEADLINE_EXCEEDED,
        8 => RetryOn::GRPC_RESOURCE_EXHAUSTED,
        13 => RetryOn::GRPC_INTERNAL,
        14 => RetryOn::GRPC_UNAVAILABLE,
        _ => return false,
    };
    on.contains(cond)
}

#[cfg(test)]
mod tests;
