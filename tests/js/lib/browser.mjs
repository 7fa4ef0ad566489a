// The Chromium the browser tests drive through playwright-core: Debian's (apt-get install -y
// chromium) unless CHROMIUM_PATH names another, launched headless with the same flags everywhere,
// and where their screenshots go (target/test-artifacts/<folder>/).
import assert from "node:assert/strict";
import { existsSync, mkdirSync } from "node:fs";
import path from "node:path";
import { chromium } from "playwright-core";

export const CHROMIUM = process.env.CHROMIUM_PATH ?? "/usr/bin/chromium";

/** The repository's target/test-artifacts (the tests' screenshots, one folder per test file). */
export const ARTIFACTS = path.resolve(import.meta.dirname, "../../../target/test-artifacts");

/** A headless Chromium; fails with the install hint when there is none. */
export async function launchBrowser() {
  assert.ok(existsSync(CHROMIUM), `no Chromium at ${CHROMIUM}: apt-get install -y chromium (or set CHROMIUM_PATH)`);
  return chromium.launch({
    executablePath: CHROMIUM,
    args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--no-first-run"],
    timeout: 30_000,
  });
}

/**
 * A screenshot function writing `<name>.png` into target/test-artifacts/`folder`/:
 * `shot(target, name, options)` where `target` is a page or a locator (anything with
 * `screenshot()`), and `options` (Playwright's screenshot options) add to or override `defaults`.
 */
export function shotter(folder, defaults = {}) {
  const dir = path.join(ARTIFACTS, folder);
  return (target, name, options = {}) => {
    mkdirSync(dir, { recursive: true });
    return target.screenshot({ ...defaults, ...options, path: path.join(dir, `${name}.png`) });
  };
}
