#!/usr/bin/env bash
# The sweep of tests/sweep/resume.toml as a 4-task Slurm job array on a real one-node Slurm
# (ctest sweep_on_slurm; tests/slurm/local_slurm.sh installs Debian's slurm-wlm and munge and
# starts munged, slurmctld and slurmd): the collected rows must equal a single-process run of
# the same sweep, byte for byte. Needs root (apt-get, the daemons); exits 77 (skipped) without.
#   tests/slurm/sweep_on_slurm.sh path/to/emergent
set -euo pipefail
cli=$(realpath "$1")
root=$(cd "$(dirname "$0")/../.." && pwd)
if [ "$(id -u)" -ne 0 ]; then
  echo "sweep_on_slurm: skipped (needs root to install and start Slurm)"
  exit 77
fi
dir=$(mktemp -d)
export SLURM_STATE_DIR=$dir/slurm
trap 'bash "$root/tests/slurm/local_slurm.sh" stop > /dev/null 2>&1 || true; rm -rf "$dir"' EXIT
bash "$root/tests/slurm/local_slurm.sh" start
eval "$(bash "$root/tests/slurm/local_slurm.sh" env)"

"$cli" sweep "$root/tests/sweep/resume.toml" --out "$dir/single" --quiet 2> /dev/null
"$cli" sweep collect "$dir/single" > /dev/null

job=$(sbatch --parsable --array=0-3 --chdir "$dir" --output "$dir/task-%a.out" \
  "$root/scripts/slurm/sweep.sbatch" "$root/tests/sweep/resume.toml" "$dir/array" "$cli")
# Not `sbatch --wait`: it polls every 2 s, then every 10 s (the tasks take 4 s, the wait took 10).
# squeue lists the tasks until they end; an error (slurmctld busy) counts as not yet.
until tasks=$(squeue -h -j "$job" 2> /dev/null) && [ -z "$tasks" ]; do sleep 0.1; done
exit_codes=$(scontrol show job "$job" | grep -o "ExitCode=[0-9]*:[0-9]*" | sort | uniq -c)
[ "$(echo $exit_codes)" = "4 ExitCode=0:0" ] || { echo "array tasks: $exit_codes"; cat "$dir"/task-*.out; exit 1; }
ls "$dir/array/rows"
for i in 0 1 2 3; do test "$(wc -l < "$dir/array/rows/shard-$i-of-4.jsonl")" -eq 2; done
"$cli" sweep collect "$dir/array"
cmp "$dir/single/results.jsonl" "$dir/array/results.jsonl"

# An array with a step (ids 0 2 4 6) takes shards 0-3 by position (before: ids 0 and 2 ran
# shards 0 and 2, id 4 failed, shards 1 and 3 never ran); a list that is not evenly spaced
# (1,2,5) is refused in each task, naming --shard.
until_done() { until tasks=$(squeue -h -j "$1" 2> /dev/null) && [ -z "$tasks" ]; do sleep 0.1; done; }
job=$(sbatch --parsable --array=0-6:2 --chdir "$dir" --output "$dir/step-%a.out" \
  "$root/scripts/slurm/sweep.sbatch" "$root/tests/sweep/resume.toml" "$dir/stepped" "$cli")
until_done "$job"
exit_codes=$(scontrol show job "$job" | grep -o "ExitCode=[0-9]*:[0-9]*" | sort | uniq -c)
[ "$(echo $exit_codes)" = "4 ExitCode=0:0" ] || { echo "stepped array: $exit_codes"; cat "$dir"/step-*.out; exit 1; }
"$cli" sweep collect "$dir/stepped"
cmp "$dir/single/results.jsonl" "$dir/stepped/results.jsonl"
job=$(sbatch --parsable --array=1,2,5 --chdir "$dir" --output "$dir/list-%a.out" \
  "$root/scripts/slurm/sweep.sbatch" "$root/tests/sweep/resume.toml" "$dir/list" "$cli")
until_done "$job"
for i in 1 2 5; do
  grep -q "ids are not evenly spaced .*--shard I/N" "$dir/list-$i.out" || { cat "$dir/list-$i.out"; exit 1; }
done
test ! -e "$dir/list/rows" || [ -z "$(cat "$dir"/list/rows/*.jsonl 2> /dev/null)" ]
echo "sweep_on_slurm: ok (4 array tasks, then ids 0-6:2, rows equal to the single-process sweep; a list 1,2,5 refused)"
