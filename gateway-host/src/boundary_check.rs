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
        }))
    })?;
    println!("{report}");
    Ok(())
}
