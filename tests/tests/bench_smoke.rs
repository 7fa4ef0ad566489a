//! The benchmarks run on a fresh clone (issue 15): `bench all --quick --no-write` drives every
//! scenario against the real gateway, module, apps and peers (installing supergateway and
//! mcp-proxy on its first run), and none of them fails or loses a call. Only that, and that each
//! scenario reports the figures BENCHMARKS.md records, is asserted: the figures themselves drift
//! with the machine, and are compared side by side by the bench, not against numbers here.
//!
//! Run: `cargo build --release --workspace && cargo test --release -p gateway-e2e --test bench_smoke`.

use std::process::Command;
use std::time::Duration;

use gateway_e2e::*;
use serde_json::Value;

/// Each scenario and the figures it must report (the names).
const SCENARIOS: &[(&str, &[&str])] = &[
    ("proxy", &["gateway_cpu_us_per_call", "p50_ratio", "p99_ratio", "throughput_ratio"]),
    ("peers", &["throughput_vs_best_peer", "p50_vs_direct_stdio"]),
    ("boundary", &["overhead_us", "threads_max"]),
    ("discovery", &["ratio_vs_walk"]),
    ("startup", &["parallel_ratio"]),
    ("memory", &["rss_mb_idle", "rss_mb_after"]),
    ("chat", &["host_ms_per_turn", "turns_per_s"]),
    ("ui_resource", &["mcp_over_apps_mcp_p50"]),
    ("replicas", &["forwarded_extra_p50_ms"]),
];

/// Every `errors` count anywhere in `value`, with where it was.
fn error_counts(value: &Value, at: String, out: &mut Vec<(String, Value)>) {
    match value {
        Value::Object(map) => {
            for (key, inner) in map {
                let here = format!("{at}.{key}");
                if key == "errors" {
                    out.push((here.clone(), inner.clone()));
                }
                error_counts(inner, here, out);
            }
        }
        Value::Array(items) => {
            for (i, inner) in items.iter().enumerate() {
                error_counts(inner, format!("{at}[{i}]"), out);
            }
        }
        _ => {}
    }
}

#[test]
fn every_benchmark_scenario_runs_without_a_failed_call() {
    let mut cmd = Command::new(release_bin("bench"));
    cmd.args(["all", "--quick", "--no-write"]);
    let output = run_with_timeout(cmd, Duration::from_secs(900));
    assert!(output.status.success(), "bench all --quick failed\n{}", describe_output(&output));
    let stdout = String::from_utf8_lossy(&output.stdout);
    let summary: Value = stdout
        .lines()
        .last()
        .and_then(|l| serde_json::from_str(l).ok())
        .unwrap_or_else(|| panic!("the last line is not the summary\n{}", describe_output(&output)));
    assert_eq!(summary["scenario"], "all", "{summary}");
    for (name, figures) in SCENARIOS {
        let result = &summary["results"][name];
        assert!(result.is_object(), "{name} did not run: {summary}");
        assert!(result.get("failed").is_none(), "{name} failed: {result}");
        for figure in *figures {
            let n = result[figure].as_f64();
            assert!(n.is_some_and(|n| n.is_finite() && n > 0.0), "{name}.{figure} is not a positive number: {result}");
        }
        let mut counts = Vec::new();
        error_counts(result, name.to_string(), &mut counts);
        assert!(!counts.is_empty(), "{name} reports no error count: {result}");
        for (at, count) in counts {
            assert_eq!(count, 0, "{at}: calls failed\n{result}");
        }
    }
}
