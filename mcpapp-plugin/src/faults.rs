//! Test-only fault injection (cargo feature `fault-injection`).
//!
//! The end-to-end tests need to prove that a panic inside the module becomes an error result while
//! the gateway keeps serving (SPEC R4). Production builds compile every check here to nothing; a
//! build with the feature reads `Testing.Faults` from the configuration: a list of
//! `"<site>:<operation>"` strings where site is `export` (panic in the exported function itself,
//! on the host's thread) or `task` (panic in the task spawned on the module's runtime), and
//! operation is a [`host_abi::ModuleInstance`] method name such as `list_apps`.

use serde_json::Value;

#[derive(Debug, Default, Clone)]
pub struct Faults {
    #[cfg_attr(not(feature = "fault-injection"), allow(dead_code))]
    entries: Vec<String>,
}

#[derive(Debug, Clone, Copy)]
pub enum Site {
    Export,
    Task,
}

impl Faults {
    pub fn from_config(config: &Value) -> Faults {
        let entries: Vec<String> = config
            .get("Testing")
            .and_then(|t| t.get("Faults"))
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(|v| v.as_str().map(str::to_string)).collect())
            .unwrap_or_default();
        if !entries.is_empty() && !cfg!(feature = "fault-injection") {
            tracing::warn!("Testing.Faults is set but this module was built without fault injection; ignoring it");
            return Faults::default();
        }
        Faults { entries }
    }

    /// Panics when the configuration asks for a fault at this site and operation.
    #[inline]
    pub fn check(&self, site: Site, operation: &str) {
        #[cfg(feature = "fault-injection")]
        {
            let key = match site {
                Site::Export => format!("export:{operation}"),
                Site::Task => format!("task:{operation}"),
            };
            if self.entries.iter().any(|e| *e == key) {
                panic!("injected fault {key}");
            }
        }
        #[cfg(not(feature = "fault-injection"))]
        let _ = (site, operation);
    }
}
