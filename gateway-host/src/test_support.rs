//! Helpers of the unit tests that check the host's own source (which keys it reads, how it reads
//! module payloads).

use std::path::PathBuf;

/// Every `.rs` file under `gateway-host/src/` with its product code: the text before its
/// `#[cfg(test)]` (unit tests build payloads and keys on purpose).
pub fn product_sources() -> Vec<(PathBuf, String)> {
    let mut out = Vec::new();
    let mut stack = vec![PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("src")];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap().flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let text = std::fs::read_to_string(&path).unwrap();
                let product = text.split("#[cfg(test)]").next().unwrap_or("").to_string();
                out.push((path, product));
            }
        }
    }
    out
}
