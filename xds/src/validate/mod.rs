//! Envoy protos → validated `engine` config, one entry point per resource
//! type so bootstrap and (later) xDS responses share the same rules.

mod access_log;
mod circuit_breakers;
mod cluster;
pub(crate) mod common;
mod compressor;
mod cors;
mod csrf;
mod dns;
mod fault;
mod filter_chain;
mod hash_policy;
mod hcm_headers;
mod header_mutation;
mod health_check;
mod health_check_filter;
mod http_connection_manager;
mod lb;
mod listener;
mod local_reply;
mod mirror;
mod node;
mod outlier;
mod per_filter;
mod retry;
mod route;
mod route_match;
mod route_reply;
mod session;
mod source;
mod tcp_proxy;
mod tls;
mod upgrade;
mod upstream;

pub use cluster::{cluster, cluster_load_assignment};
pub(crate) use common::{reject_set, socket_address};
pub use http_connection_manager::http_connection_manager;
pub use lb::{common_lb_config, least_request_lb_config, load_balancing_policy};
pub use listener::listener;
pub use node::{node, USER_AGENT_NAME};
pub use outlier::outlier_detection;
pub use per_filter::{typed_per_filter_config, Level};
pub use route::{route_config, virtual_host, TableDefaults};
pub use route_reply::DEFAULT_MAX_DIRECT_RESPONSE_BODY;
pub use session::{stateful_session, stateful_session_per_route};
pub use source::{ads_config, config_source, dynamic_resources, initial_fetch_timeout, Allowed};
