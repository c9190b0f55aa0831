#!/usr/bin/env bash
# Runs the measured multi-GPU training configurations (measure_parallel.py under torchrun:
# DDP, FSDP fp32 and bf16, Megatron-style TP, DTensor TP, a 2-stage 1F1B pipeline, and the
# 4-GPU combinations dp2 x tp2 and tp2 x pp2) and combines their JSON documents into one
# "clustersim-measured-runs/1" file.
#
# usage: calibration/training/run_parallel.sh COMBINED.json [PER_RUN_DIR]
# environment: GPU_COUNTS (default "2 4", capped by the GPUs present), WARMUP (3), STEPS (8),
#              ONLY (space-separated run names), SKIP (names to leave out),
#              HARD_S (seconds from the start by which every run must have ended: a run starts
#              only with 40 s left, and its timeout is cut to what is left; default none),
#              RUN_TIMEOUT_S (default per run, from the list below),
#              PROFILE_STEPS (profile that many of the measured steps again under torch.profiler:
#              GPU time per kernel class, NCCL overlap and idle time per rank; default off).
# A 2-GPU run sees GPUs 0,1 (CUDA_VISIBLE_DEVICES=0,1); a 4-GPU run GPUs 0-3.
# A run that fails, times out or is skipped still leaves a document with an "error" in the
# combined file's "failed" list. NVLink multicast stays off (NCCL_NVLS_ENABLE=0).
set -u -o pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
combined="${1:-measured_parallel_runs.json}"
rundir="${2:-$(mktemp -d /tmp/clustersim-par.XXXXXX)}"
mkdir -p "$rundir"
WARMUP="${WARMUP:-3}"
STEPS="${STEPS:-8}"
ONLY="${ONLY:-}"
SKIP="${SKIP:-}"
HARD_S="${HARD_S:-0}"
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
present=$(nvidia-smi -L | grep -c '^GPU')
GPU_COUNTS="${GPU_COUNTS:-2 4}"
t_begin=$SECONDS

names=()
failed=0
# run NAME GPUS TIMEOUT_S MODE [measure_parallel.py arguments...]
run() {
  local name="$1" n="$2" tmo="$3" mode="$4"
  shift 4
  if [[ -n "$ONLY" && " $ONLY " != *" $name "* ]]; then return 0; fi
  if [[ -n "$SKIP" && " $SKIP " == *" $name "* ]]; then return 0; fi
  if [[ " $GPU_COUNTS " != *" $n "* ]]; then return 0; fi
  if (( n > present )); then echo "skipping $name: $n GPUs, $present present"; return 0; fi
  names+=("$name")
  rm -f "$rundir/$name.json" "$rundir/$name.json".rank* "$rundir/$name.skipped"
  tmo="${RUN_TIMEOUT_S:-$tmo}"
  if (( HARD_S > 0 )); then
    local left=$((HARD_S - (SECONDS - t_begin)))
    if (( left < 40 )); then
      echo "=== $name: not started (${left} s left of HARD_S=${HARD_S})"
      echo "deadline" > "$rundir/$name.skipped"
      failed=$((failed + 1))
      return 0
    fi
    (( tmo > left - 5 )) && tmo=$((left - 5))
  fi
  local devices="0,1,2,3,4,5,6,7"
  devices="${devices:0:$((2 * n - 1))}"
  echo "=== $name: $mode on $n GPU(s) [$devices]: $*"
  local t0=$SECONDS
  if ! CUDA_VISIBLE_DEVICES="$devices" timeout -k 5 "$tmo" \
      torchrun --standalone --nproc-per-node "$n" "$here/measure_parallel.py" --mode "$mode" --name "$name" \
      --out "$rundir/$name.json" --warmup "$WARMUP" --steps "$STEPS" --precision amp-bf16 --optimizer adam \
      ${PROFILE_STEPS:+--profile-steps "$PROFILE_STEPS"} "$@"; then
    echo "!!! $name failed"
    failed=$((failed + 1))
  fi
  echo "    ($((SECONDS - t0)) s)"
}

GPT350="--family gpt --hidden 1024 --layers 24 --heads 16"
GPT13="--family gpt --hidden 2048 --layers 24 --heads 16"
GPT27="--family gpt --hidden 2560 --layers 32 --heads 32"
GPT67="--family gpt --hidden 4096 --layers 32 --heads 32"
LLAMA11="--family llama --hidden 2048 --layers 22 --heads 32 --kv-heads 4 --ffn-hidden 5632"
LLAMA24="--family llama --hidden 2560 --layers 32 --heads 32 --kv-heads 8 --ffn-hidden 6912"
LLAMA7="--family llama --hidden 4096 --layers 32 --heads 32 --kv-heads 32 --ffn-hidden 11008"

# ---- 4 GPUs (listed first: the combinations, then the rest) ----
run dtp4-gpt-2.7b-s2048-mb2        4 150 dtp  $GPT27 --seq-len 2048 --micro-batch 2
run dtp4-llama-7b-s2048-mb1        4 200 dtp  $LLAMA7 --seq-len 2048 --micro-batch 1
run dp2tp2-gpt-1.3b-s2048-mb4      4 150 tp   $GPT13 --seq-len 2048 --micro-batch 4 --tp 2
run dp2tp2-gpt-2.7b-s2048-mb2      4 150 tp   $GPT27 --seq-len 2048 --micro-batch 2 --tp 2
run tp2pp2-gpt-2.7b-s2048-mb2-m4   4 150 pp   $GPT27 --seq-len 2048 --micro-batch 2 --micro-batches 4 --tp 2
run tp2pp2-gpt-6.7b-s2048-mb1-m8   4 200 pp   $GPT67 --seq-len 2048 --micro-batch 1 --micro-batches 8 --tp 2
run ddp4-gpt-1.3b-s2048-mb4        4 120 ddp  $GPT13 --seq-len 2048 --micro-batch 4
run ddp4-llama-1.1b-s2048-mb4      4 120 ddp  $LLAMA11 --seq-len 2048 --micro-batch 4
run fsdp4-gpt-2.7b-s2048-mb2-fp32  4 150 fsdp $GPT27 --seq-len 2048 --micro-batch 2 --fsdp-mp none
run fsdp4-gpt-6.7b-s2048-mb1-fp32  4 200 fsdp $GPT67 --seq-len 2048 --micro-batch 1 --fsdp-mp none
run fsdp4-gpt-2.7b-s2048-mb2-bf16  4 150 fsdp $GPT27 --seq-len 2048 --micro-batch 2 --fsdp-mp bf16 --fsdp-reduce-dtype fp32
run fsdp4-llama-7b-s2048-mb1-bf16  4 200 fsdp $LLAMA7 --seq-len 2048 --micro-batch 1 --fsdp-mp bf16 --fsdp-reduce-dtype fp32
run fsdp4-llama-7b-s2048-mb2-bf16  4 200 fsdp $LLAMA7 --seq-len 2048 --micro-batch 2 --fsdp-mp bf16 --fsdp-reduce-dtype fp32
run tp4-gpt-2.7b-s2048-mb2         4 150 tp   $GPT27 --seq-len 2048 --micro-batch 2
run tp4-gpt-6.7b-s2048-mb1         4 200 tp   $GPT67 --seq-len 2048 --micro-batch 1
# ---- 2 GPUs ----
run ddp2-gpt-350m-s1024-mb16       2 120 ddp  $GPT350 --seq-len 1024 --micro-batch 16
run ddp2-gpt-350m-s1024-mb4        2 120 ddp  $GPT350 --seq-len 1024 --micro-batch 4
run ddp2-gpt-1.3b-s2048-mb4        2 120 ddp  $GPT13 --seq-len 2048 --micro-batch 4
run ddp2-llama-1.1b-s2048-mb4      2 120 ddp  $LLAMA11 --seq-len 2048 --micro-batch 4
run fsdp2-gpt-1.3b-s2048-mb4-fp32  2 120 fsdp $GPT13 --seq-len 2048 --micro-batch 4 --fsdp-mp none
run fsdp2-gpt-1.3b-s2048-mb4-bf16  2 120 fsdp $GPT13 --seq-len 2048 --micro-batch 4 --fsdp-mp bf16 --fsdp-reduce-dtype fp32
run fsdp2-gpt-1.3b-s2048-mb4-bf16-fsdp2 2 120 fsdp $GPT13 --seq-len 2048 --micro-batch 4 --fsdp-mp bf16 --fsdp-reduce-dtype fp32 --fsdp-impl fsdp2
run fsdp2-llama-2.4b-s2048-mb2-bf16r 2 150 fsdp $LLAMA24 --seq-len 2048 --micro-batch 2 --fsdp-mp bf16 --fsdp-reduce-dtype bf16
run tp2-gpt-1.3b-s2048-mb4         2 120 tp   $GPT13 --seq-len 2048 --micro-batch 4
run tp2-gpt-2.7b-s2048-mb2         2 150 tp   $GPT27 --seq-len 2048 --micro-batch 2
run dtp2-gpt-1.3b-s2048-mb4        2 150 dtp  $GPT13 --seq-len 2048 --micro-batch 4
run dtp2-llama-1.1b-s2048-mb4      2 150 dtp  $LLAMA11 --seq-len 2048 --micro-batch 4
run pp2-gpt-1.3b-s2048-mb2-m8      2 150 pp   $GPT13 --seq-len 2048 --micro-batch 2 --micro-batches 8
run pp2-llama-1.1b-s2048-mb4-m4    2 150 pp   $LLAMA11 --seq-len 2048 --micro-batch 4 --micro-batches 4
# ---- 2 GPUs, 8,192 tokens, SDPA left to its own kernels (cuDNN's on an H100 with torch 2.11;
#      the runs above force flash): the cuDNN attention curve under DDP, FSDP and tensor
#      parallelism (calibration/README.md, "Fused attention") ----
run ddp2-gpt-1.3b-s8192-mb1        2 120 ddp  $GPT13 --seq-len 8192 --micro-batch 1
run ddp2-gpt-1.3b-s8192-mb1-sdpa-auto 2 120 ddp $GPT13 --seq-len 8192 --micro-batch 1 --attention auto
run fsdp2-llama-1.1b-s8192-mb1-bf16-sdpa-auto 2 150 fsdp $LLAMA11 --seq-len 8192 --micro-batch 1 --fsdp-mp bf16 --fsdp-reduce-dtype fp32 --attention auto
run tp2-gpt-1.3b-s8192-mb1-sdpa-auto 2 120 tp $GPT13 --seq-len 8192 --micro-batch 1 --attention auto

python3 - "$combined" "$rundir" "${names[@]}" <<'PY'
import glob, json, os, sys
out, rundir, names = sys.argv[1], sys.argv[2], sys.argv[3:]
runs, failed = [], []
for name in names:
    path = os.path.join(rundir, name + ".json")
    if not os.path.exists(path):
        ranks = sorted(glob.glob(path + ".rank*"))
        path = ranks[0] if ranks else None
    if path:
        with open(path) as f:
            d = json.load(f)
    else:
        skipped = os.path.exists(os.path.join(rundir, name + ".skipped"))
        d = {"format": "clustersim-measured-run/1", "name": name,
             "error": {"type": "skipped" if skipped else "no-document",
                       "message": "not started: the batch's deadline had passed" if skipped else
                       "the run left no document (killed by its timeout, or crashed); see the log"}}
    (failed if "error" in d else runs).append(d)
doc = {"format": "clustersim-measured-runs/1", "source": "calibration/training/run_parallel.sh",
       "runs": runs, "failed": [{"name": d.get("name"), "error": d.get("error"),
                                 "scenario": d.get("scenario")} for d in failed]}
with open(out, "w") as f:
    json.dump(doc, f, indent=1)
    f.write("\n")
ms = lambda v: "%9.2f" % (v * 1e3) if v is not None else "        -"
print("\n%-34s %-19s %2s %2s %2s %2s %9s %9s %9s %7s %8s %8s %9s %7s" % (
    "name", "framework", "dp", "tp", "pp", "M", "step_ms", "fwd_ms", "bwd_ms", "opt_ms", "alloc_GB", "resv_GB",
    "tok/s", "TFLOP/s"))
for d in runs:
    m, pl, tr = d["measured"], d["scenario"]["plan"], d["scenario"]["training"]
    print("%-34s %-19s %2d %2d %2d %2d %s %s %s %7.2f %8.2f %8.2f %9.0f %7.1f" % (
        d["name"], tr.get("framework", "?"), pl["dp"], pl["tp"], pl["pp"], pl.get("micro_batches", 1),
        ms(m["step_time_s"]), ms(m.get("forward_time_s")), ms(m.get("backward_time_s")),
        m["optimizer_time_s"] * 1e3, m["peak_memory_bytes"] / 2**30, m["peak_reserved_bytes"] / 2**30,
        m["tokens_per_s"], m["model_tflops_per_s"]))
for d in failed:
    print("FAILED %s: %s" % (d.get("name"), (d.get("error") or {}).get("message", "")[:300].replace("\n", " ")))
print("wrote %s (%d runs, %d failed)" % (out, len(runs), len(failed)))
PY
(( failed == 0 ))