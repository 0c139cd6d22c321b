//! A connection manager's `access_log`: file, stdout and stderr loggers with a text or JSON `log_format`, its command operators checked by name.

use std::sync::Arc;

use engine::access_log::{LogFormat, DEFAULT_FORMAT};
use engine::{AccessLog, LogSink};
use prost::Name;

use super::common::reject_set;
use super::tls::data_source;
use crate::decode::{any_type_name, unpack};
use crate::error::{Error, Path, Result};
use crate::pb::envoy::config::accesslog::v3 as accesslog;
use crate::pb::envoy::config::core::v3 as core;
use crate::pb::envoy::extensions::access_loggers::file::v3 as file;
use crate::pb::envoy::extensions::access_loggers::stream::v3 as stream;

pub(crate) fn access_logs(logs: &[accesslog::AccessLog], path: &Path) -> Result<Vec<AccessLog>> {
    logs.iter()
        .enumerate()
        .map(|(i, l)| access_log(l, &path.index(i)))
        .collect()
}

fn access_log(l: &accesslog::AccessLog, path: &Path) -> Result<AccessLog> {
    let filter = match &l.filter {
        Some(f) => {
            let rule = super::local_reply::log_filter(f, &path.field("filter"))?;
            Some(Arc::new(engine::LogRule::new(rule)))
        }
        None => None,
    };
    let tpath = path.field("typed_config");
    let Some(accesslog::access_log::ConfigType::TypedConfig(any)) = &l.config_type else {
        return Err(Error::invalid(tpath, "required"));
    };
    let name = any_type_name(any, &tpath)?;
    let (sink, format) = if name == file::FileAccessLog::full_name() {
        let (f, fpath) = unpack::<file::FileAccessLog>(any, &tpath)?;
        if f.path.is_empty() {
            return Err(Error::invalid(fpath.field("path"), "required"));
        }
        use file::file_access_log::AccessLogFormat as F;
        let format = match &f.access_log_format {
            None => text(DEFAULT_FORMAT, &fpath)?,
            Some(F::Format(s)) => text(s, &fpath.field("format"))?,
            Some(F::JsonFormat(j)) => json(j, &fpath.field("json_format"))?,
            Some(F::TypedJsonFormat(_)) => {
                return Err(Error::unsupported(fpath.field("typed_json_format")))
            }
            Some(F::LogFormat(lf)) => log_format(lf, &fpath.field("log_format"))?,
        };
        (LogSink::File(f.path.into()), format)
    } else if name == stream::StdoutAccessLog::full_name() {
        let (s, spath) = unpack::<stream::StdoutAccessLog>(any, &tpath)?;
        let format = match &s.access_log_format {
            None => text(DEFAULT_FORMAT, &spath)?,
            Some(stream::stdout_access_log::AccessLogFormat::LogFormat(lf)) => {
                log_format(lf, &spath.field("log_format"))?
            }
        };
        (LogSink::Stdout, format)
    } else if name == stream::StderrAccessLog::full_name() {
        let (s, spath) = unpack::<stream::StderrAccessLog>(any, &tpath)?;
        let format = match &s.access_log_format {
            None => text(DEFAULT_FORMAT, &spath)?,
            Some(stream::stderr_access_log::AccessLogFormat::LogFormat(lf)) => {
                log_format(lf, &spath.field("log_format"))?
            }
        };
        (LogSink::Stderr, format)
    } else {
        return Err(Error::unsupported_msg(
            tpath,
            format!(
                "access logger {:?} ({name}) is not supported; file ({}), stdout ({}) and stderr ({}) are",
                l.name,
                file::FileAccessLog::full_name(),
                stream::StdoutAccessLog::full_name(),
                stream::StderrAccessLog::full_name()
            ),
        ));
    };
    Ok(AccessLog {
        sink,
        format: Arc::new(format),
        filter,
    })
}

fn text(s: &str, path: &Path) -> Result<LogFormat> {
    LogFormat::text(s).map_err(|e| Error::invalid(path.clone(), e.to_string()))
}

/// `json_format`: string values only (each a text format).
fn json(j: &prost_types::Struct, path: &Path) -> Result<LogFormat> {
    let mut fields = Vec::with_capacity(j.fields.len());
    for (k, v) in &j.fields {
        match &v.kind {
            Some(prost_types::value::Kind::StringValue(s)) => fields.push((k.clone(), s.clone())),
            _ => {
                return Err(Error::unsupported_msg(
                    path.field(k),
                    "only string values (command operators and text) are supported",
                ))
            }
        }
    }
    LogFormat::json(&fields).map_err(|e| Error::invalid(path.clone(), e.to_string()))
}

pub(super) fn log_format(lf: &core::SubstitutionFormatString, path: &Path) -> Result<LogFormat> {
    reject_set!(path, lf, omit_empty_values, formatters, json_format_options);
    use core::substitution_format_string::Format as F;
    match &lf.format {
        None => text(DEFAULT_FORMAT, path),
        Some(F::TextFormat(s)) => text(s, &path.field("text_format")),
        Some(F::JsonFormat(j)) => json(j, &path.field("json_format")),
        Some(F::TextFormatSource(d)) => {
            let dpath = path.field("text_format_source");
            let bytes = data_source(Some(d), &dpath)?;
            let s =
                String::from_utf8(bytes).map_err(|_| Error::invalid(dpath.clone(), "not UTF-8"))?;
            text(&s, &dpath)
        }
    }
}
