// The serving simulator: a discrete-event loop in plain C++ over the replicas of a
// serving scenario. Requests arrive (trace or generator), a router sends each to a
// replica, each replica's scheduler (strategies/serving_scheduler) forms its next
// iteration whenever the previous one ends, and the batch-time model
// (strategies/serving_batch) says how long it takes. Under disaggregation a request
// prefills on a prefill instance, then its KV cache moves to a decode instance before it
// decodes there: the loop then runs as one SimGrid actor on the cluster's platform
// (sim/platform, as the training replay's) and each transfer is a flow from every prefill
// GPU to every decode GPU that holds the same layers and kv heads, sharing NICs and links
// with the transfers running at the same time; the controller waits for the next local
// event or the end of a transfer, whichever comes first. Replicas whose pipeline stages
// sit on different nodes run their iterations on the platform as well, each
// stage-to-stage activation send a flow per tp rank through the training replay's
// point-to-point collective. That runs in a forked child (sim/child.hpp: one SimGrid
// engine per process). Otherwise nothing crosses replicas or nodes and the loop runs
// alone.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "costmodel/cluster.hpp"
#include "scenarios/serving.hpp"
#include "strategies/serving_scheduler.hpp"

namespace clustersim::sim {

struct ServeRecord {
  std::int64_t id = 0;
  Seconds arrival = 0, first_token = 0, last_token = 0;
  std::int64_t prompt = 0, output = 0;
  Seconds max_tbt = 0;  // longest gap between two of its tokens
  std::int64_t replica = -1, prefill_replica = -1;
  Seconds kv_transfer = 0;  // disaggregation: KV-cache transfer time
  std::int64_t tokens = 0;  // output tokens delivered (== output once it finished)
  Seconds ttft() const { return first_token - arrival; }
  Seconds e2e() const { return last_token - arrival; }
  // (E2E - TTFT) / (D - 1); 0 for a single-token output.
  Seconds tpot() const { return output > 1 ? (last_token - first_token) / double(output - 1) : 0.0; }
};

struct Percentiles {
  double mean = 0, p50 = 0, p90 = 0, p99 = 0;
  // The distribution at every percent: quantiles[k] is the k/100 quantile (k = 0..100, the
  // same rank rule as p50/p90/p99; [0] the smallest value), for `db plot latency-cdf`.
  // Empty where only binned values exist (tbt) or nothing was measured.
  std::vector<double> quantiles;
};

struct ServeIteration {
  std::int32_t replica = 0;  // pool order: prefill instances first under disaggregation
  Seconds start = 0, duration = 0;
  std::int32_t decodes = 0, prefills = 0;
  std::int64_t prefill_tokens = 0;
  double kv_used = 0;  // share of the replica's blocks in use when it started
};

struct ServeSummary {
  std::int64_t requests = 0, measured = 0;
  Seconds makespan = 0;  // last token of any request
  Percentiles ttft, tpot, e2e, tbt;  // seconds; tbt over every token gap (1% bins)
  double throughput_rps = 0, output_tokens_per_s = 0;  // measured requests over their window
  double slo_attainment = 0;  // share of measured requests meeting every SLO target given
  double goodput_rps = 0;     // measured requests meeting the SLOs per second of the window
  std::int64_t preemptions = 0, swapped_blocks = 0, iterations = 0;
  double mean_batch_tokens = 0;
  std::int64_t kv_blocks = 0, kv_block_size = 0;  // per replica (decode pool)
  double kv_peak_use = 0, kv_mean_use = 0;        // share of blocks, time-weighted mean over replicas
  std::int64_t prefill_kv_blocks = 0;             // per prefill instance (disaggregation)
  Seconds kv_transfer_mean = 0;
  double wall_s = 0;  // simulator wall time
};

struct ServeResult {
  ServeSummary summary;
  std::vector<ServeRecord> records;        // by request id
  std::vector<ServeIteration> iterations;  // only with keep_iterations
};

struct ServeOptions {
  bool keep_iterations = false;
};

// Throws InputError (file = the scenario's source) when the replicas cannot hold the
// longest request's KV cache or a request cannot ever be scheduled.
ServeResult simulate_serving(const ServingScenario& s, const ClusterModel& cluster, const ServeOptions& opt = {});

// The request-level figures of `sm` (requests, measured, makespan, TTFT/TPOT/E2E
// percentiles, throughput, SLO attainment, goodput, mean KV transfer) from per-request
// records, leaving out requests that arrived before `warmup`: the one rule for a
// simulated run and for a measured one (runner/serving_import), so that both sides of a
// comparison are the same statistics.
void summarize_requests(const std::vector<ServeRecord>& records, Seconds warmup, const SloSpec& slo, ServeSummary& sm);
// Percentiles of token gaps as a simulated run's tbt is computed (1% logarithmic bins).
Percentiles token_gap_percentiles(const std::vector<double>& gaps);

nlohmann::json to_json(const ServeSummary& s);
// Per-request CSV (header + one line per request, by id).
std::string requests_csv(const ServeResult& r);
// Chrome/Perfetto trace: one slice per iteration on its replica's track, KV use counters.
nlohmann::json perfetto_trace(const ServeResult& r);

}  // namespace clustersim::sim
