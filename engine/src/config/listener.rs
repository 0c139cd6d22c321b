//! A listener: its filter chains (each a transport socket and an HTTP connection manager), the table that picks one per connection, and its listener filters (`proxy_protocol`, `tls_inspector`).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use super::http_connection_manager::HttpConnectionManager;
use crate::filter_chain::{ChainTable, Connection, FilterChainMatch};

/// A listener and its filter chains.
#[derive(Debug, Clone)]
pub struct Listener {
    pub name: String,
    pub address: SocketAddr,
    /// `per_connection_buffer_limit_bytes`: unwritten output (and response
    /// window granted upstream) per downstream connection before its
    /// streams stop taking response data.
    pub per_connection_buffer_limit_bytes: u32,
    /// `filter_chains`, in configuration order.
    pub filter_chains: Vec<FilterChain>,
    /// `default_filter_chain`: for connections no chain matches (without
    /// it they are closed unanswered).
    pub default_filter_chain: Option<FilterChain>,
    /// Selection among `filter_chains`, built from their matches.
    pub chain_table: Arc<ChainTable>,
    /// `listener_filters` with `listener_filters_timeout`.
    pub listener_filters: ListenerFilters,
    /// `drain_type`: whether `/healthcheck/fail` drains it too.
    pub drain_type: DrainType,
}

/// `Listener.drain_type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum DrainType {
    /// Drains on updates, at stop, and while the health check fails
    /// (`POST /healthcheck/fail`).
    #[default]
    Default,
    /// Drains on updates and at stop only.
    ModifyOnly,
}

/// A listener's `listener_filters`, which run in this order before a
/// filter chain is chosen, all within one `listener_filters_timeout`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ListenerFilters {
    /// `envoy.filters.listener.proxy_protocol`: the PROXY header's
    /// addresses stand for the connection's own.
    pub proxy_protocol: Option<Arc<ProxyProtocol>>,
    /// `envoy.filters.listener.tls_inspector`: reads the ClientHello (SNI,
    /// ALPN).
    pub tls_inspector: bool,
    /// `listener_filters_timeout` (Envoy's default 15 s; `0s`: `None`).
    pub timeout: Option<Duration>,
    /// `continue_on_listener_filters_timeout`: past the timeout, choose a
    /// chain with what was read so far (the connection's own addresses,
    /// no ClientHello) instead of closing.
    pub continue_on_timeout: bool,
}

impl ListenerFilters {
    /// Whether the listener has any listener filter (and so a timer).
    pub fn any(&self) -> bool {
        self.tls_inspector || self.proxy_protocol.is_some()
    }
}

/// `envoy.filters.listener.proxy_protocol`: a PROXY protocol header (v1 or
/// v2) opens each connection and names the client and the address it
/// connected to, for everything that reads the connection's addresses.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProxyProtocol {
    /// `allow_requests_without_proxy_protocol`: a connection whose first
    /// bytes are not a PROXY header goes on with its own addresses.
    pub allow_without: bool,
    /// Versions not in `disallowed_versions`.
    pub allow_v1: bool,
    pub allow_v2: bool,
    /// `stat_prefix`: its counters are `proxy_proto.<stat_prefix>.*`
    /// (empty: `proxy_proto.*`).
    pub stat_prefix: String,
    /// `pass_through_tlvs`: which of a v2 header's TLVs the connection
    /// keeps for an upstream PROXY header.
    pub pass_through: TlvSelection,
}

/// Which TLVs pass: `ProxyProtocolPassThroughTLVs`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum TlvSelection {
    /// None (no `pass_through_tlvs`).
    #[default]
    None,
    /// `INCLUDE_ALL`.
    All,
    /// `INCLUDE`: these types.
    Types(Vec<u8>),
}

impl TlvSelection {
    /// Whether a TLV of type `kind` passes.
    pub fn includes(&self, kind: u8) -> bool {
        match self {
            TlvSelection::None => false,
            TlvSelection::All => true,
            TlvSelection::Types(t) => t.contains(&kind),
        }
    }
}

/// Envoy's default `listener_filters_timeout`.
pub const LISTENER_FILTERS_TIMEOUT: Duration = Duration::from_secs(15);

/// One filter chain: its match, its transport socket and its HTTP
/// connection manager.
#[derive(Debug, Clone)]
pub struct FilterChain {
    /// `name` (may be empty).
    pub name: String,
    pub filter_chain_match: FilterChainMatch,
    /// What the chain was configured from (a digest of its resource
    /// without RDS's routes): the same chain in a later snapshot of the
    /// listener has the same id, a changed one another.
    pub id: u64,
    /// The chain's `transport_socket`: TLS, or plaintext (`None`).
    pub tls: Option<Arc<crate::tls::DownstreamTls>>,
    /// The chain's HTTP connection manager. A `tcp_proxy` chain has one
    /// with no routes and no filters, which nothing reads.
    pub http: HttpConnectionManager,
    /// `envoy.filters.network.tcp_proxy`: the chain moves bytes to a
    /// cluster instead of serving HTTP.
    pub tcp_proxy: Option<Arc<super::tcp_proxy::TcpProxy>>,
    /// `envoy.filters.network.rbac` ahead of it: who may connect.
    pub rbac: Option<Arc<super::rbac_filter::NetworkRbac>>,
}

impl Listener {
    /// A listener with one chain that matches every connection (what
    /// tests and the demo build by hand).
    pub fn single(
        name: impl Into<String>,
        address: SocketAddr,
        per_connection_buffer_limit_bytes: u32,
        tls: Option<Arc<crate::tls::DownstreamTls>>,
        http: HttpConnectionManager,
    ) -> Self {
        let chain = FilterChain {
            name: String::new(),
            filter_chain_match: FilterChainMatch::default(),
            id: 0,
            tls,
            http,
            tcp_proxy: None,
            rbac: None,
        };
        let table = ChainTable::build(&[&chain.filter_chain_match])
            .expect("a single chain overlaps nothing");
        Self {
            name: name.into(),
            address,
            per_connection_buffer_limit_bytes,
            filter_chains: vec![chain],
            default_filter_chain: None,
            chain_table: Arc::new(table),
            listener_filters: ListenerFilters::default(),
            drain_type: DrainType::Default,
        }
    }

    /// The chain connection `c` gets (the table's, else the default),
    /// with its position in [`Self::chains`] order.
    pub fn select(&self, c: &Connection<'_>) -> Option<(usize, &FilterChain)> {
        match self.chain_table.find(c) {
            Some(i) => self.filter_chains.get(i).map(|f| (i, f)),
            None => self
                .default_filter_chain
                .as_ref()
                .map(|f| (self.filter_chains.len(), f)),
        }
    }

    /// Every chain, the default last.
    pub fn chains(&self) -> impl Iterator<Item = &FilterChain> {
        self.filter_chains
            .iter()
            .chain(self.default_filter_chain.as_ref())
    }

    /// Mutable access to every chain, the default last.
    pub fn chains_mut(&mut self) -> impl Iterator<Item = &mut FilterChain> {
        self.filter_chains
            .iter_mut()
            .chain(self.default_filter_chain.as_mut())
    }

    /// The chain with this id, if the listener still has it.
    pub fn chain(&self, id: u64) -> Option<&FilterChain> {
        self.chains().find(|c| c.id == id)
    }

    /// The chain with this id, looked for first at position `hint` (in
    /// [`Self::chains`] order, where it was when the connection opened):
    /// a request costs no scan of a listener with many chains unless an
    /// update moved its chain.
    pub fn chain_at(&self, hint: usize, id: u64) -> Option<&FilterChain> {
        match self.chains().nth(hint) {
            Some(c) if c.id == id => Some(c),
            _ => self.chain(id),
        }
    }
}
