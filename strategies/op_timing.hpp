// One op of the logical graph as it runs on one GPU under a Megatron-style manual plan
// (tensor, sequence and expert parallelism): its compute time forward and backward,
// the collectives it triggers, the activations it keeps and the parameters it holds.
// The analytical estimator sums these, the simulator replays them as activities, and the
// search's Megatron space costs its strategies with them. Plan-level rules (what a plan
// does with these per-op costs) are in rules.hpp.
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

}  // namespace clustersim
