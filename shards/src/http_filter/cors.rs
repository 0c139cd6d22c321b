//! The CORS filter (Envoy's `envoy.filters.http.cors`): a preflight from an origin the route's policy allows is answered here; a cross-origin request it allows gets the `access-control-*` fields on its response.
//!
//! A route's policy is read with its virtual host's and its table's: each
//! field comes from the most specific level that sets it (origins,
//! methods, headers, …), while whether the filter is enabled (or
//! shadowed) is the most specific level's alone, as in Envoy. A request
//! without `Origin`, on a route with no policy, or on a route that answers
//! itself (direct response, redirect) passes untouched.

use engine::{CorsPolicies, CorsPolicy};

use super::{FilterCx, Flow, HttpFilter, Reply, RequestFlow, RequestHead, ResponseHead};

/// The filter; its policies are the routes'.
#[derive(Debug, Clone, Copy, Default)]
pub struct Cors;

/// The stream's state: a cross-origin request whose response gets the
/// `access-control-*` fields, with its origin (kept: the request's head
/// may be gone by the response, once its body went upstream).
struct CorsRequest(Vec<u8>);

/// The route's policy levels, read field by field.
struct Policy<'a>(&'a CorsPolicies);

impl<'a> Policy<'a> {
    /// The first level's value that `field` finds.
    fn first<T: ?Sized>(&self, field: impl Fn(&'a CorsPolicy) -> Option<&'a T>) -> Option<&'a T> {
        self.0.levels().find_map(field)
    }

    fn allow_origins(&self) -> &'a [engine::HeaderMatchKind] {
        self.0
            .levels()
            .map(|p| &p.allow_origins[..])
            .find(|o| !o.is_empty())
            .unwrap_or(&[])
    }

    fn origin_allowed(&self, origin: &[u8]) -> bool {
        let Ok(origin) = std::str::from_utf8(origin) else {
            return false;
        };
        // A matcher that takes `*` takes every origin (Envoy's rule, so
        // `safe_regex: '\*'` and `exact: '*'` mean "any").
        self.allow_origins()
            .iter()
            .any(|m| m.matches("*") || m.matches(origin))
    }

    fn allow_credentials(&self) -> bool {
        self.0
            .levels()
            .find_map(|p| p.allow_credentials)
            .unwrap_or(false)
    }

    fn allow_private_network_access(&self) -> bool {
        self.0
            .levels()
            .find_map(|p| p.allow_private_network_access)
            .unwrap_or(false)
    }

    fn forward_not_matching_preflights(&self) -> bool {
        self.0
            .levels()
            .find_map(|p| p.forward_not_matching_preflights)
            .unwrap_or(true)
    }
}

/// Whether the route's most specific policy is enforced, and whether it
/// is shadowed, for this request.
fn enabled(policies: &CorsPolicies, cx: &FilterCx<'_>) -> Option<(bool, bool)> {
    let top = policies.levels().next()?;
    let enforced = top
        .filter_enabled
        .is_none_or(|f| f.includes(cx.shard.random_u64()));
    let shadow = top
        .shadow_enabled
        .is_some_and(|f| f.includes(cx.shard.random_u64()));
    Some((enforced, shadow))
}

impl HttpFilter for Cors {
    fn on_request_headers(&self, cx: &mut FilterCx<'_>, head: &mut RequestHead<'_>) -> RequestFlow {
        // Routes that answer themselves (direct responses, redirects) and
        // requests no route took are left alone, as in Envoy.
        let Some(route) = cx
            .route
            .filter(|r| matches!(r.action, engine::RouteAction::Forward(_)))
        else {
            return RequestFlow::Continue;
        };
        let policies = &route.per_filter.cors;
        let Some((enforced, shadow)) = enabled(policies, cx) else {
            return RequestFlow::Continue;
        };
        if !enforced && !shadow {
            return RequestFlow::Continue;
        }
        let Some(origin) = head.get(b"origin").filter(|o| !o.is_empty()) else {
            return RequestFlow::Continue;
        };
        let policy = Policy(policies);
        let allowed = policy.origin_allowed(origin);
        // Gateway-wide (`/stats`), and its connection manager's (Envoy's
        // `http.<stat_prefix>.cors.*`).
        let stats = cx.counters::<crate::stats::CorsStats>();
        match allowed {
            true => stats.inc(|s| &s.origin_valid),
            false => stats.inc(|s| &s.origin_invalid),
        }
        if !enforced {
            return RequestFlow::Continue;
        }
        let preflight = head.get(b":method") == Some(b"OPTIONS")
            && head
                .get(b"access-control-request-method")
                .is_some_and(|m| !m.is_empty());
        if !preflight || (!allowed && policy.forward_not_matching_preflights()) {
            if allowed {
                cx.set_state(CorsRequest(origin.to_vec()));
            }
            return RequestFlow::Continue;
        }
        // Answered here, in Envoy's order. Values were checked at load;
        // the echoed ones came in fields.
        let mut reply = Reply::new(200, "", "");
        let f = &mut reply.fields;
        if allowed {
            let _ = f.append(b"access-control-allow-origin", origin);
        }
        if policy.allow_credentials() {
            let _ = f.append(b"access-control-allow-credentials", b"true");
        }
        if let Some(methods) = policy.first(|p| p.allow_methods.as_deref()) {
            let value = match methods {
                "*" => head
                    .get(b"access-control-request-method")
                    .unwrap_or_default(),
                m => m.as_bytes(),
            };
            let _ = f.append(b"access-control-allow-methods", value);
        }
        if let Some(headers) = policy.first(|p| p.allow_headers.as_deref()) {
            let value = match headers {
                "*" => head
                    .get(b"access-control-request-headers")
                    .unwrap_or_default(),
                h => h.as_bytes(),
            };
            let _ = f.append(b"access-control-allow-headers", value);
        }
        if let Some(age) = policy.first(|p| p.max_age.as_deref()) {
            let _ = f.append(b"access-control-max-age", age.as_bytes());
        }
        if policy.allow_private_network_access()
            && head.get(b"access-control-request-private-network") == Some(b"true")
        {
            let _ = f.append(b"access-control-allow-private-network", b"true");
        }
        if allowed {
            if let Some(expose) = policy.first(|p| p.expose_headers.as_deref()) {
                let _ = f.append(b"access-control-expose-headers", expose.as_bytes());
            }
        }
        RequestFlow::Reply(reply)
    }

    fn on_response_headers(&self, cx: &mut FilterCx<'_>, head: &mut ResponseHead<'_>) -> Flow {
        let Some(route) = cx.route else {
            return Flow::Continue;
        };
        let Some(CorsRequest(origin)) = cx.state::<CorsRequest>() else {
            return Flow::Continue;
        };
        // A reply may replace this head and come here again: kept.
        let origin = origin.clone();
        let policy = Policy(&route.per_filter.cors);
        let _ = head.set(b"access-control-allow-origin", &origin);
        if policy.allow_credentials() {
            let _ = head.set(b"access-control-allow-credentials", b"true");
        }
        if let Some(expose) = policy.first(|p| p.expose_headers.as_deref()) {
            let _ = head.set(b"access-control-expose-headers", expose.as_bytes());
        }
        Flow::Continue
    }
}
