#!/usr/bin/env bash
# Issue 23's render benchmark: prepares two copies of one package of 4,000
# Deployments in 4 files, one whose Kptfile runs the built-in set-namespace
# then set-labels, one whose Kptfile runs two no-op `exec: cat` steps (kpt's
# own overhead, a floor under what kpt does with the real containers), and
# prints the two commands to time side by side.
#
# usage: tests/bench/render-builtins.sh DIR    (DIR must not exist)
set -euo pipefail
cd "$(dirname "$0")/../.."
dir=${1:?usage: $0 DIR}
. tests/bench/render-package.sh
render_package
render_copies <<'KPTFILES'
apiVersion: kpt.dev/v1
kind: Kptfile
metadata:
  name: bench
pipeline:
  mutators:
  - image: ghcr.io/kptdev/krm-functions-catalog/set-namespace:v0.4.2
    configMap:
      namespace: prod
  - image: gcr.io/kpt-fn/set-labels:v0.2.0
    configMap:
      env: prod
---KPT---
apiVersion: kpt.dev/v1
kind: Kptfile
metadata:
  name: bench
pipeline:
  mutators:
  - exec: cat
  - exec: cat
KPTFILES
render_commands
