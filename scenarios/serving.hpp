// The serving scenario (`clustersim serve FILE`): model and cluster sections as in a
// training scenario, the engine that runs the model, the replicas and their tp x pp,
// the scheduler and its knobs, the router, the workload and the SLOs. Plain structs in
// SI units; parsing reports every problem with file and JSON path. The schema is
// documented in docs/serving.md.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "scenarios/diagnostics.hpp"
#include "scenarios/scenario.hpp"

namespace clustersim {

// What the software running the model does per iteration, beyond the GPU kernels.
enum class LaunchMode { eager, cuda_graphs };
// How the KV cache is stored: paged blocks written in place (vLLM, transformers'
// continuous batching) or one contiguous tensor per layer that grows by torch.cat
// (transformers' DynamicCache: each step copies the whole cache).
// concat_view: that tensor after DynamicCache.crop() (transformers' assisted generation crops it
// every step): K and V are views of longer tensors, and each update's torch.cat takes the
// generic concatenation path (MemoryKind::concat) over the whole cache.
enum class KvLayout { paged, concat, concat_view };
// Whose kernels the forward runs: transformers' modeling code (separate projections, an fp32
// RMSNorm of eight kernels, rotary and SwiGLU as PyTorch ops: GraphStyle::transformers_inference)
// or fused kernels as vLLM/SGLang and Megatron launch them (fused QKV and gate-up GEMMs, fused
// norms, rotary and SiLU-and-multiply).
enum class EngineKernels { transformers, fused };
// How grouped-query attention reads K and V: natively (each KV head read once) or after
// repeat_kv expands them to every query head (transformers' eager/sdpa path). masked_repeat_kv
// is transformers' sdpa path with torch >= 2.5: SDPA's enable_gqa where the call needs no
// attention mask (decode steps, a prefill with no past), repeat_kv where it does (a prefill
// chunk over a past cache: sdpa_attention_forward's use_gqa_in_sdpa needs a None mask).
enum class GqaMode { native, repeat_kv, masked_repeat_kv };

// How attention runs over a batch: per request (flash/paged kernels: each request's
// queries against its own KV cache), or packed (transformers' continuous batching with
// paged|sdpa: every layer gathers the K and V of every token any scheduled request
// attends to and runs one SDPA over all Q packed tokens x all KV_total gathered tokens
// under a dense block-diagonal mask, ENGINE.md section 6).
enum class AttentionMode { per_request, packed };

// One host phase of an engine iteration as a linear function of the batch (the terms
// the engine's Python code has), seconds.
struct HostTerms {
  Seconds fixed = 0, per_request = 0, per_prefill_token = 0, per_kv_token = 0;
  Seconds at(double requests, double prefill_tokens, double kv_tokens) const {
    return fixed + per_request * requests + per_prefill_token * prefill_tokens + per_kv_token * kv_tokens;
  }
};

// A measured engine's per-iteration host cost, fitted from its iteration log
// (calibration/serving/fit_engine_host.py) and read from that calibration file: the
// iteration is prepare_update + max(launch, GPU) (with the measured attention path, the GPU
// starts after cuDNN's graph build), nothing overlapped (ENGINE.md section 1).
// The measured attention path of transformers' paged|sdpa (ENGINE.md section 6), from the
// same calibration file (calibration/serving/engine_attention_path.py): the masked cuDNN
// SDPA's time over query and key counts at the engine's mask layout, the rate of
// repeat_kv's strided copy, and the host time cuDNN takes to build the SDPA graph of a
// (q, kv) shape it has not seen, during which the GPU has nothing queued.
struct EngineAttentionPath {
  struct Point {
    std::int64_t q = 0;
    double kv = 0;
    Seconds time = 0;
  };
  bool enabled = false;
  std::int64_t heads = 0, head_dim = 0;  // the measured kernel's shape
  // Its work decomposition: one unit = query_rows_per_cta queries of one head, run in waves
  // of resident_ctas (a persistent kernel: one CTA per SM).
  std::int64_t query_rows_per_cta = 128, resident_ctas = 132;
  std::vector<Point> sdpa;  // sorted by q, then kv
  double repeat_kv_copy_rate = 0;                         // bytes/s, bytes read + written
  Seconds graph_build = 0;
};

// The measured spread of the engine's host launch about its fitted mean (launch_residual:
// measured - fitted over the fit iterations, calibration/serving/fit_engine_host.py), as
// quantiles at increasing probabilities from 0 to 1. Empty: the launch is its fitted mean.
struct ResidualQuantiles {
  std::vector<double> probability;  // strictly increasing, first 0, last 1
  std::vector<Seconds> value;       // non-decreasing, one per probability
  bool empty() const { return value.empty(); }
};

struct EngineHostCost {
  bool enabled = false;
  std::string file, model;  // the calibration file and its model entry
  HostTerms prepare_update, launch;
  EngineAttentionPath attention;  // when the file has the model's attention_path
  // What the launch saves when the batch's attention shape was met before in the process
  // and cuDNN looks its graph up (built_graph_launch_saving_s: a lone request's slow launch
  // less that of its exact repeats); 0 when the file has none (then the graph build).
  Seconds built_graph_saving = 0;
  // Drawn once per iteration and added to the launch (BatchTimeModel::time), when the file
  // has it; a file without it keeps the launch at its fitted mean.
  ResidualQuantiles launch_residual;
  // The fit runs' decode iterations at a new shape that the host waited on the GPU for
  // (gpu_bound_probe): their batch and measured launch + wait. BatchTimeModel reads from them
  // how long the GPU idles while cuDNN builds a graph; without them, the profiled build.
  struct GpuBoundIteration {
    std::int64_t decodes = 0;
    double kv = 0;
    Seconds launch_and_wait = 0;
  };
  std::vector<GpuBoundIteration> gpu_bound;
};

struct EngineSpec {
  LaunchMode launch = LaunchMode::eager;
  EngineKernels kernels = EngineKernels::transformers;  // scenario default: transformers when eager
  KvLayout kv_layout = KvLayout::paged;
  GqaMode gqa = GqaMode::native;
  AttentionMode attention = AttentionMode::per_request;
  EngineHostCost host;  // replaces the per-kernel launch model and iteration_overhead when enabled
  Seconds iteration_overhead = 0;  // host work per iteration outside the forward (scheduling, sampling)
  double memory_fraction = 0.9;    // share of the GPU's usable memory the engine may take
};

enum class SchedulerKind { static_batching, orca, vllm, sarathi, transformers_fifo };
enum class Preemption { recompute, swap };
enum class RouterKind { round_robin, least_outstanding_tokens };

struct SchedulerSpec {
  SchedulerKind kind = SchedulerKind::vllm;
  std::int64_t max_batch_size = 256;           // requests running at once (vLLM max_num_seqs)
  std::int64_t max_batched_tokens = 8192;      // tokens per iteration (Sarathi: the token budget)
  std::int64_t block_size = 16;                // KV-cache block, tokens
  double watermark = 0.01;                     // share of blocks kept free at admission
  Preemption preemption = Preemption::recompute;
  // transformers-fifo: no new prefill while free blocks < safety_margin x num_blocks.
  double safety_margin = 0.15;
  std::int64_t num_blocks = 0;  // KV blocks per replica as the engine resolved them; 0: from memory_fraction
};

struct PoolSpec {
  std::int64_t replicas = 1, tp = 1, pp = 1;
  std::int64_t gpus() const { return replicas * tp * pp; }
};

// Prefill/decode disaggregation: prefill instances hand each request's KV cache to a
// decode instance; `pool` then describes the decode pool.
struct DisaggregationSpec {
  bool enabled = false;
  PoolSpec prefill;
};

enum class ArrivalKind { trace, poisson, gamma, fixed_rate };
enum class LengthKind { fixed, uniform, zipf };

struct LengthSpec {
  LengthKind kind = LengthKind::fixed;
  std::int64_t value = 0;           // fixed
  std::int64_t min = 1, max = 1;    // uniform, zipf (support)
  double exponent = 1.0;            // zipf
};

struct WorkloadSpec {
  ArrivalKind arrival = ArrivalKind::poisson;
  std::string trace;               // CSV or JSONL (trace); relative to the scenario file
  double rate = 1;                 // requests per second
  double cv = 1;                   // gamma: coefficient of variation of the gaps
  std::int64_t requests = 0;       // generated requests (or 0 with duration)
  Seconds duration = 0;            // generate until this time
  LengthSpec prompt, output;
  std::uint64_t seed = 1;
  Seconds warmup = 0;              // requests arriving before this are not measured
};

struct SloSpec {
  Seconds ttft = 0;  // 0: no target
  Seconds tpot = 0;
  Seconds e2e = 0;
  double attainment = 0.9;  // goodput's target share
};

struct ServingScenario {
  std::string name, description, source;
  ModelSpec model;
  ClusterSpec cluster;
  EngineSpec engine;
  PoolSpec pool;
  DisaggregationSpec disaggregation;
  SchedulerSpec scheduler;
  RouterKind router = RouterKind::round_robin;
  WorkloadSpec workload;
  SloSpec slo;
};

std::string_view to_string(SchedulerKind);
std::string_view to_string(RouterKind);
std::string_view to_string(Preemption);

// Whether a JSON document is a serving scenario (it has a "serving" key).
bool is_serving_scenario(const nlohmann::json& doc);
ServingScenario parse_serving_scenario(const nlohmann::json& doc, Diagnostics& diag);
// Reads, parses, validates; a trace path is made relative to the file. Throws InputError.
ServingScenario load_serving_scenario(const std::string& file);
// Reads h.model's prepare_update and launch terms (and, where the file has them, the
// graph-cache saving, the launch residuals and the attention path) from h.file (a
// clustersim-serving-engine-host/1 file). Throws InputError with JSON paths.
void read_engine_host_cost(EngineHostCost& h);
// Canonical JSON (defaults filled in), for hashing and storing.
nlohmann::json to_json(const ServingScenario& s);

}  // namespace clustersim
