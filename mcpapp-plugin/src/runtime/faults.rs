//! Test-only fault injection (cargo feature `fault-injection`).
//!
//! The end-to-end tests need to prove that a panic inside the module becomes an error result while
//! the gateway keeps serving (SPEC R4), and that the module's own races are handled. Production
//! builds compile every check here to nothing; a build with the feature reads `Testing.Faults`
//! from the configuration: a list of strings, each one of
//!
//! - `export:<operation>`: panic in the exported function itself, on the host's thread;
//! - `task:<operation>`: panic in the task spawned on the module's runtime;
//! - `supervise:<app id>`: panic in that app's supervisor task, the first time only (so the
//!   restart that follows shows the app supervised again);
//! - `delay:<operation>:<ms>`: the operation's task waits this long before it registers its call
//!   (so a cancel from the host arrives first, as it can when the runtime is busy).
//!
//! `<operation>` is a [`host_abi::ModuleInstance`] method name such as `list_apps` or `call_tool`.

use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use serde_json::Value;

/// Cheap to clone; clones share which one-shot faults already fired.
#[derive(Debug, Default, Clone)]
pub struct Faults {
    #[cfg_attr(not(feature = "fault-injection"), allow(dead_code))]
    entries: Arc<[String]>,
    #[cfg_attr(not(feature = "fault-injection"), allow(dead_code))]
    fired: Arc<Mutex<Vec<String>>>,
}

#[derive(Debug, Clone, Copy)]
pub enum Site {
    Export,
    Task,
    /// An app's supervisor; the operation is the app's id.
    Supervisor,
}

impl Site {
    #[cfg_attr(not(feature = "fault-injection"), allow(dead_code))]
    fn prefix(self) -> &'static str {
        match self {
            Site::Export => "export",
            Site::Task => "task",
            Site::Supervisor => "supervise",
        }
    }

    /// Whether a fault here fires only once per module instance.
    #[cfg_attr(not(feature = "fault-injection"), allow(dead_code))]
    fn once(self) -> bool {
        matches!(self, Site::Supervisor)
    }
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
        Faults { entries: entries.into(), fired: Arc::default() }
    }

    /// Panics when the configuration asks for a fault at this site and operation.
    #[inline]
    pub fn check(&self, site: Site, operation: &str) {
        #[cfg(feature = "fault-injection")]
        {
            let key = format!("{}:{operation}", site.prefix());
            if !self.entries.iter().any(|e| *e == key) {
                return;
            }
            if site.once() {
                let mut fired = self.fired.lock();
                if fired.contains(&key) {
                    return;
                }
                fired.push(key.clone());
            }
            panic!("injected fault {key}");
        }
        #[cfg(not(feature = "fault-injection"))]
        let _ = (site, operation);
    }

    /// How long `operation`'s task waits before registering its call (`delay:<operation>:<ms>`).
    #[inline]
    pub fn delay(&self, operation: &str) -> Option<Duration> {
        #[cfg(feature = "fault-injection")]
        {
            self.entries.iter().find_map(|e| {
                let rest = e.strip_prefix("delay:")?;
                let (op, ms) = rest.rsplit_once(':')?;
                (op == operation).then(|| ms.parse().ok().map(Duration::from_millis)).flatten()
            })
        }
        #[cfg(not(feature = "fault-injection"))]
        {
            let _ = operation;
            None
        }
    }
}

#[cfg(all(test, feature = "fault-injection"))]
mod tests {
    use super::*;
    use serde_json::json;

    fn faults(entries: &[&str]) -> Faults {
        Faults::from_config(&json!({ "Testing": { "Faults": entries } }))
    }

    #[test]
    fn supervisor_faults_fire_once() {
        let f = faults(&["supervise:a"]);
        let first = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f.check(Site::Supervisor, "a")));
        assert!(first.is_err());
        f.clone().check(Site::Supervisor, "a");
        f.check(Site::Supervisor, "b");
    }

    #[test]
    fn delays_are_per_operation() {
        let f = faults(&["delay:call_tool:250", "delay:bad"]);
        assert_eq!(f.delay("call_tool"), Some(Duration::from_millis(250)));
        assert_eq!(f.delay("forward"), None);
    }
}
