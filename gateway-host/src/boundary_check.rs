//! `gateway-host boundary-check`: many calls in flight across the module boundary at once.
//!
//! Proves SPEC R2 on the real binary and the real module: calls are futures resolved by the
//! module's runtime, so the host's thread count does not grow with the number of calls.

use std::path::Path;
use std::time::Instant;

use serde_json::json;

use crate::serve;
use crate::BoxError;

/// Threads of this process, from `/proc/self/status`.
pub fn thread_count() -> usize {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| s.lines().find_map(|l| l.strip_prefix("Threads:").map(|v| v.trim().parse().unwrap_or(0))))
        .unwrap_or(0)
}

pub fn run(config: Option<&Path>, module: Option<&Path>, calls: usize, delay_ms: u64) -> Result<(), BoxError> {
    let (settings, loaded) = serve::load(config, module)?;
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    let report = runtime.block_on(async move {
        let module = serve::create_module(&settings, loaded)?;
        // One warm-up call so that both runtimes have started all their threads.
        module.invoke("diag.echo", &json!({ "value": 0 })).await?;
        let threads_before = thread_count();
        let started = Instant::now();
        let futures: Vec<_> = (0..calls)
            .map(|i| {
                let module = module.clone();
                async move { module.invoke("diag.echo", &json!({ "value": i, "delayMs": delay_ms })).await }
            })
            .collect();
        // Sample the thread count while every call is in flight.
        let sampler = tokio::spawn(async move {
            let mut peak = 0;
            for _ in 0..20 {
                peak = peak.max(thread_count());
                tokio::time::sleep(std::time::Duration::from_millis(1)).await;
            }
            peak
        });
        let results = futures::future::join_all(futures).await;
        let elapsed = started.elapsed();
        let threads_peak = sampler.await.unwrap_or(0).max(thread_count());
        let mut completed = 0usize;
        let mut correct = 0usize;
        for (i, r) in results.iter().enumerate() {
            if let Ok(v) = r {
                completed += 1;
                if v["echo"] == json!(i) {
                    correct += 1;
                }
            }
        }
        let threads_after = thread_count();
        let (across_us, in_process_us) = one_call_alone(&module).await?;
        module.shutdown().await?;
        Ok::<_, BoxError>(json!({
            "calls": calls,
            "delayMs": delay_ms,
            "completed": completed,
            "correct": correct,
            "elapsedMs": elapsed.as_secs_f64() * 1000.0,
            "threadsBefore": threads_before,
            "threadsPeak": threads_peak,
            "threadsAfter": threads_after,
            "oneCallUs": across_us,
            "oneCallInProcessUs": in_process_us,
        }))
    })?;
    println!("{report}");
    Ok(())
}

/// How many calls in a row [`one_call_alone`] times.
const ONE_BY_ONE: usize = 2000;

/// The round trip of one call with nothing else in flight (the median of [`ONE_BY_ONE`] calls in
/// a row, µs): `diag.echo` across the boundary, and the same work done in-process — the params
/// written as JSON, read, the answer built and written, and read back, as `ModuleHost::invoke`
/// and the module do. The difference is what the boundary costs a call.
async fn one_call_alone(module: &crate::module::host::ModuleHost) -> Result<(f64, f64), BoxError> {
    let mut across = Vec::with_capacity(ONE_BY_ONE);
    for i in 0..ONE_BY_ONE {
        let started = Instant::now();
        let answer = module.invoke("diag.echo", &json!({ "value": i })).await?;
        across.push(started.elapsed().as_secs_f64() * 1e6);
        if answer["echo"] != json!(i) {
            return Err(format!("diag.echo answered {answer} to {i}").into());
        }
    }
    let mut in_process = Vec::with_capacity(ONE_BY_ONE);
    for i in 0..ONE_BY_ONE {
        let started = Instant::now();
        let params: serde_json::Value = serde_json::from_str(&json!({ "value": i }).to_string())?;
        let answer = json!({ "echo": params.get("value").cloned() }).to_string();
        let answer: serde_json::Value = std::hint::black_box(serde_json::from_str(&answer)?);
        in_process.push(started.elapsed().as_secs_f64() * 1e6);
        if answer["echo"] != json!(i) {
            return Err(format!("the in-process echo answered {answer} to {i}").into());
        }
    }
    Ok((median(&mut across), median(&mut in_process)))
}

fn median(samples: &mut [f64]) -> f64 {
    samples.sort_by(f64::total_cmp);
    samples.get(samples.len() / 2).copied().unwrap_or(f64::NAN)
}
