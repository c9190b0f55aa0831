#!/usr/bin/env bash
# The single-GPU calibration of one GPU model (first run for the H200, 2026-11-28) in one
# device call: everything `clustersim calibrate fit` reads for one GPU, and the
# ten training runs its predictions are checked against.
#
#   chain A (first GPU):  clustersim-microbench (GEMM sweep, memcpy, memory-bound kernels,
#                         launch), measure_gemm_duty.py (the bf16 and fp8 shapes re-timed under a
#                         training step's duty cycle) and merge_gemm_duty.py, measure_eager_kernels.py --graphs,
#                         measure_host.py (ops and blocks; one process), profile_step.py (SDPA flash
#                         sweep and kernel profiles of two training steps), measure_sdpa_backends.py
#                         (FlashAttention-2 and cuDNN attention, back to back)
#   chain B (second GPU, or first with one GPU): training/run_all.sh (10 runs, amp-bf16), then
#                         (chain C, after chain A) serving/measure_batches.py and
#                         serving/measure_inference_host.py
#
# With two or more GPUs the chains run side by side, one GPU each (the GPUs are separate
# devices with separate power limits; measure_gemm_duty.py samples only its own GPU).
# With one GPU the training runs go first (they are what the transferred profile is judged
# on), then chain A. Everything lands in OUTDIR/calib.tar.gz (one file: a device call returns
# at most 8), packed again after every step so that a call cut short keeps what finished; the
# console log is the caller's (tee it into OUTDIR/log.txt).
#
# usage: calibration/run_single_gpu.sh OUTDIR
# environment: BUILD (default /tmp/build-microbench), CUDA_ARCH (default 90), END_S (seconds
#              after start by which every step must have ended; default 560), SERVING (0: no chain C)
set -u -o pipefail
OUTDIR="$1"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
BUILD="${BUILD:-/tmp/build-microbench}"
CUDA_ARCH="${CUDA_ARCH:-90}"
END_S="${END_S:-560}"
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
work="$(mktemp -d /tmp/calib.XXXXXX)"
mkdir -p "$OUTDIR" "$work/runs"
T0=$SECONDS
pack() { local p="$OUTDIR/.calib.$BASHPID.part"; tar -C "$work" -czf "$p" . 2>/dev/null && mv -f "$p" "$OUTDIR/calib.tar.gz"; }
stamp() { echo "--- [$((SECONDS - T0)) s] $*"; }
left() { echo $((END_S - (SECONDS - T0))); }
# step NAME CMD...: runs CMD with what is left of the budget, logs its time and status.
step() {
  local name="$1"; shift
  local budget; budget=$(left)
  if (( budget < 10 )); then echo "!!! $name skipped: no time left"; return 1; fi
  stamp "$name (budget ${budget} s)"
  local t=$SECONDS
  timeout -k 5 "$budget" "$@"; local rc=$?
  echo "    $name rc=$rc ($((SECONDS - t)) s)"
  pack
  return $rc
}

stamp "machine"
nvidia-smi --query-gpu=index,name,driver_version,memory.total,clocks.max.sm,clocks.max.mem,power.limit,temperature.gpu --format=csv
python3 -c "import torch, platform; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'gpus', torch.cuda.device_count(), 'python', platform.python_version())"
nvcc --version | tail -1
ngpu=$(nvidia-smi -L | wc -l)

chain_a() {
  export CUDA_VISIBLE_DEVICES=0
  step build bash -c "cmake -S '$root/calibration/microbench' -B '$BUILD' -DCMAKE_BUILD_TYPE=Release \
      -DCMAKE_CUDA_ARCHITECTURES=$CUDA_ARCH >/dev/null && cmake --build '$BUILD' -j 16 | tail -1" || return
  step microbench "$BUILD/clustersim-microbench" --out "$work/microbench.json"
  step gemm-duty python3 "$root/calibration/training/measure_gemm_duty.py" --shapes "$work/microbench.json" \
      --out-regimes "$work/gemm-duty-regimes.json" --out-microbench "$work/microbench-duty-raw.json" --dtypes bf16,fp8 &&
    python3 "$root/calibration/training/merge_gemm_duty.py" "$work/microbench-duty-raw.json" "$work/microbench-duty.json"
  step eager python3 "$root/calibration/training/measure_eager_kernels.py" --graphs --out "$work/eager-kernels-graphs.json"
  step host python3 "$root/calibration/training/measure_host.py" --sections ops,blocks --out "$work/host-dispatch.json"
  step profile python3 "$root/calibration/training/profile_step.py" --out "$work/profile"
  step sdpa python3 "$root/calibration/training/measure_sdpa_backends.py" --out-dir "$work/sdpa"
}
chain_b() {
  export CUDA_VISIBLE_DEVICES=$1
  step training bash "$root/calibration/training/run_all.sh" "$work/measured-runs.json" "$work/runs"
}
# Serving ground truth: the batch table of calibration/serving (prefill, decode and chunk cells of
# random-weight Llama 1B and 8B in transformers) and the eager forward's host rate (each width in a
# process of its own, timed before any profiler runs).
chain_c() {
  [[ "${SERVING:-1}" == 1 ]] || return 0
  export CUDA_VISIBLE_DEVICES=$1
  step serving-batches python3 "$root/calibration/serving/measure_batches.py" --out "$work/serving-batches.json"
  step inference-host python3 "$root/calibration/serving/measure_inference_host.py" "$work/inference-host.json"
}

if (( ngpu >= 2 )); then
  chain_b 1 > "$work/chain-b.log" 2>&1 &
  b=$!
  chain_a
  wait "$b"
  # After chain A: the serving table and the inference host rate time the host, which chain
  # A's host and profiling steps would share.
  chain_c 1 >> "$work/chain-b.log" 2>&1
  stamp "chain B's log"
  cat "$work/chain-b.log"
else
  chain_b 0
  chain_a
  chain_c 0
fi

stamp "pack"
nvidia-smi --query-gpu=index,name,clocks.sm,clocks.mem,power.draw,temperature.gpu --format=csv
pack; ls -la "$OUTDIR"
stamp "done"
