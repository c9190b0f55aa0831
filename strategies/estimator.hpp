// Analytical estimator for manual plans: data, Megatron tensor (+ sequence), pipeline
// (GPipe, 1F1B, interleaved), expert parallelism and ZeRO 1/2/3, with gradient
// accumulation, overlap of the gradient reduction with backward, and recompute.
//
// Per-block costs (one transformer layer, one bottleneck...) are computed once per
// (micro-batch, tp, sp, ep, recompute) and reused, so evaluating a plan is O(stages).
#pragma once
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <tuple>
#include <vector>

#include "costmodel/cluster.hpp"
#include "costmodel/graph.hpp"
#include "costmodel/precision.hpp"
#include "scenarios/scenario.hpp"

namespace clustersim {

struct TimeBreakdown {
  Seconds compute_forward = 0;    // busiest stage, all micro-batches
  Seconds compute_backward = 0;
  Seconds compute_recompute = 0;
  Seconds tp_comm_exposed = 0;    // tensor-parallel collectives (not overlapped)
  Seconds ep_comm_exposed = 0;    // expert all-to-all
  Seconds pp_comm_exposed = 0;    // pipeline sends on the critical path
  Seconds bubble = 0;             // pipeline fill and drain
  Seconds dp_comm_exposed = 0;    // gradient reduction (and ZeRO-3 gathers) not hidden
  Seconds optimizer = 0;
  Seconds total() const;
};

struct MemoryBreakdown {
  Bytes weights = 0, gradients = 0, optimizer_states = 0, activations = 0, temporary = 0;
  Bytes total() const { return weights + gradients + optimizer_states + activations + temporary; }
};

struct StageEstimate {
  int first_layer = 0, layers = 0;  // layer range [first, first + layers)
  // Per micro-batch on one GPU of the stage. zero3_gather: ZeRO-3 parameter gathers
  // not hidden behind compute.
  Seconds forward = 0, backward = 0, recompute = 0, tp_comm = 0, ep_comm = 0, p2p = 0, zero3_gather = 0;
  Seconds per_micro_batch() const { return forward + backward + recompute + tp_comm + ep_comm + p2p + zero3_gather; }
  Seconds dp_exposed = 0, optimizer = 0;  // once per iteration, after the last micro-batch
  double params_per_gpu = 0;
  MemoryBreakdown memory;
};

struct Estimate {
  Seconds iteration_time = 0;
  double tokens_per_s = 0, samples_per_s = 0;
  double tflops_per_gpu = 0;        // hardware FLOPs (recompute counted) / time / GPUs, in TFLOP/s
  double model_tflops_per_gpu = 0;  // model FLOPs (3x forward) / time / GPUs, in TFLOP/s
  double mfu = 0;                   // model FLOP/s over the GPU's peak for the compute type
  Bytes memory_per_gpu = 0;         // the most loaded stage
  Bytes memory_capacity = 0;        // usable: capacity minus the profile's reserve
  bool fits = true;
  Bytes overflow = 0;               // how much over capacity when it does not fit
  TimeBreakdown breakdown;
  MemoryBreakdown memory;           // of the most loaded stage
  std::int64_t micro_batches = 0;
  double parameters = 0;
  double hardware_flops = 0, model_flops = 0;  // per iteration, whole cluster
  std::vector<StageEstimate> stages;
};

nlohmann::json to_json(const Estimate& e);

class Estimator {
 public:
  Estimator(ModelSpec model, TrainingSpec training, ClusterModel cluster);
  // Plan and micro-batch size must already be valid for the model and cluster
  // (scenario validation checks that).
  Estimate estimate(const PlanSpec& plan, std::int64_t micro_batch, Recompute recompute) const;
  Estimate estimate(const PlanSpec& plan) const {
    return estimate(plan, training_.micro_batch, training_.recompute);
  }
  const ClusterModel& cluster() const { return cluster_; }
  const PrecisionRules& precision() const { return rules_; }

  // Cost of one block on one GPU for one micro-batch.
  struct BlockCost {
    Seconds forward = 0, backward = 0, recompute = 0;
    Seconds tp_forward = 0, tp_backward = 0, tp_recompute = 0, ep = 0;
    Bytes saved = 0;        // activations kept per micro-batch
    Bytes working = 0;      // transient activations while this block runs backward
    double params = 0;      // parameters on this GPU
    double hardware_flops = 0;  // this GPU's FLOPs, forward + backward + recompute
  };

 private:
  using Key = std::tuple<std::int64_t, std::int64_t, bool, std::int64_t, int>;  // b, tp, sp, ep, recompute
  const ModelGraph& graph(std::int64_t micro_batch) const;
  const std::vector<BlockCost>& block_costs(std::int64_t micro_batch, const PlanSpec& plan, Recompute rc) const;
  BlockCost cost_block(const Block& block, const PlanSpec& plan, Recompute rc, bool is_layer) const;

  ModelSpec model_;
  TrainingSpec training_;
  ClusterModel cluster_;
  PrecisionRules rules_;
  mutable std::map<std::int64_t, ModelGraph> graphs_;
  mutable std::map<Key, std::vector<BlockCost>> costs_;
};

// Resolves the scenario's cluster and checks what the estimator needs (the GPU has
// units for the precision...). Throws InputError naming the scenario file and field.
Estimator make_estimator(const Scenario& s);

}  // namespace clustersim
