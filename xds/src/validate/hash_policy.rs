//! A route's `hash_policy` → the engine's hash inputs: header, cookie, source IP, query parameter.

use super::common::reject_set;
use crate::error::{Error, Path, Result};
use crate::pb::envoy::config::route::v3 as pb;

/// `hash_policy`: header, cookie (with `ttl` and `path`; `attributes`
/// refused), `connection_properties.source_ip` and `query_parameter`;
/// `filter_state` and a header's `regex_rewrite` refused by name.
pub(super) fn hash_policies(
    list: &[pb::route_action::HashPolicy],
    path: &Path,
) -> Result<Vec<engine::HashPolicy>> {
    use engine::HashOn;
    use pb::route_action::hash_policy::PolicySpecifier as P;
    let mut out = Vec::with_capacity(list.len());
    for (i, h) in list.iter().enumerate() {
        let hpath = path.index(i);
        let kind = match &h.policy_specifier {
            Some(P::Header(x)) => {
                let xpath = hpath.field("header");
                reject_set!(xpath, x, regex_rewrite);
                if !super::common::is_token(&x.header_name) && !x.header_name.starts_with(':') {
                    return Err(Error::invalid(
                        xpath.field("header_name"),
                        format!("{:?} is not a header name", x.header_name),
                    ));
                }
                HashOn::Header(x.header_name.to_ascii_lowercase())
            }
            Some(P::Cookie(c)) => {
                let cpath = hpath.field("cookie");
                reject_set!(cpath, c, attributes);
                if !super::common::is_token(&c.name) {
                    return Err(Error::invalid(
                        cpath.field("name"),
                        format!("{:?} is not a cookie name", c.name),
                    ));
                }
                if c.path.bytes().any(|b| b == b';' || b.is_ascii_control()) {
                    return Err(Error::invalid(cpath.field("path"), "not a cookie path"));
                }
                let ttl = match &c.ttl {
                    Some(d) => Some(super::common::duration(d, &cpath.field("ttl"))?),
                    None => None,
                };
                HashOn::Cookie {
                    name: c.name.clone(),
                    ttl,
                    path: (!c.path.is_empty()).then(|| c.path.clone()),
                }
            }
            Some(P::ConnectionProperties(c)) => {
                if !c.source_ip {
                    // Envoy hashes nothing then: an entry that never
                    // yields a hash.
                    return Err(Error::invalid(
                        hpath.field("connection_properties").field("source_ip"),
                        "must be true",
                    ));
                }
                HashOn::SourceIp
            }
            Some(P::QueryParameter(q)) => {
                if q.name.is_empty() {
                    return Err(Error::invalid(
                        hpath.field("query_parameter").field("name"),
                        "required",
                    ));
                }
                HashOn::QueryParameter(q.name.clone())
            }
            Some(P::FilterState(_)) => return Err(Error::unsupported(hpath.field("filter_state"))),
            None => {
                return Err(Error::invalid(
                    hpath,
                    "one of header, cookie, connection_properties or query_parameter is required",
                ))
            }
        };
        out.push(engine::HashPolicy {
            kind,
            terminal: h.terminal,
        });
    }
    Ok(out)
}
