#!/usr/bin/env bash
# Steady-state replays of the committed serving traces (issue 15's ground truth), as call C of
# the warm ground truth ran them: per process the engine's warm-up, single and probe runs (the
# inputs of its own host fit), then the listed traces once each, the first of which builds the
# machine's runtime-compiled kernels and is not a steady run. Processes listed for one GPU run
# one after another on it; the GPUs run side by side. Each process's output is packed in one
# tar (OUTDIR/NAME.tar.gz: a device call returns at most 8 files).
#
# usage: calibration/serving/run_steady.sh OUTDIR END_S SPEC...
#   SPEC  GPU:NAME:MODEL:LABELS, e.g. 0:t0:llama-1b:rate5,rate0,rate1
#   END_S seconds after start by which every process must have ended (each process's
#         --deadline-s is what is left of it when it starts)
set -u -o pipefail
OUTDIR="$1"; END_S="$2"; shift 2
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
R="$root/calibration/data/h100-sxm5-80gb/serving-engine-2026-11-26.json"
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
mkdir -p "$OUTDIR"
work="$(mktemp -d /tmp/steady.XXXXXX)"
T0=$SECONDS

run_gpu() {
  local gpu="$1"; shift
  local spec name model labels left
  for spec in "$@"; do
    IFS=: read -r _ name model labels <<< "$spec"
    left=$((END_S - (SECONDS - T0) - 10))
    if (( left < 90 )); then echo "[$name] skipped: ${left} s left"; continue; fi
    echo "[$name] gpu $gpu $model $labels (deadline ${left} s)"
    mkdir -p "$work/$name"
    CUDA_VISIBLE_DEVICES="$gpu" timeout -k 5 "$((left + 5))" python3 "$root/calibration/serving/measure_engine.py" \
      --out-dir "$work/$name" --models "$model" --replay "$R" --replay-labels "$model=$labels" --passes 1 \
      --pressure-blocks 0 --deadline-s "$left" > "$work/$name/$name.log" 2>&1
    echo "[$name] rc=$? after $((SECONDS - T0)) s"
    tar -C "$work" -czf "$OUTDIR/$name.tar.gz" "$name"
  done
}

nvidia-smi --query-gpu=index,name,driver_version,clocks.max.sm,power.limit --format=csv,noheader
gpus=$(for s in "$@"; do echo "${s%%:*}"; done | sort -u)
pids=()
for g in $gpus; do
  mine=()
  for s in "$@"; do [[ "${s%%:*}" == "$g" ]] && mine+=("$s"); done
  run_gpu "$g" "${mine[@]}" &
  pids+=($!)
done
wait "${pids[@]}"
for f in "$work"/*/*.log; do echo "=== $f"; grep -v '^{' "$f" | tail -14; done
ls -la "$OUTDIR"
