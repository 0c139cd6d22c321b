//! A route's header edits (`request_headers_to_add`, `response_headers_to_remove`, …) applied to a head as Envoy applies them: level by level, each removing first, then judging its additions against the head as it stands, then overwriting, then appending.

use std::borrow::Cow;
use std::net::SocketAddr;
use std::time::SystemTime;

use engine::access_log::{LogFormat, LogRecord};
use engine::{AppendAction, HeaderMutation, HeaderValue};
use h2wire::message::HeaderList;
use smallvec::SmallVec;

use super::HeaderEdits;

/// What a header value's `%…%` operators may read besides the head.
#[derive(Debug, Clone, Copy)]
pub(crate) struct FormatInput<'a> {
    pub peer: SocketAddr,
    /// The host that answered (response side); `None` on the request, as
    /// in Envoy (the value is then empty).
    pub upstream: Option<SocketAddr>,
    pub protocol: &'a str,
    /// The response's status; `None` where Envoy reads 0 (the request, a
    /// reply the gateway made).
    pub status: Option<u16>,
    pub sni: Option<&'a str>,
}

/// Fields a level decided on, waiting for their turn: name, value.
type Pending<'a> = SmallVec<[(&'a [u8], Cow<'a, [u8]>); 4]>;

/// The head edited, and what `REQ()` / `RESP()` read.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Head<'a> {
    /// The request's head: `REQ()` reads it (with the edits so far).
    Request(&'a HeaderList),
    /// A response's head (`None`: a reply the gateway made): `RESP()`
    /// reads it (with the edits so far), `REQ()` the request as it came.
    Response {
        list: Option<&'a HeaderList>,
        request: Option<&'a HeaderList>,
    },
}

impl<'a> Head<'a> {
    fn list(self) -> Option<&'a HeaderList> {
        match self {
            Self::Request(l) => Some(l),
            Self::Response { list, .. } => list,
        }
    }
}

/// Applies `levels` over `head` through `edits`. Returns how many values
/// were refused (a formatted value with CR, LF or NUL), for the stats.
pub(crate) fn apply(
    levels: &[HeaderMutation],
    head: Head<'_>,
    edits: &mut HeaderEdits,
    input: &FormatInput<'_>,
) -> u32 {
    let list = head.list();
    let mut refused = 0;
    for level in levels {
        for name in &level.remove {
            // Names are checked at load.
            let _ = edits.remove(name);
        }
        if level.add.iter().all(plain_append) {
            // The usual level (literal fields appended): nothing to judge,
            // the values were checked at load.
            for add in &level.add {
                if let HeaderValue::Literal(v) = &add.value {
                    if !v.is_empty() || add.keep_empty {
                        edits.append_checked(&add.name, v);
                    }
                }
            }
            continue;
        }
        // Every addition is judged and formatted against the head as the
        // level found it (after its removals), then overwrites go, then
        // appends.
        let mut overwrite: Pending<'_> = SmallVec::new();
        let mut append: Pending<'_> = SmallVec::new();
        for add in &level.add {
            let value = match &add.value {
                HeaderValue::Literal(v) => Cow::Borrowed(&v[..]),
                HeaderValue::Format(f) => Cow::Owned(render(f, head, edits, input)),
            };
            if value.is_empty() && !add.keep_empty {
                continue;
            }
            // Looked up only for the actions that ask.
            let exists = || {
                edits
                    .get(&add.name, list.and_then(|l| l.get(&add.name)))
                    .is_some()
            };
            match add.action {
                AppendAction::AppendIfExistsOrAdd => append.push((&add.name, value)),
                AppendAction::AddIfAbsent if !exists() => append.push((&add.name, value)),
                AppendAction::OverwriteIfExistsOrAdd => overwrite.push((&add.name, value)),
                AppendAction::OverwriteIfExists if exists() => overwrite.push((&add.name, value)),
                AppendAction::AddIfAbsent | AppendAction::OverwriteIfExists => {}
            }
        }
        for (name, value) in overwrite {
            refused += u32::from(edits.set(name, &value).is_err());
        }
        for (name, value) in append {
            refused += u32::from(edits.append(name, &value).is_err());
        }
    }
    refused
}

/// A literal field appended whatever the head holds.
fn plain_append(add: &engine::HeaderToAdd) -> bool {
    add.action == AppendAction::AppendIfExistsOrAdd && matches!(add.value, HeaderValue::Literal(_))
}

/// A formatted value: the operators read the head with the edits so far.
fn render(f: &LogFormat, head: Head<'_>, edits: &HeaderEdits, input: &FormatInput<'_>) -> Vec<u8> {
    let (req, resp) = match head {
        Head::Request(l) => (Some(l), None),
        Head::Response { list, request } => (request, list),
    };
    let request_edited = matches!(head, Head::Request(_));
    let req_values: SmallVec<[Option<&[u8]>; 4]> = f
        .req_fields()
        .iter()
        .map(|n| match request_edited {
            true => edited(edits, req, n),
            false => req.and_then(|l| l.get(n.as_bytes())),
        })
        .collect();
    let resp_values: SmallVec<[Option<&[u8]>; 4]> = f
        .resp_fields()
        .iter()
        .map(|n| match request_edited {
            true => None,
            false => edited(edits, resp, n),
        })
        .collect();
    let record = LogRecord {
        start: Some(SystemTime::now()),
        protocol: input.protocol,
        status: input.status,
        upstream_host: input.upstream,
        downstream: Some(input.peer),
        downstream_direct: Some(input.peer),
        sni: input.sni,
        req: &req_values,
        resp: &resp_values,
        ..Default::default()
    };
    let mut out = Vec::new();
    f.render_value(&record, &mut out);
    out
}

/// The first value of `name` in `list` with `edits` over it.
fn edited<'a>(
    edits: &'a HeaderEdits,
    list: Option<&'a HeaderList>,
    name: &str,
) -> Option<&'a [u8]> {
    edits.get(name.as_bytes(), list.and_then(|l| l.get(name.as_bytes())))
}

#[cfg(test)]
mod tests;
