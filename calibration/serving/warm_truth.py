#!/usr/bin/env python3
"""Assembles the warm ground truth of the engine's Poisson traces (calibration/serving/README.md, "Warm ground truth").

Each process of `measure_engine.py --replay COMMITTED --passes K --replay-labels ...` ran the engine's warm-up, single
and probe runs (the inputs of its own host fit), then replayed some of the committed traces K times, pass after pass.
The first pass meets every new attention shape (cuDNN's runtime-compiled kernels are built then); later passes run
with them built.

  warm_truth.py OUT_DIR COMMITTED_ENGINE_JSON PROCESS_DIR...
  warm_truth.py --refit OUT_DIR COMMITTED_ENGINE_JSON   (every process's host fit again, from its iteration log)

A process directory holds serving-engine.json, serving-engine-iterations.json and the process's log (NAME.log, or
../NAME.log), NAME being the directory's own name (g0, s3, t0, u1: a lower-case letter, then letters or digits); it
names every file of that process in OUT_DIR. Where serving-engine.json did not come back from the device (the call
returned at most 8 files), the run summaries are read from the log's lines (milliseconds, three decimals of seconds)
and the per-request records are absent. Writes to OUT_DIR, per process NAME: NAME-iterations.json.gz, NAME-host.json
(fit_engine_host.py then engine_attention_path.py on that process's own iterations), NAME.log, NAME-engine.json.gz
when it came back; and warm-truth.json: per process and replayed trace, the engine settings, the model, the host
file, and each pass's TTFT and end-to-end p50/p90 (seconds), with its place among the process's replayed runs of
that model ("order", from 0).

Appending: where OUT_DIR/warm-truth.json exists, the listed processes are added after those it holds, which are
left as they are (byte for byte; their source directories are not needed again). Every directory is checked before
anything is written, and all problems are reported: a name already in the index or given twice, a file of that name
already in OUT_DIR, a missing log or iteration log, an iteration log without the single0-2 and probe runs of each
model (the inputs of the host fit), a replayed run whose trace is not the committed one of its (model, label) or
whose request count differs from it, a process with no replayed trace. Standard library only.
"""
import gzip
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
LINE = re.compile(r"^(\S+)\s+(rate\d+)-pass(\d+)\s+n=(\d+)\s+done=(\d+)\s+wall\s+([\d.]+) s\s+TTFT p50/p90 ([\d.]+)/([\d.]+) s"
                  r"\s+E2E ([\d.]+)/([\d.]+) s")


def gz_copy(src, dst):
    """A gzip copy without a time stamp, so that the same input gives the same bytes."""
    with open(src, "rb") as f, open(dst, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0, filename="") as z:
        z.write(f.read())


NAME = re.compile(r"^[a-z][a-z0-9]*$")
ENGINE_KEYS = ("block_size", "num_blocks", "max_batch_tokens", "max_requests_per_batch", "safety_margin")
FIT_RUNS = ("single0", "single1", "single2", "probe")  # what fit_engine_host.py reads, per model


def dump(doc):
    return json.dumps(doc, indent=1, sort_keys=True) + "\n"


def read_process(d, traces, problems):
    """The index entry of one process directory, from its files alone; problems are appended, nothing is written."""
    g = os.path.basename(os.path.normpath(d))
    bad = lambda what: problems.append("%s: %s" % (d, what))
    logs = [p for p in (os.path.join(d, g + ".log"), os.path.join(d, "..", g + ".log")) if os.path.exists(p)]
    iterations = os.path.join(d, "serving-engine-iterations.json")
    engine_json = os.path.join(d, "serving-engine.json")
    if not logs:
        bad("no console log %s.log here or in the parent directory" % g)
    if not os.path.exists(iterations):
        bad("no serving-engine-iterations.json (the host fit needs the process's iteration log)")
    else:
        runs = json.load(open(iterations))["runs"]
        for model in sorted({r["model"] for r in runs}):
            have = {r["label"] for r in runs if r["model"] == model}
            missing = [k for k in FIT_RUNS if k not in have]
            if missing:
                bad("serving-engine-iterations.json: /runs: model %s has no %s run (fit_engine_host.py needs %s)" % (
                    model, ", ".join(missing), ", ".join(FIT_RUNS)))
    proc = {"process": g, "host_file": g + "-host.json", "log": g + ".log", "engines": {}, "runs": []}
    order = {}

    def add_run(model, label, k, n, source, ttft, e2e, where):
        key = (model, label)
        if key not in traces:
            bad("%s: replay_of %r of %s is not a committed Poisson trace (committed: %s)" % (
                where, label, model, ", ".join("%s %s" % t for t in sorted(traces))))
            return
        trace = traces[key]
        if n != trace["requests"]:
            bad("%s: %s %s has %d requests, the committed trace %s has %d" % (where, model, label, n, trace["file"],
                                                                                trace["requests"]))
        order[model] = order.get(model, -1) + 1
        proc["runs"].append({"model": model, "replay_of": label, "pass": k, "order": order[model],
                             "trace_file": trace["file"], "from": source, "ttft_s": ttft, "e2e_s": e2e})

    if os.path.exists(engine_json):
        doc = json.load(open(engine_json))
        proc["engine_file"] = g + "-engine.json.gz"
        proc["provenance"] = {k: doc["provenance"].get(k) for k in (
            "command", "date_utc", "finished_utc", "host", "gpu_name", "nvidia_smi", "torch", "transformers",
            "cudnn", "cpu", "cpu_count", "environment")}
        for e in doc["engines"]:
            proc["engines"][e["model"]] = {k: e[k] for k in ENGINE_KEYS}
        for i, r in enumerate(doc["runs"]):
            if "replay_of" not in r:
                continue
            where = "serving-engine.json: /runs/%d" % i
            if r["trace"]["file"] != traces.get((r["model"], r["replay_of"]), {}).get("file", r["trace"]["file"]):
                bad("%s/trace/file: %r, the committed trace of %s %s is %r" % (
                    where, r["trace"]["file"], r["model"], r["replay_of"], traces[(r["model"], r["replay_of"])]["file"]))
            s = r["summary"]
            add_run(r["model"], r["replay_of"], r["pass"], len(r["requests"]), "requests",
                    [s["ttft_s"]["p50"], s["ttft_s"]["p90"]], [s["e2e_s"]["p50"], s["e2e_s"]["p90"]], where)
    elif logs:
        proc["provenance"] = {"note": "serving-engine.json of this process did not come back from the device "
                                      "(at most 8 files a call); summaries from its log"}
        model = None
        for i, ln in enumerate(open(logs[0]).read().splitlines()):
            if ln.startswith("model "):
                model = ln.split()[1].rstrip(":")
            if ln.startswith("engine: "):
                e = json.loads(ln[len("engine: "):])
                proc["engines"][model] = {k: e[k] for k in ENGINE_KEYS}
            m = LINE.match(ln)
            if m:
                add_run(m.group(1), m.group(2), int(m.group(3)), int(m.group(4)), "log",
                        [float(m.group(7)), float(m.group(8))], [float(m.group(9)), float(m.group(10))],
                        "%s line %d" % (g + ".log", i + 1))
    for r in proc["runs"]:
        if r["model"] not in proc["engines"]:
            bad("no engine settings of %s (the replay needs its num_blocks and budget)" % r["model"])
            break
    if not proc["runs"]:
        bad("no replayed trace (no run with replay_of in serving-engine.json, no RUN-passK line in the log)")
    return proc, (logs[0] if logs else None), iterations, (engine_json if "engine_file" in proc else None)


def fit_host(out, committed_path, g, iterations):
    """NAME-host.json: fit_engine_host.py then engine_attention_path.py on the process's own iterations."""
    host = os.path.join(out, g + "-host.json")
    subprocess.run([sys.executable, os.path.join(HERE, "fit_engine_host.py"), iterations, host], check=True)
    subprocess.run([sys.executable, os.path.join(HERE, "engine_attention_path.py"), host,
                    os.path.dirname(committed_path)], check=True, stdout=subprocess.DEVNULL)
    fitted = json.load(open(host))
    fitted["source"] = g + "-iterations.json.gz (this folder; the process's own single and probe runs)"
    with open(host, "w") as f:
        f.write(dump(fitted))


def write_process(out, committed_path, proc, log, iterations, engine_json):
    g = proc["process"]
    shutil.copy(log, os.path.join(out, g + ".log"))
    gz_copy(iterations, os.path.join(out, g + "-iterations.json.gz"))
    fit_host(out, committed_path, g, iterations)
    if engine_json:
        gz_copy(engine_json, os.path.join(out, g + "-engine.json.gz"))


def refit(out, committed_path):
    """--refit: every process's host fit again from its committed iteration log (after fit_engine_host.py changed);
    the index and the measured data are left as they are."""
    index = json.load(open(os.path.join(out, "warm-truth.json")))
    with tempfile.TemporaryDirectory() as tmp:
        for p in index["processes"]:
            g = p["process"]
            iterations = os.path.join(tmp, g + "-iterations.json")
            with gzip.open(os.path.join(out, g + "-iterations.json.gz"), "rb") as src, open(iterations, "wb") as dst:
                shutil.copyfileobj(src, dst)
            fit_host(out, committed_path, g, iterations)
            print("%s: host refitted" % g)


def main():
    if len(sys.argv) == 4 and sys.argv[1] == "--refit":
        refit(sys.argv[2], sys.argv[3])
        return
    if len(sys.argv) < 4:
        sys.exit("usage: warm_truth.py OUT_DIR COMMITTED_ENGINE_JSON PROCESS_DIR... (see the file's docstring)")
    out, committed_path, dirs = sys.argv[1], sys.argv[2], sys.argv[3:]
    committed = json.load(open(committed_path))
    traces = {(r["model"], r["label"]): {"file": r["trace"]["file"], "requests": len(r["requests"])}
              for r in committed["runs"] if r.get("kind") == "poisson" and "trace" in r}
    index_path = os.path.join(out, "warm-truth.json")
    replays = os.path.relpath(committed_path, out)
    problems = []
    if os.path.exists(index_path):
        old = open(index_path).read()
        index = json.loads(old)
        if dump(index) != old:
            problems.append("%s: does not read back to the same bytes (edited by hand?); appending would rewrite it"
                            % index_path)
        if os.path.abspath(os.path.join(out, index.get("replays", ""))) != os.path.abspath(committed_path):
            problems.append("%s: /replays: %r, but the committed engine JSON given is %r" % (
                index_path, index.get("replays"), replays))
    else:
        index = {"format": "clustersim-serving-warm-truth/1", "source": "calibration/serving/warm_truth.py",
                 "replays": replays, "processes": []}
    known = {p["process"] for p in index["processes"]}
    given = set()
    new = []
    for d in dirs:
        g = os.path.basename(os.path.normpath(d))
        if not os.path.isdir(d):
            problems.append("%s: not a directory" % d)
            continue
        if not NAME.match(g):
            problems.append("%s: process name %r: expected a lower-case letter then letters or digits (t0, u1)" % (d, g))
            continue
        if g in given:
            problems.append("%s: process name %s given twice" % (d, g))
            continue
        given.add(g)
        if g in known:
            problems.append("%s: process %s is already in %s (a new measurement needs a new name; its entry and "
                            "files are kept as they are)" % (d, g, index_path))
            continue
        clash = sorted(f for f in (os.listdir(out) if os.path.isdir(out) else []) if f.startswith(g + "-")
                       or f == g + ".log")
        if clash:
            problems.append("%s: %s already holds %s" % (d, out, ", ".join(clash)))
        new.append(read_process(d, traces, problems))
    if problems:
        sys.stderr.write("".join("warm_truth.py: %s\n" % p for p in problems))
        sys.exit(1)
    os.makedirs(out, exist_ok=True)
    for proc, log, iterations, engine_json in new:
        write_process(out, committed_path, proc, log, iterations, engine_json)
        index["processes"].append(proc)
        print("%s: %s" % (proc["process"], ", ".join("%s %s pass %d (order %d)" % (
            r["model"], r["replay_of"], r["pass"], r["order"]) for r in proc["runs"])))
    with open(index_path, "w") as f:
        f.write(dump(index))


if __name__ == "__main__":
    main()
