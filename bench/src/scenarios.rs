//! The scenarios. Each returns its JSON object (printed by main as the last stdout line).

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::common::*;

pub struct Opts {
    pub quick: bool,
}

pub(crate) fn tempdir(prefix: &str) -> Res<tempfile::TempDir> {
    tempfile::Builder::new()
        .prefix(prefix)
        .tempdir()
        .map_err(|e| e.to_string())
}

/// The `/mcp` name of an app's tool: found in the gateway's `tools/list`.
pub async fn gateway_tool_name(
    client: &reqwest::Client,
    gw: &Gateway,
    app: &str,
    tool: &str,
) -> Res<String> {
    // The native registry may learn an app's tools a moment after /apps/health says running.
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let list = McpRequest::new(&format!("{}/mcp", gw.url), "tools/list", json!({}))
            .send(client)
            .await?;
        let names: Vec<String> = list["tools"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|t| t["name"].as_str().map(str::to_string))
            .collect();
        if let Some(n) = names
            .iter()
            .find(|n| n.starts_with(app) && n.ends_with(tool))
        {
            return Ok(n.clone());
        }
        if Instant::now() >= deadline {
            return Err(format!(
                "no tool for {app}/{tool} in /mcp tools/list: {names:?}"
            ));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

// ---------------------------------------------------------------------------------------------
// proxy
// ---------------------------------------------------------------------------------------------

pub async fn proxy(art: &Artefacts, o: &Opts) -> Res<Value> {
    let (rounds, secs) = if o.quick { (3, 1.2) } else { (5, 3.0) };
    let dir = tempdir("bench-proxy-")?;
    let apps = dir.path().join("apps");
    let port = free_port();
    write_manifest(&apps, "web", &http_app(art, "web", port))?;
    // The same app declaring the 2026-07-28 revision: the gateway's session to it is stateless,
    // each request carrying the revision's envelope and headers.
    let mut modern = http_app(art, "web26", free_port());
    modern["protocolVersion"] = json!("2026-07-28");
    write_manifest(&apps, "web26", &modern)?;
    let gw = Gateway::start(art, dir, &gateway_config(&apps), &[])?;
    let client = http_client();
    gw.wait_running(&client, &["web".into(), "web26".into()], Duration::from_secs(30))
        .await?;
    let mcp_name = gateway_tool_name(&client, &gw, "web", "echo").await?;
    log(format!(
        "proxy: gateway {} (pid {}), app on port {port}, /mcp tool {mcp_name}",
        gw.url,
        gw.pid()
    ));
    // The floor: a bare hyper forwarder in a process of its own (bare_proxy.rs).
    let bare_port = free_port();
    let mut bare_cmd = Command::new(std::env::current_exe().map_err(|e| e.to_string())?);
    bare_cmd
        .arg("bare-proxy")
        .arg(format!("127.0.0.1:{bare_port}"))
        .arg(format!("http://127.0.0.1:{port}/mcp"))
        .stdout(Stdio::null());
    let bare = Proc::spawn(bare_cmd)?;
    wait_listening(bare_port, Duration::from_secs(10)).await?;
    let args = json!({ "text": "bench" });
    let targets = [
        (
            "direct",
            McpRequest::tool_call(
                &format!("http://127.0.0.1:{port}/mcp"),
                "echo",
                args.clone(),
            ),
        ),
        (
            "apps_mcp",
            McpRequest::tool_call(&format!("{}/apps/mcp/web", gw.url), "echo", args.clone()),
        ),
        (
            "mcp",
            McpRequest::tool_call(&format!("{}/mcp", gw.url), &mcp_name, args.clone()),
        ),
        (
            "apps_mcp_2026",
            McpRequest::tool_call(&format!("{}/apps/mcp/web26", gw.url), "echo", args.clone()),
        ),
        (
            "bare_proxy",
            McpRequest::tool_call(&format!("http://127.0.0.1:{bare_port}/"), "echo", args.clone()),
        ),
    ];
    // Whose CPU each target's rounds are charged to.
    let pid_of = |name: &str| if name == "bare_proxy" { bare.pid } else { gw.pid() };
    // Warm-up: connections, caches, the app's lazy paths.
    for (name, req) in &targets {
        let s = load(&client, req, 4, Duration::from_secs(10), Some(200)).await;
        if s.errors > 0 {
            return Err(format!(
                "warm-up of {name} failed: {:?}\n{}",
                s.first_error,
                gw.logs()
            ));
        }
    }
    let concurrencies = [1usize, 16];
    // samples[target][conc]
    let mut samples = vec![vec![Samples::default(); concurrencies.len()]; targets.len()];
    // cpu[target][conc], µs of the process the target's rounds are charged to.
    let mut cpu = vec![vec![0u64; concurrencies.len()]; targets.len()];
    for round in 0..rounds {
        for (ci, &c) in concurrencies.iter().enumerate() {
            // Rotate the order each round so that drift hits every side.
            for k in 0..targets.len() {
                let ti = (k + round) % targets.len();
                let pid = pid_of(targets[ti].0);
                let before = cpu_us(pid);
                let s = load(
                    &client,
                    &targets[ti].1,
                    c,
                    Duration::from_secs_f64(secs),
                    None,
                )
                .await;
                cpu[ti][ci] += cpu_us(pid).saturating_sub(before);
                log(format!(
                    "proxy: round {} c{c} {}: {} calls, {} errors",
                    round + 1,
                    targets[ti].0,
                    s.calls(),
                    s.errors
                ));
                samples[ti][ci].merge(s);
            }
        }
    }
    let mut out = json!({ "scenario": "proxy", "rounds": rounds, "round_secs": secs, "concurrency": concurrencies });
    let mut errors = 0;
    for (ti, (name, _)) in targets.iter().enumerate() {
        let mut entry = json!({});
        let mut calls = 0;
        for (ci, &c) in concurrencies.iter().enumerate() {
            let s = &samples[ti][ci];
            let d = &samples[0][ci];
            let mut v = s.summary();
            if ti > 0 {
                v["p50_ratio"] = ratio(s.pct_ms(50.0), d.pct_ms(50.0)).into();
                v["p99_ratio"] = ratio(s.pct_ms(99.0), d.pct_ms(99.0)).into();
                v["throughput_ratio"] = ratio(s.rps(), d.rps()).into();
                v["cpu_us_per_call"] = round(cpu[ti][ci] as f64 / s.calls().max(1) as f64, 1).into();
            }
            errors += s.errors;
            calls += s.calls();
            entry[format!("c{c}")] = v;
        }
        if ti > 0 {
            entry["gateway_cpu_us_per_call"] =
                round(cpu[ti].iter().sum::<u64>() as f64 / calls.max(1) as f64, 1).into();
        } else {
            entry["gateway_cpu_us_total_during_direct"] = cpu[ti].iter().sum::<u64>().into();
        }
        out[*name] = entry;
    }
    out["p50_ratio"] = out["apps_mcp"]["c1"]["p50_ratio"].clone();
    out["p99_ratio"] = out["apps_mcp"]["c1"]["p99_ratio"].clone();
    out["throughput_ratio"] = out["apps_mcp"]["c16"]["throughput_ratio"].clone();
    out["gateway_cpu_us_per_call"] = out["apps_mcp"]["gateway_cpu_us_per_call"].clone();
    out["errors"] = errors.into();
    out["gateway_cpu_vs_bare_proxy"] = ratio(
        out["apps_mcp"]["gateway_cpu_us_per_call"].as_f64().unwrap_or(0.0),
        out["bare_proxy"]["gateway_cpu_us_per_call"].as_f64().unwrap_or(0.0),
    )
    .into();
    out["note"] = "ratios are gateway ÷ direct within this run; bare_proxy is a bare hyper forwarder in its own process \
                   (the floor of any proxy; its CPU is its own process's); gateway_cpu_vs_bare_proxy is /apps/mcp's CPU per call ÷ the bare proxy's; top-level p50/p99 ratios are /apps/mcp at concurrency 1, \
                   throughput_ratio /apps/mcp at 16; apps_mcp_2026 is /apps/mcp to the same app declaring the 2026-07-28 \
                   revision (a stateless session: envelope and headers on every request); gateway CPU is /proc/PID/stat utime+stime of gateway-host only (the \
                   app is a separate process) over its rounds ÷ calls proxied: gateway_cpu_us_per_call over the rounds at both \
                   concurrencies, cpu_us_per_call (the table's CPU column) over those at one"
        .into();
    Ok(out)
}

// ---------------------------------------------------------------------------------------------
// boundary
// ---------------------------------------------------------------------------------------------

fn boundary_check(art: &Artefacts, dir: &Path, calls: usize, delay_ms: u64) -> Res<Value> {
    let mut cmd = Command::new(&art.gateway);
    scrub_env(&mut cmd);
    cmd.arg("boundary-check")
        .arg("--module")
        .arg(&art.module)
        .arg("--config")
        .arg(dir.join("appsettings.json"));
    cmd.args([
        "--calls",
        &calls.to_string(),
        "--delay-ms",
        &delay_ms.to_string(),
    ])
    .current_dir(dir);
    let (ok, stdout, stderr) = run_bounded(cmd, Duration::from_secs(60))?;
    if !ok {
        return Err(format!("boundary-check failed:\n{stdout}\n{stderr}"));
    }
    let line = stdout
        .lines()
        .rev()
        .find(|l| l.trim_start().starts_with('{'))
        .unwrap_or("");
    serde_json::from_str(line)
        .map_err(|e| format!("boundary-check output is not JSON ({e}): {stdout}"))
}

pub async fn boundary(art: &Artefacts, o: &Opts) -> Res<Value> {
    let dir = tempdir("bench-boundary-")?;
    std::fs::create_dir_all(dir.path().join("apps")).map_err(|e| e.to_string())?;
    std::fs::write(
        dir.path().join("appsettings.json"),
        gateway_config(&dir.path().join("apps")).to_string(),
    )
    .map_err(|e| e.to_string())?;
    let mut runs = Vec::new();
    for delay in [0u64, 5] {
        let r = boundary_check(art, dir.path(), 10_000, delay)?;
        log(format!("boundary: 10000 calls, delay {delay} ms → {r}"));
        runs.push(r);
    }
    // One call alone: boundary-check times 2,000 diag.echo calls in a row, and the same work
    // in-process, in each run; the medians of its runs.
    let singles = if o.quick { 5 } else { 15 };
    let (mut across_us, mut in_process_us) = (Vec::new(), Vec::new());
    for _ in 0..singles {
        let r = boundary_check(art, dir.path(), 1, 0)?;
        across_us.push(r["oneCallUs"].as_f64().unwrap_or(f64::NAN));
        in_process_us.push(r["oneCallInProcessUs"].as_f64().unwrap_or(f64::NAN));
    }
    let (across, in_process) = (median(&across_us), median(&in_process_us));
    let bad = runs
        .iter()
        .any(|r| r["completed"] != r["calls"] || r["correct"] != r["calls"]);
    let threads_max = runs
        .iter()
        .filter_map(|r| r["threadsPeak"].as_u64())
        .max()
        .unwrap_or(0);
    let zero = &runs[0];
    let per_call_concurrent = zero["elapsedMs"].as_f64().unwrap_or(f64::NAN) * 1000.0 / 10_000.0;
    Ok(json!({
        "scenario": "boundary",
        "threads_max": threads_max,
        "threads_before": zero["threadsBefore"],
        "in_flight": 10_000,
        "runs": runs,
        "overhead_us": round(across - in_process, 1),
        "one_call_us": round(across, 1),
        "one_call_in_process_us": round(in_process, 2),
        "overhead_us_amortized_10k": round(per_call_concurrent, 2),
        "single_call_runs": singles,
        "errors": if bad { 1 } else { 0 },
        "note": "overhead_us is one call alone across the module boundary minus the same work in-process: \
                 one_call_us is the median round trip of diag.echo with nothing else in flight (boundary-check times \
                 2,000 in a row after a warm-up; median of its runs), one_call_in_process_us the same JSON work (params \
                 written and read, answer built, written and read back) without the boundary. overhead_us_amortized_10k is \
                 elapsedMs ÷ 10,000 with all calls in flight at once. threads_max is the peak thread count of the process \
                 while 10,000 calls are in flight (delay 0 and 5 ms)"
    }))
}

// ---------------------------------------------------------------------------------------------
// discovery
// ---------------------------------------------------------------------------------------------

const MANIFEST: &str = "openclaw.mcpapp.json";

fn walk(dir: &Path, read: bool, found: &mut usize) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    for e in rd.flatten() {
        let Ok(ft) = e.file_type() else { continue };
        if ft.is_dir() {
            walk(&e.path(), read, found);
        } else if ft.is_file() && e.file_name() == MANIFEST {
            if read {
                let text = std::fs::read(e.path()).unwrap_or_default();
                if serde_json::from_slice::<Value>(&text).is_ok() {
                    *found += 1;
                }
            } else {
                *found += 1;
            }
        }
    }
}

fn time_apps(art: &Artefacts, cfg: &Path, cwd: &Path) -> Res<(f64, usize)> {
    let mut cmd = Command::new(&art.gateway);
    scrub_env(&mut cmd);
    cmd.arg("apps")
        .arg("--config")
        .arg(cfg)
        .arg("--module")
        .arg(&art.module)
        .arg("--json")
        .current_dir(cwd);
    let t = Instant::now();
    let (ok, stdout, stderr) = run_bounded(cmd, Duration::from_secs(120))?;
    let ms = t.elapsed().as_secs_f64() * 1000.0;
    if !ok {
        return Err(format!(
            "gateway-host apps failed:\n{}\n{}",
            &stdout[..stdout.len().min(2000)],
            &stderr[..stderr.len().min(2000)]
        ));
    }
    let v: Value =
        serde_json::from_str(stdout.trim()).map_err(|e| format!("apps --json is not JSON: {e}"))?;
    let n = v["apps"]
        .as_array()
        .map(|a| a.len())
        .or_else(|| v.as_array().map(|a| a.len()))
        .unwrap_or(0);
    Ok((ms, n))
}

pub async fn discovery(art: &Artefacts, o: &Opts) -> Res<Value> {
    const N: usize = 10_000;
    let rounds = if o.quick { 3 } else { 7 };
    let dir = tempdir("bench-discovery-")?;
    let tree = dir.path().join("tree");
    let empty = dir.path().join("empty");
    std::fs::create_dir_all(&empty).map_err(|e| e.to_string())?;
    let t = Instant::now();
    for i in 0..N {
        // 10 vendors × 10 groups × 100 apps, each app in its own folder: 4 levels below the root.
        let folder = format!("vendor{}/group{}/app{i}", i / 1000, (i / 100) % 10);
        let id = format!("app{i}");
        write_manifest(&tree, &folder, &stdio_app(art, &id, &[]))?;
    }
    log(format!(
        "discovery: wrote {N} manifests in {:.1} s",
        t.elapsed().as_secs_f64()
    ));
    let cfg_tree = dir.path().join("tree.json");
    let cfg_empty = dir.path().join("empty.json");
    std::fs::write(&cfg_tree, gateway_config(&tree).to_string()).map_err(|e| e.to_string())?;
    std::fs::write(&cfg_empty, gateway_config(&empty).to_string()).map_err(|e| e.to_string())?;
    // Warm the page cache for both sides.
    let mut n = 0;
    walk(&tree, true, &mut n);
    let (_, listed) = time_apps(art, &cfg_tree, dir.path())?;
    let (mut cmd_ms, mut empty_ms, mut walk_ms, mut walk_read_ms) =
        (vec![], vec![], vec![], vec![]);
    for r in 0..rounds {
        let (ms, n) = time_apps(art, &cfg_tree, dir.path())?;
        if n != N {
            return Err(format!("apps --json listed {n} apps, expected {N}"));
        }
        cmd_ms.push(ms);
        empty_ms.push(time_apps(art, &cfg_empty, dir.path())?.0);
        let mut found = 0;
        let t = Instant::now();
        walk(&tree, false, &mut found);
        walk_ms.push(t.elapsed().as_secs_f64() * 1000.0);
        let mut parsed = 0;
        let t = Instant::now();
        walk(&tree, true, &mut parsed);
        walk_read_ms.push(t.elapsed().as_secs_f64() * 1000.0);
        if found != N || parsed != N {
            return Err(format!(
                "the walk found {found} / parsed {parsed} manifests, expected {N}"
            ));
        }
        log(format!(
            "discovery: round {}: apps {ms:.1} ms, empty {:.1} ms, walk {:.1} ms",
            r + 1,
            empty_ms[r],
            walk_ms[r]
        ));
    }
    let (c, e, w, wr) = (
        median(&cmd_ms),
        median(&empty_ms),
        median(&walk_ms),
        median(&walk_read_ms),
    );
    Ok(json!({
        "scenario": "discovery",
        "manifests": N, "apps_listed": listed, "rounds": rounds,
        "apps_cmd_ms": round(c, 1), "apps_cmd_empty_tree_ms": round(e, 1), "discovery_ms": round(c - e, 1),
        "walk_ms": round(w, 2), "walk_read_parse_ms": round(wr, 2),
        "ratio_vs_walk": ratio(c - e, w), "ratio_vs_walk_read_parse": ratio(c - e, wr),
        "errors": 0,
        "note": "discovery_ms = `gateway-host apps --json` on the 10,000-manifest tree minus the same command on an empty tree \
                 (process start, module load, JSON output of an empty list); walk = std::fs recursion in the bench finding \
                 the same files (walk_read_parse also reads and parses each as JSON); medians, page cache warm"
    }))
}

// ---------------------------------------------------------------------------------------------
// startup
// ---------------------------------------------------------------------------------------------

/// `sandbox_mode` is `Sandbox.Mode` (SPEC R48): `enforce` (the default) or `off`.
async fn time_to_running(art: &Artefacts, n: usize, delay_ms: u64, sandbox_mode: &str) -> Res<f64> {
    let dir = tempdir("bench-startup-")?;
    let apps = dir.path().join("apps");
    let ids: Vec<String> = (0..n).map(|i| format!("s{i}")).collect();
    let delay = delay_ms.to_string();
    for id in &ids {
        write_manifest(
            &apps,
            id,
            &stdio_app(art, id, &["--startup-delay-ms", &delay]),
        )?;
    }
    let mut config = gateway_config(&apps);
    config["Sandbox"] = json!({ "Mode": sandbox_mode });
    let gw = Gateway::start(art, dir, &config, &[])?;
    let client = http_client();
    let t = gw
        .running_logged(&client, &ids, Duration::from_secs(60))
        .await?;
    drop(gw);
    Ok(t.as_secs_f64() * 1000.0)
}

/// Confined/unconfined pairs timed in each round of `startup`.
const PAIRS_PER_ROUND: usize = 4;

pub async fn startup(art: &Artefacts, o: &Opts) -> Res<Value> {
    let rounds = if o.quick { 2 } else { 5 };
    let (mut one, mut twenty) = (vec![], vec![]);
    let (mut confined, mut unconfined) = (vec![], vec![]);
    for r in 0..rounds {
        one.push(time_to_running(art, 1, 1000, "enforce").await?);
        twenty.push(time_to_running(art, 20, 1000, "enforce").await?);
        // The confined/unconfined pair (SPEC R48): apps that start at once, so the cost of
        // confining them (the Landlock ruleset, the seccomp programs, the cgroup, the namespace)
        // is not hidden behind a slow start. In alternation, so load from elsewhere hits both.
        // Several pairs a round: each is short, and the ratio of two ~100 ms times is noisy.
        for _ in 0..PAIRS_PER_ROUND {
            unconfined.push(time_to_running(art, 20, 0, "off").await?);
            confined.push(time_to_running(art, 20, 0, "enforce").await?);
        }
        let last = confined.len() - PAIRS_PER_ROUND..;
        log(format!(
            "startup: round {}: 1 app {:.0} ms, 20 apps {:.0} ms; 20 quick apps confined {:.0?} ms, unconfined {:.0?} ms",
            r + 1,
            one[r],
            twenty[r],
            &confined[last.clone()],
            &unconfined[last]
        ));
    }
    let (a, b) = (median(&one), median(&twenty));
    let (c, u) = (median(&confined), median(&unconfined));
    Ok(json!({
        "scenario": "startup",
        "apps": 20, "startup_delay_ms": 1000, "rounds": rounds, "confined_pairs": confined.len(),
        "one_app_ms": round(a, 1), "twenty_apps_ms": round(b, 1),
        "parallel_ratio": ratio(b, a),
        "twenty_confined_ms": round(c, 1), "twenty_unconfined_ms": round(u, 1),
        "confined_ratio": ratio(c, u),
        "errors": 0,
        "note": "time from spawning gateway-host until it has logged every app's move to running (read from its log as \
                 it is written, then confirmed on /apps/health; polling /apps/health every 10 ms instead weighs on the \
                 confined side, whose reports are five times larger); \
                 medians; 1.0 means the 20 slow starts fully overlap; the confined/unconfined pair is 20 apps with no \
                 startup delay under Sandbox.Mode enforce and off, in alternation, 4 pairs a round (target: confined_ratio <= 1.1)"
    }))
}

// ---------------------------------------------------------------------------------------------
// memory
// ---------------------------------------------------------------------------------------------

pub async fn memory(art: &Artefacts, o: &Opts) -> Res<Value> {
    let calls: u64 = if o.quick { 10_000 } else { 100_000 };
    let dir = tempdir("bench-memory-")?;
    let apps = dir.path().join("apps");
    let ids: Vec<String> = (0..20).map(|i| format!("m{i}")).collect();
    for id in &ids {
        write_manifest(&apps, id, &stdio_app(art, id, &[]))?;
    }
    let gw = Gateway::start(art, dir, &gateway_config(&apps), &[])?;
    let client = http_client();
    gw.wait_running(&client, &ids, Duration::from_secs(60))
        .await?;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let idle = rss_mb(gw.pid());
    let (idle_anon, idle_file) = (status_mb(gw.pid(), "RssAnon:"), status_mb(gw.pid(), "RssFile:"));
    log(format!(
        "memory: idle RSS {idle} MiB with 20 apps running; {calls} calls…"
    ));
    let req = McpRequest::tool_call(
        &format!("{}/apps/mcp/m0", gw.url),
        "echo",
        json!({ "text": "bench" }),
    );
    let s = load(
        &client,
        &req,
        16,
        Duration::from_secs(if o.quick { 45 } else { 400 }),
        Some(calls),
    )
    .await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let after = rss_mb(gw.pid());
    let (after_anon, after_file) = (status_mb(gw.pid(), "RssAnon:"), status_mb(gw.pid(), "RssFile:"));
    log(format!(
        "memory: {} calls in {:.1} s, {} errors, RSS after {after} MiB",
        s.calls(),
        s.secs,
        s.errors
    ));
    Ok(json!({
        "scenario": "memory",
        "apps_running": 20,
        "rss_mb_idle": idle, "rss_mb_after": after,
        "rss_anon_mb_idle": idle_anon, "rss_file_mb_idle": idle_file,
        "rss_anon_mb_after": after_anon, "rss_file_mb_after": after_file,
        "calls": s.calls(), "calls_planned": calls, "errors": s.errors, "first_error": s.first_error,
        "calls_secs": round(s.secs, 2), "rps": round(s.rps(), 1),
        "note": "VmRSS of gateway-host (apps excluded), 1 s after all 20 stdio apps are running and 1 s after the calls \
                 (tools/call echo on /apps/mcp/m0, 16 concurrent); rss_anon is the process's private memory (heap, stacks), \
                 rss_file the pages of mapped files it touched (mostly the code of gateway-host and libmcpapp_plugin.so, \
                 shared with every other process mapping them)"
    }))
}
