//! `replicas` (issue 42): what it costs when a 2026-07-28 client's retry reaches another replica
//! than the one holding its call. Two gateways share a Redis (a `redis-server` of the bench's own)
//! and a cluster secret; each runs the test app. A call of its `elicit` tool is parked on
//! replica A (`input_required`); its retry with the answer goes to A itself (answered where it
//! started) or to B (B looks the owner up and sends it on to A). The two are timed in
//! alternation, so load from elsewhere hits both; the figure is the difference of their p50s.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::common::*;
use crate::scenarios::{tempdir, Opts};

const SECRET: &str = "the bench's cluster secret, 32 chars";

pub async fn replicas(art: &Artefacts, o: &Opts) -> Res<Value> {
    let rounds = if o.quick { 100 } else { 500 };
    let port = free_port();
    let mut redis = Command::new("redis-server");
    redis
        .args(["--port", &port.to_string(), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let _redis = Proc::spawn(redis).map_err(|e| format!("{e} (redis-server: apt install redis-server)"))?;
    wait_listening(port, Duration::from_secs(10)).await?;
    let mut gateways = Vec::new();
    for id in ["a", "b"] {
        let dir = tempdir("bench-replicas-")?;
        let apps = dir.path().join("apps");
        write_manifest(&apps, "e", &stdio_app(art, "e", &[]))?;
        let mut config = gateway_config(&apps);
        config["Sessions"] = json!({ "Store": "redis", "RedisUrl": format!("redis://127.0.0.1:{port}") });
        config["Cluster"] = json!({ "Secret": SECRET, "ReplicaId": id });
        gateways.push(Gateway::start(art, dir, &config, &[])?);
    }
    let client = http_client();
    for gw in &gateways {
        gw.wait_running(&client, &["e".to_string()], Duration::from_secs(60)).await?;
    }
    let (a, b) = (&gateways[0].url, &gateways[1].url);
    let (mut here, mut forwarded) = (Vec::with_capacity(rounds), Vec::with_capacity(rounds));
    for round in 0..rounds + 10 {
        // Alternate which goes first.
        let order = if round % 2 == 0 { [a, b] } else { [b, a] };
        for target in order {
            let took = retry_through(&client, a, target).await?;
            if round >= 10 {
                if target == a { here.push(took) } else { forwarded.push(took) }
            }
        }
    }
    let ms = |v: &[u64], p: f64| percentile(v, p) / 1000.0;
    let (here_p50, forwarded_p50) = (ms(&here, 50.0), ms(&forwarded, 50.0));
    log(format!("replicas: retry answered where parked p50 {here_p50:.3} ms, sent on to the owner p50 {forwarded_p50:.3} ms"));
    Ok(json!({
        "scenario": "replicas",
        "rounds": rounds,
        "retry_here_p50_ms": round3(here_p50), "retry_here_p90_ms": round3(ms(&here, 90.0)),
        "retry_forwarded_p50_ms": round3(forwarded_p50), "retry_forwarded_p90_ms": round3(ms(&forwarded, 90.0)),
        "forwarded_extra_p50_ms": round3(forwarded_p50 - here_p50),
        "errors": 0,
        "note": "a 2026-07-28 elicitation call parked on replica A; its retry with the answer sent to A itself or to B, \
                 which finds the owner in Redis and sends it on (target: forwarded_extra_p50_ms <= 1); in alternation"
    }))
}

/// Parks an `elicit` call on `owner`, then times its retry sent to `target` (µs). Any answer but
/// the app's result is an error.
async fn retry_through(client: &reqwest::Client, owner: &str, target: &str) -> Res<u64> {
    let capable = json!({ "elicitation": { "form": {} } });
    let ask = McpRequest::tool_call(&format!("{owner}/mcp"), "e.elicit", json!({ "message": "pick" })).with_client_capabilities(capable.clone());
    let asked = ask.send(client).await?;
    let state = asked["requestState"].as_str().ok_or_else(|| format!("no requestState: {asked}"))?;
    let key = asked["inputRequests"].as_object().and_then(|m| m.keys().next().cloned()).ok_or_else(|| format!("no question: {asked}"))?;
    let params = json!({
        "name": "e.elicit", "arguments": { "message": "pick" }, "requestState": state,
        "inputResponses": { key: { "action": "accept", "content": { "name": "bench", "color": "green", "count": 1 } } },
    });
    let retry = McpRequest::new(&format!("{target}/mcp"), "tools/call", params).with_client_capabilities(capable);
    let started = Instant::now();
    let done = retry.send(client).await?;
    let took = started.elapsed().as_micros() as u64;
    if !done.to_string().contains("green") {
        return Err(format!("the retry did not reach the app: {done}"));
    }
    Ok(took)
}

fn round3(x: f64) -> f64 {
    round(x, 3)
}
