#!/usr/bin/env bash
# Builds the workspace, then runs the demo: a real wrapper-server around the
# example function, one EvaluateFunction call over loopback gRPC.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --quiet --workspace --bins
exec ./target/x86_64-unknown-linux-gnu/debug/demo "$@"
