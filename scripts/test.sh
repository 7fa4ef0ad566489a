#!/usr/bin/env bash
# Runs every test of the repository on a fresh machine: installs what the tests need when it is
# missing (Chromium, Node packages, a Python venv with the official `mcp` client), builds the
# workspace in release mode, then runs the Rust tests (unit and end-to-end), the Node tests
# (official TypeScript MCP SDK, headless Chromium) and the Python tests (official PyPI `mcp`).
# A private redis-server (Debian package) runs for the whole run, for the Redis session store's
# tests (GATEWAY_TEST_REDIS_URL); it is stopped when the script exits.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

log() { printf '\n==> %s\n' "$*"; }

# --- system packages -------------------------------------------------------------------------
apt_needed=()
command -v chromium >/dev/null 2>&1 || apt_needed+=(chromium)
command -v node >/dev/null 2>&1 || apt_needed+=(nodejs npm)
python3 -c 'import venv, ensurepip' >/dev/null 2>&1 || apt_needed+=(python3-venv)
command -v redis-server >/dev/null 2>&1 || apt_needed+=(redis-server)
command -v openssl >/dev/null 2>&1 || apt_needed+=(openssl) # the TLS Redis test's certificates
if [ ${#apt_needed[@]} -gt 0 ]; then
  log "installing ${apt_needed[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq "${apt_needed[@]}" >/dev/null
fi

# --- Redis (the chat session store's tests, R35) ---------------------------------------------
# Our own server on a free loopback port, nothing saved to disk; stopped on exit. A server the
# package may have started as a service is left alone.
redis_dir=$(mktemp -d)
redis_pid=
stop_redis() {
  if [ -n "$redis_pid" ]; then
    kill "$redis_pid" 2>/dev/null || true
    wait "$redis_pid" 2>/dev/null || true
    redis_pid=
  fi
  rm -rf "$redis_dir"
}
trap stop_redis EXIT
trap 'exit 130' INT TERM

redis_ready() { # port: true once the server answers PING (redis-cli comes with redis-server)
  [ "$(redis-cli -h 127.0.0.1 -p "$1" ping 2>/dev/null)" = PONG ]
}

log "starting redis-server"
for attempt in 1 2 3; do
  redis_port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  redis-server --port "$redis_port" --bind 127.0.0.1 --save '' --appendonly no --daemonize no \
    --dir "$redis_dir" >"$redis_dir/redis.log" 2>&1 &
  redis_pid=$!
  for _ in $(seq 50); do
    redis_ready "$redis_port" && break
    kill -0 "$redis_pid" 2>/dev/null || break
    sleep 0.1
  done
  if redis_ready "$redis_port"; then
    break
  fi
  # The port was taken meanwhile, or the server failed: show why and try another port.
  cat "$redis_dir/redis.log" >&2 || true
  kill "$redis_pid" 2>/dev/null || true
  wait "$redis_pid" 2>/dev/null || true
  redis_pid=
  if [ "$attempt" = 3 ]; then
    echo "redis-server did not start" >&2
    exit 1
  fi
done
export GATEWAY_TEST_REDIS_URL="redis://127.0.0.1:$redis_port/"
echo "redis-server $(redis-server --version | sed -n 's/.*v=\([^ ]*\).*/\1/p') on $GATEWAY_TEST_REDIS_URL"

# --- Node packages ---------------------------------------------------------------------------
log "installing Node test packages"
(cd tests/js && npm ci --no-audit --no-fund --loglevel=error)
(cd mcpapps/grocery-inventory/ui && npm ci --no-audit --no-fund --loglevel=error)
(cd gateway-host/web && npm ci --no-audit --no-fund --loglevel=error)

# --- Python packages -------------------------------------------------------------------------
log "installing Python test packages"
if [ ! -x tests/py/.venv/bin/python ]; then
  python3 -m venv tests/py/.venv
fi
tests/py/.venv/bin/pip install -q --disable-pip-version-check -r tests/py/requirements.txt
# The official PyPI app mcp-server-time, in a venv of its own (its `mcp` pin differs from the
# client's): tests/tests/confinement.rs runs it under the default confinement (issue 41).
if [ ! -x tests/py/.venv-time/bin/mcp-server-time ]; then
  python3 -m venv tests/py/.venv-time
  tests/py/.venv-time/bin/pip install -q --disable-pip-version-check mcp-server-time==2026.10.19
fi

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
