#!/usr/bin/env bash
# Runs the gateway benchmarks (the `bench` crate, see BENCHMARKS.md) and rewrites BENCHMARKS.md's
# results section. Builds the release artefacts first. Pass `--quick` for short runs; to run one
# scenario instead: cargo run --release -p bench -- proxy|boundary|discovery|startup|memory|peers|chat [--quick]
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --workspace
exec cargo run --release -p bench -- all "$@"
