#!/usr/bin/env bash
# Issue 26's render benchmark: one package of 4,000 Deployments in 4 files
# and a StarlarkRun that sets a label on every Deployment. Ours runs it
# with the built-in starlark (the program in its sandbox process); kpt's
# copy runs one no-op `exec: cat` step instead (kpt's own overhead, a floor
# under kpt with the catalog's starlark container, which cannot be pulled
# here). Prints the two commands to time side by side; each restores its
# package from the prepared copy first.
#
# usage: tests/bench/render-starlark.sh DIR    (DIR must not exist)
set -euo pipefail
cd "$(dirname "$0")/../.."
dir=${1:?usage: $0 DIR}
. tests/bench/render-package.sh
render_package
cat >"$dir/src/set-label.yaml" <<'FN'
apiVersion: fn.kpt.dev/v1alpha1
kind: StarlarkRun
metadata:
  name: set-label
  annotations:
    config.kubernetes.io/local-config: "true"
params:
  value: prod
source: |
  value = ctx.resource_list["functionConfig"]["params"]["value"]
  for r in ctx.resource_list["items"]:
    if r["kind"] == "Deployment":
      labels = r["metadata"].setdefault("labels", {})
      labels["env"] = value
FN
render_copies <<'KPTFILES'
apiVersion: kpt.dev/v1
kind: Kptfile
metadata:
  name: bench
pipeline:
  mutators:
  - image: gcr.io/kpt-fn/starlark:v0.5.1
    configPath: set-label.yaml
---KPT---
apiVersion: kpt.dev/v1
kind: Kptfile
metadata:
  name: bench
pipeline:
  mutators:
  - exec: cat
KPTFILES
render_commands
