//! Every module task starts through `runtime::executor::Tasks::spawn` (see `src/runtime/executor.rs`). `clippy.toml`
//! forbids the bare spawns, but the tests run `cargo test`, not clippy: this is the same rule as a
//! plain text check of the sources, cheap enough to run every time.

use std::path::{Path, PathBuf};

/// Ways of starting a task that bypass the helper.
const FORBIDDEN: &[&str] = &[
    "tokio::spawn(",
    "tokio::task::spawn(",
    "task::spawn_local(",
    "Handle::current().spawn(",
    "handle().spawn(",
    ".handle.spawn(",
];

/// The helper's own call, allowed once, in `src/runtime/executor.rs` only.
const HELPER_CALL: &str = "self.handle.spawn(";

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("reading {}: {e}", dir.display())) {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// `(line number, line)` of the code lines (comments left out, so docs may name the rule).
fn code_lines(text: &str) -> impl Iterator<Item = (usize, &str)> {
    text.lines().enumerate().map(|(i, l)| (i + 1, l)).filter(|(_, l)| !l.trim_start().starts_with("//"))
}

#[test]
fn module_tasks_start_only_through_the_runtime_helper() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    assert!(files.len() > 10, "found the sources under {}", src.display());
    let mut offences = Vec::new();
    let mut helper_calls = 0;
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        let is_runtime = file.ends_with("runtime/executor.rs");
        for (n, line) in code_lines(&text) {
            if is_runtime && line.contains(HELPER_CALL) {
                helper_calls += 1;
                continue;
            }
            if let Some(pattern) = FORBIDDEN.iter().find(|p| line.contains(*p)) {
                offences.push(format!("{}:{n}: `{pattern}` in: {}", file.display(), line.trim()));
            }
        }
    }
    assert!(
        offences.is_empty(),
        "start module tasks with runtime::Tasks::spawn, not a bare spawn:\n{}",
        offences.join("\n")
    );
    assert_eq!(helper_calls, 1, "runtime.rs spawns in exactly one place (Tasks::spawn)");
}
