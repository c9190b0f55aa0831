// Analytical estimator for manual plans: data, Megatron tensor (+ sequence), pipeline
// (GPipe, 1F1B, interleaved), expert parallelism and ZeRO 1/2/3, with gradient
// accumulation, overlap of the gradient reduction with backward, and recompute.
//
// Per-block costs (one transformer layer, one bottleneck...) are computed once per
// (micro-batch, tp, sp, ep, recompute) and reused, so evaluating a plan is O(stages).
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "costmodel/cluster.hpp"
#include "costmodel/graph.hpp"
#include "costmodel/precision.hpp"
#include "strategies/prediction.hpp"
#include "strategies/rules.hpp"
#include "scenarios/scenario.hpp"

namespace clustersim {

class Estimator {
 public:
  Estimator(ModelSpec model, TrainingSpec training, ClusterModel cluster);
  // Plan and micro-batch size must already be valid for the model and cluster
  // (scenario validation checks that).
  Prediction estimate(const PlanSpec& plan, std::int64_t micro_batch, Recompute recompute) const;
  Prediction estimate(const PlanSpec& plan) const {
    return estimate(plan, training_.micro_batch, training_.recompute);
  }
  const ClusterModel& cluster() const { return cluster_; }
  const PrecisionRules& precision() const { return rules_; }

  // Cost of one block on one GPU for one micro-batch.
  struct BlockCost {
    Seconds forward = 0, backward = 0, recompute = 0;
    Seconds weight_grad = 0;  // of backward: the weight gradients
    Seconds tp_forward = 0, tp_backward = 0, tp_recompute = 0, ep = 0;
    Seconds cp = 0;         // context parallelism's exposed exchange, forward + backward + recompute
    Bytes saved = 0;        // activations kept per micro-batch
    Bytes working = 0;      // transient activations while this block runs backward
    double params = 0;      // parameters on this GPU
    double expert_params = 0;  // of them, the experts' (replicated over dp / ep GPUs only)
    double fp8_params = 0;     // of them, those Transformer Engine casts to fp8 (graph.hpp fp8_cast_params)
    double expert_fp8_params = 0;  // of those, the experts'
    double hardware_flops = 0;  // this GPU's FLOPs, forward + backward + recompute
    StageLaunches launches;  // its ops' kernels and host extras (rules.hpp op_launches)
    std::vector<double> weight_params;  // per op with parameters, those on this GPU
  };

 private:
  using Key = std::tuple<std::int64_t, std::int64_t, bool, std::int64_t, int, std::int64_t, int>;  // b, tp, sp, ep, recompute, cp, cp algorithm
  const ModelGraph& graph(std::int64_t micro_batch) const;
  const std::vector<BlockCost>& block_costs(std::int64_t micro_batch, const PlanSpec& plan, Recompute rc) const;
  BlockCost cost_block(const Block& block, const PlanSpec& plan, Recompute rc, bool is_layer) const;

  ModelSpec model_;
  TrainingSpec training_;
  ClusterModel cluster_;
  PrecisionRules rules_;
  // A micro-batch size's graph with its totals (summing every op of every layer costs
  // more than the rest of a plan's estimate).
  struct GraphTotals {
    ModelGraph graph;
    double params = 0, model_flops = 0;
  };
  const GraphTotals& totals(std::int64_t micro_batch) const;
  mutable std::map<std::int64_t, GraphTotals> graphs_;
  mutable std::map<Key, std::vector<BlockCost>> costs_;
};

// Resolves the scenario's cluster and checks what the estimator needs (the GPU has
// units for the precision...). Throws InputError naming the scenario file and field.
Estimator make_estimator(const Scenario& s);

}  // namespace clustersim
