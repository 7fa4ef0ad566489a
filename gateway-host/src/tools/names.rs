//! Provider-safe tool names (SPEC R20): LLM providers accept `[a-zA-Z0-9_-]{1,64}`, while registry
//! names carry prefixes like `grocery.`. The mapping is reversible and deterministic: the same set
//! of names always maps the same way, and collisions get numbered suffixes in sorted order.

use std::collections::{BTreeSet, HashMap};

pub const MAX_LEN: usize = 64;

/// A two-way mapping between registry names and provider names.
#[derive(Debug, Default, Clone)]
pub struct ProviderNames {
    to_provider: HashMap<String, String>,
    from_provider: HashMap<String, String>,
}

impl ProviderNames {
    pub fn build<'a>(names: impl IntoIterator<Item = &'a str>) -> ProviderNames {
        let sorted: BTreeSet<&str> = names.into_iter().collect();
        let mut map = ProviderNames::default();
        // Names that are already safe keep themselves, so they are never displaced by a sanitised one.
        for name in sorted.iter().filter(|n| is_safe(n)) {
            map.insert(name, name.to_string());
        }
        for name in sorted.iter().filter(|n| !is_safe(n)) {
            let base = sanitize(name);
            let mut candidate = base.clone();
            let mut n = 2;
            while map.from_provider.contains_key(&candidate) {
                let suffix = format!("_{n}");
                candidate = format!("{}{suffix}", truncate(&base, MAX_LEN - suffix.len()));
                n += 1;
            }
            map.insert(name, candidate);
        }
        map
    }

    fn insert(&mut self, name: &str, provider: String) {
        self.from_provider.insert(provider.clone(), name.to_string());
        self.to_provider.insert(name.to_string(), provider);
    }

    pub fn to_provider(&self, name: &str) -> Option<&str> {
        self.to_provider.get(name).map(String::as_str)
    }

    /// The registry name for a name an LLM provider sent back (the chat agent's side, R34).
    pub fn to_registry(&self, provider_name: &str) -> Option<&str> {
        self.from_provider.get(provider_name).map(String::as_str)
    }
}

pub fn is_safe(name: &str) -> bool {
    !name.is_empty() && name.len() <= MAX_LEN && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// Replaces every character outside the alphabet with `_`; long names keep their start and a hash
/// of the whole name, so two long names with a common start stay apart.
fn sanitize(name: &str) -> String {
    let mut s: String = name.chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '_' { c } else { '_' }).collect();
    if s.is_empty() {
        s.push('_');
    }
    if s.len() > MAX_LEN {
        let hash = fnv1a(name.as_bytes());
        s = format!("{}_{hash:08x}", truncate(&s, MAX_LEN - 9));
    }
    s
}

fn truncate(s: &str, max: usize) -> &str {
    &s[..s.len().min(max)]
}

fn fnv1a(bytes: &[u8]) -> u32 {
    bytes.iter().fold(0x811c9dc5u32, |h, b| (h ^ *b as u32).wrapping_mul(0x01000193))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maps_reversibly_and_deterministically() {
        let names = ["grocery.get_low_stock", "grocery_get_low_stock", "grocery-get.low_stock", "plain"];
        let map = ProviderNames::build(names);
        assert_eq!(map.to_provider("grocery_get_low_stock"), Some("grocery_get_low_stock"), "safe names keep themselves");
        let a = map.to_provider("grocery.get_low_stock").unwrap();
        assert_eq!(a, "grocery_get_low_stock_2");
        assert_eq!(map.to_provider("grocery-get.low_stock"), Some("grocery-get_low_stock"));
        for n in names {
            let p = map.to_provider(n).unwrap();
            assert!(is_safe(p), "{p}");
            assert_eq!(map.to_registry(p), Some(n));
        }
        let again = ProviderNames::build(names.iter().rev().copied());
        assert_eq!(again.to_provider("grocery.get_low_stock"), Some(a));
    }

    #[test]
    fn long_names_fit() {
        let long = format!("app.{}", "x".repeat(100));
        let other = format!("app.{}y", "x".repeat(100));
        let map = ProviderNames::build([long.as_str(), other.as_str()]);
        let (a, b) = (map.to_provider(&long).unwrap(), map.to_provider(&other).unwrap());
        assert!(a.len() <= MAX_LEN && b.len() <= MAX_LEN && a != b);
    }
}
