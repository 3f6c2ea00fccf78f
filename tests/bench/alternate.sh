#!/usr/bin/env bash
# Two commands timed side by side, alternating (A B A B ...), so that a
# machine whose speed drifts slows both alike: the median wall time and peak
# RSS of each, and the median of the pair-by-pair ratio A/B. A PREPARE
# command (optional) runs, untimed, before every run of either.
#
# usage: tests/bench/alternate.sh RUNS 'COMMAND A' 'COMMAND B' ['PREPARE']
set -euo pipefail
runs=${1:?usage: $0 RUNS 'COMMAND A' 'COMMAND B' ['PREPARE']}
a=${2:?command A}
b=${3:?command B}
prepare=${4:-true}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
one() { # NAME COMMAND: appends "wall_seconds max_rss_kib" to $out/NAME
  sh -c "$prepare" >/dev/null 2>&1
  /usr/bin/time -f '%e %M' -o "$out/t" sh -c "exec $2" >/dev/null 2>&1 || true
  cat "$out/t" >>"$out/$1"
}
one a "$a"
one b "$b" # warm-up, dropped below
: >"$out/a"
: >"$out/b"
for _ in $(seq "$runs"); do
  one a "$a"
  one b "$b"
done
median() { sort -g | awk '{v[NR]=$1} END {print (NR%2 ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2)}'; }
for side in a b; do
  echo "$side: wall median $(cut -d' ' -f1 "$out/$side" | median) s, min $(cut -d' ' -f1 "$out/$side" | sort -g | head -1) s, max $(cut -d' ' -f1 "$out/$side" | sort -g | tail -1) s; peak RSS median $(cut -d' ' -f2 "$out/$side" | median) KiB"
done
echo "A/B wall, median of $runs pairs: $(paste -d' ' "$out/a" "$out/b" | awk '$3 > 0 {print $1 / $3}' | median)"
