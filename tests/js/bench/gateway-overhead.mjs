// Benchmark: what the gateway adds to an MCP tool call, as ratios measured side by side in one run
// (the machine is shared and noisy, so absolute times drift; ratios within one run do not).
//
// Three paths to the same test-app server, interleaved round by round:
//   direct   the official TypeScript client → test-app's own /mcp
//   browser  the client → gateway /apps/mcp/{app} → module forward → the gateway's upstream session
//   model    the client → gateway /mcp → tool registry → module tool bridge → the same session
// plus the module boundary alone (`gateway-host boundary-check`).
//
// Usage: node bench/gateway-overhead.mjs [--rounds 5] [--calls 200] [--concurrency 32]
import { spawn, execFileSync } from "node:child_process";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { GATEWAY_BIN, TEST_APP_BIN, freePort, gatewayConfig, startGateway, stopChild, tempDir, waitRunning, writeManifest } from "../lib/gateway.mjs";

const arg = (name, dflt) => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? Number(process.argv[i + 1]) : dflt;
};
const ROUNDS = arg("rounds", 5);
const CALLS = arg("calls", 200);
const CONCURRENCY = arg("concurrency", 32);

async function connect(url) {
  const client = new Client({ name: "bench", version: "1.0.0" });
  await client.connect(new StreamableHTTPClientTransport(new URL(url)));
  return client;
}

const quantile = (xs, q) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(q * s.length))];
};

async function main() {
  const port = await freePort();
  const app = spawn(TEST_APP_BIN, ["--http", `127.0.0.1:${port}`], { stdio: "ignore" });
  const dir = tempDir("gateway-bench-");
  let gateway;
  try {
    for (let i = 0; i < 100; i++) {
      try {
        await fetch(`http://127.0.0.1:${port}/mcp`, { method: "GET" });
        break;
      } catch {
        await new Promise((r) => setTimeout(r, 50));
      }
    }
    writeManifest(dir.apps, "bench", { id: "bench", transport: "http", url: `http://127.0.0.1:${port}/mcp`, toolNamePrefix: "bench." });
    gateway = await startGateway(gatewayConfig(dir.apps), { dir: dir.dir, env: { RUST_LOG: "warn,gateway_host::serve=info" } });
    await waitRunning(gateway, ["bench"]);
    const paths = {
      direct: { client: await connect(`http://127.0.0.1:${port}/mcp`), tool: "echo" },
      browser: { client: await connect(gateway.url("/apps/mcp/bench")), tool: "echo" },
      model: { client: await connect(gateway.url("/mcp")), tool: "bench.echo" },
    };
    const call = (p) => p.client.callTool({ name: p.tool, arguments: { text: "benchmark" } });
    for (const p of Object.values(paths)) for (let i = 0; i < 100; i++) await call(p); // warm-up

    const latencies = Object.fromEntries(Object.keys(paths).map((k) => [k, []]));
    const throughput = Object.fromEntries(Object.keys(paths).map((k) => [k, []]));
    const names = Object.keys(paths);
    for (let round = 0; round < ROUNDS; round++) {
      const order = names.map((_, i) => names[(i + round) % names.length]);
      for (const name of order) {
        const p = paths[name];
        for (let i = 0; i < CALLS; i++) {
          const t = process.hrtime.bigint();
          await call(p);
          latencies[name].push(Number(process.hrtime.bigint() - t) / 1e6);
        }
        const t = process.hrtime.bigint();
        let next = 0;
        await Promise.all(
          Array.from({ length: CONCURRENCY }, async () => {
            while (next++ < CALLS * 5) await call(p);
          }),
        );
        throughput[name].push((CALLS * 5) / (Number(process.hrtime.bigint() - t) / 1e9));
      }
    }
    for (const p of Object.values(paths)) await p.client.close();

    const boundary = (delay) =>
      JSON.parse(execFileSync(GATEWAY_BIN, ["boundary-check", "--calls", "10000", "--delay-ms", String(delay)], { env: { ...process.env, RUST_LOG: "warn" } }).toString());
    const b0 = boundary(0);
    const b5 = boundary(5);

    const median = (k) => quantile(latencies[k], 0.5);
    const p95 = (k) => quantile(latencies[k], 0.95);
    const tput = (k) => quantile(throughput[k], 0.5);
    const rows = names.map(
      (k) =>
        `| ${k} | ${median(k).toFixed(3)} | ${(median(k) / median("direct")).toFixed(2)}× | ${p95(k).toFixed(3)} | ${tput(k).toFixed(0)} | ${(tput(k) / tput("direct")).toFixed(2)}× |`,
    );
    const report = [
      `Tool call \`echo\` to one test-app over Streamable HTTP, ${ROUNDS} interleaved rounds × ${CALLS} sequential calls per path, then ${CALLS * 5} calls at concurrency ${CONCURRENCY}.`,
      "",
      "| path | median ms | vs direct | p95 ms | calls/s (concurrent) | vs direct |",
      "|---|---|---|---|---|---|",
      ...rows,
      "",
      "Module boundary alone (`gateway-host boundary-check --calls 10000`):",
      "",
      "| delay in module | elapsed ms | threads before → peak |",
      "|---|---|---|",
      `| 0 ms | ${b0.elapsedMs.toFixed(1)} | ${b0.threadsBefore} → ${b0.threadsPeak} |`,
      `| 5 ms | ${b5.elapsedMs.toFixed(1)} | ${b5.threadsBefore} → ${b5.threadsPeak} |`,
    ].join("\n");
    console.log(report);
  } finally {
    await gateway?.stop();
    await stopChild(app);
    dir.cleanup();
  }
}

await main();
