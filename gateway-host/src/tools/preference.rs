//! `ResolvePreference` (SPEC R30): when several providers offer a tool of the same name, the
//! configured order (`Tools.Preference`) decides which one the model gets.
//!
//! Entries are provider ids (`mcp:files`) or prefixes ending in `*` (`mcpapp:*`). A provider
//! matching no entry ranks after all that do; ties keep registration order (built-in, then the
//! module's order: apps in discovery order, then standard servers).

use serde_json::Value;

pub const DEFAULT_ORDER: &[&str] = &["builtin:*", "mcpapp:*", "mcp:*"];

#[derive(Debug, Clone)]
pub struct Preference {
    order: Vec<String>,
}

impl Preference {
    pub fn from_config(value: Option<&Value>) -> Preference {
        let order: Vec<String> = match value {
            Some(Value::Array(items)) => items.iter().filter_map(|v| v.as_str().map(str::to_string)).collect(),
            Some(Value::String(s)) => s.split([',', ';']).map(|p| p.trim().to_string()).filter(|p| !p.is_empty()).collect(),
            _ => Vec::new(),
        };
        if order.is_empty() {
            Preference { order: DEFAULT_ORDER.iter().map(|s| s.to_string()).collect() }
        } else {
            Preference { order }
        }
    }

    pub fn order(&self) -> &[String] {
        &self.order
    }

    /// The rank of a provider: the index of the first matching entry.
    pub fn rank(&self, provider_id: &str) -> usize {
        self.order
            .iter()
            .position(|p| match p.strip_suffix('*') {
                Some(prefix) => provider_id.to_ascii_lowercase().starts_with(&prefix.to_ascii_lowercase()),
                None => p.eq_ignore_ascii_case(provider_id),
            })
            .unwrap_or(self.order.len())
    }

    /// Index of the preferred candidate among `providers` (in registration order).
    pub fn choose(&self, providers: &[&str]) -> usize {
        providers
            .iter()
            .enumerate()
            .min_by_key(|(i, p)| (self.rank(p), *i))
            .map(|(i, _)| i)
            .unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn configured_order_wins_and_ties_keep_registration_order() {
        let default = Preference::from_config(None);
        assert_eq!(default.choose(&["mcp:files", "mcpapp:demo"]), 1);
        let mcp_first = Preference::from_config(Some(&json!(["mcp:*", "mcpapp:*"])));
        assert_eq!(mcp_first.choose(&["mcpapp:demo", "mcp:files"]), 1);
        let exact = Preference::from_config(Some(&json!("mcpapp:b, mcpapp:*")));
        assert_eq!(exact.choose(&["mcpapp:a", "mcpapp:b"]), 1);
        assert_eq!(exact.choose(&["other:x", "mcpapp:a"]), 1, "unmatched providers rank last");
        assert_eq!(exact.choose(&["other:x", "other:y"]), 0);
    }
}
