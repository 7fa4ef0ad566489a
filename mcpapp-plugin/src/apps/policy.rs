//! Allow / Deny filtering of apps (SPEC R13) plus the per-app `Entries.{id}.Enabled` switch (R14).
//!
//! Everything here fails closed, because a misconfigured allow list must never let an unwanted app
//! run: an unknown `AllowlistSemantics` disables every app (naming the bad value), an invalid glob in
//! `Allow` makes the allow list match nothing, an invalid glob in `Deny` makes the deny list match
//! everything. Each such problem is also reported once by [`AppPolicy::errors`].
//!
//! Order of checks, and why:
//! 1. bad semantics → [`PolicyDecision::Misconfigured`] (nothing else can be trusted);
//! 2. `Deny` → [`PolicyDecision::Denied`] ("deny wins", even over an explicit entry);
//! 3. `Entries.{id}.Enabled = false` → [`PolicyDecision::DisabledByEntry`];
//! 4. `Allow` (empty: `legacy` allows all, `strict` allows none) → Allowed or Denied.
//!
//! `Entries.{id}.Enabled = true` does not bypass `Allow`: the allow list is the administrator's
//! boundary, entries only tune apps inside it.

use globset::{GlobBuilder, GlobSet, GlobSetBuilder};

use crate::apps::config::McpAppsConfig;
use crate::apps::manifest::ValidationError;

/// `McpApps.AllowlistSemantics`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AllowlistSemantics {
    /// Empty `Allow` allows every app (the historical behaviour).
    Legacy,
    /// Empty `Allow` allows no app.
    Strict,
}

impl AllowlistSemantics {
    /// Case-insensitive, surrounding whitespace ignored; anything else is `None`.
    pub fn parse(s: &str) -> Option<Self> {
        match s.trim().to_ascii_lowercase().as_str() {
            "legacy" => Some(Self::Legacy),
            "strict" => Some(Self::Strict),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Legacy => "legacy",
            Self::Strict => "strict",
        }
    }
}

/// What the policy says about one app.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PolicyDecision {
    Allowed,
    /// Filtered out by `Deny`/`Allow`; `reason` names the pattern or rule.
    Denied { reason: String },
    /// `Entries.{id}.Enabled` is false.
    DisabledByEntry,
    /// The policy itself is broken (bad `AllowlistSemantics`); every app gets this.
    Misconfigured { error: ValidationError },
}

impl PolicyDecision {
    pub fn is_allowed(&self) -> bool {
        matches!(self, PolicyDecision::Allowed)
    }

    /// A sentence for `InstallState::disabled_reason` and logs; `None` when allowed.
    pub fn reason(&self) -> Option<String> {
        match self {
            PolicyDecision::Allowed => None,
            PolicyDecision::Denied { reason } => Some(reason.clone()),
            PolicyDecision::DisabledByEntry => Some("disabled by McpApps.Entries.{id}.Enabled=false".to_string()),
            PolicyDecision::Misconfigured { error } => Some(format!("disabled: {error}")),
        }
    }
}

/// A compiled pattern list.
#[derive(Debug, Clone)]
enum PatternList {
    Empty,
    Compiled { set: GlobSet, patterns: Vec<String> },
    /// At least one pattern did not compile; the list fails closed.
    Broken(ValidationError),
}

impl PatternList {
    fn compile(key: &str, patterns: &[String]) -> PatternList {
        let patterns: Vec<String> = patterns.iter().map(|p| p.trim().to_string()).collect();
        if patterns.is_empty() {
            return PatternList::Empty;
        }
        let mut builder = GlobSetBuilder::new();
        for (i, p) in patterns.iter().enumerate() {
            let field = format!("McpApps.{key}[{i}]");
            if p.is_empty() {
                return PatternList::Broken(ValidationError::new(field, "empty pattern"));
            }
            match GlobBuilder::new(p).case_insensitive(true).literal_separator(false).build() {
                Ok(g) => {
                    builder.add(g);
                }
                Err(e) => {
                    let msg = format!("invalid glob pattern '{p}': {}", e.kind());
                    return PatternList::Broken(ValidationError::new(field, msg));
                }
            }
        }
        match builder.build() {
            Ok(set) => PatternList::Compiled { set, patterns },
            Err(e) => PatternList::Broken(ValidationError::new(format!("McpApps.{key}"), e.to_string())),
        }
    }

    /// The first pattern matching `id`, if any.
    fn first_match(&self, id: &str) -> Option<&str> {
        match self {
            PatternList::Compiled { set, patterns } => set.matches(id).first().map(|&i| patterns[i].as_str()),
            _ => None,
        }
    }
}

/// The compiled allow/deny policy. Build once per discovery run.
#[derive(Debug, Clone)]
pub struct AppPolicy {
    semantics: Result<AllowlistSemantics, ValidationError>,
    allow: PatternList,
    deny: PatternList,
}

impl AppPolicy {
    pub fn new(semantics: &str, allow: &[String], deny: &[String]) -> AppPolicy {
        let semantics = AllowlistSemantics::parse(semantics).ok_or_else(|| {
            ValidationError::new(
                "McpApps.AllowlistSemantics",
                format!("'{semantics}' is not supported; expected \"legacy\" or \"strict\" (all apps disabled)"),
            )
        });
        AppPolicy { semantics, allow: PatternList::compile("Allow", allow), deny: PatternList::compile("Deny", deny) }
    }

    pub fn from_config(config: &McpAppsConfig) -> AppPolicy {
        AppPolicy::new(&config.allowlist_semantics, &config.allow, &config.deny)
    }

    /// Configuration problems, each naming the bad value or pattern (empty when the policy is sound).
    pub fn errors(&self) -> Vec<ValidationError> {
        let mut out = Vec::new();
        if let Err(e) = &self.semantics {
            out.push(e.clone());
        }
        for list in [&self.allow, &self.deny] {
            if let PatternList::Broken(e) = list {
                out.push(e.clone());
            }
        }
        out
    }

    /// Decides for one app. `entry_enabled` is `Entries.{id}.Enabled` when configured.
    pub fn decide(&self, app_id: &str, entry_enabled: Option<bool>) -> PolicyDecision {
        let semantics = match &self.semantics {
            Ok(s) => *s,
            Err(e) => return PolicyDecision::Misconfigured { error: e.clone() },
        };
        match &self.deny {
            PatternList::Broken(e) => {
                return PolicyDecision::Denied { reason: format!("Deny list is invalid, failing closed ({e})") };
            }
            list => {
                if let Some(p) = list.first_match(app_id) {
                    return PolicyDecision::Denied { reason: format!("denied by Deny pattern '{p}'") };
                }
            }
        }
        if entry_enabled == Some(false) {
            return PolicyDecision::DisabledByEntry;
        }
        match (&self.allow, semantics) {
            (PatternList::Empty, AllowlistSemantics::Legacy) => PolicyDecision::Allowed,
            (PatternList::Empty, AllowlistSemantics::Strict) => PolicyDecision::Denied {
                reason: "Allow is empty and AllowlistSemantics is \"strict\"".to_string(),
            },
            (PatternList::Broken(e), _) => {
                PolicyDecision::Denied { reason: format!("Allow list is invalid, failing closed ({e})") }
            }
            (list, _) => match list.first_match(app_id) {
                Some(_) => PolicyDecision::Allowed,
                None => PolicyDecision::Denied { reason: format!("'{app_id}' matches no Allow pattern") },
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| x.to_string()).collect()
    }

    fn decide(sem: &str, allow: &[&str], deny: &[&str], id: &str) -> PolicyDecision {
        AppPolicy::new(sem, &s(allow), &s(deny)).decide(id, None)
    }

    #[test]
    fn matrix() {
        use PolicyDecision::Allowed;
        let denied = |d: &PolicyDecision| matches!(d, PolicyDecision::Denied { .. });
        // (semantics, allow, deny, id, allowed?)
        type Case<'a> = (&'a str, &'a [&'a str], &'a [&'a str], &'a str, bool);
        let cases: &[Case] = &[
            ("legacy", &[], &[], "a", true),
            ("strict", &[], &[], "a", false),
            ("legacy", &["*"], &[], "a", true),
            ("strict", &["*"], &[], "a", true),
            ("legacy", &["grocery-*"], &[], "grocery-inventory", true),
            ("legacy", &["grocery-*"], &[], "weather", false),
            ("strict", &["grocery-*"], &[], "weather", false),
            ("legacy", &["*"], &["grocery-*"], "grocery-inventory", false),
            ("legacy", &[], &["bad"], "bad", false),
            ("legacy", &[], &["bad"], "good", true),
            ("strict", &["x"], &["x"], "x", false), // deny wins
            ("legacy", &["GROCERY-*"], &[], "grocery-inventory", true), // case-insensitive
            ("legacy", &[], &["Grocery-Inventory"], "grocery-inventory", false),
            ("legacy", &["app-?"], &[], "app-1", true),
            ("legacy", &["app-[0-9]"], &[], "app-x", false),
            ("legacy", &["{a,b}*"], &[], "bee", true),
            ("LEGACY", &[], &[], "a", true),
            (" Strict ", &[], &[], "a", false),
        ];
        for (sem, allow, deny, id, want) in cases {
            let d = decide(sem, allow, deny, id);
            if *want {
                assert_eq!(d, Allowed, "{sem} {allow:?} {deny:?} {id}");
            } else {
                assert!(denied(&d), "{sem} {allow:?} {deny:?} {id}: {d:?}");
            }
        }
    }

    #[test]
    fn denial_reasons_name_the_rule() {
        assert_eq!(decide("legacy", &[], &["g*"], "grocery").reason().unwrap(), "denied by Deny pattern 'g*'");
        assert!(decide("strict", &[], &[], "a").reason().unwrap().contains("strict"));
        assert!(decide("legacy", &["x"], &[], "a").reason().unwrap().contains("matches no Allow pattern"));
    }

    #[test]
    fn bad_semantics_fails_closed_naming_the_value() {
        let p = AppPolicy::new("permissive", &s(&["*"]), &[]);
        let d = p.decide("anything", Some(true));
        let PolicyDecision::Misconfigured { error } = &d else { panic!("{d:?}") };
        assert_eq!(error.field, "McpApps.AllowlistSemantics");
        assert!(error.message.contains("'permissive'"));
        assert!(d.reason().unwrap().contains("permissive"));
        assert_eq!(p.errors().len(), 1);
        assert!(matches!(AppPolicy::new("", &[], &[]).decide("a", None), PolicyDecision::Misconfigured { .. }));
    }

    #[test]
    fn invalid_glob_fails_closed_for_its_list() {
        let p = AppPolicy::new("legacy", &s(&["ok", "[unclosed"]), &[]);
        let errs = p.errors();
        assert_eq!(errs.len(), 1);
        assert_eq!(errs[0].field, "McpApps.Allow[1]");
        assert!(errs[0].message.contains("'[unclosed'"));
        assert!(matches!(p.decide("ok", None), PolicyDecision::Denied { .. }), "broken Allow allows nothing");

        let p = AppPolicy::new("legacy", &s(&["*"]), &s(&["{a,"]));
        assert_eq!(p.errors()[0].field, "McpApps.Deny[0]");
        let d = p.decide("zzz", None);
        assert!(d.reason().unwrap().contains("Deny list is invalid"), "broken Deny denies everything: {d:?}");

        let p = AppPolicy::new("legacy", &s(&["  "]), &[]);
        assert!(p.errors()[0].message.contains("empty pattern"));
    }

    #[test]
    fn entries_enabled() {
        let p = AppPolicy::new("legacy", &[], &s(&["blocked"]));
        assert_eq!(p.decide("a", Some(false)), PolicyDecision::DisabledByEntry);
        assert_eq!(p.decide("a", Some(true)), PolicyDecision::Allowed);
        assert!(matches!(p.decide("blocked", Some(true)), PolicyDecision::Denied { .. }), "deny wins over an entry");
        let strict = AppPolicy::new("strict", &s(&["x"]), &[]);
        assert!(matches!(strict.decide("y", Some(true)), PolicyDecision::Denied { .. }), "entries do not bypass Allow");
    }

    #[test]
    fn from_config() {
        let cfg = McpAppsConfig {
            allowlist_semantics: "strict".into(),
            allow: s(&["a*"]),
            deny: s(&["ab"]),
            ..Default::default()
        };
        let p = AppPolicy::from_config(&cfg);
        assert!(p.errors().is_empty());
        assert!(p.decide("ac", None).is_allowed());
        assert!(!p.decide("ab", None).is_allowed());
        assert!(!p.decide("b", None).is_allowed());
    }
}
