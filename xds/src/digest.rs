//! A digest of a resource that says whether two pushes configure the same thing: map entries hash in key order and `Any` values by their decoded contents, so the order a control plane (or our YAML decoder) happened to encode maps in changes nothing.

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};

use prost::{Message, Name};
use prost_reflect::{DynamicMessage, MapKey, ReflectMessage, Value};

use crate::decode::pool;

/// The digest of `msg` (stable within a build: `DefaultHasher::new()` has
/// fixed keys).
pub fn digest<T: Message + Name>(msg: &T) -> u64 {
    let mut h = DefaultHasher::new();
    let bytes = msg.encode_to_vec();
    match pool()
        .get_message_by_name(&T::full_name())
        .and_then(|d| DynamicMessage::decode(d, bytes.as_slice()).ok())
    {
        Some(m) => message(&m, &mut h),
        // Not in our descriptor set (never, for the types we call it on):
        // the bytes as they are.
        None => bytes.hash(&mut h),
    }
    h.finish()
}

fn message(m: &DynamicMessage, h: &mut DefaultHasher) {
    if m.descriptor().full_name() == "google.protobuf.Any" {
        let url = m.get_field_by_name("type_url");
        let value = m.get_field_by_name("value");
        if let (Some(Value::String(url)), Some(Value::Bytes(bytes))) =
            (url.as_deref(), value.as_deref())
        {
            let name = crate::decode::type_name(url);
            if let Some(inner) = pool()
                .get_message_by_name(name)
                .and_then(|d| DynamicMessage::decode(d, bytes.as_ref()).ok())
            {
                url.hash(h);
                message(&inner, h);
                return;
            }
        }
    }
    for (field, v) in m.fields() {
        field.number().hash(h);
        value(v, h);
    }
}

fn value(v: &Value, h: &mut DefaultHasher) {
    std::mem::discriminant(v).hash(h);
    match v {
        Value::Bool(b) => b.hash(h),
        Value::I32(n) | Value::EnumNumber(n) => n.hash(h),
        Value::I64(n) => n.hash(h),
        Value::U32(n) => n.hash(h),
        Value::U64(n) => n.hash(h),
        Value::F32(f) => f.to_bits().hash(h),
        Value::F64(f) => f.to_bits().hash(h),
        Value::String(s) => s.hash(h),
        Value::Bytes(b) => b.hash(h),
        Value::Message(m) => message(m, h),
        Value::List(items) => {
            items.len().hash(h);
            items.iter().for_each(|i| value(i, h));
        }
        Value::Map(map) => {
            let mut entries: Vec<(&MapKey, &Value)> = map.iter().collect();
            entries.sort_by(|a, b| a.0.cmp(b.0));
            entries.len().hash(h);
            for (k, v) in entries {
                k.hash(h);
                value(v, h);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pb::envoy::config::listener::v3 as pb;

    fn hash_of(name: &str, bytes: &[u8]) -> u64 {
        let d = pool().get_message_by_name(name).expect("known type");
        let m = DynamicMessage::decode(d, bytes).expect("decodes");
        let mut h = DefaultHasher::new();
        message(&m, &mut h);
        h.finish()
    }

    /// A length-delimited field `tag` holding `body`.
    fn field(tag: u8, body: &[u8]) -> Vec<u8> {
        let mut out = vec![tag, body.len() as u8];
        out.extend_from_slice(body);
        out
    }

    /// `typed_per_filter_config` entry: key → Any of type `url`.
    fn entry(key: &str, url: &str) -> Vec<u8> {
        let any = field(0x0a, url.as_bytes());
        // VirtualHost field 15: tag (15 << 3) | 2.
        field(
            0x7a,
            &[field(0x0a, key.as_bytes()), field(0x12, &any)].concat(),
        )
    }

    /// The same map in two encodings (entries swapped): one digest; other
    /// contents: another.
    #[test]
    fn map_order_does_not_change_the_digest() {
        const VH: &str = "envoy.config.route.v3.VirtualHost";
        let (a, b) = (
            entry("one", "type.googleapis.com/google.protobuf.Duration"),
            entry(
                "two",
                "type.googleapis.com/envoy.config.route.v3.VirtualHost",
            ),
        );
        let ab = hash_of(VH, &[a.clone(), b.clone()].concat());
        assert_eq!(ab, hash_of(VH, &[b.clone(), a.clone()].concat()));
        let c = entry("two", "type.googleapis.com/google.protobuf.Duration");
        assert_ne!(ab, hash_of(VH, &[a, c].concat()));
    }

    #[test]
    fn a_changed_field_changes_the_digest() {
        let a = pb::FilterChain {
            name: "a".into(),
            ..Default::default()
        };
        let b = pb::FilterChain {
            name: "b".into(),
            ..Default::default()
        };
        assert_eq!(digest(&a), digest(&a.clone()));
        assert_ne!(digest(&a), digest(&b));
    }
}
