#!/usr/bin/env python3
"""Assembles the warm ground truth of the engine's Poisson traces (calibration/serving/README.md, "Warm ground truth").

Each process of `measure_engine.py --replay COMMITTED --passes 3` ran the engine's warm-up, single and probe runs (the
inputs of its own host fit), then replayed some of the committed traces three times, pass after pass. The first pass
meets every new attention shape (cuDNN's runtime-compiled kernels are built then); passes 2 and 3 run with them built.

  warm_truth.py OUT_DIR COMMITTED_ENGINE_JSON PROCESS_DIR...

A process directory holds serving-engine.json, serving-engine-iterations.json and the process's log (gN.log, or
../gN.log). Where serving-engine.json did not come back from the device (the call returned at most 8 files), the
run summaries are read from the log's lines (milliseconds, three decimals of seconds) and the per-request records
are absent. Writes to OUT_DIR, per process gN: gN-iterations.json.gz, gN-host.json (fit_engine_host.py then
engine_attention_path.py on that process's own iterations), gN.log, gN-engine.json.gz when it came back; and
warm-truth.json: per process and replayed trace, the engine settings, the model, the host file, and each pass's
TTFT and end-to-end p50/p90 (seconds), with its place among the process's replayed runs of that model ("order",
from 0). Standard library only.
"""
import gzip
import json
import os
import re
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
LINE = re.compile(r"^(\S+)\s+(rate\d+)-pass(\d+)\s+n=(\d+)\s+done=(\d+)\s+wall\s+([\d.]+) s\s+TTFT p50/p90 ([\d.]+)/([\d.]+) s"
                  r"\s+E2E ([\d.]+)/([\d.]+) s")


def gz_copy(src, dst):
    """A gzip copy without a time stamp, so that the same input gives the same bytes."""
    with open(src, "rb") as f, open(dst, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0, filename="") as z:
        z.write(f.read())


def main():
    out, committed_path, dirs = sys.argv[1], sys.argv[2], sys.argv[3:]
    os.makedirs(out, exist_ok=True)
    committed = json.load(open(committed_path))
    traces = {(r["model"], r["label"]): r["trace"] for r in committed["runs"]
              if r.get("kind") == "poisson" and "trace" in r}
    index = {"format": "clustersim-serving-warm-truth/1", "source": "calibration/serving/warm_truth.py",
             "replays": os.path.relpath(committed_path, out), "processes": []}
    for d in dirs:
        g = os.path.basename(os.path.normpath(d))
        log = next(p for p in (os.path.join(d, g + ".log"), os.path.join(d, "..", g + ".log")) if os.path.exists(p))
        shutil.copy(log, os.path.join(out, g + ".log"))
        iterations = os.path.join(d, "serving-engine-iterations.json")
        gz_copy(iterations, os.path.join(out, g + "-iterations.json.gz"))
        host = os.path.join(out, g + "-host.json")
        subprocess.run([sys.executable, os.path.join(HERE, "fit_engine_host.py"), iterations, host], check=True)
        subprocess.run([sys.executable, os.path.join(HERE, "engine_attention_path.py"), host,
                        os.path.dirname(committed_path)], check=True, stdout=subprocess.DEVNULL)
        fitted = json.load(open(host))
        fitted["source"] = g + "-iterations.json.gz (this folder; the process's own single and probe runs)"
        with open(host, "w") as f:
            json.dump(fitted, f, indent=1, sort_keys=True)
            f.write("\n")
        engine_json = os.path.join(d, "serving-engine.json")
        lines = open(log).read().splitlines()
        proc = {"process": g, "host_file": g + "-host.json", "log": g + ".log", "engines": {}, "runs": []}
        if os.path.exists(engine_json):
            doc = json.load(open(engine_json))
            gz_copy(engine_json, os.path.join(out, g + "-engine.json.gz"))
            proc["engine_file"] = g + "-engine.json.gz"
            proc["provenance"] = {k: doc["provenance"].get(k) for k in (
                "command", "date_utc", "finished_utc", "host", "gpu_name", "nvidia_smi", "torch", "transformers",
                "cudnn", "cpu", "cpu_count", "environment")}
            for e in doc["engines"]:
                proc["engines"][e["model"]] = {k: e[k] for k in (
                    "block_size", "num_blocks", "max_batch_tokens", "max_requests_per_batch", "safety_margin")}
            order = {}
            for r in doc["runs"]:
                if "replay_of" not in r:
                    continue
                s = r["summary"]
                order[r["model"]] = order.get(r["model"], -1) + 1
                proc["runs"].append({"model": r["model"], "replay_of": r["replay_of"], "pass": r["pass"],
                                     "order": order[r["model"]],
                                     "trace_file": r["trace"]["file"], "from": "requests",
                                     "ttft_s": [s["ttft_s"]["p50"], s["ttft_s"]["p90"]],
                                     "e2e_s": [s["e2e_s"]["p50"], s["e2e_s"]["p90"]]})
        else:
            proc["provenance"] = {"note": "serving-engine.json of this process did not come back from the device "
                                          "(at most 8 files a call); summaries from its log"}
            model = None
            order = {}
            for ln in lines:
                if ln.startswith("model "):
                    model = ln.split()[1].rstrip(":")
                if ln.startswith("engine: "):
                    e = json.loads(ln[len("engine: "):])
                    proc["engines"][model] = {k: e[k] for k in (
                        "block_size", "num_blocks", "max_batch_tokens", "max_requests_per_batch", "safety_margin")}
                m = LINE.match(ln)
                if m:
                    name, label, k = m.group(1), m.group(2), int(m.group(3))
                    order[name] = order.get(name, -1) + 1
                    proc["runs"].append({"model": name, "replay_of": label, "pass": k, "order": order[name],
                                         "trace_file": traces[(name, label)]["file"], "from": "log",
                                         "ttft_s": [float(m.group(7)), float(m.group(8))],
                                         "e2e_s": [float(m.group(9)), float(m.group(10))]})
        index["processes"].append(proc)
    with open(os.path.join(out, "warm-truth.json"), "w") as f:
        json.dump(index, f, indent=1, sort_keys=True)
        f.write("\n")


if __name__ == "__main__":
    main()
