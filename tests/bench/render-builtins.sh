#!/usr/bin/env bash
# Issue 23's render benchmark: prepares two copies of one package of 4,000
# Deployments in 4 files, one whose Kptfile runs the built-in set-namespace
# then set-labels, one whose Kptfile runs two no-op `exec: cat` steps (kpt's
# own overhead, a floor under what kpt does with the real containers), and
# prints the two commands to time side by side; each restores its package
# from the prepared copy first, so every run renders the same input.
#
# usage: tests/bench/render-builtins.sh DIR    (DIR must not exist)
set -euo pipefail
cd "$(dirname "$0")/../.."
dir=${1:?usage: $0 DIR}
[ -e "$dir" ] && { echo "$dir exists" >&2; exit 1; }
gen=function-runner/tests/fixtures/eval/gen-deployments.py
mkdir -p "$dir/src"
for i in 0 1 2 3; do
  python3 "$gen" 1000 file "$dir/src/deploy-$i.yaml"
done
ours="$dir/ours-src" kpts="$dir/kpt-src"
cp -r "$dir/src" "$ours"
cp -r "$dir/src" "$kpts"
cat >"$ours/Kptfile" <<'KPTFILE'
apiVersion: kpt.dev/v1
kind: Kptfile
metadata:
  name: bench
pipeline:
  mutators:
  - image: gcr.io/kpt-fn/set-namespace:v0.4.1
    configMap:
      namespace: prod
  - image: gcr.io/kpt-fn/set-labels:v0.2.0
    configMap:
      env: prod
KPTFILE
cat >"$kpts/Kptfile" <<'KPTFILE'
apiVersion: kpt.dev/v1
kind: Kptfile
metadata:
  name: bench
pipeline:
  mutators:
  - exec: cat
  - exec: cat
KPTFILE
rm -rf "$dir/src"
fr=$PWD/target/x86_64-unknown-linux-gnu/release/function-runner
echo "ours: sh -c 'rm -rf $dir/ours && cp -r $ours $dir/ours && exec $fr render $dir/ours'"
echo "kpt:  sh -c 'rm -rf $dir/kpt && cp -r $kpts $dir/kpt && exec kpt fn render $dir/kpt --allow-exec'"
