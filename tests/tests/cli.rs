//! The command line as an operator reads it (issue 14).

use gateway_e2e::run_gateway;

#[test]
fn help_describes_each_command_with_its_own_text() {
    let output = run_gateway(&["--help"], &[]);
    assert!(output.status.success());
    let help = String::from_utf8_lossy(&output.stdout).to_string();
    let line = |command: &str| help.lines().find(|l| l.trim_start().starts_with(command)).unwrap_or_default().to_string();
    assert!(line("validate").contains("Check manifest files"), "{help}");
    assert!(!line("validate").contains("calls in flight"), "validate carries boundary-check's text:\n{help}");
    assert!(line("boundary-check").contains("calls in flight"), "{help}");
    assert!(line("apps").contains("discovery finds"), "{help}");
    assert!(line("module-info").contains("ABI version"), "{help}");
}
