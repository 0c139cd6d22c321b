//! `request_headers_to_add/remove` and `response_headers_to_add/remove` of a route, its virtual host and its table, folded per route into the levels that apply, in Envoy's order.

use crate::access_log::LogFormat;

/// `HeaderValueOption.append_action`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AppendAction {
    /// `APPEND_IF_EXISTS_OR_ADD` (the default): one more field.
    AppendIfExistsOrAdd,
    /// `ADD_IF_ABSENT`: only when the head has no field of that name.
    AddIfAbsent,
    /// `OVERWRITE_IF_EXISTS_OR_ADD` (and the deprecated `append: false`):
    /// replaces every field of that name.
    OverwriteIfExistsOrAdd,
    /// `OVERWRITE_IF_EXISTS`: replaces, only when the head has one.
    OverwriteIfExists,
}

/// A header value: bytes as configured, or a format with `%…%` operators
/// (Envoy's substitution formatter, the access log's), parsed at load.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HeaderValue {
    Literal(Box<[u8]>),
    Format(Box<LogFormat>),
}

/// One `HeaderValueOption`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeaderToAdd {
    /// Lowercase.
    pub name: Box<[u8]>,
    pub value: HeaderValue,
    pub action: AppendAction,
    /// `keep_empty_value`: a value that formats to nothing is still added
    /// (by default the entry is skipped).
    pub keep_empty: bool,
}

/// One level's (route, virtual host or route table) edits of one head:
/// the removals, then the additions (Envoy: a level removes first, then
/// evaluates every addition against the head as it was, then overwrites,
/// then appends).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HeaderMutation {
    /// Lowercase names.
    pub remove: Vec<Box<[u8]>>,
    pub add: Vec<HeaderToAdd>,
}

impl HeaderMutation {
    pub fn is_empty(&self) -> bool {
        self.remove.is_empty() && self.add.is_empty()
    }
}

/// A route's header edits with its virtual host's and table's, as the
/// levels apply in turn: route, virtual host, table by default; the
/// reverse with `most_specific_header_mutations_wins`. Levels that edit
/// nothing are left out, so a route without any is two empty lists.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RouteHeaders {
    /// On the request, as it goes upstream.
    pub request: Vec<HeaderMutation>,
    /// On the response, the upstream's or the gateway's own (a
    /// redirect, a direct response, a reply the router made).
    pub response: Vec<HeaderMutation>,
}

impl RouteHeaders {
    /// Folds the three levels' (request, response) mutations into the
    /// order they apply.
    pub fn fold(
        route: (HeaderMutation, HeaderMutation),
        virtual_host: &(HeaderMutation, HeaderMutation),
        table: &(HeaderMutation, HeaderMutation),
        most_specific_wins: bool,
    ) -> Self {
        let (route_req, route_resp) = route;
        let mut request = vec![route_req, virtual_host.0.clone(), table.0.clone()];
        let mut response = vec![route_resp, virtual_host.1.clone(), table.1.clone()];
        if most_specific_wins {
            // The table first, so the route's overwrite last (it wins).
            request.reverse();
            response.reverse();
        }
        request.retain(|m| !m.is_empty());
        response.retain(|m| !m.is_empty());
        Self { request, response }
    }
}
