#!/usr/bin/env bash
# Single-GPU training steps with SDPA left to its own choice of attention kernels (on an
# H100 with torch 2.11: cuDNN's) beside the same models with FlashAttention-2 forced, at
# 2,048 and 8,192 tokens: the end-to-end check of the cuDNN attention curve
# (calibration/README.md, "Fused attention"). One process per run, combined into one
# clustersim-measured-runs/1 file.
#
# usage: calibration/training/run_attention_kernels.sh COMBINED.json [PER_RUN_DIR]
set -u -o pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
combined="${1:?usage: run_attention_kernels.sh COMBINED.json [PER_RUN_DIR]}"
rundir="${2:-$(mktemp -d /tmp/clustersim-attn.XXXXXX)}"
mkdir -p "$rundir"
export PYTHONUNBUFFERED=1
names=()
run() {
  local name="$1"
  shift
  names+=("$name")
  echo "=== $name: $*"
  local t0=$SECONDS
  python3 "$here/measure_train.py" --name "$name" --out "$rundir/$name.json" --warmup 10 --steps 20 \
      --precision amp-bf16 --optimizer adam "$@" || echo "!!! $name failed"
  echo "    ($((SECONDS - t0)) s)"
}
gpt13=(--family gpt --hidden 2048 --layers 24 --heads 16)
llama11=(--family llama --hidden 2048 --layers 22 --heads 32 --kv-heads 4 --ffn-hidden 5632)
run gpt-1.3b-s2048-mb4-sdpa-auto   "${gpt13[@]}" --seq-len 2048 --micro-batch 4 --attention auto
run llama-1.1b-s2048-mb4-sdpa-auto "${llama11[@]}" --seq-len 2048 --micro-batch 4 --attention auto
run gpt-1.3b-s8192-mb1             "${gpt13[@]}" --seq-len 8192 --micro-batch 1 --attention flash
run gpt-1.3b-s8192-mb1-sdpa-auto   "${gpt13[@]}" --seq-len 8192 --micro-batch 1 --attention auto
run llama-1.1b-s8192-mb1           "${llama11[@]}" --seq-len 8192 --micro-batch 1 --attention flash
run llama-1.1b-s8192-mb1-sdpa-auto "${llama11[@]}" --seq-len 8192 --micro-batch 1 --attention auto
files=()
for n in "${names[@]}"; do [[ -f "$rundir/$n.json" ]] && files+=("$rundir/$n.json"); done
python3 - "$combined" "${files[@]}" <<'PY'
import json, sys
runs, failed = [], []
for f in sys.argv[2:]:
    d = json.load(open(f))
    (failed if "error" in d else runs).append(d)
json.dump({"format": "clustersim-measured-runs/1", "source": "calibration/training/run_attention_kernels.sh",
           "runs": runs, "failed": failed}, open(sys.argv[1], "w"), indent=1)
print("combined %d runs (%d failed) into %s" % (len(runs), len(failed), sys.argv[1]))
PY
