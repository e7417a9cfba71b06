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
echo "sweep_on_slurm: ok (4 array tasks, rows equal to the single-process sweep)"
