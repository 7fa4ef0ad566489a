//! ui_resource (issue 38): GroceryInventory's ~500 KB UI resource read through the gateway's
//! `/mcp` (multiplexed, by its rewritten URI) and through `/apps/mcp/grocery-inventory` (the app's
//! own URI), rounds interleaved in one run. The figure is `mcp_over_apps_mcp_p50` (target ≤ 1.2).

use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::common::*;
use crate::scenarios::Opts;

const APP: &str = "grocery-inventory";
const UI_URI: &str = "ui://grocery/store-dashboard.html";
/// The rule: `S://R` → `S://K/R`, K the app id.
const UI_URI_MCP: &str = "ui://grocery-inventory/grocery/store-dashboard.html";

/// The repository's GroceryInventory manifest, on a free port, started from the release build.
fn grocery_manifest(port: u16) -> Res<Value> {
    let path = repo_root().join("mcpapps/grocery-inventory/openclaw.mcpapp.json");
    let text = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut manifest: Value =
        serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
    manifest["command"] = json!(release_artefact("grocery-inventory")?);
    manifest["url"] = json!(format!("http://127.0.0.1:{port}/mcp"));
    manifest["arguments"] = json!(["--listen", format!("127.0.0.1:{port}")]);
    manifest["startupTimeoutSeconds"] = json!(30);
    Ok(manifest)
}

/// One `resources/read` result → (its only content's uri, text, mimeType), checked to be one text.
fn content(result: &Value, at: &str) -> Res<(String, String, Value)> {
    let contents = result["contents"]
        .as_array()
        .ok_or_else(|| format!("{at}: no contents in {}", short(result)))?;
    let [c] = contents.as_slice() else {
        return Err(format!("{at}: {} contents, expected 1", contents.len()));
    };
    let text = c["text"]
        .as_str()
        .ok_or_else(|| format!("{at}: the content has no text"))?;
    Ok((
        c["uri"].as_str().unwrap_or_default().to_string(),
        text.to_string(),
        c["mimeType"].clone(),
    ))
}

/// Until `/mcp`'s resources/list (every page) has `uri`, bounded. `/mcp` learns of an app from
/// the module's events, debounced, so for a moment after `/apps/health` shows it running `/mcp`
/// answers "McpApp '…' is not running" for it (as its tool registry does not list its tools yet).
async fn wait_listed(client: &reqwest::Client, gw: &Gateway, uri: &str) -> Res<()> {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let mut listed = Vec::new();
        let mut cursor: Option<String> = None;
        let mut failed = None;
        loop {
            let params = match &cursor {
                Some(c) => json!({ "cursor": c }),
                None => json!({}),
            };
            match McpRequest::new(&format!("{}/mcp", gw.url), "resources/list", params)
                .send(client)
                .await
            {
                Ok(page) => {
                    listed.extend(
                        page["resources"]
                            .as_array()
                            .into_iter()
                            .flatten()
                            .filter_map(|r| r["uri"].as_str().map(str::to_string)),
                    );
                    cursor = page["nextCursor"].as_str().map(str::to_string);
                    if cursor.is_none() {
                        break;
                    }
                }
                Err(e) => {
                    failed = Some(e);
                    break;
                }
            }
        }
        if failed.is_none() && listed.iter().any(|u| u == uri) {
            return Ok(());
        }
        if Instant::now() >= deadline {
            return Err(format!(
                "/mcp resources/list has no {uri} after 15 s: {listed:?} {failed:?}\n{}",
                gw.logs()
            ));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn short(v: &Value) -> String {
    v.to_string().chars().take(300).collect()
}

pub async fn ui_resource(art: &Artefacts, o: &Opts) -> Res<Value> {
    let (rounds, secs) = if o.quick { (3, 1.0) } else { (7, 3.0) };
    let dir = tempfile::Builder::new()
        .prefix("bench-ui-resource-")
        .tempdir()
        .map_err(|e| e.to_string())?;
    let apps = dir.path().join("apps");
    write_manifest(&apps, APP, &grocery_manifest(free_port())?)?;
    let gw = Gateway::start(art, dir, &gateway_config(&apps), &[])?;
    let client = http_client();
    gw.wait_running(&client, &[APP.to_string()], Duration::from_secs(30))
        .await?;
    wait_listed(&client, &gw, UI_URI_MCP).await?;
    let targets = [
        (
            "apps_mcp",
            McpRequest::new(
                &format!("{}/apps/mcp/{APP}", gw.url),
                "resources/read",
                json!({ "uri": UI_URI }),
            ),
        ),
        (
            "mcp",
            McpRequest::new(
                &format!("{}/mcp", gw.url),
                "resources/read",
                json!({ "uri": UI_URI_MCP }),
            ),
        ),
    ];
    // The same bytes both ways, each under its own URI: what is measured is the same work.
    let apps_mcp = targets[0].1.send(&client).await.map_err(|e| {
        format!(
            "resources/read {UI_URI} on /apps/mcp/{APP}: {e}\n{}",
            gw.logs()
        )
    })?;
    let mcp = targets[1]
        .1
        .send(&client)
        .await
        .map_err(|e| format!("resources/read {UI_URI_MCP} on /mcp: {e}\n{}", gw.logs()))?;
    let (uri_a, text_a, mime_a) = content(&apps_mcp, "/apps/mcp")?;
    let (uri_m, text_m, mime_m) = content(&mcp, "/mcp")?;
    if uri_a != UI_URI || uri_m != UI_URI_MCP {
        return Err(format!(
            "content uris: /apps/mcp {uri_a:?} (expected {UI_URI}), /mcp {uri_m:?} (expected {UI_URI_MCP})"
        ));
    }
    if text_a != text_m || mime_a != mime_m {
        return Err(format!(
            "/mcp answered other contents than /apps/mcp: {} vs {} bytes, mimeType {mime_m} vs {mime_a}",
            text_m.len(),
            text_a.len()
        ));
    }
    let bytes = text_a.len();
    log(format!(
        "ui_resource: gateway {} (pid {}), {bytes} bytes of {UI_URI} (/mcp: {UI_URI_MCP})",
        gw.url,
        gw.pid()
    ));
    // Warm-up: connections, the app's and the gateway's lazy paths.
    for (name, req) in &targets {
        let s = load(&client, req, 1, Duration::from_secs(10), Some(30)).await;
        if s.errors > 0 {
            return Err(format!(
                "warm-up of {name} failed: {:?}\n{}",
                s.first_error,
                gw.logs()
            ));
        }
    }
    let mut samples = vec![Samples::default(); targets.len()];
    let mut cpu = vec![0u64; targets.len()];
    for round in 0..rounds {
        // Alternate which side goes first, so that drift hits both.
        for k in 0..targets.len() {
            let ti = (k + round) % targets.len();
            let before = cpu_us(gw.pid());
            let s = load(
                &client,
                &targets[ti].1,
                1,
                Duration::from_secs_f64(secs),
                None,
            )
            .await;
            cpu[ti] += cpu_us(gw.pid()).saturating_sub(before);
            log(format!(
                "ui_resource: round {} {}: {} reads, p50 {:.3} ms, {} errors",
                round + 1,
                targets[ti].0,
                s.calls(),
                s.pct_ms(50.0),
                s.errors
            ));
            samples[ti].merge(s);
        }
    }
    let mut out = json!({
        "scenario": "ui_resource", "rounds": rounds, "round_secs": secs, "concurrency": 1,
        "resource_bytes": bytes,
    });
    let mut errors = 0;
    for (ti, (name, _)) in targets.iter().enumerate() {
        let s = &samples[ti];
        let mut v = s.summary();
        v["gateway_cpu_us_per_read"] = round(cpu[ti] as f64 / s.calls().max(1) as f64, 1).into();
        errors += s.errors;
        out[*name] = v;
    }
    let (a, m) = (&samples[0], &samples[1]);
    out["mcp_over_apps_mcp_p50"] = ratio(m.pct_ms(50.0), a.pct_ms(50.0)).into();
    out["mcp_over_apps_mcp_p99"] = ratio(m.pct_ms(99.0), a.pct_ms(99.0)).into();
    out["mcp_over_apps_mcp_cpu"] = ratio(
        cpu[1] as f64 / m.calls().max(1) as f64,
        cpu[0] as f64 / a.calls().max(1) as f64,
    )
    .into();
    out["errors"] = errors.into();
    out["note"] = "resources/read of GroceryInventory's UI resource (one text content), one reader at a time, \
                   2026-07-28 stateless requests: on /apps/mcp/grocery-inventory by the app's URI \
                   ui://grocery/store-dashboard.html, on /mcp by its rewritten URI \
                   ui://grocery-inventory/grocery/store-dashboard.html (checked first: the same text and mimeType, \
                   each content's uri its own); rounds interleaved, the side going first alternating; latency is the \
                   whole response read and parsed by the bench; gateway CPU is /proc/PID/stat utime+stime of \
                   gateway-host (the app is a separate process) over its rounds ÷ reads"
        .into();
    Ok(out)
}
