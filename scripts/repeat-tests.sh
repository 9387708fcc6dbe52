#!/usr/bin/env bash
# Run the README's test command N times in a row in a fresh clone of HEAD (default 10), stopping at the first
# failure. Usage: scripts/repeat-tests.sh [N] [CLONE_DIR]. Prints one line per run and writes them, with each
# run's full output, under CLONE_DIR/.repeat/.
set -euo pipefail
n=${1:-10}
here=$(cd "$(dirname "$0")/.." && pwd)
dir=${2:-$(mktemp -d /tmp/converse-tap-repeat.XXXXXX)/clone}
rev=$(git -C "$here" rev-parse HEAD)
git clone --quiet "$here" "$dir"
git -C "$dir" checkout --quiet "$rev"
mkdir -p "$dir/.repeat"
echo "commit $rev in $dir: make test, $n runs in a row" | tee "$dir/.repeat/summary"
for i in $(seq 1 "$n"); do
  start=$(date +%s)
  if make -C "$dir" test >"$dir/.repeat/run-$i.log" 2>&1; then rc=0; else rc=$?; fi
  took=$(( $(date +%s) - start ))
  last=$(grep -E '(passed|failed|error)' "$dir/.repeat/run-$i.log" | tail -1)
  echo "run $i: exit $rc in ${took}s: $last" | tee -a "$dir/.repeat/summary"
  if [ "$rc" != 0 ]; then exit "$rc"; fi
done
