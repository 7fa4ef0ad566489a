// Bundles src/ into ONE self-contained HTML file, dist/store-dashboard.html, which the Rust
// server embeds with include_str!. The build is deterministic (same sources and dependency
// versions → same bytes), which is what lets a test rebuild and compare with the committed file.
//
//   node build.mjs               write dist/store-dashboard.html
//   node build.mjs --out DIR     write DIR/store-dashboard.html instead
//   node build.mjs --check       exit 1 when the committed dist file differs from a fresh build
import { build } from "esbuild";
import { readFile, writeFile, mkdir } from "node:fs/promises";
import path from "node:path";

const here = import.meta.dirname;
const args = process.argv.slice(2);
const outIndex = args.indexOf("--out");
const outDir = outIndex >= 0 ? path.resolve(args[outIndex + 1]) : path.join(here, "dist");
const check = args.includes("--check");

const bundle = await build({
  entryPoints: [path.join(here, "src/main.js")],
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
const script = bundle.outputFiles[0].text.replaceAll("</script", "<\\/script");
const styles = (await readFile(path.join(here, "src/styles.css"), "utf8")).replaceAll("</style", "<\\/style");
const template = await readFile(path.join(here, "src/index.html"), "utf8");
// Function replacements: `$` sequences in the bundle must not be read as patterns.
const html = template
  .replace("/*__STYLES__*/", () => styles.trim())
  .replace("/*__SCRIPT__*/", () => script.trim());

const target = path.join(outDir, "store-dashboard.html");
if (check) {
  const committed = await readFile(path.join(here, "dist/store-dashboard.html"), "utf8").catch(() => "");
  if (committed !== html) {
    console.error("dist/store-dashboard.html is stale: run `npm run build` in mcpapps/grocery-inventory/ui");
    process.exit(1);
  }
  console.log("dist/store-dashboard.html is up to date");
} else {
  await mkdir(outDir, { recursive: true });
  await writeFile(target, html);
  console.log(`wrote ${path.relative(process.cwd(), target)} (${(html.length / 1024).toFixed(1)} KiB)`);
}
