//! Which interface a side was built against, and what optional methods each side declares
//! (see the crate documentation for the version policy).

use crate::lenient;

/// The ABI major version: the major of [`INTERFACE_VERSION`] (see the crate documentation), read
/// from this crate's version so the two cannot disagree. The host refuses a module whose
/// `ModuleInfo::abi_version` differs from its own.
pub const ABI_VERSION: u32 = major_of(env!("CARGO_PKG_VERSION_MAJOR"));

/// The decimal number `digits` (Cargo's `CARGO_PKG_VERSION_MAJOR`), at compile time.
const fn major_of(digits: &str) -> u32 {
    let bytes = digits.as_bytes();
    assert!(!bytes.is_empty(), "the crate version has no major");
    let mut value = 0u32;
    let mut i = 0;
    while i < bytes.len() {
        assert!(bytes[i].is_ascii_digit(), "the crate version's major is not a number");
        value = value * 10 + (bytes[i] - b'0') as u32;
        i += 1;
    }
    value
}

/// The version of this interface crate, as compiled into whichever side uses it: `MAJOR.MINOR.PATCH`,
/// where `MAJOR.MINOR` is the ABI version (see the crate documentation). The root module's
/// `VERSION_STRINGS` are this string, so `abi_stable` records it in every module's library header.
pub const INTERFACE_VERSION: &str = env!("CARGO_PKG_VERSION");

/// Names of the optional (appended) methods, as the capability lists carry them: `Trait::method`.
///
/// A minor version that appends a method adds its name here, and the side implementing it lists
/// the name in its [`ModuleInfoExtra`] / [`ModuleConfigExtra`]. Unknown names are ignored.
pub mod capability {
    /// Since ABI 1.1 (still optional in 2.0): [`HostSink::http_post`](crate::HostSink::http_post), the host sending an app's HTTP request for the module.
    pub const HOST_SINK_HTTP_POST: &str = "HostSink::http_post";
    /// Every optional method this version of the interface knows.
    pub const ALL: &[&str] = &[HOST_SINK_HTTP_POST];
}

/// The payload of [`ModuleInfo::extra_json`](crate::ModuleInfo::extra_json): what the module declares about itself.
///
/// Decoding is tolerant: unknown keys are ignored, a missing or ill-typed key takes its default,
/// non-string entries of `capabilities` are dropped, and a payload that is not a JSON object
/// decodes as the default (nothing optional).
#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase", default)]
pub struct ModuleInfoExtra {
    /// The optional methods the module implements ([`capability`] names).
    #[serde(deserialize_with = "lenient::strings")]
    pub capabilities: Vec<String>,
    /// The module was built with test fault injection.
    #[serde(deserialize_with = "lenient::value")]
    pub fault_injection: bool,
}

/// The payload of [`ModuleConfig::extra_json`](crate::ModuleConfig::extra_json): what the host declares about itself. Decoded as
/// tolerantly as [`ModuleInfoExtra`].
#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase", default)]
pub struct ModuleConfigExtra {
    /// The host's [`INTERFACE_VERSION`] (its ABI `MAJOR.MINOR` and patch).
    #[serde(deserialize_with = "lenient::value")]
    pub interface_version: String,
    /// The optional methods the host implements ([`capability`] names), e.g. on [`HostSink`](crate::HostSink).
    #[serde(deserialize_with = "lenient::strings")]
    pub capabilities: Vec<String>,
}

impl ModuleInfoExtra {
    /// Decodes `ModuleInfo::extra_json` tolerantly (see the type).
    pub fn from_json(text: &str) -> Self {
        serde_json::from_str(text).unwrap_or_default()
    }

    /// Whether the module declared the optional method `capability`.
    pub fn has(&self, capability: &str) -> bool {
        self.capabilities.iter().any(|c| c == capability)
    }
}

impl ModuleConfigExtra {
    /// Decodes `ModuleConfig::extra_json` tolerantly (see the type).
    pub fn from_json(text: &str) -> Self {
        serde_json::from_str(text).unwrap_or_default()
    }

    /// Whether the host declared the optional method `capability`.
    pub fn has(&self, capability: &str) -> bool {
        self.capabilities.iter().any(|c| c == capability)
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_abi_version_is_the_interface_versions_major() {
        let major = super::INTERFACE_VERSION.split('.').next().unwrap();
        assert_eq!(super::ABI_VERSION.to_string(), major);
    }
}
