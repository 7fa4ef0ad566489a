#!/usr/bin/env bash
# Runs every test of the repository on a fresh machine: installs what the tests need when it is
# missing (Chromium, Node packages), builds the workspace in release mode, then runs the Rust
# tests (unit and end-to-end) and the Node tests (official MCP clients, headless Chromium).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

log() { printf '\n==> %s\n' "$*"; }

# --- system packages -------------------------------------------------------------------------
apt_needed=()
command -v chromium >/dev/null 2>&1 || apt_needed+=(chromium)
command -v node >/dev/null 2>&1 || apt_needed+=(nodejs npm)
if [ ${#apt_needed[@]} -gt 0 ]; then
  log "installing ${apt_needed[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq "${apt_needed[@]}" >/dev/null
fi

# --- Node packages ---------------------------------------------------------------------------
log "installing Node test packages"
(cd tests/js && npm ci --no-audit --no-fund --loglevel=error)
(cd mcpapps/grocery-inventory/ui && npm ci --no-audit --no-fund --loglevel=error)

# --- build -----------------------------------------------------------------------------------
log "building the workspace (release)"
cargo build --release --workspace

# --- tests -----------------------------------------------------------------------------------
log "Rust tests (unit and end-to-end)"
cargo test --release --workspace

log "Node tests"
(cd tests/js && npm test)

log "all tests passed"
