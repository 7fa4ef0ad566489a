//! Per-app install state and lifecycle (SPEC R15).
//!
//! ```text
//! Discovered ─→ Validated ─→ Loaded ─→ Running ─→ Stopped
//!     │             │           │          │         │
//!     └─────────────┴───────────┴──────────┴─→ Failed ┘   (+ Disabled by policy)
//! ```
//!
//! Every transition is checked against [`AppState::can_transition_to`], logged at info level
//! (target `mcpapp_plugin::install_state`) and recorded with its time, so `/apps/health` and the logs can tell
//! *when* an app went Failed and why. Restarts are legal: Failed/Stopped → Loaded/Running.
//! Re-validation on reload is legal from Stopped, Failed and Disabled.

use std::fmt;
use std::path::PathBuf;
use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Serialize, Serializer};

use crate::apps::manifest::{Manifest, ManifestFingerprint, ValidationError};

/// Transitions kept per app; older ones are dropped so a long-lived, often-restarted app does not grow
/// without bound.
pub const MAX_TRANSITIONS: usize = 256;

/// Lifecycle state of one app.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AppState {
    Discovered,
    Validated,
    Loaded,
    Running,
    Stopped,
    Failed,
    Disabled,
}

impl AppState {
    pub fn as_str(self) -> &'static str {
        match self {
            AppState::Discovered => "discovered",
            AppState::Validated => "validated",
            AppState::Loaded => "loaded",
            AppState::Running => "running",
            AppState::Stopped => "stopped",
            AppState::Failed => "failed",
            AppState::Disabled => "disabled",
        }
    }

    /// The legal lifecycle edges. Failed → Failed is allowed so a new error on an already failed app
    /// (e.g. a failed restart attempt) is recorded as its own transition.
    pub fn can_transition_to(self, to: AppState) -> bool {
        use AppState::*;
        matches!(
            (self, to),
            (Discovered, Validated | Failed | Disabled)
                | (Validated, Loaded | Running | Stopped | Failed | Disabled)
                | (Loaded, Running | Stopped | Failed)
                | (Running, Stopped | Failed)
                | (Stopped, Validated | Loaded | Running | Failed | Disabled)
                | (Failed, Validated | Loaded | Running | Stopped | Failed | Disabled)
                | (Disabled, Validated | Failed)
        )
    }

    /// Stopped, Failed and Disabled apps have no live connection.
    pub fn is_terminal(self) -> bool {
        matches!(self, AppState::Stopped | AppState::Failed | AppState::Disabled)
    }
}

/// The state as the host reads it (`AppDescriptor::state`, `app.state_changed` events).
impl From<AppState> for host_abi::payloads::AppState {
    fn from(state: AppState) -> Self {
        use host_abi::payloads::AppState as Wire;
        match state {
            AppState::Discovered => Wire::Discovered,
            AppState::Validated => Wire::Validated,
            AppState::Loaded => Wire::Loaded,
            AppState::Running => Wire::Running,
            AppState::Stopped => Wire::Stopped,
            AppState::Failed => Wire::Failed,
            AppState::Disabled => Wire::Disabled,
        }
    }
}

impl fmt::Display for AppState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One recorded state change.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Transition {
    pub from: AppState,
    pub to: AppState,
    #[serde(serialize_with = "serialize_unix_millis")]
    pub at: SystemTime,
    pub reason: String,
}

/// A transition the lifecycle does not allow; the state is left unchanged.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("McpApp '{id}': illegal state transition {from} -> {to}")]
pub struct IllegalTransition {
    pub id: String,
    pub from: AppState,
    pub to: AppState,
}

/// Everything the gateway knows about one discovered app.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct InstallState {
    /// The manifest's id as written (may be empty when the manifest has none).
    pub id: String,
    /// The unique registry key: the id, except for manifests that cannot be keyed by it (no id, or a
    /// duplicate id); those use their manifest path, which never collides with a valid id because
    /// ids cannot contain `/`.
    pub key: String,
    pub manifest_path: PathBuf,
    /// The effective manifest (after `Entries` overrides). `None` when the file could not be read
    /// or was not a JSON object.
    pub manifest: Option<Manifest>,
    pub state: AppState,
    pub validation_errors: Vec<ValidationError>,
    pub warnings: Vec<String>,
    pub last_error: Option<String>,
    /// Why the app is Disabled (policy or entry), when it is.
    pub disabled_reason: Option<String>,
    #[serde(serialize_with = "serialize_unix_millis")]
    pub discovered_at: SystemTime,
    pub transitions: Vec<Transition>,
    /// The confinement the app gets (SPEC R48), filled in for `gateway-host apps`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub confinement: Option<crate::apps::sandbox::Report>,
}

impl InstallState {
    /// A freshly discovered app (state Discovered).
    pub fn new(id: impl Into<String>, key: impl Into<String>, manifest_path: PathBuf, manifest: Option<Manifest>) -> Self {
        Self {
            id: id.into(),
            key: key.into(),
            manifest_path,
            manifest,
            state: AppState::Discovered,
            validation_errors: Vec::new(),
            warnings: Vec::new(),
            last_error: None,
            disabled_reason: None,
            discovered_at: SystemTime::now(),
            transitions: Vec::new(),
            confinement: None,
        }
    }

    /// Moves to `to`, logging and recording the transition. Illegal moves are refused (and logged at
    /// warn level): a caller bug must not corrupt the lifecycle shown to users.
    pub fn transition(&mut self, to: AppState, reason: impl Into<String>) -> Result<(), IllegalTransition> {
        let from = self.state;
        let reason = reason.into();
        if !from.can_transition_to(to) {
            let err = IllegalTransition { id: self.key.clone(), from, to };
            tracing::warn!(app = %self.key, %from, %to, %reason, "{err}");
            return Err(err);
        }
        if reason.is_empty() {
            tracing::info!(app = %self.key, %from, %to, "McpApp '{}' {} -> {}", self.key, from, to);
        } else {
            tracing::info!(app = %self.key, %from, %to, "McpApp '{}' {} -> {}: {}", self.key, from, to, reason);
        }
        self.state = to;
        if self.transitions.len() >= MAX_TRANSITIONS {
            self.transitions.remove(0);
        }
        self.transitions.push(Transition { from, to, at: SystemTime::now(), reason });
        Ok(())
    }

    /// Records `error` as `last_error` and moves to Failed.
    pub fn fail(&mut self, error: impl Into<String>) -> Result<(), IllegalTransition> {
        let error = error.into();
        self.last_error = Some(error.clone());
        self.transition(AppState::Failed, error)
    }

    /// Moves to Disabled with a reason (kept in `disabled_reason`).
    pub fn disable(&mut self, reason: impl Into<String>) -> Result<(), IllegalTransition> {
        let reason = reason.into();
        self.disabled_reason = Some(reason.clone());
        self.transition(AppState::Disabled, reason)
    }

    /// Time of the most recent transition (or of discovery).
    pub fn last_transition_at(&self) -> SystemTime {
        self.transitions.last().map(|t| t.at).unwrap_or(self.discovered_at)
    }

    /// Fingerprint of the effective manifest, for reload (changed apps restart, unchanged keep
    /// running). `None` when there is no manifest.
    pub fn fingerprint(&self) -> Option<ManifestFingerprint> {
        self.manifest.as_ref().map(Manifest::fingerprint)
    }

    /// Whether a reload must restart this app: its effective manifest changed, or it was not
    /// startable before and may be now.
    pub fn differs_from(&self, newer: &InstallState) -> bool {
        self.fingerprint() != newer.fingerprint()
            || self.manifest_path != newer.manifest_path
            || self.admitted() != newer.admitted()
    }

    /// Whether discovery let this app run: not disabled (Deny, `Entries.{id}.Enabled`) and
    /// without validation errors. A policy change flips this without touching the manifest.
    fn admitted(&self) -> bool {
        self.state != AppState::Disabled && self.validation_errors.is_empty()
    }

    /// `validation_errors` as `field: message` strings (what `/apps/health` shows).
    pub fn validation_error_strings(&self) -> Vec<String> {
        self.validation_errors.iter().map(ToString::to_string).collect()
    }
}

/// Applies `Entries` overrides (R14); see [`EntryOverride::apply_to`](crate::apps::config::EntryOverride::apply_to).
pub fn apply_overrides(manifest: &Manifest, entry: &crate::apps::config::EntryOverride) -> Manifest {
    entry.apply_to(manifest)
}

fn serialize_unix_millis<S: Serializer>(t: &SystemTime, s: S) -> Result<S::Ok, S::Error> {
    let ms = t.duration_since(UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or(0);
    s.serialize_u64(ms)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    fn app() -> InstallState {
        InstallState::new("a", "a", PathBuf::from("/x/openclaw.mcpapp.json"), Some(Manifest { id: "a".into(), ..Default::default() }))
    }

    #[test]
    fn as_str_is_lowercase() {
        use AppState::*;
        for (s, name) in [
            (Discovered, "discovered"),
            (Validated, "validated"),
            (Loaded, "loaded"),
            (Running, "running"),
            (Stopped, "stopped"),
            (Failed, "failed"),
            (Disabled, "disabled"),
        ] {
            assert_eq!(s.as_str(), name);
            assert_eq!(serde_json::to_value(s).unwrap(), name);
        }
    }

    #[test]
    fn happy_path_and_restart() {
        use AppState::*;
        let mut a = app();
        for (to, why) in [(Validated, ""), (Loaded, "starting"), (Running, "connected"), (Stopped, "stop"), (Running, "restart")] {
            a.transition(to, why).unwrap();
        }
        a.fail("process exited with status 1").unwrap();
        assert_eq!(a.state, Failed);
        assert_eq!(a.last_error.as_deref(), Some("process exited with status 1"));
        a.transition(Loaded, "restart after backoff").unwrap();
        a.fail("again").unwrap();
        a.fail("and again").unwrap(); // Failed -> Failed records the new error
        let seen: Vec<_> = a.transitions.iter().map(|t| (t.from, t.to)).collect();
        assert_eq!(
            seen,
            [
                (Discovered, Validated),
                (Validated, Loaded),
                (Loaded, Running),
                (Running, Stopped),
                (Stopped, Running),
                (Running, Failed),
                (Failed, Loaded),
                (Loaded, Failed),
                (Failed, Failed)
            ]
        );
        assert!(a.transitions.windows(2).all(|w| w[0].at <= w[1].at));
        assert_eq!(a.last_transition_at(), a.transitions.last().unwrap().at);
    }

    #[test]
    fn illegal_transitions_are_refused() {
        use AppState::*;
        let mut a = app();
        let e = a.transition(Running, "skip ahead").unwrap_err();
        assert_eq!((e.from, e.to), (Discovered, Running));
        assert_eq!(e.to_string(), "McpApp 'a': illegal state transition discovered -> running");
        assert_eq!(a.state, Discovered);
        assert!(a.transitions.is_empty());
        a.disable("denied").unwrap();
        assert_eq!(a.disabled_reason.as_deref(), Some("denied"));
        assert!(a.transition(Running, "").is_err(), "a disabled app must be re-validated first");
        assert!(!Running.can_transition_to(Loaded));
        assert!(!Stopped.can_transition_to(Stopped));
        assert!(Disabled.can_transition_to(Validated));
    }

    #[test]
    fn transitions_are_bounded() {
        let mut a = app();
        a.transition(AppState::Validated, "").unwrap();
        for i in 0..MAX_TRANSITIONS * 2 {
            a.fail(format!("crash {i}")).unwrap();
        }
        assert_eq!(a.transitions.len(), MAX_TRANSITIONS);
        assert_eq!(a.transitions.last().unwrap().reason, format!("crash {}", MAX_TRANSITIONS * 2 - 1));
    }

    #[test]
    fn fingerprint_and_differs_from() {
        let a = app();
        let b = app();
        assert_eq!(a.fingerprint(), b.fingerprint());
        assert!(!a.differs_from(&b));
        let mut c = app();
        c.manifest.as_mut().unwrap().url = Some("http://h".into());
        assert!(a.differs_from(&c));
        let none = InstallState::new("", "/p", PathBuf::from("/p"), None);
        assert_eq!(none.fingerprint(), None);
    }

    #[test]
    fn serializes_for_health() {
        let mut a = app();
        a.validation_errors.push(ValidationError::new("url", "is required"));
        a.fail("bad").unwrap();
        let v = serde_json::to_value(&a).unwrap();
        assert_eq!(v["state"], "failed");
        assert_eq!(v["lastError"], "bad");
        assert_eq!(v["validationErrors"][0]["field"], "url");
        assert!(v["transitions"][0]["at"].as_u64().unwrap() > 1_600_000_000_000);
        assert_eq!(a.validation_error_strings(), ["url: is required"]);
    }

    /// Every transition is logged at info level with the module path as target.
    #[test]
    fn transitions_are_logged() {
        use tracing_subscriber::layer::SubscriberExt;

        #[derive(Clone, Default)]
        struct Capture(Arc<Mutex<Vec<(String, tracing::Level, String)>>>);
        struct Visitor<'a>(&'a mut String);
        impl tracing::field::Visit for Visitor<'_> {
            fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn fmt::Debug) {
                if field.name() == "message" {
                    self.0.push_str(&format!("{value:?}"));
                }
            }
        }
        impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for Capture {
            fn on_event(&self, e: &tracing::Event<'_>, _: tracing_subscriber::layer::Context<'_, S>) {
                let mut msg = String::new();
                e.record(&mut Visitor(&mut msg));
                self.0.lock().unwrap().push((e.metadata().target().to_string(), *e.metadata().level(), msg));
            }
        }
        let cap = Capture::default();
        let sub = tracing_subscriber::registry().with(cap.clone());
        crate::runtime::logging::with_scoped_subscriber(sub, || {
            let mut a = app();
            a.transition(AppState::Validated, "").unwrap();
            a.fail("boom").unwrap();
        });
        let logs = cap.0.lock().unwrap();
        assert_eq!(logs.len(), 2);
        assert_eq!(logs[0].0, "mcpapp_plugin::apps::install_state");
        assert_eq!(logs[0].1, tracing::Level::INFO);
        assert_eq!(logs[0].2, "McpApp 'a' discovered -> validated");
        assert_eq!(logs[1].2, "McpApp 'a' validated -> failed: boom");
    }
}
