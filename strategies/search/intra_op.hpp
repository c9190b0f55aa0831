// The intra-op pass: lowers a range of blocks of the logical training graph onto a 2-D
// logical device mesh (lowering.hpp), enumerates every op's sharding strategies with
// their costs (strategy_space.hpp: op_timing for the work, rules.hpp for the weight
// update and activations, collective times per mesh axis), hands the flat request to
// the ILP and reads back one strategy per op with the stage's time and memory.
#pragma once
#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "costmodel/cluster.hpp"
#include "costmodel/collectives.hpp"
#include "costmodel/graph.hpp"
#include "costmodel/precision.hpp"
#include "strategies/prediction.hpp"
#include "strategies/rules.hpp"
#include "strategies/search/ilp.hpp"

namespace clustersim::search {

struct MeshAxis {
  std::int64_t size = 1;
  Group group;              // for collective_time: inside a node -> NVLink, across -> NICs
  double node_share = 1;    // fraction of the node's NICs one group of this axis gets
};

// A submesh of `hosts` x `gpus` (gpus per host used) viewed as d0 x d1. Axis 1 holds
// adjacent devices (d1 <= gpus, inside a host); axis 0 strides over the rest.
struct LogicalMesh {
  std::int64_t hosts = 1, gpus = 1;
  std::array<MeshAxis, 2> axes;
  std::int64_t devices() const { return axes[0].size * axes[1].size; }
  std::string name() const;  // "2x4"
};
// Whether d0 x d1 tiles a hosts x gpus submesh with axis 1 inside a host.
bool tiles(std::int64_t hosts, std::int64_t gpus, std::int64_t d0, std::int64_t d1);
// Throws std::invalid_argument unless tiles(hosts, gpus, d0, d1).
LogicalMesh make_logical_mesh(const ClusterModel& c, std::int64_t hosts, std::int64_t gpus, std::int64_t d0, std::int64_t d1);

// Which strategies an op may take. An op with parameters whose weight is replicated
// over data axes (mesh axes that split rows, i.e. data parallelism; not the experts of
// an expert-split matmul) also has weight-update-sharded variants (ZeRO; Alpa's
// weight update sharding), named with a suffix " [zero-2 @ 0]" (level, data axes).
enum class StrategySpace {
  full,      // every 2-D sharding (Alpa), each with ZeRO-0, ZeRO-2 and ZeRO-3 weight updates
  megatron,  // manual baseline: data parallel on axis 0, Megatron's split (graph.hpp Split) on
             // axis 1, the weight update at IntraOpProblem::zero
};

struct IntraOpProblem {
  const ClusterModel* cluster = nullptr;
  PrecisionRules rules;
  const ModelGraph* graph = nullptr;
  std::vector<int> blocks;       // indices into graph->blocks, in execution order
  LogicalMesh mesh;
  std::int64_t micro_batches = 1;  // per iteration: gradient sync and optimizer step are amortised over them
  double inflight = 1;             // micro-batches whose activations are live at the peak
  double memory_budget = 0;        // bytes per device
  std::int64_t heads = 1, experts = 1;  // quanta for splitting attention heads / expert batches
  std::int64_t top_k = 0, max_nodes_per_token = 0;  // routing, for expert_all_to_all_share
  StrategySpace space = StrategySpace::full;
  // ZeRO level (0-3) of every op with parameters and data axes; StrategySpace::megatron
  // only (the full space offers every useful level). Out of range: std::invalid_argument.
  int zero = 0;
  Recompute recompute = Recompute::none;  // the scenario's; applies to the repeated layers
  FrameworkSpec framework;                // whose host launches the ops (rules.hpp op_launches)
};

struct OpDecision {
  std::string op, strategy, kind;  // "fc1", "RS1 = RR x RS1", "column"
};

// Seconds of a stage's chosen strategies on one device.
struct StageCosts {
  Seconds forward = 0, backward = 0, recompute = 0;  // compute, per micro-batch
  Seconds comm = 0;          // intra-op collectives and resharding, per micro-batch
  Seconds ep_comm = 0;       // expert all-to-all, per micro-batch
  Seconds zero3_gather = 0;  // ZeRO-3 weight gathers not hidden behind compute, per micro-batch
  Seconds dp_sync = 0;       // per iteration: gradient reduction, ZeRO-1/2 weight gather,
                             // tied-embedding gradient all-reduce
  Seconds optimizer = 0;     // per iteration
  // The host's launches (rules.hpp op_launches): not in the ILP's objective (host-bound
  // time is a max over the whole stage, not a sum over ops); predict_plan applies them
  // with the estimator's rules (stage_host, host_bound_time).
  StageLaunches launches;
  Seconds per_micro_batch() const { return forward + backward + recompute + comm + ep_comm + zero3_gather; }
  Seconds per_iteration() const { return dp_sync + optimizer; }
  // What the search minimises per micro-batch (Alpa's stage latency): the per-iteration
  // work amortised over the B micro-batches.
  Seconds amortised(std::int64_t micro_batches) const {
    return per_micro_batch() + per_iteration() / double(micro_batches);
  }
  StageCosts& operator+=(const StageCosts& o);
};

struct IntraOpResult {
  bool feasible = false;  // a choice exists and fits the budget with `inflight` micro-batches
  IlpStatus status = IlpStatus::infeasible;
  Seconds latency = 0;    // costs.amortised(B)
  StageCosts costs;
  // Memory per device. The ILP's rows: the ops' weight memory (rules::weight_memory at
  // each op's ZeRO level, the autocast copy included) and kept activations of one
  // micro-batch (rules::kept_activations per op for the recompute mode).
  WeightMemory weights;
  Bytes weight_memory = 0;      // weights.total()
  Bytes activation_memory = 0;  // kept activations of one micro-batch
  // Full space: a lower bound of the stage's temporary memory (rules::kept_activations'
  // working memory of the largest block over each op's least-activation strategy, the
  // ZeRO-3 gathered weights not counted), added to every ILP's memory row. Exact for the
  // chosen strategies when they are the least-activation ones and none takes ZeRO-3.
  Bytes temporary_memory = 0;
  // Megatron space: what rules::stage_memory takes (in_flight set per use): the exact
  // memory of the manual plan's stage.
  bool exact_memory = false;
  StageMemoryInputs stage_inputs;
  // The memory of the stage with `inflight` micro-batches in flight: stage_memory() in
  // the Megatron space, else the ILP's rows plus temporary_memory.
  MemoryBreakdown memory(double inflight, const PrecisionRules& r) const;
  Bytes min_memory = 0;         // when infeasible: the smallest budget that fits
  // Lower bounds of the weight and activation memory of any choice (each op's least,
  // summed): no choice fits in less than least_weight_memory + s x least_activation_memory
  // + temporary_memory.
  Bytes least_weight_memory = 0, least_activation_memory = 0;
  double params = 0;            // parameters held per device (before ZeRO)
  double hardware_flops = 0;    // per micro-batch on one device (recompute counted)
  std::string message;
  std::vector<OpDecision> decisions;
  std::map<std::string, int> kind_counts;  // strategy kind -> ops (sorted: deterministic)
  int ilp_nodes = 0, ilp_leaders = 0, ilp_edges = 0;
  bool solved_by_cbc = false;  // else the frontier DP (or no solve: nothing divides)
  IlpResult::DpStats dp_stats;
};

// Builds the flat request (exposed for tests and tools).
IlpRequest build_intra_op_request(const IntraOpProblem& p, std::vector<OpDecision>* names = nullptr);
IntraOpResult solve_intra_op(const IntraOpProblem& p, const IlpOptions& options = {});
// Costs a fixed choice: `decisions` name one strategy per non-following op, in order
// (as solve_intra_op returns them). Throws InputError at `path`/i when an op or
// strategy name does not match this problem.
IntraOpResult evaluate_intra_op(const IntraOpProblem& p, const std::vector<OpDecision>& decisions,
                                const std::string& file, const std::string& path);

}  // namespace clustersim::search
