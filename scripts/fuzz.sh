#!/usr/bin/env bash
# Runs every fuzz target (fuzz/fuzz_targets, cargo fuzz + libFuzzer) for a bounded time each and
# fails on any crash. Usage: bash scripts/fuzz.sh [SECONDS_PER_TARGET] (default 60).
# Needs a nightly toolchain (sanitizers); installs cargo-fuzz from crates.io when missing.
# The committed seed corpora (fuzz/corpus/TARGET) are read, never written: new inputs go to a
# temporary folder. A crash leaves its input in fuzz/artifacts/TARGET/ and the script exits 1.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}

if ! cargo +nightly --version >/dev/null 2>&1; then
  echo "fuzz: a nightly toolchain is needed (rustup toolchain install nightly)" >&2
  rustup toolchain install nightly --profile minimal >&2 || { echo "fuzz: no nightly toolchain; cannot fuzz" >&2; exit 1; }
fi
if ! cargo fuzz --version >/dev/null 2>&1; then
  echo "==> installing cargo-fuzz"
  cargo install cargo-fuzz --locked
fi

cd fuzz
# Unoptimised, without debug info: the targets build in a third of the time of `-O` (the whole
# gateway is behind them; that build was 12 of CI's 40 minutes), run with debug assertions and
# overflow checks on, and still execute ~1,000 inputs per second each — for a bounded smoke run of
# every target per CI run that is the better trade. For a long hunt, fuzz one target with `-O`.
export CARGO_PROFILE_DEV_DEBUG=0
echo "==> building the fuzz targets"
cargo +nightly fuzz build --dev
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for target in $(cargo +nightly fuzz list); do
  echo "==> fuzzing $target for ${seconds}s"
  mkdir -p "$work/$target"
  status=0
  cargo +nightly fuzz run --dev "$target" "$work/$target" "corpus/$target" -- \
    -max_total_time="$seconds" -max_len=65536 -rss_limit_mb=2048 -print_final_stats=1 \
    >"$work/$target.log" 2>&1 || status=$?
  grep -E '^(#[0-9]+ +DONE|stat::number_of_executed_units|==[0-9]+==|SUMMARY|thread .* panicked|Test unit written)' "$work/$target.log" || true
  if [ "$status" -ne 0 ]; then
    tail -n 40 "$work/$target.log" >&2
    echo "fuzz: $target failed (exit $status); the input is in fuzz/artifacts/$target/" >&2
    exit 1
  fi
done
echo "==> fuzzing done: no crash"
