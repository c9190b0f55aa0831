// The simulator's entry points (no SimGrid types here, so the CLI and the tests see a
// plain API). SimGrid supports one engine per process, so every simulation runs in a
// forked child process with a fresh engine and sends its typed result back (serialised
// by the Prediction's to_json / prediction_from_json); the parent never initialises
// SimGrid.
#pragma once
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "costmodel/cluster.hpp"
#include "costmodel/collectives.hpp"
#include "scenarios/scenario.hpp"
#include "sim/network_model.hpp"
#include "sim/replay_plan.hpp"

namespace clustersim::sim {

// Micro-batches per data-parallel replica the replay accepts (each is thousands of events).
inline constexpr std::int64_t kMaxSimulatedMicroBatches = 100000;

struct SimulateOptions {
  std::string trace_file;     // Chrome/Perfetto trace; empty: none
  std::string platform_file;  // SimGrid platform to use instead of the one built from the scenario
  // > 0: the result carries a "timeline" of the compute and communication slices of the
  // first `timeline_gpus` GPUs (for `db plot timeline`); 0: none (it grows with the run).
  std::int64_t timeline_gpus = 0;
  // Replay one representative per class of identical data-parallel replicas where the
  // platform provably treats them alike (sim/symmetry.hpp); the result is the full
  // replay's. Off, or with a trace or timeline (which show every GPU's own slices), every
  // replica is replayed.
  bool replica_symmetry = true;
  NetworkModelConfig network;
  // Called in this process while the replay runs (in its child), about every
  // `progress_interval_s` of wall time: the simulated time reached so far and the
  // iteration time the estimator predicts (the replay's total is known only at its
  // end). Empty: the child reports nothing and pays nothing.
  std::function<void(double simulated_s, double expected_s)> progress;
  double progress_interval_s = 0.1;
};

// One training iteration of a scenario's plan: the Prediction (method "simulated"; the
// same fields as the estimator's) plus the simulator's own statistics.
struct SimulationResult {
  Prediction prediction;
  // Per-GPU compute/communication/idle, busiest links, events, wall time, bubble
  // fraction, network model, platform, the estimator's iteration time.
  nlohmann::json simulator;
  nlohmann::json timeline;  // null unless SimulateOptions::timeline_gpus > 0
};
// Throws InputError for scenarios the simulator cannot replay.
SimulationResult simulate(const Scenario& s, const SimulateOptions& o = {});
// The prediction's keys (as `run --json` prints them) plus "simulator" (and "timeline").
nlohmann::json to_json(const SimulationResult& r);

// A replay plan on a cluster (tests build synthetic plans). Returns the same
// "simulator" statistics plus iteration_time_s.
nlohmann::json simulate_plan(const ReplayPlan& plan, const ClusterModel& cluster, const SimulateOptions& o = {});

// Collectives started together, each on its own actor: returns each one's simulated
// duration in seconds. `algorithm` is a table name or "auto".
struct CollectiveProbe {
  std::string algorithm = "auto";
  Collective kind = Collective::all_reduce;
  Bytes bytes = 0;
  std::vector<std::vector<std::int64_t>> groups;
};
std::vector<double> time_collectives(const ClusterModel& cluster, const std::vector<CollectiveProbe>& together,
                                     const NetworkModelConfig& network = {});

// Algorithm names and descriptions from the name table, in name order.
std::vector<std::pair<std::string, std::string>> list_collectives();

}  // namespace clustersim::sim
