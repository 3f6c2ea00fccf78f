#!/usr/bin/env bash
# The YAML differential harness's long run (docs/eval-render.md, "Generated
# packages"): CASES generated packages through our parse and emit against
# yaml.v3's, and KPT_CASES of them through eval (four functions) and render
# (a two-step pipeline) against kpt's, from seed FIRST (CI's fixed set is
# seeds 0..3,000 and 0..40). Prints every failure, shrunk, and the figures
# BENCHMARKS.md records; exits 1 on any difference that is not a documented
# departure. Needs what the harness's test needs (docs/testing.md).
#
#   tests/bench/yaml-soak.sh [CASES [KPT_CASES [FIRST]]]
set -euo pipefail
cd "$(dirname "$0")/../.."
cases=${1:-10000} kpt_cases=${2:-1000} first=${3:-100000}
cargo build -q -p e2e-tests --bin yaml-soak -p function-runner --bin function-runner
exec target/x86_64-unknown-linux-gnu/debug/yaml-soak \
  --first-seed "$first" --cases "$cases" --kpt-cases "$kpt_cases"
