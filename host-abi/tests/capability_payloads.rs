//! The capability payloads (`ModuleInfo::extra_json`, `ModuleConfig::extra_json`) decode
//! tolerantly: whatever the other side sent, a reader gets a value, never an error.

use host_abi::{ModuleConfigExtra, ModuleInfoExtra};

#[test]
fn module_info_extra_round_trips_and_ignores_unknown_keys() {
    let extra = ModuleInfoExtra { capabilities: vec!["ModuleInstance::stats".into()], fault_injection: true };
    let text = serde_json::to_string(&extra).unwrap();
    assert_eq!(text, r#"{"capabilities":["ModuleInstance::stats"],"faultInjection":true}"#);
    assert_eq!(ModuleInfoExtra::from_json(&text), extra);
    let newer = r#"{"capabilities":["ModuleInstance::stats"],"faultInjection":true,"gitRevision":"abc","later":{"x":1}}"#;
    assert_eq!(ModuleInfoExtra::from_json(newer), extra);
    assert!(extra.has("ModuleInstance::stats"));
    assert!(!extra.has("HostSink::notice"));
}

#[test]
fn what_an_abi_1_0_module_sends_means_nothing_optional() {
    // Today's module: no capability list at all.
    let today = ModuleInfoExtra::from_json(r#"{"faultInjection":false}"#);
    assert_eq!(today, ModuleInfoExtra::default());
    assert!(today.capabilities.is_empty());
}

#[test]
fn ill_typed_or_missing_parts_take_their_defaults() {
    for text in ["", "null", "[]", "42", "not json", "{}", r#"{"capabilities":null}"#, r#"{"capabilities":"ModuleInstance::stats"}"#] {
        assert_eq!(ModuleInfoExtra::from_json(text).capabilities, Vec::<String>::new(), "{text}");
        assert_eq!(ModuleConfigExtra::from_json(text), ModuleConfigExtra::default(), "{text}");
    }
    // One bad field does not cost the others.
    let mixed = ModuleInfoExtra::from_json(r#"{"capabilities":["A::a", 7, null, "B::b"],"faultInjection":"yes"}"#);
    assert_eq!(mixed.capabilities, vec!["A::a".to_string(), "B::b".to_string()]);
    assert!(!mixed.fault_injection);
    let host = ModuleConfigExtra::from_json(r#"{"interfaceVersion":1.1,"capabilities":["HostSink::notice"]}"#);
    assert_eq!(host.interface_version, "");
    assert!(host.has("HostSink::notice"));
}

#[test]
fn module_config_extra_round_trips() {
    let extra = ModuleConfigExtra { interface_version: host_abi::INTERFACE_VERSION.into(), capabilities: vec![] };
    let text = serde_json::to_string(&extra).unwrap();
    assert_eq!(text, format!(r#"{{"interfaceVersion":"{}","capabilities":[]}}"#, host_abi::INTERFACE_VERSION));
    assert_eq!(ModuleConfigExtra::from_json(&text), extra);
}

#[test]
fn abi_2_0_declares_the_hosts_http_post_and_its_major_is_the_interface_major() {
    // ABI 1.0 had no optional methods; 1.1 appended `HostSink::http_post`, which stays optional in 2.0.
    assert_eq!(host_abi::capability::ALL, &["HostSink::http_post"]);
    assert!(host_abi::INTERFACE_VERSION.starts_with("2.0."), "{}", host_abi::INTERFACE_VERSION);
    let major: u32 = host_abi::INTERFACE_VERSION.split('.').next().unwrap().parse().unwrap();
    assert_eq!(major, host_abi::ABI_VERSION);
}
