//! Field decoders that never fail: a value of the wrong shape becomes the default.

use serde::{Deserialize, Deserializer};

pub fn value<'de, D: Deserializer<'de>, T: serde::de::DeserializeOwned + Default>(d: D) -> Result<T, D::Error> {
    let raw = serde_json::Value::deserialize(d)?;
    Ok(serde_json::from_value(raw).unwrap_or_default())
}

pub fn strings<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    let raw = serde_json::Value::deserialize(d)?;
    let items = match raw {
        serde_json::Value::Array(items) => items,
        _ => Vec::new(),
    };
    Ok(items.into_iter().filter_map(|v| v.as_str().map(str::to_string)).collect())
}

/// A JSON object, else `{}`.
pub fn object<'de, D: Deserializer<'de>>(d: D) -> Result<serde_json::Value, D::Error> {
    let raw = serde_json::Value::deserialize(d)?;
    Ok(if raw.is_object() { raw } else { serde_json::Value::Object(Default::default()) })
}
