// Bundles the host page (src/host.js → dist/host.js, and src/theme.js, the stored theme applied
// before the first paint, → dist/theme.js) and the sandbox proxy (src/sandbox.js →
// dist/sandbox.js) and copies the HTML and CSS beside them. gateway-host embeds dist/ with
// include_str!, so the Rust build needs no Node; the bundle is committed. The build is
// deterministic (same sources and dependency versions → same bytes), which is what lets a test
// rebuild into a temp folder and compare with the committed files.
//
//   node build.mjs               write dist/
//   node build.mjs --out DIR     write DIR/ instead
//   node build.mjs --check       exit 1 when a committed dist file differs from a fresh build
import { build } from "esbuild";
import { readFile, writeFile, mkdir } from "node:fs/promises";
import path from "node:path";

const here = import.meta.dirname;
const args = process.argv.slice(2);
const outIndex = args.indexOf("--out");
const outDir = outIndex >= 0 ? path.resolve(args[outIndex + 1]) : path.join(here, "dist");
const check = args.includes("--check");

async function bundle(entry) {
  const result = await build({
    entryPoints: [path.join(here, "src", entry)],
    bundle: true,
    write: false,
    format: "iife",
    platform: "browser",
    target: ["es2022"],
    minify: true,
    legalComments: "none",
    charset: "utf8",
    logLevel: "warning",
  });
  return result.outputFiles[0].text;
}

const files = {
  "host.js": await bundle("host.js"),
  "sandbox.js": await bundle("sandbox.js"),
  "theme.js": await bundle("theme.js"),
  "index.html": await readFile(path.join(here, "src/index.html"), "utf8"),
  "host.css": await readFile(path.join(here, "src/host.css"), "utf8"),
  "sandbox.html": await readFile(path.join(here, "src/sandbox.html"), "utf8"),
};

if (check) {
  let stale = [];
  for (const [name, text] of Object.entries(files)) {
    const committed = await readFile(path.join(here, "dist", name), "utf8").catch(() => "");
    if (committed !== text) stale.push(name);
  }
  if (stale.length) {
    console.error(`dist/${stale.join(", dist/")} stale: run \`npm run build\` in gateway-host/web`);
    process.exit(1);
  }
  console.log("dist/ is up to date");
} else {
  await mkdir(outDir, { recursive: true });
  for (const [name, text] of Object.entries(files)) {
    await writeFile(path.join(outDir, name), text);
    console.log(`wrote ${path.relative(process.cwd(), path.join(outDir, name))} (${(text.length / 1024).toFixed(1)} KiB)`);
  }
}
