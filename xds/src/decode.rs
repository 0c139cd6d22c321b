//! JSON (or YAML, via `serde_json::Value`) → prost structs through the
//! descriptor pool, and `Any` unpacking (including `TypedStruct` wrappers).

use std::sync::OnceLock;

use prost::{Message, Name};
use prost_reflect::{DescriptorPool, DeserializeOptions, DynamicMessage, Kind, MessageDescriptor};
use serde_json::{Map, Value};

use crate::error::{Error, Path, Result};
use crate::pb;

const UNSUPPORTED: &str = "gateway.v1.Unsupported";
const ANY: &str = "google.protobuf.Any";
const TYPE_URL_PREFIX: &str = "type.googleapis.com/";
const XDS_TYPED_STRUCT: &str = "xds.type.v3.TypedStruct";
const UDPA_TYPED_STRUCT: &str = "udpa.type.v1.TypedStruct";

/// Descriptors of everything in `proto/` plus the well-known types.
pub fn pool() -> &'static DescriptorPool {
    static POOL: OnceLock<DescriptorPool> = OnceLock::new();
    POOL.get_or_init(|| {
        // Built from our own build output, never from config input: a failure
        // here is a build bug, not a config error.
        DescriptorPool::decode(pb::FILE_DESCRIPTOR_SET).expect("descriptor set built by build.rs")
    })
}

fn descriptor(full_name: &str) -> Result<MessageDescriptor> {
    pool()
        .get_message_by_name(full_name)
        .ok_or_else(|| Error::invalid(Path::root(), format!("no descriptor for {full_name}")))
}

/// Decodes proto3 JSON (already parsed; YAML works too) into `T`.
///
/// Accepts original and camelCase field names, resolves `Any` by its
/// `@type`, and reports unknown fields and type errors with their path,
/// prefixed by `base`.
pub fn from_json<T: Message + Name + Default>(mut value: Value, base: &Path) -> Result<T> {
    let desc = descriptor(&T::full_name())?;
    normalize(&mut value, &desc, base)?;
    let options = DeserializeOptions::new().deny_unknown_fields(true);
    let mut track = serde_path_to_error::Track::new();
    let de = serde_path_to_error::Deserializer::new(&value, &mut track);
    let message =
        DynamicMessage::deserialize_with_options(desc.clone(), de, &options).map_err(|e| {
            let path = to_path(base, track.path(), &desc, &value);
            Error::invalid(path, e.to_string())
        })?;
    message
        .transcode_to::<T>()
        .map_err(|e| Error::invalid(base.clone(), e.to_string()))
}

/// Walks `value` as message `desc` before the real deserialization so that:
/// - keys become proto field names (paths and docs then use one spelling);
/// - unknown fields are reported with their path;
/// - fields typed `gateway.v1.Unsupported` have their contents dropped (they
///   are rejected later, by presence, with a "not supported" message);
/// - an `Any` whose type we do not know becomes a `TypedStruct` carrying the
///   original type URL, so validation can name it (or skip an optional
///   filter) instead of failing inside the JSON decoder.
fn normalize(value: &mut Value, desc: &MessageDescriptor, path: &Path) -> Result<()> {
    let name = desc.full_name();
    if value.is_null() {
        return Ok(());
    }
    if name == UNSUPPORTED {
        *value = Value::Object(Map::new());
        return Ok(());
    }
    if name == ANY {
        return normalize_any(value, path);
    }
    if name.starts_with("google.protobuf.") {
        // Well-known types have their own JSON forms; prost-reflect checks them.
        return Ok(());
    }
    let Value::Object(object) = value else {
        return Ok(()); // the deserializer reports the type mismatch with its path
    };
    let mut out = Map::new();
    for (key, mut v) in std::mem::take(object) {
        let Some(field) = desc
            .get_field_by_name(&key)
            .or_else(|| desc.get_field_by_json_name(&key))
        else {
            return Err(Error::UnknownField {
                path: path.field(&key),
            });
        };
        let fpath = path.field(field.name());
        if out.contains_key(field.name()) {
            return Err(Error::invalid(fpath, "given twice (proto and JSON names)"));
        }
        if field.is_map() {
            if let (Kind::Message(entry), Value::Object(entries)) = (field.kind(), &mut v) {
                if let Kind::Message(value_desc) = entry.map_entry_value_field().kind() {
                    for (k, mv) in entries.iter_mut() {
                        normalize(mv, &value_desc, &fpath.key(k))?;
                    }
                }
            }
        } else if let Kind::Message(field_desc) = field.kind() {
            match &mut v {
                Value::Array(items) if field.is_list() => {
                    for (i, item) in items.iter_mut().enumerate() {
                        normalize(item, &field_desc, &fpath.index(i))?;
                    }
                }
                _ => normalize(&mut v, &field_desc, &fpath)?,
            }
        }
        out.insert(field.name().to_owned(), v);
    }
    *object = out;
    Ok(())
}

fn normalize_any(value: &mut Value, path: &Path) -> Result<()> {
    let Value::Object(object) = value else {
        return Ok(());
    };
    let Some(Value::String(type_url)) = object.remove("@type") else {
        return Err(Error::invalid(path.field("@type"), "required in an Any"));
    };
    let type_name = type_url.rsplit('/').next().unwrap_or_default().to_owned();
    let mut rest = std::mem::take(object);
    // "@type" goes first so the deserializer streams the rest of the object
    // (and serde_path_to_error keeps paths) instead of buffering it.
    object.insert("@type".into(), Value::String(type_url.clone()));
    match pool().get_message_by_name(&type_name) {
        Some(desc) => {
            if !type_name.starts_with("google.protobuf.") {
                let mut inner = Value::Object(rest);
                normalize(&mut inner, &desc, path)?;
                let Value::Object(inner) = inner else {
                    return Ok(());
                };
                rest = inner;
            }
            object.extend(rest);
        }
        None => {
            object.insert(
                "@type".into(),
                Value::String(format!("{TYPE_URL_PREFIX}{XDS_TYPED_STRUCT}")),
            );
            object.insert("type_url".into(), Value::String(type_url));
            object.insert("value".into(), Value::Object(rest));
        }
    }
    Ok(())
}

/// Re-expresses serde_path_to_error's path with our conventions, walking the
/// descriptors so proto map keys print as `["key"]` rather than as fields.
fn to_path(
    base: &Path,
    track: serde_path_to_error::Path,
    desc: &MessageDescriptor,
    value: &Value,
) -> Path {
    use serde_path_to_error::Segment;
    let mut path = base.clone();
    let mut desc = Some(desc.clone());
    let mut value = Some(value);
    let mut in_map = false;
    for seg in track.iter() {
        match seg {
            Segment::Seq { index } => {
                path = path.index(*index);
                value = value.and_then(|v| v.get(*index));
            }
            Segment::Map { key } if in_map => {
                path = path.key(key);
                value = value.and_then(|v| v.get(key.as_str()));
                in_map = false;
            }
            Segment::Map { key } => {
                // Inside an Any the fields are those of the `@type` message.
                if desc.as_ref().is_some_and(|d| d.full_name() == ANY) {
                    desc = value
                        .and_then(|v| v.get("@type"))
                        .and_then(Value::as_str)
                        .and_then(|t| pool().get_message_by_name(type_name(t)));
                }
                path = path.field(key);
                value = value.and_then(|v| v.get(key.as_str()));
                let field = desc.as_ref().and_then(|d| d.get_field_by_name(key));
                in_map = field.as_ref().is_some_and(|f| f.is_map());
                desc = field.and_then(|f| match f.kind() {
                    Kind::Message(m) if f.is_map() => match m.map_entry_value_field().kind() {
                        Kind::Message(v) => Some(v),
                        _ => None,
                    },
                    Kind::Message(m) => Some(m),
                    _ => None,
                });
            }
            Segment::Enum { .. } | Segment::Unknown => {}
        }
    }
    path
}

/// The message name an `Any` carries, looking through a `TypedStruct`
/// wrapper (as Envoy does for extension configs).
pub fn any_type_name(any: &prost_types::Any, path: &Path) -> Result<String> {
    let name = type_name(&any.type_url);
    if name == XDS_TYPED_STRUCT || name == UDPA_TYPED_STRUCT {
        Ok(type_name(&typed_struct(any, path)?.type_url).to_owned())
    } else {
        Ok(name.to_owned())
    }
}

/// The original type URL an `Any` carries (looking through `TypedStruct`).
pub fn any_type_url(any: &prost_types::Any, path: &Path) -> Result<String> {
    let name = type_name(&any.type_url);
    if name == XDS_TYPED_STRUCT || name == UDPA_TYPED_STRUCT {
        Ok(typed_struct(any, path)?.type_url)
    } else {
        Ok(any.type_url.clone())
    }
}

/// Decodes an `Any` holding `T` directly or as a `TypedStruct` of `T`.
/// Also returns the path of `T`'s fields: `path`, or `path.value` when
/// wrapped, so later validation errors point into the document correctly.
pub fn unpack<T: Message + Name + Default>(
    any: &prost_types::Any,
    path: &Path,
) -> Result<(T, Path)> {
    let name = type_name(&any.type_url);
    let want = T::full_name();
    if name == want {
        return T::decode(any.value.as_slice())
            .map(|m| (m, path.clone()))
            .map_err(|e| Error::invalid(path.clone(), format!("invalid {want}: {e}")));
    }
    if name == XDS_TYPED_STRUCT || name == UDPA_TYPED_STRUCT {
        let ts = typed_struct(any, path)?;
        if type_name(&ts.type_url) == want {
            let value = ts.value.map(struct_to_json).unwrap_or(Value::Null);
            let value = if value.is_null() {
                Value::Object(Map::new())
            } else {
                value
            };
            let vpath = path.field("value");
            return Ok((from_json(value, &vpath)?, vpath));
        }
        return Err(Error::invalid(
            path.field("type_url"),
            format!("expected {TYPE_URL_PREFIX}{want}, got {:?}", ts.type_url),
        ));
    }
    Err(Error::invalid(
        path.clone(),
        format!("expected {TYPE_URL_PREFIX}{want}, got {:?}", any.type_url),
    ))
}

pub(crate) fn type_name(type_url: &str) -> &str {
    type_url.rsplit('/').next().unwrap_or_default()
}

fn typed_struct(any: &prost_types::Any, path: &Path) -> Result<pb::xds::r#type::v3::TypedStruct> {
    // udpa.type.v1.TypedStruct and xds.type.v3.TypedStruct share one layout.
    pb::xds::r#type::v3::TypedStruct::decode(any.value.as_slice())
        .map_err(|e| Error::invalid(path.clone(), format!("invalid TypedStruct: {e}")))
}

fn struct_to_json(s: prost_types::Struct) -> Value {
    Value::Object(
        s.fields
            .into_iter()
            .map(|(k, v)| (k, value_to_json(v)))
            .collect(),
    )
}

fn value_to_json(v: prost_types::Value) -> Value {
    use prost_types::value::Kind as K;
    match v.kind {
        None | Some(K::NullValue(_)) => Value::Null,
        Some(K::BoolValue(b)) => Value::Bool(b),
        Some(K::StringValue(s)) => Value::String(s),
        // Struct numbers are doubles; integral ones go back to integers so
        // they can populate integer fields (ports, weights).
        Some(K::NumberValue(n)) if n.fract() == 0.0 && n.abs() < 9.0e15 => {
            Value::Number((n as i64).into())
        }
        Some(K::NumberValue(n)) => serde_json::Number::from_f64(n)
            .map(Value::Number)
            .unwrap_or(Value::Null),
        Some(K::StructValue(s)) => struct_to_json(s),
        Some(K::ListValue(l)) => Value::Array(l.values.into_iter().map(value_to_json).collect()),
    }
}
