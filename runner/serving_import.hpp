// Measured serving runs of a real engine: the clustersim-serving-engine/1 files that
// calibration/serving/measure_engine.py writes (transformers' continuous-batching engine
// under Poisson load, calibration/serving/ENGINE.md). For each run that replays a trace:
// the serving scenario of that engine (engine_scenario, the one builder the ground-truth
// test and `db import-serving` use), the summary of its requests computed by the
// simulator's own rule (sim::summarize_requests), its per-request records and provenance,
// stored as a measured serving run. `db compare --method served` pairs it with the served
// run of the same scenario (compare_serving).
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "results/store.hpp"
#include "runner/measured_import.hpp"
#include "scenarios/serving.hpp"

namespace clustersim::runner {

// The serving scenario of one measured engine on one GPU of profile `gpu`: `model` is an
// entry of the file's /models (a Hugging Face Llama config), `engine` one of /engines (the
// engine's resolved settings: block size, num_blocks, token budget, safety margin), `trace`
// the CSV it replayed. With `host_file` non-empty, the engine's host cost and attention path
// come from that calibration file (clustersim-serving-engine-host/1) under the model's name.
nlohmann::json engine_scenario(const nlohmann::json& model, const nlohmann::json& engine, const std::string& trace,
                               const std::string& host_file, const std::string& gpu = "h100-sxm5-80gb");

struct MeasuredServingRun {
  std::string label;                  // "llama-1b/rate0"
  nlohmann::json scenario_document;   // engine_scenario's document: `clustersim serve` reads it as a file
  ServingScenario scenario;           // parsed (host cost read)
  results::MeasuredServingRecord record;
};

struct ServingImport {
  std::vector<MeasuredServingRun> runs;
  std::vector<std::string> skipped;  // "llama-1b/warmup (warmup): no trace to replay"
};

// Reads one clustersim-serving-engine/1 file; traces are looked up in its folder's
// serving-traces/. Throws InputError naming the file, the JSON path and the bad value of
// every problem found, so a damaged file imports nothing.
ServingImport read_serving_engine_runs(const std::string& file, const std::string& host_file, const std::string& gpu);

// Stores the runs in `db_file` (created when missing) in one transaction; a run imported
// before keeps its id (idempotent on scenario, source, name and date).
std::vector<ImportedRun> store_measured_serving_runs(const std::string& db_file,
                                                     const std::vector<MeasuredServingRun>& runs);

}  // namespace clustersim::runner
