//! The part of `envoy.service.auth.v3` (and the messages it uses) a check carries, as prost messages: field numbers are the protos'; fields a check never sets or reads are left out (prost skips them when decoding).

use std::collections::BTreeMap;

/// `CheckRequest`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct CheckRequest {
    #[prost(message, optional, tag = "1")]
    pub attributes: Option<AttributeContext>,
}

/// `AttributeContext`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct AttributeContext {
    #[prost(message, optional, tag = "1")]
    pub source: Option<Peer>,
    #[prost(message, optional, tag = "2")]
    pub destination: Option<Peer>,
    #[prost(message, optional, tag = "4")]
    pub request: Option<Request>,
    #[prost(btree_map = "string, string", tag = "10")]
    pub context_extensions: BTreeMap<String, String>,
    /// Empty, as Envoy's with no dynamic metadata.
    #[prost(message, optional, tag = "11")]
    pub metadata_context: Option<Metadata>,
    #[prost(message, optional, tag = "12")]
    pub tls_session: Option<TlsSession>,
    #[prost(message, optional, tag = "13")]
    pub route_metadata_context: Option<Metadata>,
}

/// `config.core.v3.Metadata` (never filled).
#[derive(Clone, PartialEq, prost::Message)]
pub struct Metadata {}

/// `AttributeContext.Peer`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Peer {
    #[prost(message, optional, tag = "1")]
    pub address: Option<Address>,
    #[prost(string, tag = "4")]
    pub principal: String,
}

/// `config.core.v3.Address` with its `socket_address`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Address {
    #[prost(message, optional, tag = "1")]
    pub socket_address: Option<SocketAddress>,
}

/// `config.core.v3.SocketAddress` (TCP).
#[derive(Clone, PartialEq, prost::Message)]
pub struct SocketAddress {
    #[prost(string, tag = "2")]
    pub address: String,
    #[prost(uint32, tag = "3")]
    pub port_value: u32,
}

/// `AttributeContext.Request`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Request {
    #[prost(message, optional, tag = "1")]
    pub time: Option<Timestamp>,
    #[prost(message, optional, tag = "2")]
    pub http: Option<HttpRequest>,
}

/// `google.protobuf.Timestamp`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Timestamp {
    #[prost(int64, tag = "1")]
    pub seconds: i64,
    #[prost(int32, tag = "2")]
    pub nanos: i32,
}

/// `AttributeContext.HttpRequest`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct HttpRequest {
    #[prost(string, tag = "1")]
    pub id: String,
    #[prost(string, tag = "2")]
    pub method: String,
    #[prost(btree_map = "string, string", tag = "3")]
    pub headers: BTreeMap<String, String>,
    #[prost(string, tag = "4")]
    pub path: String,
    #[prost(string, tag = "5")]
    pub host: String,
    #[prost(string, tag = "6")]
    pub scheme: String,
    #[prost(int64, tag = "9")]
    pub size: i64,
    #[prost(string, tag = "10")]
    pub protocol: String,
    #[prost(string, tag = "11")]
    pub body: String,
    #[prost(bytes = "vec", tag = "12")]
    pub raw_body: Vec<u8>,
    #[prost(message, optional, tag = "13")]
    pub header_map: Option<HeaderMap>,
}

/// `config.core.v3.HeaderMap`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct HeaderMap {
    #[prost(message, repeated, tag = "1")]
    pub headers: Vec<HeaderValue>,
}

/// `config.core.v3.HeaderValue`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct HeaderValue {
    #[prost(string, tag = "1")]
    pub key: String,
    #[prost(string, tag = "2")]
    pub value: String,
    #[prost(bytes = "vec", tag = "3")]
    pub raw_value: Vec<u8>,
}

impl HeaderValue {
    /// Its value: `raw_value` when set, as Envoy reads it.
    pub fn value(&self) -> &[u8] {
        if self.raw_value.is_empty() {
            self.value.as_bytes()
        } else {
            &self.raw_value
        }
    }
}

/// `AttributeContext.TLSSession`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct TlsSession {
    #[prost(string, tag = "1")]
    pub sni: String,
}

/// `CheckResponse`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct CheckResponse {
    #[prost(message, optional, tag = "1")]
    pub status: Option<RpcStatus>,
    #[prost(message, optional, tag = "2")]
    pub denied_response: Option<DeniedHttpResponse>,
    #[prost(message, optional, tag = "3")]
    pub ok_response: Option<OkHttpResponse>,
    #[prost(message, optional, tag = "5")]
    pub error_response: Option<DeniedHttpResponse>,
}

/// `google.rpc.Status`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct RpcStatus {
    #[prost(int32, tag = "1")]
    pub code: i32,
    #[prost(string, tag = "2")]
    pub message: String,
}

/// `DeniedHttpResponse` (an error response's shape too).
#[derive(Clone, PartialEq, prost::Message)]
pub struct DeniedHttpResponse {
    #[prost(message, optional, tag = "1")]
    pub status: Option<HttpStatus>,
    #[prost(message, repeated, tag = "2")]
    pub headers: Vec<HeaderValueOption>,
    #[prost(string, tag = "3")]
    pub body: String,
}

/// `type.v3.HttpStatus`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct HttpStatus {
    #[prost(int32, tag = "1")]
    pub code: i32,
}

/// `OkHttpResponse`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct OkHttpResponse {
    #[prost(message, repeated, tag = "2")]
    pub headers: Vec<HeaderValueOption>,
    #[prost(string, repeated, tag = "5")]
    pub headers_to_remove: Vec<String>,
    #[prost(message, repeated, tag = "6")]
    pub response_headers_to_add: Vec<HeaderValueOption>,
    #[prost(message, repeated, tag = "7")]
    pub query_parameters_to_set: Vec<QueryParameter>,
    #[prost(string, repeated, tag = "8")]
    pub query_parameters_to_remove: Vec<String>,
}

/// `config.core.v3.HeaderValueOption`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct HeaderValueOption {
    #[prost(message, optional, tag = "1")]
    pub header: Option<HeaderValue>,
    /// `google.protobuf.BoolValue`.
    #[prost(message, optional, tag = "2")]
    pub append: Option<BoolValue>,
}

/// `google.protobuf.BoolValue`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct BoolValue {
    #[prost(bool, tag = "1")]
    pub value: bool,
}

/// `config.core.v3.QueryParameter`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct QueryParameter {
    #[prost(string, tag = "1")]
    pub key: String,
    #[prost(string, tag = "2")]
    pub value: String,
}
