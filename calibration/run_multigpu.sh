#!/usr/bin/env bash
# The multi-GPU calibration batch (issue 12) on one host with 2-4 GPUs, as run on the lent
# nvidia-h100-x4 machine. Writes at most 8 files into OUTDIR:
#   nccl-2gpu.json nccl-4gpu.json   clustersim-nccl-bench, 1 KiB..4 GiB by 2x, gated timing
#   nccl-extra.json                 all-reduce with NCCL_ALGO=Ring and =Tree (4 GPUs), and
#                                   ungated runs up to 1 MiB (2 and 4 GPUs), in one file
#   nccl-debug.txt                  NCCL_DEBUG=INFO (INIT,TUNING) lines of a --quick run, deduplicated
#   overlap.json                    clustersim-overlap-bench on 2 and 4 GPUs
#   host.json                       measure_host.py on 2 GPUs (torchrun)
#   runs.json                       run_parallel.sh (per-run timeouts; TRAIN_END_S = seconds after this
#                                   script starts by which training must end, passed on as HARD_S)
#   (the log is the caller's: tee it into OUTDIR/log.txt)
#   nccl-tree.json                  (phase ncclalgo) all-reduce with NCCL_ALGO="allreduce:tree", 2 and 4 GPUs
# usage: calibration/run_multigpu.sh OUTDIR [PHASES]   PHASES: any of "build nccl ncclalgo overlap host train"
#        (default: build nccl overlap host train)
set -u -o pipefail
OUTDIR="$1"
PHASES="${2:-build nccl overlap host train}"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
BUILD="${BUILD:-/tmp/build-nccl}"
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
mkdir -p "$OUTDIR"
T0=$SECONDS
stamp() { echo "--- [$((SECONDS - T0)) s] $*"; }
has() { [[ " $PHASES " == *" $1 "* ]]; }

stamp "machine"
nvidia-smi -L
nvidia-smi --query-gpu=index,name,pci.bus_id,driver_version,memory.total,clocks.max.sm,clocks.max.mem,power.limit,temperature.gpu --format=csv
nvidia-smi topo -m
nvidia-smi nvlink --status -i 0 | head -24
nvidia-smi -q -i 0 | grep -E -A0 "Product Name|Product Architecture|Driver Version|CUDA Version|VBIOS|Bus Id|Max Link|Current Link|Link Width|Persistence|MIG Mode|Current  *: |Fabric|State  *:" | head -40
python3 -c "import torch, platform; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'nccl', torch.cuda.nccl.version(), 'gpus', torch.cuda.device_count(), 'python', platform.python_version())"
nvcc --version | tail -2
nproc

if has build; then
  stamp "build"
  cmake -S "$root/calibration/nccl" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null && cmake --build "$BUILD" -j 16 | tail -2
  ldd "$BUILD/clustersim-nccl-bench" | grep -i nccl
fi
NB="$BUILD/clustersim-nccl-bench"
ngpu=$(nvidia-smi -L | grep -c '^GPU')
four() { (( ngpu >= 4 )); }   # the 4-GPU steps run only where 4 GPUs are present
OB="$BUILD/clustersim-overlap-bench"

if has nccl; then
  stamp "nccl 2 GPUs"
  CUDA_VISIBLE_DEVICES=0,1 timeout -k 5 150 "$NB" --gpus 2 --out "$OUTDIR/nccl-2gpu.json"; echo "rc=$?"
  stamp "nccl 4 GPUs"
  four && { timeout -k 5 150 "$NB" --gpus 4 --out "$OUTDIR/nccl-4gpu.json"; echo "rc=$?"; }
  stamp "nccl extra: Ring / Tree all-reduce on 4 GPUs, ungated small sizes"
  four && { NCCL_ALGO=Ring timeout -k 5 60 "$NB" --gpus 4 --ops all_reduce --out /tmp/nccl-ring4.json; echo "rc=$?"; }
  four && { NCCL_ALGO=Tree timeout -k 5 60 "$NB" --gpus 4 --ops all_reduce --out /tmp/nccl-tree4.json; echo "rc=$?"; }
  CUDA_VISIBLE_DEVICES=0,1 timeout -k 5 40 "$NB" --gpus 2 --no-gate --max-bytes 1048576 --out /tmp/nccl-nogate2.json; echo "rc=$?"
  four && { timeout -k 5 40 "$NB" --gpus 4 --no-gate --max-bytes 1048576 --out /tmp/nccl-nogate4.json; echo "rc=$?"; }
  python3 - "$OUTDIR/nccl-extra.json" /tmp/nccl-ring4.json /tmp/nccl-tree4.json /tmp/nccl-nogate2.json /tmp/nccl-nogate4.json <<'PY'
import json, os, sys
docs = []
for p in sys.argv[2:]:
    if os.path.exists(p):
        with open(p) as f:
            docs.append({"file": os.path.basename(p), "document": json.load(f)})
with open(sys.argv[1], "w") as f:
    json.dump({"format": "clustersim-nccl-bench-set/1", "documents": docs}, f, indent=1)
print("nccl-extra: %d documents" % len(docs))
PY
  stamp "nccl debug (INIT,TUNING) on a --quick run"
  rm -f /tmp/nccldbg.*
  for n in $(four && echo 2 4 || echo 2); do
    NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,TUNING NCCL_DEBUG_FILE=/tmp/nccldbg.$n.%p timeout -k 5 60 \
      "$NB" --gpus $n --quick --ops all_reduce,all_gather,reduce_scatter,all_to_all,broadcast,send_recv --out /tmp/nccl-dbg$n.json >/dev/null; echo "rc=$?"
  done
  {
    for n in 2 4; do
      echo "===== $n GPUs: INIT lines in order (first 120) ====="
      cat /tmp/nccldbg.$n.* 2>/dev/null | sed -E 's/^[^ ]+ //' | grep -v -E "TUNING|Bytes ->" | head -120
      echo "===== $n GPUs: channel, algorithm and protocol lines (deduplicated, with counts; first 150) ====="
      cat /tmp/nccldbg.$n.* 2>/dev/null | sed -E 's/^[^ ]+ //; s/0x[0-9a-f]+/0x/g; s/opCount [0-9a-f]+/opCount/g' \
        | grep -i -E "channel|algo|proto|tree|ring|nvls|p2p|thread|tuning|bytes" | sort | uniq -c | sort -rn | head -150
    done
  } > "$OUTDIR/nccl-debug.txt"
  wc -l "$OUTDIR/nccl-debug.txt"
  grep -i -E "channels|coll channels|nChannels" "$OUTDIR/nccl-debug.txt" | head -8
fi

if has ncclalgo; then
  # NCCL_ALGO=Tree alone fails the benchmark's all-gather check ("invalid usage": all-gather has no
  # tree), so only the all-reduce is forced to tree (NCCL's per-collective syntax).
  stamp "nccl all-reduce forced to tree, 2 and 4 GPUs"
  CUDA_VISIBLE_DEVICES=0,1 NCCL_ALGO="allreduce:tree" timeout -k 5 60 "$NB" --gpus 2 --ops all_reduce --out /tmp/nccl-tree2.json; echo "rc=$?"
  four && { NCCL_ALGO="allreduce:tree" timeout -k 5 60 "$NB" --gpus 4 --ops all_reduce --out /tmp/nccl-tree4.json; echo "rc=$?"; }
  python3 - "$OUTDIR/nccl-tree.json" /tmp/nccl-tree2.json /tmp/nccl-tree4.json <<'PY'
import json, os, sys
docs = []
for p in sys.argv[2:]:
    if os.path.exists(p):
        with open(p) as f:
            docs.append({"file": os.path.basename(p), "document": json.load(f)})
with open(sys.argv[1], "w") as f:
    json.dump({"format": "clustersim-nccl-bench-set/1", "documents": docs}, f, indent=1)
print("nccl-tree: %d documents" % len(docs))
PY
fi

if has overlap; then
  stamp "overlap 2 and 4 GPUs"
  timeout -k 5 240 "$OB" --gpus "$(four && echo 2,4 || echo 2)" --out "$OUTDIR/overlap.json"; echo "rc=$?"
fi

if has host; then
  stamp "host dispatch (torchrun, 2 GPUs)"
  CUDA_VISIBLE_DEVICES=0,1 timeout -k 10 240 torchrun --standalone --nproc-per-node 2 \
    "$root/calibration/training/measure_host.py" --out "$OUTDIR/host.json"; echo "rc=$?"
fi

if has train; then
  stamp "training runs"
  # TRAIN_END_S: seconds after this script's start by which the training runs must have ended.
  if [[ -n "${TRAIN_END_S:-}" ]]; then export HARD_S=$((TRAIN_END_S - (SECONDS - T0))); echo "HARD_S=$HARD_S"; fi
  bash "$root/calibration/training/run_parallel.sh" "$OUTDIR/runs.json" /tmp/par; echo "rc=$?"
fi
stamp "done"
nvidia-smi --query-gpu=index,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv
