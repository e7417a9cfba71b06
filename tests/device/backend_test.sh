#!/usr/bin/env bash
# `emergent train --backend thrust-omp --seeds` end to end (ctest device_backend): the device
# ensemble writes the CPU's run folders, so a run started on one backend resumes on the other and
# ends where a run on the CPU alone ends (the members of an ensemble each from its own
# checkpoint); the causal MLP-Mixer's ensemble and Dyck's follow their CPU runs; a mixed sweep
# packs its runs into ensembles, survives two kills and gives the CPU sweep's rows; and bad
# requests get one line and a non-zero exit.
#   tests/device/backend_test.sh path/to/emergent
set -euo pipefail
cli=$1
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
common=(--task linear-map --S 6 --s 2 --batch-tokens 256 --log-every 10 --checkpoint-every 30
        --threads 2 --quiet)

# The reference: 2 seeds, 60 steps, on the CPU.
"$cli" train "${common[@]}" --steps 60 --seeds 3-4 --out "$dir/cpu" > /dev/null
# Device first (30 steps), then the CPU resumes each seed to 60.
"$cli" train "${common[@]}" --steps 30 --seeds 3-4 --backend thrust-omp --out "$dir/device_then_cpu" > /dev/null
test -f "$dir/device_then_cpu/seed_3/step_000030.safetensors"
"$cli" train "${common[@]}" --steps 60 --seeds 3-4 --out "$dir/device_then_cpu" > /dev/null
# CPU first, then the device ensemble resumes both.
"$cli" train "${common[@]}" --steps 30 --seeds 3-4 --out "$dir/cpu_then_device" > /dev/null
"$cli" train "${common[@]}" --steps 60 --seeds 3-4 --backend thrust-omp --out "$dir/cpu_then_device" > /dev/null

python3 - "$dir" <<'PY'
import json, sys
root = sys.argv[1]
def rows(run):
    return [json.loads(line) for line in open(f"{root}/{run}/metrics.jsonl")]
for seed in (3, 4):
    reference = rows(f"cpu/seed_{seed}")
    assert [r["step"] for r in reference] == list(range(0, 60, 10)), reference
    for mixed in ("device_then_cpu", "cpu_then_device"):
        other = rows(f"{mixed}/seed_{seed}")
        assert [r["step"] for r in other] == [r["step"] for r in reference], (mixed, other)
        worst = max(abs(a["loss"] - b["loss"]) for a, b in zip(reference, other))
        print(f"seed {seed} {mixed}: worst |loss - cpu loss| {worst:.2e}")
        assert worst < 1e-3, (mixed, seed, worst)
        summary = json.load(open(f"{root}/{mixed}/seed_{seed}/summary.json"))
        assert summary["steps_done"] == 60, summary
        # the extension from 30 to 60 steps is recorded in the first row after the resume, by
        # either backend (train/run_binding.hpp), and nowhere else
        changed = [r["step"] for r in other if "changed_on_resume" in r]
        assert changed == [30], (mixed, changed)
        assert other[3]["changed_on_resume"] == {"steps": {"from": 30, "to": 60}}, other[3]
PY
# Members at different checkpoints: seed 3 has 30 steps (on the CPU), seed 4 none; the ensemble
# resumes each from its own and both end where the CPU alone ends.
"$cli" train "${common[@]}" --steps 30 --seeds 3 --out "$dir/uneven" > /dev/null
"$cli" train "${common[@]}" --steps 60 --seeds 3-4 --backend thrust-omp --out "$dir/uneven" > /dev/null
python3 - "$dir" <<'PY'
import json, sys
root = sys.argv[1]
for seed in (3, 4):
    cpu, uneven = ([json.loads(line) for line in open(f"{root}/{run}/seed_{seed}/metrics.jsonl")]
                   for run in ("cpu", "uneven"))
    assert [r["step"] for r in uneven] == [r["step"] for r in cpu], (seed, uneven)
    worst = max(abs(a["loss"] - b["loss"]) for a, b in zip(cpu, uneven))
    print(f"uneven seed {seed}: worst |loss - cpu loss| {worst:.2e}")
    assert worst < 1e-3, (seed, worst)
PY
# The causal MLP-Mixer on the device (its twin, cuda/mlp_mixer.cuh) follows its CPU runs.
"$cli" train "${common[@]}" --mixer mlp_mixer --steps 30 --seeds 3-4 --out "$dir/mixer_cpu" > /dev/null
"$cli" train "${common[@]}" --mixer mlp_mixer --steps 30 --seeds 3-4 --backend thrust-omp \
  --out "$dir/mixer_device" > /dev/null
python3 - "$dir" <<'PY'
import json, sys
root = sys.argv[1]
for seed in (3, 4):
    cpu, device = ([json.loads(line) for line in open(f"{root}/{run}/seed_{seed}/metrics.jsonl")]
                   for run in ("mixer_cpu", "mixer_device"))
    assert [r["step"] for r in device] == [r["step"] for r in cpu] == [0, 10, 20], (cpu, device)
    worst = max(abs(a["loss"] - b["loss"]) for a, b in zip(cpu, device))
    print(f"mlp_mixer seed {seed}: worst |device loss - cpu loss| {worst:.2e}")
    assert worst < 1e-4, (seed, worst)
PY
# An edited config.json is refused by the device backend too, naming the checkpoint's value.
sed -i 's/"lr": 0.001,/"lr": 0.01,/' "$dir/cpu_then_device/seed_3/config.json"
if "$cli" train "${common[@]}" --steps 90 --seeds 3-4 --backend thrust-omp --out "$dir/cpu_then_device" \
     2> "$dir/err.txt" > /dev/null; then exit 1; fi
grep -q "lr: 0.001 (step_000060.safetensors), 0.01 (config.json), 0.001 (given)" "$dir/err.txt"

# A mixed sweep on the device backend: 16 runs (two S, two sparsities, two bias strengths, two
# seeds) packed into ensembles of at most 6 (--max-members; in sweep order, so the second mixes
# S = 5 and 6, the shorter runs padded, beside s, bias and seed), killed twice part-way and
# resumed: every run has its row once, and the rows have the CPU sweep's ids and (within 1e-4)
# its numbers.
cat > "$dir/sweep.toml" <<'TOML'
[base]
task = "linear-map"
steps = 60
batch_tokens = 256
log_every = 10
checkpoint_every = 20
[[grid]]
seeds = 2
S = [5, 6]
s = [1, 2]
bias = [0, 2]
TOML
device_sweep=("$cli" sweep "$dir/sweep.toml" --out "$dir/sweep_device" --backend thrust-omp
              --max-members 6 --quiet)
rows_done() { cat "$dir"/sweep_device/rows/*.jsonl 2> /dev/null | wc -l || true; }
checkpoints() { find "$dir/sweep_device" -name 'step_*.safetensors' 2> /dev/null | wc -l || true; }
for kill in 1 2; do  # start, wait for a new checkpoint, kill -9 the sweep and its ensemble
  before=$(checkpoints)
  setsid "${device_sweep[@]}" 2> /dev/null &
  sweep_pid=$!
  for _ in $(seq 1 1500); do
    [ "$(checkpoints)" -gt "$before" ] && break
    sleep 0.02
  done
  kill -9 -- "-$sweep_pid"
  wait "$sweep_pid" 2> /dev/null || true
  echo "sweep killed ($kill): $(rows_done) of 16 rows"
  [ "$(rows_done)" -lt 16 ] || { echo "the sweep finished before kill $kill"; exit 1; }
done
"${device_sweep[@]}" 2> "$dir/sweep.txt"
grep -q "runs done in [0-9]* ensembles on thrust-omp, 0 failed" "$dir/sweep.txt"
"$cli" sweep "$dir/sweep.toml" --out "$dir/sweep_cpu" --quiet 2> /dev/null
python3 - "$dir" <<'PY'
import collections, glob, json, sys
def rows(name):
    return [r for f in glob.glob(f"{sys.argv[1]}/{name}/rows/*.jsonl") for r in map(json.loads, open(f))]
device, cpu = rows("sweep_device"), rows("sweep_cpu")
counts = collections.Counter(r["id"] for r in device)
assert len(counts) == 16 and set(counts.values()) == {1}, counts  # every run once
device = {r["id"]: r for r in device}
cpu = {r["id"]: r for r in cpu}
assert sorted(device) == sorted(cpu), (sorted(device), sorted(cpu))
worst = max(abs(device[i]["result"]["final_loss"] - cpu[i]["result"]["final_loss"]) for i in cpu)
print(f"mixed sweep: 16 runs, killed twice, worst |final loss - cpu| {worst:.2e}")
assert worst < 1e-4, worst
assert all(device[i]["result"]["steps_done"] == 60 for i in device)
PY

# Dyck on the device: loss weights and bias patterns per sequence, the analysis sequence by
# sequence (the automaton's prebuilt shape: vocab 2k = 4, 4 layers), as its CPU runs.
dyck=(--task dyck --k 2 --tokens 16 --layers 4 --max-len 256 --bias 1 --batch-tokens 64
      --steps 15 --log-every 5 --analysis-every 5 --seeds 0-1 --threads 2 --quiet)
"$cli" train "${dyck[@]}" --out "$dir/dyck_cpu" > /dev/null
"$cli" train "${dyck[@]}" --backend thrust-omp --out "$dir/dyck_device" > /dev/null
python3 - "$dir" <<'PY'
import json, sys
root = sys.argv[1]
for seed in (0, 1):
    cpu, device = ([json.loads(line) for line in open(f"{root}/{run}/seed_{seed}/metrics.jsonl")]
                   for run in ("dyck_cpu", "dyck_device"))
    assert [r["step"] for r in device] == [r["step"] for r in cpu] == [0, 5, 10], device
    worst = max(abs(a[k] - b[k]) for a, b in zip(cpu, device)
                for k in ("loss", "closing_loss", "closing_accuracy", "attention_iou"))
    print(f"dyck seed {seed}: worst |loss, closing loss, iou - cpu| {worst:.2e}")
    assert worst < 1e-3, (seed, worst)
PY

# Bad requests: one line naming what to change, a non-zero exit, nothing trained.
expect_error() {  # expected text, then the command
  local text=$1; shift
  if "$@" > /dev/null 2> "$dir/err.txt"; then echo "expected an error: $*"; exit 1; fi
  grep -q "$text" "$dir/err.txt" || { echo "wrong error for $*:"; cat "$dir/err.txt"; exit 1; }
}
expect_error "give --seeds" "$cli" train "${common[@]}" --steps 5 --backend thrust-omp --out "$dir/bad"
# Runs that cannot share an ensemble (here: two batch_tokens; S = 5 and 6 may, padded) are
# refused by the ensemble program in one line naming the field.
configs=$(python3 - "$dir" <<'PY'
import glob, json, sys
by_S = {json.load(open(f))["S"]: f for f in sorted(glob.glob(f"{sys.argv[1]}/sweep_device/runs/*/config.json"))}
other = json.load(open(by_S[6]))
other["batch_tokens"] *= 2
open(f"{sys.argv[1]}/other.json", "w").write(json.dumps(other))
print(f"{by_S[5]},{sys.argv[1]}/other.json")
PY
)
expect_error "field 'batch_tokens' is" "$(dirname "$cli")/emergent_ensemble_thrust_omp" \
  --configs "$configs" --run-dirs "$dir/bad4,$dir/bad5"
expect_error "not a seed list" "$cli" train "${common[@]}" --steps 5 --seeds 1-x --backend thrust-omp --out "$dir/bad3"
# The NaN stop: the device keeps each member's first non-finite step and reports it when the host
# next reads (a logging or checkpoint step, or the end): the member stops there with the CPU's
# "stopped" summary, and the ensemble ends with the CPU's message for each such member, a step
# within 2 of the CPU's (the sums differ in order, and a diverging run reaches inf a step sooner or
# later: here 9 against 10), no metrics row at or after it, and no checkpoint after it.
expect_error "training stopped at step" "$cli" train "${common[@]}" --steps 40 --lr 1000 --warmup-steps 0 \
  --seeds 0-1 --backend thrust-omp --out "$dir/nan_device"
device_step=$(grep -o "stopped at step [0-9]*" "$dir/err.txt" | head -n 1 | grep -o "[0-9]*$")
expect_error "training stopped at step" "$cli" train "${common[@]}" --steps 40 --lr 1000 --warmup-steps 0 \
  --seed 0 --out "$dir/nan_cpu"
cpu_step=$(grep -o "stopped at step [0-9]*" "$dir/err.txt" | grep -o "[0-9]*$")
[ $((device_step - cpu_step)) -le 2 ] && [ $((cpu_step - device_step)) -le 2 ] ||
  { echo "NaN stop: device step $device_step, cpu step $cpu_step"; exit 1; }
python3 - "$dir/nan_device/seed_0/metrics.jsonl" "$device_step" <<'PY'
import json, sys
steps = [json.loads(line)["step"] for line in open(sys.argv[1])]
assert steps and max(steps) < int(sys.argv[2]), (steps, sys.argv[2])
PY
test ! -e "$dir/nan_device/seed_0/step_000030.safetensors"
# In a mixed sweep a diverging run stops alone: the ensemble's other runs get their rows, the
# diverged ones the CPU's "stopped" summary and no row, and the sweep exits non-zero.
cat > "$dir/nan_sweep.toml" <<'TOML'
[base]
task = "linear-map"
S = 6
s = 2
steps = 40
batch_tokens = 256
warmup_steps = 0
[[grid]]
seeds = 2
lr = [0.001, 1000]
TOML
if "$cli" sweep "$dir/nan_sweep.toml" --out "$dir/nan_sweep" --backend thrust-omp --quiet \
     2> "$dir/nan_sweep.txt"; then echo "the diverging sweep exited 0"; exit 1; fi
grep -q "2 runs done in 1 ensembles on thrust-omp, 2 failed" "$dir/nan_sweep.txt"
python3 - "$dir/nan_sweep" <<'PY'
import glob, json, sys
rows = [json.loads(l) for f in glob.glob(f"{sys.argv[1]}/rows/*.jsonl") for l in open(f)]
assert sorted(r["config"]["lr"] for r in rows) == [0.001, 0.001], rows
for run in json.load(open(f"{sys.argv[1]}/sweep.json"))["runs"]:
    summary = json.load(open(f"{sys.argv[1]}/runs/{run['id']}/summary.json"))
    assert ("stopped" in summary) == (run["config"]["lr"] == 1000), (run["config"]["lr"], summary)
PY
echo "device backend: ok"
