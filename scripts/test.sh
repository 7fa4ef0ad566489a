#!/usr/bin/env bash
# Runs every test of the repository on a fresh machine: installs what the tests need when it is
# missing (Chromium, Node packages, a Python venv with the official `mcp` client), builds the
# workspace in release mode, then runs the Rust tests (unit and end-to-end), the Node tests
# (official TypeScript MCP SDK, headless Chromium) and the Python tests (official PyPI `mcp`).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

log() { printf '\n==> %s\n' "$*"; }

# --- system packages -------------------------------------------------------------------------
apt_needed=()
command -v chromium >/dev/null 2>&1 || apt_needed+=(chromium)
command -v node >/dev/null 2>&1 || apt_needed+=(nodejs npm)
python3 -c 'import venv, ensurepip' >/dev/null 2>&1 || apt_needed+=(python3-venv)
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

# --- Python packages -------------------------------------------------------------------------
log "installing Python test packages"
if [ ! -x tests/py/.venv/bin/python ]; then
  python3 -m venv tests/py/.venv
fi
tests/py/.venv/bin/pip install -q --disable-pip-version-check -r tests/py/requirements.txt

# --- build -----------------------------------------------------------------------------------
log "building the workspace (release)"
cargo build --release --workspace

# --- tests -----------------------------------------------------------------------------------
log "Rust tests (unit and end-to-end)"
cargo test --release --workspace

log "Node tests"
(cd tests/js && npm test)

log "Python tests"
(cd tests/py && .venv/bin/python -m pytest -q)

log "all tests passed"
