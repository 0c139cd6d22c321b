//! A connection manager's `local_reply_config`: how the gateway's own replies (no route, upstream failures, timeouts, direct responses, filters' refusals) are rewritten, by the first mapper whose filter takes the reply, and formatted.

use crate::access_log::filter::{FilterInput, LogFilter};
use crate::access_log::LogFormat;

use super::HeaderMutation;

/// `local_reply_config`.
#[derive(Debug, Clone)]
pub struct LocalReplyConfig {
    /// `mappers`, tried in order: the first whose filter takes the reply
    /// applies, alone.
    pub mappers: Vec<ReplyMapper>,
    /// `body_format`: every local reply's body (unless its mapper has its
    /// own), with `%LOCAL_REPLY_BODY%` the body it had.
    pub body_format: Option<BodyFormat>,
}

/// One `ResponseMapper`.
#[derive(Debug, Clone)]
pub struct ReplyMapper {
    pub filter: LogFilter,
    /// `status_code`: the reply's new status (200..=599).
    pub status: Option<u16>,
    /// `body`: the reply's new body (before formatting).
    pub body: Option<Box<[u8]>>,
    /// `body_format_override`.
    pub body_format: Option<BodyFormat>,
    /// `headers_to_add`, on the reply (no removals).
    pub headers: HeaderMutation,
}

/// A `SubstitutionFormatString` for reply bodies.
#[derive(Debug, Clone)]
pub struct BodyFormat {
    pub format: LogFormat,
    /// `content_type`, else `text/plain` (`application/json` for a JSON
    /// format), as Envoy sets it.
    pub content_type: String,
}

impl LocalReplyConfig {
    /// The mapper for a reply: the first whose filter takes it.
    pub fn mapper(&self, reply: &FilterInput<'_, '_>) -> Option<&ReplyMapper> {
        self.mappers.iter().find(|m| m.filter.matches(reply))
    }

    /// The format of a reply's body: its mapper's, else the config's.
    pub fn body_format<'a>(&'a self, mapper: Option<&'a ReplyMapper>) -> Option<&'a BodyFormat> {
        mapper
            .and_then(|m| m.body_format.as_ref())
            .or(self.body_format.as_ref())
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::access_log::filter::Comparison;

    fn mapper(filter: LogFilter, status: u16) -> ReplyMapper {
        ReplyMapper {
            filter,
            status: Some(status),
            body: None,
            body_format: None,
            headers: HeaderMutation::default(),
        }
    }

    #[test]
    fn the_first_mapper_that_takes_a_reply_applies_with_its_own_format_first() {
        let text = |s: &str| BodyFormat {
            format: LogFormat::text(s).unwrap(),
            content_type: "text/plain".into(),
        };
        let mut first = mapper(LogFilter::Flags(vec!["NR".into()]), 410);
        first.body_format = Some(text("override %LOCAL_REPLY_BODY%"));
        let second = mapper(LogFilter::Status(Comparison::Eq, 404), 411);
        let config = LocalReplyConfig {
            mappers: vec![first, second],
            body_format: Some(text("global %LOCAL_REPLY_BODY%")),
        };
        let none = |_: &str| None;
        let reply = |status, flags| FilterInput {
            status,
            duration: Duration::ZERO,
            flags,
            request: &none,
            grpc_status: None,
            random: 0,
        };
        let nr = config.mapper(&reply(404, "NR"));
        assert_eq!(nr.and_then(|m| m.status), Some(410));
        let format = config.body_format(nr).unwrap();
        assert_eq!(format.format.literal(), None);
        let plain = config.mapper(&reply(404, ""));
        assert_eq!(plain.and_then(|m| m.status), Some(411));
        assert!(config.mapper(&reply(503, "UF")).is_none());
        // No mapper: the config's own format.
        let global = config.body_format(None).unwrap();
        let mut out = Vec::new();
        let record = crate::access_log::LogRecord {
            local_reply_body: Some(b"gone"),
            ..Default::default()
        };
        global.format.render(&record, &mut out);
        assert_eq!(out, b"global gone");
    }
}
