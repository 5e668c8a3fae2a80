#!/usr/bin/env bash
# compare-cli.sh OLD_BIN NEW_BIN: runs two gitfleet binaries over the same
# inputs and compares stdout, stderr and exit status byte for byte. Exits 1
# on any difference (a unified diff of each is printed), 0 when all agree.
#
# Covered: `--help`/`-h` of every subcommand; validate, plan (text, markdown,
# json), explain (text, json) on examples/fleet, on a generated fleet with
# pending jobs and preemptions, and on every case of tests/cases/plan;
# `plan --base` and history on this repository and on a throwaway repository
# with a change to examples/fleet; reconcile (iteration times masked),
# status and apply on the sim executor; a few error paths.
set -uo pipefail

if [ $# -ne 2 ]; then
  echo "usage: $0 OLD_BIN NEW_BIN" >&2
  exit 2
fi
OLD=$(realpath "$1")
NEW=$(realpath "$2")
ROOT=$(cd "$(dirname "$0")/.." && pwd)
WORK=$(mktemp -d)
# COMPARE_KEEP=1 keeps the work directory (its path is printed) to look into.
if [ -n "${COMPARE_KEEP:-}" ]; then echo "work directory: $WORK"; else trap 'rm -rf "$WORK"' EXIT; fi
NOW=2026-11-21T10:00:00Z
checks=0
failures=0

# run BIN OUT_PREFIX DIR ARGS...: stdout, stderr and exit status to files.
run() {
  local bin=$1 out=$2 dir=$3
  shift 3
  (cd "$dir" && "$bin" "$@" >"$out.stdout" 2>"$out.stderr" </dev/null)
  echo $? >"$out.code"
}

# same DIR ARGS...: runs both binaries in DIR and compares their results.
# An argument @STATE@ becomes a state directory of each binary's own.
same() {
  local dir=$1
  shift
  checks=$((checks + 1))
  run "$OLD" "$WORK/old" "$dir" "${@//@STATE@/$WORK/state-$checks-old}"
  run "$NEW" "$WORK/new" "$dir" "${@//@STATE@/$WORK/state-$checks-new}"
  compare "gitfleet $* (in $dir)"
}

# compare WHAT: compares the last two runs.
compare() {
  local part bad=0
  for part in stdout stderr code; do
    if ! cmp -s "$WORK/old.$part" "$WORK/new.$part"; then
      if [ $bad = 0 ]; then
        echo "DIFFERENT: $1"
      fi
      bad=1
      diff -u "$WORK/old.$part" "$WORK/new.$part" | head -40 | sed 's/^/    /'
    fi
  done
  failures=$((failures + bad))
}

# The subcommands' help, short and long.
same "$ROOT" --help
same "$ROOT" -h
same "$ROOT" --version
for cmd in reconcile apply status validate plan history generate inventory schema "inventory merge"; do
  # shellcheck disable=SC2086
  same "$ROOT" $cmd --help
  # shellcheck disable=SC2086
  same "$ROOT" $cmd -h
done
# `explain` gained --rev (issue 13, step 4): its help is compared with that
# option taken out of the new binary's, and must mention it.
for flag in --help -h; do
  checks=$((checks + 1))
  run "$OLD" "$WORK/old" "$ROOT" explain "$flag"
  run "$NEW" "$WORK/new" "$ROOT" explain "$flag"
  grep -q -- '--rev <REV>' "$WORK/new.stdout" || echo "(no --rev in the new explain $flag)" >>"$WORK/new.stdout"
  awk '/^ +--rev <REV> /{next} /^ +--rev <REV>$/{skip=1;next} skip&&/^$/{skip=0;next} !skip' \
    "$WORK/new.stdout" >"$WORK/new.filtered" && mv "$WORK/new.filtered" "$WORK/new.stdout"
  compare "gitfleet explain $flag (without --rev)"
done
same "$ROOT" help plan
same "$ROOT" plan --no-such-flag
same "$ROOT" plan -o yaml

# examples/fleet: validate, plan, explain.
same "$ROOT" validate examples/fleet
same "$ROOT" validate examples/fleet --rev HEAD
for o in text markdown json; do
  same "$ROOT" plan examples/fleet --now "$NOW" -o "$o"
  same "$ROOT" plan examples/fleet --now "$NOW" -o "$o" --detailed-exitcode
  same "$ROOT" plan examples/fleet --rev HEAD --now "$NOW" -o "$o"
done
for o in text json markdown; do
  same "$ROOT" explain llama3-70b-pretrain examples/fleet --now "$NOW" -o "$o"
  same "$ROOT" explain no-such-job examples/fleet --now "$NOW" -o "$o"
done

# A generated fleet with pending jobs and preemptions (a storm).
"$OLD" generate --out "$WORK/gen" --nodes 12 --pending 60 --running 40 --leaves 6 \
  --now "$NOW" --storm >/dev/null
same "$WORK/gen" validate repo
for o in text markdown json; do
  same "$WORK/gen" plan repo --observed observed.yaml -o "$o"
  same "$WORK/gen" plan repo --observed observed.json --now "$NOW" -o "$o"
done
jobs=$(cd "$WORK/gen" && "$OLD" plan repo --observed observed.yaml -o json |
  grep -E '^\s+"(job|for)": ' | sed -E 's/.*: "([^"]*)".*/\1/' | sort -u | head -12)
for job in $jobs; do
  for o in text json; do
    same "$WORK/gen" explain "$job" repo --observed observed.yaml -o "$o"
  done
done
same "$ROOT" generate --out "$WORK/gen-old-new" --nodes 4 --pending 8 --running 4 --leaves 2 --now "$NOW"

# Every plan case of the test suite.
for case in "$ROOT"/tests/cases/plan/*/; do
  args=(repo --now "$NOW")
  [ -f "$case/observed.yaml" ] && args+=(--observed observed.yaml)
  for o in text markdown json; do
    same "$case" plan "${args[@]}" -o "$o"
  done
  if [ -f "$case/observed.yaml" ]; then
    for job in $(cd "$case" && "$OLD" plan "${args[@]}" -o json |
      grep -E '^\s+"(job|for)": ' | sed -E 's/.*: "([^"]*)".*/\1/' | sort -u | head -6); do
      same "$case" explain "$job" "${args[@]}"
      same "$case" explain "$job" "${args[@]}" -o json
    done
  fi
done
for case in "$ROOT"/tests/cases/validate/*/; do
  [ -d "$case/repo" ] && same "$case" validate repo
done

# This repository: preview and history (HEAD~1 → HEAD).
for o in text markdown json; do
  same "$ROOT" plan --base HEAD~1 --rev HEAD examples/fleet -o "$o"
  same "$ROOT" plan --base HEAD~1 examples/fleet --now "$NOW" -o "$o" --detailed-exitcode
done
same "$ROOT" history examples/fleet
same "$ROOT" history examples/fleet -o json
same "$ROOT" history examples/fleet -o markdown

# A throwaway repository with examples/fleet changed over three commits.
repo="$WORK/repo"
mkdir -p "$repo"
cp -r "$ROOT/examples/fleet" "$repo/fleet"
git_=(git -C "$repo" -c user.name=Ada -c user.email=ada@example.com -c commit.gpgsign=false)
"${git_[@]}" init -q -b main
"${git_[@]}" add -A && "${git_[@]}" commit -q -m "Initial fleet"
sed -i 's/guaranteed: 200, limit: 320/guaranteed: 100, limit: 120/' "$repo/fleet/queues.yaml"
sed -i 's/replicas: 6/replicas: 4/' "$repo/fleet/jobs/nlp.yaml"
"${git_[@]}" commit -q -am "Cut nlp's quota, shrink a gang"
rm "$repo/fleet/jobs/speech.yaml"
sed -i 's/^  size: {min: 0, max: 8}/  size: {min: 2, max: 8}/' "$repo/fleet/pools.yaml"
"${git_[@]}" add -A && "${git_[@]}" commit -q -m "Drop speech jobs"
echo "kind: [broken" >"$repo/fleet/broken.yaml"
echo "apiVersion: gitfleet/v1
kind: Job
metadata: {name: bad}
spec: {queue: nope, gpusPerReplica: 3}" >"$repo/fleet/jobs/bad.yaml"
"${git_[@]}" add -A && "${git_[@]}" commit -q -m "An invalid change"
for o in text markdown json; do
  same "$repo" plan --base HEAD~3 --rev HEAD~1 fleet --now "$NOW" -o "$o"
  same "$repo" plan --base HEAD~2 --rev HEAD~1 fleet --now "$NOW" -o "$o" --detailed-exitcode
  same "$repo" plan --base HEAD~1 fleet --now "$NOW" -o "$o"
  same "$repo" plan --base HEAD~3 --rev HEAD~1 fleet --observed "$WORK/gen/observed.yaml" -o "$o"
  same "$repo" plan fleet --rev HEAD~2 --now "$NOW" -o "$o"
  same "$repo" plan fleet --rev HEAD --now "$NOW" -o "$o"
  same "$repo" plan fleet --now "$NOW" -o "$o"
done
same "$repo" validate fleet
same "$repo" validate fleet --rev HEAD~1
same "$repo" validate fleet --rev HEAD
same "$repo" validate fleet --rev no-such-rev
same "$repo" explain llama3-70b-pretrain fleet --now "$NOW"
for args in "" "-p" "-o json" "queue/nlp" "job/whisper-large-asr -p" "job/nothing" "fleet --since 2020-01-01" \
  "--since yesterday" "queue/nlp fleet -o json" "nonsense fleet"; do
  # shellcheck disable=SC2086
  same "$repo" history $args
done

# The reconciler on the sim executor: reconcile (iteration times masked),
# status of one state read by both binaries, apply.
mask() { sed -E 's/[0-9.]+ ms$/N ms/' "$1" >"$1.masked" && mv "$1.masked" "$1"; }
reconcile=(reconcile examples/fleet --iterations 2 --sim-step 30m --interval 1s --listen off --now "$NOW")
checks=$((checks + 1))
run "$OLD" "$WORK/old" "$ROOT" "${reconcile[@]}" --state "$WORK/state-old"
run "$NEW" "$WORK/new" "$ROOT" "${reconcile[@]}" --state "$WORK/state-new"
mask "$WORK/old.stdout"
mask "$WORK/new.stdout"
compare "gitfleet ${reconcile[*]}"
for o in text json markdown; do
  same "$ROOT" status --state "$WORK/state-old" -o "$o"
done
# The loop through a change of the throwaway repository: a pool's new
# minimum (scale) and removed jobs (cancel).
loop=(reconcile fleet --listen off)
checks=$((checks + 1))
run "$OLD" "$WORK/old" "$repo" "${loop[@]}" --branch HEAD~3 --once --now "$NOW" --state "$WORK/loop-old"
run "$NEW" "$WORK/new" "$repo" "${loop[@]}" --branch HEAD~3 --once --now "$NOW" --state "$WORK/loop-new"
mask "$WORK/old.stdout"
mask "$WORK/new.stdout"
compare "gitfleet ${loop[*]} --branch HEAD~3 --once"
checks=$((checks + 1))
run "$OLD" "$WORK/old" "$repo" "${loop[@]}" --branch HEAD~1 --iterations 3 --sim-step 10m --interval 1s --state "$WORK/loop-old"
run "$NEW" "$WORK/new" "$repo" "${loop[@]}" --branch HEAD~1 --iterations 3 --sim-step 10m --interval 1s --state "$WORK/loop-new"
mask "$WORK/old.stdout"
mask "$WORK/new.stdout"
grep -q "scale h100-cloud 0 → 2" "$WORK/new.stdout" || echo "(no scale line)" >>"$WORK/new.stdout"
compare "gitfleet ${loop[*]} --branch HEAD~1 --iterations 3"
for o in text json; do
  same "$ROOT" status --state "$WORK/loop-old" -o "$o"
done
same "$ROOT" status --state "$WORK/no-state"
for o in text markdown json; do
  same "$ROOT" apply examples/fleet --now "$NOW" --auto-approve --state @STATE@ -o "$o"
done
same "$ROOT" apply examples/fleet --now "$NOW" --state @STATE@
same "$ROOT" apply examples/fleet --executor kube
same "$WORK/gen" apply repo --no-git --observed observed.yaml --now "$NOW" --auto-approve --state @STATE@
# a second apply on the state of the first: nothing to do
checks=$((checks + 1))
for bin in old new; do
  b=$OLD
  [ $bin = new ] && b=$NEW
  "$b" apply "$ROOT/examples/fleet" --no-git --now "$NOW" --auto-approve --state "$WORK/again-$bin" >/dev/null 2>&1
  run "$b" "$WORK/$bin" "$ROOT" apply examples/fleet --no-git --auto-approve --state "$WORK/again-$bin"
done
compare "gitfleet apply (second time)"

# Errors.
same "$ROOT" plan no-such-dir
same "$ROOT" plan examples/fleet --now yesterday
same "$ROOT" plan examples/fleet --observed no-such-file.yaml
same "$ROOT" explain x examples/fleet --observed "$ROOT/Cargo.toml"
same "$ROOT" plan "$repo/fleet"
same "$ROOT" explain bad "$repo/fleet"

echo "compare-cli: $checks checks, $failures different"
[ "$failures" = 0 ]
