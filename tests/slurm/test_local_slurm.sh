#!/usr/bin/env bash
# End-to-end check of tests/slurm/local_slurm.sh on a real one-node Slurm:
# job array env, sbatch --wait (and its exit status), restart, and
# scripts/slurm/sweep.sbatch with a stub binary (argument passing only).
# Needs root. Prints "N passed, N failed"; exit status 0 only if all pass.
#   bash tests/slurm/test_local_slurm.sh
# shellcheck disable=SC2016  # single-quoted $VARS are expanded by the job/inner bash
set -uo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
LS=$HERE/local_slurm.sh
export SLURM_STATE_DIR=${SLURM_STATE_DIR:-/tmp/emergent-slurm}
WORK=$SLURM_STATE_DIR/test
pass=0 fail=0
ok() { pass=$((pass + 1)); echo "ok   - $*"; }
bad() { fail=$((fail + 1)); echo "FAIL - $*"; }
check() { local name=$1; shift; if "$@"; then ok "$name"; else bad "$name"; fi; }
finish() {
  "$LS" stop >/dev/null 2>&1 || true
  echo "$pass passed, $fail failed"
  trap - EXIT
  exit $((fail == 0 && pass > 0 ? 0 : 1))
}
trap finish EXIT

wait_empty() { # bounded wait until squeue shows no jobs
  local i
  for ((i = 0; i < 120; i++)); do
    [[ -z $(timeout 5 squeue -h -o %i 2>/dev/null) ]] && return 0
    sleep 0.5
  done
  return 1
}

array_files_ok() { # dir n
  local i
  for ((i = 0; i < $2; i++)); do
    [[ $(cat "$1/out_$i.txt" 2>/dev/null) == "$i $2" ]] || { echo "  out_$i.txt: '$(cat "$1/out_$i.txt" 2>/dev/null)'"; return 1; }
  done
}

t0=$SECONDS
if ! "$LS" start; then bad "start"; exit; fi
ok "start ($((SECONDS - t0)) s incl. any install)"
eval "$("$LS" env)"
check "SLURM_CONF points at private config" test -f "$SLURM_CONF"

t0=$SECONDS
out=$("$LS" start 2>&1)
check "start is idempotent and quick" bash -c '[[ $1 == *"already running"* ]] && (($2 <= 5))' _ "$out" "$((SECONDS - t0))"

rm -rf "$WORK"; mkdir -p "$WORK/a" "$WORK/w" "$WORK/r" "$WORK/s"

# 1. plain array + polling squeue
sbatch -Q --array=0-3 --chdir="$WORK/a" --output="$WORK/a/slurm-%A_%a.out" \
  --wrap 'echo $SLURM_ARRAY_TASK_ID $SLURM_ARRAY_TASK_COUNT > out_$SLURM_ARRAY_TASK_ID.txt'
check "array drains from squeue" wait_empty
check "array wrote 4 files with 'ID COUNT'" array_files_ok "$WORK/a" 4

# 2. sbatch --wait blocks until the array is done; exit status propagates
sbatch -Q --wait --array=0-3 --chdir="$WORK/w" --output="$WORK/w/slurm-%A_%a.out" \
  --wrap 'echo $SLURM_ARRAY_TASK_ID $SLURM_ARRAY_TASK_COUNT > out_$SLURM_ARRAY_TASK_ID.txt'
rc=$?
check "sbatch --wait exits 0" test "$rc" -eq 0
check "sbatch --wait: files present on return" array_files_ok "$WORK/w" 4
sbatch -Q --wait --array=0-1 --chdir="$WORK/w" --output=/dev/null --wrap 'exit $SLURM_ARRAY_TASK_ID'
check "sbatch --wait returns failing task's status" test "$?" -ne 0

# 3. restart
"$LS" stop
check "stop leaves no slurm daemons from this state dir" bash -c \
  '! kill -0 "$(cat "$1/run/slurmctld.pid" 2>/dev/null)" 2>/dev/null && ! kill -0 "$(cat "$1/run/slurmd.pid" 2>/dev/null)" 2>/dev/null' _ "$SLURM_STATE_DIR"
check "start after stop" "$LS" start
sbatch -Q --wait --array=0-1 --chdir="$WORK/r" --output=/dev/null \
  --wrap 'echo $SLURM_ARRAY_TASK_ID $SLURM_ARRAY_TASK_COUNT > out_$SLURM_ARRAY_TASK_ID.txt'
check "array after restart" array_files_ok "$WORK/r" 2

# 4. sweep.sbatch with a stub binary: check the arguments and env it gets
cat >"$WORK/s/stub" <<'EOF'
#!/usr/bin/env bash
echo "$* | $SLURM_ARRAY_TASK_ID $SLURM_ARRAY_TASK_COUNT" > "$4/shard_$SLURM_ARRAY_TASK_ID.txt"
EOF
chmod +x "$WORK/s/stub"
(cd "$WORK/s" && sbatch -Q --wait --array=0-2 "$ROOT/scripts/slurm/sweep.sbatch" sweep.toml "$WORK/s" "$WORK/s/stub")
check "sweep.sbatch exits 0" test "$?" -eq 0
sweep_ok() {
  local i
  for i in 0 1 2; do
    [[ $(cat "$WORK/s/shard_$i.txt" 2>/dev/null) == "sweep sweep.toml --out $WORK/s --jobs 1 | $i 3" ]] ||
      { echo "  shard_$i.txt: '$(cat "$WORK/s/shard_$i.txt" 2>/dev/null)'"; return 1; }
  done
  ls "$WORK/s"/emergent-sweep-*_0.out >/dev/null 2>&1 || { echo "  no emergent-sweep-%A_%a.out log"; return 1; }
}
check "sweep.sbatch passes SWEEP_FILE --out OUT_DIR --jobs 1, one task per shard" sweep_ok
