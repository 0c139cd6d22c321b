//! Incremental (Delta) xDS over ADS (`api_type: DELTA_GRPC`): the same client state as State of the World, fed by deltas. Each type's resources are held by name with their versions; a response's additions and removals are applied to a copy, and the copy's whole set goes through the same validation as a State-of-the-World response, so a rejected delta changes nothing and the next one applies to the last accepted set.
//!
//! ```text
//!  stream opened ──▶ on_delta_stream_open() ──▶ per type: subscribe (names, or none: wildcard)
//!                                                  + initial_resource_versions held
//!  response      ──▶ on_delta_response()    ──▶ ACK or NACK (nonce) + subscription changes
//! ```
//!
//! A removal of a name not held is ignored and counted (a control plane
//! may repeat one, or remove what it never sent); a resource without a
//! body is a rejection of the whole response, as Envoy's.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Instant;

use super::{nack_delay, ResourceType, XdsClient, NACK_CODE};
use crate::pb::envoy::service::discovery::v3::{
    DeltaDiscoveryRequest, DeltaDiscoveryResponse, DiscoveryRequest,
};
use crate::pb::google::rpc::Status;

/// One type's resources as the server sent them: version and body by
/// name; and the names subscribed on the current stream.
#[derive(Debug, Default, Clone)]
pub(super) struct DeltaType {
    held: BTreeMap<String, (String, prost_types::Any)>,
    /// Names the server was told about on this stream (RDS/EDS).
    sent: BTreeSet<String>,
    /// Whether this type was subscribed on this stream at all.
    subscribed: bool,
}

/// What a delta response led to.
#[derive(Debug, Default)]
pub struct DeltaOutcome {
    /// To send, in order (ACK/NACK first).
    pub requests: Vec<DeltaDiscoveryRequest>,
    pub changed: bool,
    pub rejected: Option<String>,
    pub repeated: u32,
    pub delay: std::time::Duration,
}

impl XdsClient {
    /// A new Delta ADS stream: every wanted type subscribed, with the
    /// versions held (the server may skip what we have).
    pub fn on_delta_stream_open(&mut self) -> Vec<DeltaDiscoveryRequest> {
        self.stream_open = true;
        self.node_sent = false;
        for t in &mut self.types {
            t.nonce.clear();
            t.requested = false;
        }
        for d in &mut self.delta {
            d.sent.clear();
            d.subscribed = false;
        }
        let wanted: Vec<ResourceType> = ResourceType::ALL
            .into_iter()
            .filter(|k| self.wants(*k))
            .collect();
        wanted
            .into_iter()
            .map(|k| self.delta_subscribe(k))
            .collect()
    }

    /// The first request of `kind` on the stream: its names (none for the
    /// wildcard types, listeners and clusters) and the versions held.
    fn delta_subscribe(&mut self, kind: ResourceType) -> DeltaDiscoveryRequest {
        let names: BTreeSet<String> = match kind {
            ResourceType::Listener | ResourceType::Cluster => BTreeSet::new(),
            _ => self.types[kind.index()].names.clone(),
        };
        let node = self.node_once();
        self.types[kind.index()].requested = true;
        let d = &mut self.delta[kind.index()];
        d.subscribed = true;
        d.sent = names.clone();
        DeltaDiscoveryRequest {
            node,
            type_url: kind.type_url().to_owned(),
            resource_names_subscribe: names.into_iter().collect(),
            initial_resource_versions: d
                .held
                .iter()
                .map(|(n, (v, _))| (n.clone(), v.clone()))
                .collect(),
            ..DeltaDiscoveryRequest::default()
        }
    }

    /// The node, on the stream's first message (or every one, unless
    /// `set_node_on_first_message_only`).
    fn node_once(&mut self) -> Option<crate::pb::envoy::config::core::v3::Node> {
        let node = (!(self.node_sent && self.node_on_first_only)).then(|| self.node.clone());
        self.node_sent = true;
        node
    }

    /// The client's subscription requests (from `set_statics`, say) for
    /// a Delta stream.
    pub fn delta_requests(&mut self, reqs: Vec<DiscoveryRequest>) -> Vec<DeltaDiscoveryRequest> {
        reqs.into_iter().filter_map(|r| self.delta_of(r)).collect()
    }

    /// A State-of-the-World subscription request (what `apply` and
    /// `resubscribe` make) as a delta one: the names added and removed
    /// since the stream last heard; `None` when nothing changed.
    pub(super) fn delta_of(&mut self, req: DiscoveryRequest) -> Option<DeltaDiscoveryRequest> {
        let kind = ResourceType::from_type_url(&req.type_url)?;
        if !self.delta[kind.index()].subscribed {
            return Some(self.delta_subscribe(kind));
        }
        let names: BTreeSet<String> = req.resource_names.into_iter().collect();
        let d = &mut self.delta[kind.index()];
        let subscribe: Vec<String> = names.difference(&d.sent).cloned().collect();
        let unsubscribe: Vec<String> = d.sent.difference(&names).cloned().collect();
        if subscribe.is_empty() && unsubscribe.is_empty() {
            return None;
        }
        // Names we no longer want: their resources are dropped with them.
        for n in &unsubscribe {
            d.held.remove(n);
        }
        d.sent = names;
        let node = self.node_once();
        Some(DeltaDiscoveryRequest {
            node,
            type_url: kind.type_url().to_owned(),
            resource_names_subscribe: subscribe,
            resource_names_unsubscribe: unsubscribe,
            ..DeltaDiscoveryRequest::default()
        })
    }

    /// Handles one `DeltaDiscoveryResponse`.
    pub fn on_delta_response(
        &mut self,
        resp: DeltaDiscoveryResponse,
        now: Instant,
    ) -> DeltaOutcome {
        let Some(kind) = ResourceType::from_type_url(&resp.type_url) else {
            return DeltaOutcome {
                rejected: Some(format!(
                    "ignored response of unknown type {:?}",
                    resp.type_url
                )),
                ..DeltaOutcome::default()
            };
        };
        let i = kind.index();
        self.types[i].nonce = resp.nonce.clone();
        let mut next = self.delta[i].held.clone();
        let mut problem = None;
        let mut named = std::collections::HashSet::new();
        for r in resp.resources {
            if !named.insert(r.name.clone()) {
                problem.get_or_insert(format!("resource {:?} is listed twice", r.name));
            }
            match r.resource {
                Some(any) => {
                    next.insert(r.name, (r.version, any));
                }
                None => {
                    problem.get_or_insert(format!("resource {:?} has no body", r.name));
                }
            }
        }
        let mut unknown = 0;
        for name in resp.removed_resources {
            if named.contains(&name) {
                problem.get_or_insert(format!("resource {name:?} is both sent and removed"));
            }
            if next.remove(&name).is_none() {
                unknown += 1;
            }
        }
        let bodies: Vec<prost_types::Any> = next.values().map(|(_, a)| a.clone()).collect();
        let applied = match problem {
            Some(p) => {
                self.reject(kind, &resp.system_version_info, &p, now);
                Err(p)
            }
            None => self.apply(kind, &resp.system_version_info, &bodies, now),
        };
        match applied {
            Ok(more) => {
                // Listeners and clusters were replaced whole. A removed
                // route table or endpoint assignment stays in use while a
                // listener or cluster names it, as in Envoy (which ignores
                // those removals): only its held copy goes, so the server
                // sending it again applies.
                self.types[i].status.unknown_removals += unknown;
                self.delta[i].held = next;
                let mut requests = vec![self.delta_ack(kind, None)];
                requests.extend(more.into_iter().filter_map(|r| self.delta_of(r)));
                DeltaOutcome {
                    requests,
                    changed: true,
                    ..DeltaOutcome::default()
                }
            }
            Err(message) => {
                let repeated = self.types[i].reject_streak;
                DeltaOutcome {
                    requests: vec![self.delta_ack(kind, Some(message.clone()))],
                    rejected: Some(message),
                    repeated,
                    delay: nack_delay(repeated),
                    ..DeltaOutcome::default()
                }
            }
        }
    }

    /// The ACK (or, with `error`, NACK) of `kind`'s last response.
    fn delta_ack(&mut self, kind: ResourceType, error: Option<String>) -> DeltaDiscoveryRequest {
        let node = self.node_once();
        DeltaDiscoveryRequest {
            node,
            type_url: kind.type_url().to_owned(),
            response_nonce: self.types[kind.index()].nonce.clone(),
            error_detail: error.map(|message| Status {
                code: NACK_CODE,
                message,
                details: Vec::new(),
            }),
            ..DeltaDiscoveryRequest::default()
        }
    }
}
