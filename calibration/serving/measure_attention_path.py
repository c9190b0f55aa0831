#!/usr/bin/env python3
"""The per-layer attention path of transformers' paged|sdpa at the engine's real shapes, one GPU.

transformers 5.17, integrations/sdpa_paged.py and generation/continuous_batching/cache.py
(PagedAttentionCache.update), read on the GPU machine: per layer the engine
  1. writes the new tokens' K and V into the paged cache (index_copy_),
  2. gathers K and V of every token the batch attends to (index_select over the read index),
  3. transposes them to [1, kv_heads, kv, head_dim] and expands them to every query head
     (repeat_kv: expand + reshape, a strided copy),
  4. runs torch's scaled_dot_product_attention over the Q packed queries x kv keys with the
     engine's additive bf16 mask: a [..., :Q, :kv] slice of a [1, 1, max_batch_tokens,
     num_slots + max_batch_tokens] buffer (input_outputs.py), i.e. rows num_slots + 8192
     elements apart. PyTorch picks cuDNN's flash fprop for it (one CTA per 64-query tile and
     head, no split over the keys).
This script times 2-4 for 32 query heads and 8 kv heads at head_dim 64 (llama-1b, 5509
blocks of 256 tokens) and 128 (llama-8b, 1501 blocks): SDPA with the strided mask and with
the same mask made contiguous, and the host time of the first call of a new (q, kv) shape
(cuDNN builds a graph per shape) against a repeated one. Median of 5 CUDA-event timings
after 2 warm-ups.

  python3 calibration/serving/measure_attention_path.py   (writes $OUT/attention-path.json)
The committed result: calibration/data/h100-sxm5-80gb/engine-attention-path-2026-11-26.json.
"""
import datetime
import json
import os
import platform
import statistics
import time

import torch
import torch.nn.functional as F

BF = torch.bfloat16
DEV = torch.device("cuda")


def timed(fn, reps=5):
    for _ in range(2):
        fn()
    ts = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        ts.append(a.elapsed_time(b) * 1e-3)
    return statistics.median(ts)


def repeat_kv(x, n_rep=4):  # sdpa_paged.repeat_kv
    _, h, s, e = x.shape
    return x[:, :, None].expand(1, h, n_rep, s, e).reshape(1, h * n_rep, s, e)


def host_call(fn):
    torch.cuda.synchronize()
    t = time.perf_counter()
    fn()
    torch.cuda.synchronize()
    return time.perf_counter() - t


def main():
    res = []
    for hd, slots in ((64, 5509 * 256), (128, 1501 * 256)):
        m_tokens = 8192
        row = slots + m_tokens
        buf = torch.zeros(1, 1, m_tokens, row, dtype=BF, device=DEV)
        cache = torch.randn(slots, 8, hd, dtype=BF, device=DEV)
        for kv in (4096, 16384, 65536, 131072):
            a = torch.arange(kv, device=DEV)
            idx = (a // 256 * 97 % (slots // 256)) * 256 + a % 256  # whole blocks, permuted
            gathered = torch.index_select(cache, 0, idx)
            kt = gathered.transpose(0, 1).unsqueeze(0)
            r = dict(kind="path", hd=hd, kv=kv, gather_s=timed(lambda: torch.index_select(cache, 0, idx)),
                     repeat_kv_s=timed(lambda: repeat_kv(kt).contiguous()),
                     index_copy_s=timed(lambda: cache.index_copy_(0, idx[:64], gathered[:64])))
            res.append(r)
            print(r, flush=True)
            K = repeat_kv(kt).contiguous()
            V = K.clone()
            for q in (16, 64, 128, 256, 512, 964, 2048, 4096, 8192):
                Q = torch.randn(1, 32, q, hd, dtype=BF, device=DEV)
                mask = buf[..., :q, :kv]
                sdpa = lambda m=mask: F.scaled_dot_product_attention(Q, K, V, attn_mask=m)  # noqa: E731
                r = dict(kind="sdpa", hd=hd, q=q, kv=kv, row_stride=row, first_call_s=host_call(sdpa))
                r["strided_s"] = timed(sdpa)
                if q * kv <= 2**30:
                    mc = mask.contiguous()
                    r["contiguous_s"] = timed(lambda: sdpa(mc))
                    del mc
                r["cached_call_s"] = host_call(sdpa)
                res.append(r)
                print(r, flush=True)
        del buf, cache, K, V
        torch.cuda.empty_cache()
    p = torch.cuda.get_device_properties(0)
    env = dict(gpu=p.name, sms=p.multi_processor_count, torch=torch.__version__, cuda=torch.version.cuda,
               cudnn=torch.backends.cudnn.version(), python=platform.python_version(),
               date_utc=datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"))
    with open(os.path.join(os.environ.get("OUT", "."), "attention-path.json"), "w") as f:
        json.dump(dict(format="clustersim-engine-attention-path/1", environment=env, results=res), f, indent=1)


if __name__ == "__main__":
    main()
