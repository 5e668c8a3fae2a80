#!/usr/bin/env bash
# Proves a refactoring kept every plan byte-for-byte identical: generates
# fleets with OLD_BIN (settled, storm, small, and examples/fleet), plans each
# with both binaries in every output format, and compares the bytes.
#   scripts/compare-plans.sh OLD_BIN NEW_BIN [WORK_DIR]
# Exits 1 on the first difference.
set -euo pipefail
old=$(realpath "$1"); new=$(realpath "$2")
work=${3:-$(mktemp -d)}
cd "$(dirname "$0")/.."
now=2026-11-22T00:00:00Z
mkdir -p "$work"
"$old" generate --out "$work/m" --nodes 3000 --pending 30000 --running 15000 --now $now >/dev/null
"$old" generate --out "$work/storm" --nodes 3000 --pending 30000 --running 15000 --storm --seed 7 --now $now >/dev/null
"$old" generate --out "$work/s" --nodes 300 --pending 3000 --running 1500 --seed 3 --now $now >/dev/null
"$new" generate --out "$work/s-new" --nodes 300 --pending 3000 --running 1500 --seed 3 --now $now >/dev/null
diff -r "$work/s" "$work/s-new" >/dev/null || { echo "generate: outputs differ"; exit 1; }
echo "generate: identical"
compare() { # label, args...
  local label=$1; shift
  for format in json text markdown; do
    "$old" "$@" -o $format >"$work/old.out" || true
    "$new" "$@" -o $format >"$work/new.out" || true
    if ! cmp -s "$work/old.out" "$work/new.out"; then
      echo "$label -o $format: plans differ"; exit 1
    fi
    echo "$label -o $format: identical ($(wc -c <"$work/new.out") bytes)"
  done
}
for fleet in m storm s; do
  compare "$fleet" plan "$work/$fleet/repo" --observed "$work/$fleet/observed.json" --now $now
done
compare examples/fleet plan examples/fleet
