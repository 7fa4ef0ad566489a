// Shared helpers for the GroceryInventory tests: start the real release binary (HTTP on a free
// port, or stdio) and connect the official TypeScript MCP client to it.
import { spawn } from "node:child_process";
import { existsSync } from "node:fs";
import path from "node:path";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { ElicitRequestSchema } from "@modelcontextprotocol/sdk/types.js";

export const REPO = path.resolve(import.meta.dirname, "../../..");
export const APP_DIR = path.join(REPO, "mcpapps/grocery-inventory");
/** The release binary; GROCERY_INVENTORY_BIN overrides it (e.g. a build in another target dir). */
export const BIN = process.env.GROCERY_INVENTORY_BIN ?? path.join(REPO, "target/release/grocery-inventory");

export function requireBinary() {
  if (!existsSync(BIN)) {
    throw new Error(`${BIN} is missing: run \`cargo build --release -p grocery-inventory\` first`);
  }
}

/**
 * Starts `grocery-inventory --listen 127.0.0.1:0` and waits for the bound address it prints.
 * Returns { url, base, child, stderr(), stop() }.
 */
export async function startHttpServer({ timeoutMs = 20_000 } = {}) {
  requireBinary();
  const child = spawn(BIN, ["--listen", "127.0.0.1:0"], { stdio: ["ignore", "pipe", "pipe"] });
  let stderr = "";
  const url = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`server did not start in ${timeoutMs} ms:\n${stderr}`)), timeoutMs);
    child.stderr.setEncoding("utf8");
    child.stderr.on("data", (chunk) => {
      stderr += chunk;
      const match = stderr.match(/GroceryInventory listening on (http:\/\/[^\s]+\/mcp)/);
      if (match) {
        clearTimeout(timer);
        resolve(match[1]);
      }
    });
    child.on("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`server exited early with ${code}:\n${stderr}`));
    });
  });
  child.removeAllListeners("exit");
  return {
    url,
    base: url.replace(/\/mcp$/, ""),
    child,
    stderr: () => stderr,
    stop: () => stopChild(child),
  };
}

export function stopChild(child) {
  return new Promise((resolve) => {
    if (!child || child.exitCode !== null || child.signalCode !== null) return resolve();
    const timer = setTimeout(() => child.kill("SIGKILL"), 5_000);
    child.once("exit", () => {
      clearTimeout(timer);
      resolve();
    });
    child.kill("SIGTERM");
  });
}

/**
 * An elicitation handler that answers every form sensibly: the first offered option of each
 * choice, 12 for integers, true for booleans, "" for text. `overrides` replaces answers by field.
 */
export function autoAnswer(overrides = {}) {
  return (request) => {
    const schema = request.params.requestedSchema ?? { properties: {} };
    const content = {};
    for (const [name, prop] of Object.entries(schema.properties ?? {})) {
      if (name in overrides) content[name] = overrides[name];
      else if (prop.oneOf) content[name] = prop.oneOf[0].const;
      else if (prop.enum) content[name] = prop.enum[0];
      else if (prop.type === "integer" || prop.type === "number") content[name] = 12;
      else if (prop.type === "boolean") content[name] = true;
      else if (prop.type === "string" && (schema.required ?? []).includes(name)) content[name] = "n/a";
    }
    return { action: "accept", content };
  };
}

/**
 * An SDK client. `elicit` is an elicitation handler (request) => result; without it the client
 * does not declare the elicitation capability.
 */
export function makeClient({ name = "grocery-test", elicit } = {}) {
  const capabilities = elicit ? { elicitation: { form: {} } } : {};
  const client = new Client({ name, version: "1.0.0" }, { capabilities });
  if (elicit) {
    client.setRequestHandler(ElicitRequestSchema, async (request) => elicit(request));
  }
  return client;
}

export async function connectHttp(url, options = {}) {
  const client = makeClient(options);
  await client.connect(new StreamableHTTPClientTransport(new URL(url)));
  return client;
}

/** Spawns the binary in `--stdio` mode through the SDK's stdio transport. */
export async function connectStdio(options = {}) {
  requireBinary();
  const client = makeClient(options);
  const transport = new StdioClientTransport({ command: BIN, args: ["--stdio"], stderr: "pipe" });
  await client.connect(transport);
  return client;
}

/** The text of a tool result's content blocks, joined. */
export function text(result) {
  return (result.content ?? []).filter((c) => c.type === "text").map((c) => c.text).join("\n");
}

/** Reads a JSON resource and parses it. */
export async function readJson(client, uri) {
  const res = await client.readResource({ uri });
  return JSON.parse(res.contents[0].text);
}

/** Resolves when `predicate()` is true, polling; rejects after `timeoutMs`. */
export async function waitFor(predicate, { timeoutMs = 10_000, intervalMs = 50, what = "condition" } = {}) {
  const start = Date.now();
  for (;;) {
    const value = await predicate();
    if (value) return value;
    if (Date.now() - start > timeoutMs) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, intervalMs));
  }
}
