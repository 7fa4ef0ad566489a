//! JSON Schemas for tool inputs and outputs, derived from the Rust types with `schemars`.
//!
//! They are post-processed for the widest client compatibility: sub-schemas are inlined (no
//! `$ref`/`$defs` for clients that resolve references poorly), the `$schema` keyword is dropped
//! (MCP defines 2020-12 as the default dialect, and draft-07 validators such as Ajv refuse an
//! unknown meta-schema URI), and schemars' Rust-specific numeric formats (`uint32`, `int64`,
//! `double`) are removed, since strict validators warn about unknown formats. The `minimum`
//! keywords that schemars emits for unsigned types stay, so the constraint is not lost.

use std::sync::Arc;

use rmcp::model::JsonObject;
use schemars::generate::SchemaSettings;
use schemars::JsonSchema;
use serde_json::Value;

/// The schema of a tool's arguments (the deserialize contract of `T`).
pub fn input<T: JsonSchema>() -> Arc<JsonObject> {
    generate::<T>(SchemaSettings::draft2020_12().for_deserialize())
}

/// The schema of a tool's `structuredContent` (the serialize contract of `T`).
pub fn output<T: JsonSchema>() -> Arc<JsonObject> {
    generate::<T>(SchemaSettings::draft2020_12().for_serialize())
}

fn generate<T: JsonSchema>(settings: SchemaSettings) -> Arc<JsonObject> {
    let settings = settings.with(|s| s.inline_subschemas = true);
    let schema = settings.into_generator().into_root_schema_for::<T>();
    let mut value = serde_json::to_value(schema).expect("schemars output is JSON");
    clean(&mut value);
    let Value::Object(mut object) = value else {
        panic!("schema of {} is not an object", std::any::type_name::<T>());
    };
    object.remove("$schema");
    object.remove("title");
    assert_eq!(
        object.get("type"),
        Some(&Value::String("object".into())),
        "MCP tool schemas must have root type object ({})",
        std::any::type_name::<T>()
    );
    Arc::new(object)
}

fn clean(value: &mut Value) {
    match value {
        Value::Object(map) => {
            if let Some(Value::String(format)) = map.get("format") {
                if matches!(
                    format.as_str(),
                    "uint" | "uint8" | "uint16" | "uint32" | "uint64" | "int" | "int8" | "int16" | "int32" | "int64" | "float" | "double"
                ) {
                    map.remove("format");
                }
            }
            map.remove("$defs");
            for v in map.values_mut() {
                clean(v);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(clean),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(JsonSchema, serde::Deserialize)]
    #[allow(dead_code)]
    struct Args {
        store_id: u32,
        note: Option<String>,
    }

    #[test]
    fn schema_is_plain_object_without_rust_formats() {
        let s = input::<Args>();
        let text = serde_json::to_string(&*s).unwrap();
        assert!(!text.contains("uint32"), "{text}");
        assert!(!text.contains("$schema"), "{text}");
        assert_eq!(s["properties"]["store_id"]["minimum"], 0);
    }
}
