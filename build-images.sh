#!/usr/bin/env bash
# Builds the two images, both FROM scratch with static binaries only:
#   wrapper-server:TAG   the init image (Dockerfile): wrapper-server and the
#                        health probe, installed into function pods/containers
#   function-runner:TAG  the runner (Dockerfile.runner), non-root
# Usage: ./build-images.sh [TAG]   (default: dev)
# Needs a Docker engine; pulls nothing (no Rust builder image: the binaries
# are built here, `dist` profile, and copied in). BINARIES=DIR takes them
# from DIR instead, unbuilt (tests/tests/docker_image.rs gives it the debug
# build the test run already made; CI has no time for a release build).
set -euo pipefail
cd "$(dirname "$0")"
tag="${1:-dev}"
if [ -n "${BINARIES:-}" ]; then
  out=$BINARIES
else
  # The shipped binaries only, with the `dist` profile's fat LTO
  # (Cargo.toml; BENCHMARKS.md, issue 38).
  cargo build --profile dist -p wrapper-server -p health-probe -p function-runner --bins
  out=target/x86_64-unknown-linux-gnu/dist
fi
ctx=$(mktemp -d)
trap 'rm -rf "$ctx"' EXIT
cp "$out/wrapper-server" "$out/health-probe" "$out/function-runner" "$ctx/"
cp /etc/ssl/certs/ca-certificates.crt "$ctx/"
# The runner image's Porch layout (Dockerfile.runner).
mkdir -p "$ctx/home/nonroot"
ln -s /function-runner "$ctx/home/nonroot/server"
ln -s /health-probe "$ctx/home/nonroot/grpc-health-probe"
docker build -q -t "wrapper-server:$tag" -f Dockerfile "$ctx"
docker build -q -t "function-runner:$tag" -f Dockerfile.runner "$ctx"
docker images --format '{{.Repository}}:{{.Tag}} {{.Size}}' "wrapper-server:$tag"
docker images --format '{{.Repository}}:{{.Tag}} {{.Size}}' "function-runner:$tag"
