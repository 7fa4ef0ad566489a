#!/usr/bin/env bash
# Runs the gateway benchmarks (see BENCHMARKS.md) and prints their tables. Builds first.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --workspace
(cd tests/js && npm ci --no-audit --no-fund --loglevel=error && node bench/gateway-overhead.mjs "$@")
