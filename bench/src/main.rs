//! The gateway's benchmarks (issue 15). `cargo run --release -p bench -- SCENARIO [--quick]`.
//!
//! Each scenario measures its subjects side by side in one run (rounds interleaved) and prints one
//! JSON object as its last stdout line; progress goes to stderr. `all` runs every scenario and
//! rewrites the generated results section of BENCHMARKS.md. Everything listens on 127.0.0.1, every
//! wait is bounded, and every child process runs in its own process group, killed on drop.

mod bare_proxy;
mod chat;
mod common;
mod peers;
mod replicas;
mod scenarios;
mod ui_resource;

use std::time::Instant;

use clap::Parser;
use serde_json::{json, Value};

use common::*;
use scenarios::Opts;

const SCENARIOS: &[&str] = &[
    "proxy",
    "boundary",
    "discovery",
    "startup",
    "memory",
    "peers",
    "chat",
    "ui_resource",
    "replicas",
];

#[derive(Parser)]
#[command(
    name = "bench",
    about = "Gateway benchmarks: proxy, boundary, discovery, startup, memory, peers, chat, ui_resource, replicas, or all"
)]
struct Cli {
    /// proxy | boundary | discovery | startup | memory | peers | chat | ui_resource | replicas | all
    scenario: String,
    /// Shorter runs (each scenario under 60 s).
    #[arg(long)]
    quick: bool,
    /// With `all`: do not rewrite BENCHMARKS.md.
    #[arg(long)]
    no_write: bool,
}

async fn run_one(name: &str, art: &Artefacts, o: &Opts) -> Res<Value> {
    match name {
        "proxy" => scenarios::proxy(art, o).await,
        "boundary" => scenarios::boundary(art, o).await,
        "discovery" => scenarios::discovery(art, o).await,
        "startup" => scenarios::startup(art, o).await,
        "memory" => scenarios::memory(art, o).await,
        "peers" => peers::peers(art, o).await,
        "chat" => chat::chat(art, o).await,
        "ui_resource" => ui_resource::ui_resource(art, o).await,
        "replicas" => replicas::replicas(art, o).await,
        other => Err(format!(
            "unknown scenario {other:?}; one of {SCENARIOS:?} or all"
        )),
    }
}

fn main() {
    // `bench bare-proxy LISTEN UPSTREAM`: the floor `proxy` runs beside the gateway (a child of
    // this binary, not a scenario).
    let argv: Vec<String> = std::env::args().collect();
    if argv.get(1).map(String::as_str) == Some("bare-proxy") {
        match (argv.get(2), argv.get(3)) {
            (Some(listen), Some(upstream)) => bare_proxy::main(listen, upstream),
            _ => {
                eprintln!("usage: bench bare-proxy LISTEN UPSTREAM");
                std::process::exit(2)
            }
        }
    }
    // `bench load URL TOOL [CONCURRENCY] [SECONDS]`: `tools/call TOOL` on an MCP endpoint for a
    // while, for looking at a gateway started by hand under load (perf, strace); not a scenario.
    if argv.get(1).map(String::as_str) == Some("load") {
        match (argv.get(2), argv.get(3)) {
            (Some(url), Some(tool)) => load_by_hand(url, tool, argv.get(4), argv.get(5)),
            _ => {
                eprintln!("usage: bench load URL TOOL [CONCURRENCY] [SECONDS]");
                std::process::exit(2)
            }
        }
    }
    let cli = Cli::parse();
    // Children in their own process groups do not get the terminal's Ctrl-C, nor a SIGTERM sent
    // to the bench (a timeout, a CI job ending): end them too, then exit as the signal would.
    std::thread::spawn(|| {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let code = rt.block_on(async {
            use tokio::signal::unix::{signal, SignalKind};
            let mut term = signal(SignalKind::terminate()).expect("cannot watch SIGTERM");
            tokio::select! {
                _ = tokio::signal::ctrl_c() => 130,
                _ = term.recv() => 143,
            }
        });
        kill_all_groups();
        std::process::exit(code);
    });
    let art = match Artefacts::find() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("bench: {e}");
            std::process::exit(2);
        }
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let o = Opts { quick: cli.quick };
    let names: Vec<&str> = if cli.scenario == "all" {
        SCENARIOS.to_vec()
    } else {
        vec![cli.scenario.as_str()]
    };
    let started = Instant::now();
    let mut results = Vec::new();
    let mut failed = false;
    for name in &names {
        log(format!(
            "== {name}{}",
            if cli.quick { " (quick)" } else { "" }
        ));
        let t = Instant::now();
        let mut v = match rt.block_on(run_one(name, &art, &o)) {
            Ok(v) => v,
            Err(e) => {
                failed = true;
                eprintln!("bench: {name} failed: {e}");
                json!({ "scenario": name, "failed": e.lines().next().unwrap_or("").to_string() })
            }
        };
        v["elapsed_s"] = round(t.elapsed().as_secs_f64(), 1).into();
        v["quick"] = cli.quick.into();
        if names.len() > 1 {
            // Keep each scenario's line visible while `all` runs.
            println!("{v}");
        }
        results.push(v);
    }
    let wall = started.elapsed().as_secs_f64();
    if cli.scenario == "all" {
        let summary = json!({ "scenario": "all", "quick": cli.quick, "wall_s": round(wall, 1),
            "results": results.iter().map(|r| (r["scenario"].as_str().unwrap_or("?").to_string(), r.clone())).collect::<serde_json::Map<_, _>>() });
        if !cli.no_write {
            match write_benchmarks_md(&results, cli.quick, wall) {
                Ok(p) => log(format!("rewrote the results section of {p}")),
                Err(e) => {
                    failed = true;
                    eprintln!("bench: writing BENCHMARKS.md: {e}");
                }
            }
        }
        println!("{summary}");
    } else {
        println!("{}", results[0]);
    }
    std::process::exit(if failed { 1 } else { 0 });
}

/// `bench load`: prints calls, errors, calls/s, p50 and p99 once the time is up.
fn load_by_hand(url: &str, tool: &str, concurrency: Option<&String>, seconds: Option<&String>) -> ! {
    let concurrency = concurrency.and_then(|c| c.parse().ok()).unwrap_or(16usize);
    let seconds = seconds.and_then(|s| s.parse().ok()).unwrap_or(10.0f64);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let request = McpRequest::tool_call(url, tool, json!({ "text": "bench" }));
    let s = rt.block_on(load(
        &http_client(),
        &request,
        concurrency,
        std::time::Duration::from_secs_f64(seconds),
        None,
    ));
    println!("{}", s.summary());
    std::process::exit(if s.errors > 0 { 1 } else { 0 })
}

// ---------------------------------------------------------------------------------------------
// BENCHMARKS.md
// ---------------------------------------------------------------------------------------------

const START: &str = "<!-- bench:results:start -->";
const END: &str = "<!-- bench:results:end -->";

fn sh(cmd: &str, args: &[&str]) -> String {
    std::process::Command::new(cmd)
        .args(args)
        .output()
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default()
}

fn machine() -> Vec<(String, String)> {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model = cpuinfo
        .lines()
        .find_map(|l| {
            l.strip_prefix("model name")
                .map(|v| v.trim_start_matches([' ', '\t', ':']).to_string())
        })
        .unwrap_or_else(|| "unknown".into());
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    let mem_gib = meminfo
        .lines()
        .find_map(|l| {
            l.strip_prefix("MemTotal:")
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        })
        .map(|kb| format!("{:.1} GiB", kb / 1024.0 / 1024.0))
        .unwrap_or_default();
    vec![
        ("nproc".into(), sh("nproc", &[])),
        ("CPU".into(), model),
        ("memory".into(), mem_gib),
        ("kernel".into(), sh("uname", &["-sr"])),
        // The cargo profile measured: the folder the bench runs from, whose artefacts it drives.
        (
            "build".into(),
            std::env::current_exe()
                .ok()
                .and_then(|exe| Some(exe.parent()?.file_name()?.to_string_lossy().into_owned()))
                .unwrap_or_default(),
        ),
        ("date".into(), sh("date", &["-u", "+%Y-%m-%d %H:%M UTC"])),
    ]
}

/// `a.b.c` → value rows of a JSON object (arrays and notes kept out of the table).
fn flatten(prefix: &str, v: &Value, out: &mut Vec<(String, String)>) {
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                if matches!(
                    k.as_str(),
                    "scenario" | "note" | "runs" | "quick" | "first_error"
                ) {
                    continue;
                }
                let key = if prefix.is_empty() {
                    k.clone()
                } else {
                    format!("{prefix}.{k}")
                };
                flatten(&key, x, out);
            }
        }
        Value::Array(_) => out.push((prefix.to_string(), v.to_string())),
        Value::Null => {}
        Value::String(s) => out.push((prefix.to_string(), s.clone())),
        _ => out.push((prefix.to_string(), v.to_string())),
    }
}

fn write_benchmarks_md(results: &[Value], quick: bool, wall: f64) -> Res<String> {
    let path = repo_root().join("BENCHMARKS.md");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|_| "# Benchmarks\n".into());
    let mut s = String::new();
    s.push_str(START);
    s.push_str("\n\n<!-- Generated by `cargo run --release -p bench -- all`; edits between the markers are overwritten. -->\n\n");
    s.push_str("## Results\n\n");
    s.push_str(&format!(
        "Command: `cargo run --release -p bench -- all{}` (wall time {:.0} s).\n\n",
        if quick { " --quick" } else { "" },
        wall
    ));
    s.push_str("| machine | |\n|---|---|\n");
    for (k, v) in machine() {
        s.push_str(&format!("| {k} | {v} |\n"));
    }
    for r in results {
        let name = r["scenario"].as_str().unwrap_or("?");
        s.push_str(&format!("\n### `{name}`\n\n"));
        if let Some(f) = r["failed"].as_str() {
            s.push_str(&format!("Failed: {f}\n"));
            continue;
        }
        let mut rows = Vec::new();
        match name {
            "proxy" | "peers" => {
                // One row per path and concurrency, then the top-level figures.
                s.push_str("| path | concurrency | calls | p50 ms | p99 ms | calls/s | p50 ratio | p99 ratio | throughput ratio | CPU µs per call |\n");
                s.push_str("|---|---|---|---|---|---|---|---|---|---|\n");
                let paths = [
                    "direct",
                    "apps_mcp",
                    "mcp",
                    "apps_mcp_2026",
                    "bare_proxy",
                    "direct_stdio",
                    "gateway",
                    "gateway_session",
                    "supergateway",
                    "mcp_proxy",
                ];
                for path in paths.iter().filter(|p| r[**p].is_object()) {
                    for c in ["c1", "c16"] {
                        let v = &r[*path][c];
                        let f = |k: &str| {
                            if v[k].is_null() {
                                "–".to_string()
                            } else {
                                v[k].to_string()
                            }
                        };
                        s.push_str(&format!(
                            "| {path} | {} | {} | {} | {} | {} | {} | {} | {} | {} |\n",
                            &c[1..],
                            f("calls"),
                            f("p50_ms"),
                            f("p99_ms"),
                            f("rps"),
                            f("p50_ratio"),
                            f("p99_ratio"),
                            f("throughput_ratio"),
                            f("cpu_us_per_call")
                        ));
                    }
                }
                s.push('\n');
                if let Value::Object(m) = r {
                    for (k, v) in m {
                        if !v.is_object() && !matches!(k.as_str(), "scenario" | "note" | "quick") {
                            flatten(k, v, &mut rows);
                        }
                        if v.is_object() {
                            if let Some(cpu) = v.get("gateway_cpu_us_per_call") {
                                rows.push((
                                    format!("{k}.gateway_cpu_us_per_call"),
                                    cpu.to_string(),
                                ));
                            }
                        }
                    }
                }
            }
            _ => flatten("", r, &mut rows),
        }
        s.push_str("| figure | value |\n|---|---|\n");
        for (k, v) in rows {
            s.push_str(&format!("| {k} | {} |\n", v.replace('|', "\\|")));
        }
        if let Some(n) = r["note"].as_str() {
            s.push_str(&format!("\n{n}\n"));
        }
    }
    s.push('\n');
    s.push_str(END);
    let new = match (text.find(START), text.find(END)) {
        (Some(a), Some(b)) if b > a => format!("{}{}{}", &text[..a], s, &text[b + END.len()..]),
        _ => format!("{}\n{}\n", text.trim_end(), s),
    };
    std::fs::write(&path, new).map_err(|e| e.to_string())?;
    Ok(path.display().to_string())
}
