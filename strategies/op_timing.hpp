// One op of the logical graph as it runs on one GPU under a Megatron-style manual plan
// (tensor, sequence and expert parallelism): its compute time forward and backward,
// the collectives it triggers, the activations it keeps and the parameters it holds.
// The analytical estimator sums these; the simulator replays them as activities.
#pragma once
#include <cstdint>

#include "costmodel/collectives.hpp"
#include "costmodel/graph.hpp"
#include "costmodel/kernels.hpp"

namespace clustersim {

enum class CommGroup { none, tp, ep };

struct CommStep {
  Collective kind = Collective::all_reduce;
  Bytes bytes = 0;  // per-rank buffer, as collective_time() takes it
  CommGroup group = CommGroup::none;
  bool active() const { return group != CommGroup::none; }
};

struct ShardingContext {
  std::int64_t tp = 1, ep = 1;
  bool sequence_parallel = false;  // only meaningful with tp > 1
  DType dtype = DType::bf16;
};

struct OpTiming {
  Seconds forward = 0, backward = 0;    // compute on this GPU
  double forward_flops = 0;             // on this GPU; backward is 2x
  CommStep forward_comm, backward_comm;  // at most one collective each way
  Bytes saved = 0;                      // activations this GPU keeps for backward
  double params = 0;                    // parameters on this GPU
};

OpTiming time_op(const Op& op, const ShardingContext& ctx, const KernelModel& km);

// Whether an op's forward runs again before its backward. Megatron checkpoints the
// repeated transformer layers only, never the embedding or the logits and loss.
inline bool recomputed(const Op& op, Recompute rc, bool in_repeated_layer) {
  if (!in_repeated_layer) return false;
  return rc == Recompute::full || (rc == Recompute::selective && op.core_attention);
}

// Communication groups of a manual plan, in Megatron-LM's rank order: tensor-parallel
// ranks adjacent, then data-parallel, then pipeline stages.
struct PlanGroups {
  Group tp, dp, ep;
  double dp_share = 1, ep_share = 1;  // fraction of a node's NICs each group gets
  bool pp_cross_node = false;         // pipeline neighbours sit on different nodes
};
PlanGroups plan_groups(const ClusterModel& c, const PlanSpec& p);

}  // namespace clustersim
