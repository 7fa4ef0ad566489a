//! The manifest parser and validator (`openclaw.mcpapp.json`): any bytes give a manifest or
//! errors naming fields — never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mcpapp_plugin::apps::manifest::Manifest;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let path = std::path::Path::new("/fuzz/app/openclaw.mcpapp.json");
    match Manifest::from_json_str(text, path) {
        Ok(loaded) => drop(loaded),
        Err(errors) => {
            let _ = errors.to_string();
        }
    }
});
