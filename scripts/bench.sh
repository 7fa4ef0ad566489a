#!/usr/bin/env bash
# Runs the gateway benchmarks (the `bench` crate, see BENCHMARKS.md) and rewrites BENCHMARKS.md's
# results section. Builds the artefacts first, with the cargo profile in $PROFILE: `release` (the
# default, what the tests run) or `release-lto` (the build to deploy). Pass `--quick` for short
# runs; to run one scenario instead:
#   cargo run --release -p bench -- proxy|boundary|discovery|startup|memory|peers|chat [--quick]
set -euo pipefail
cd "$(dirname "$0")/.."
profile=${PROFILE:-release}
cargo build --profile "$profile" --workspace
exec cargo run --profile "$profile" -p bench -- all "$@"
