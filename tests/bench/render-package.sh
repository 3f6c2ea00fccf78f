# Shared by the render benchmarks (sourced): one package of 4,000
# Deployments in 4 files, copied for ours and for kpt, and the two
# commands to time side by side (each restores its package from the
# prepared copy first, so every run renders the same input).

# Generates the package in "$dir/src" ($dir must not exist).
render_package() {
  [ -e "$dir" ] && { echo "$dir exists" >&2; exit 1; }
  local gen=function-runner/tests/fixtures/eval/gen-deployments.py
  mkdir -p "$dir/src"
  for i in 0 1 2 3; do
    python3 "$gen" 1000 file "$dir/src/deploy-$i.yaml"
  done
}

# Copies "$dir/src" to $ours and $kpts, each with the Kptfile given on
# stdin (ours first, then kpt's, separated by a line `---KPT---`).
render_copies() {
  ours="$dir/ours-src" kpts="$dir/kpt-src"
  cp -r "$dir/src" "$ours"
  cp -r "$dir/src" "$kpts"
  awk -v o="$ours/Kptfile" -v k="$kpts/Kptfile" \
    '/^---KPT---$/ {f=1; next} { print > (f ? k : o) }'
  rm -rf "$dir/src"
}

# Prints the two commands.
render_commands() {
  local fr=$PWD/target/x86_64-unknown-linux-gnu/release/function-runner
  echo "ours: sh -c 'rm -rf $dir/ours && cp -r $ours $dir/ours && exec $fr render $dir/ours'"
  echo "kpt:  sh -c 'rm -rf $dir/kpt && cp -r $kpts $dir/kpt && exec kpt fn render $dir/kpt --allow-exec'"
}
