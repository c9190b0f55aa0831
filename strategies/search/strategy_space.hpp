// Strategy enumeration for the intra-op pass: every sharding of every node of a lowered
// stage on the logical mesh, with what it costs on one device.
//
// Tensors are viewed as 2-D [rows, cols]: rows = tokens (or images x pixels, or experts x
// capacity), cols = features. A sharding spec says, for each mesh axis, whether it
// splits rows, cols or nothing ("S0R" = rows on axis 0, cols replicated; "S01R" = rows
// on both axes; "RS1"; "S0S1"). A matmul C[rows,n] = A[rows,k] B[k,n] assigns each mesh
// axis to rows, n, k or nothing: k on an axis leaves partial sums and costs an
// all-reduce of C on that axis (Alpa's "SR = SS x SR"); n on an axis costs an all-reduce
// of dA in backward; rows on an axis replicates the weight there (a data axis), whose
// update follows rules.hpp at the strategy's ZeRO level. Memory-bound ops follow their
// producer (Alpa's follow nodes) and take its ZeRO level.
//
// Where the numbers come from: the op's work, saved activations and parameters under the
// strategy's split from op_timing (op_work); the weight update (gradient_sync,
// weight_memory, zero3_gather_exposed, optimizer_step_marginal), recompute
// (op_recomputed) and kept activations (kept_activations) from rules.hpp; collective
// times from costmodel/collectives.hpp with the mesh axis's group. What is the search's
// own: which collectives a sharding implies, timed one mesh axis after the other.
#pragma once
#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "strategies/rules.hpp"
#include "strategies/search/intra_op.hpp"
#include "strategies/search/lowering.hpp"

namespace clustersim::search {

enum class Dim : std::uint8_t { none, rows, cols, contract };

struct Spec {  // per mesh axis: none, rows or cols
  std::array<Dim, 2> on{Dim::none, Dim::none};
  friend bool operator==(const Spec&, const Spec&) = default;
};

struct Strategy {
  Spec out, in;  // output spec; spec required of the (main) input
  std::array<Dim, 2> assign{Dim::none, Dim::none};  // matmuls / embeddings: rows, cols (= n), contract (= k / vocab)
  StageCosts cost;     // this op's share of the stage's costs
  Seconds ilp_cost = 0;  // cost.amortised(B): the ILP's cost vector entry
  WeightMemory weights;  // rules::weight_memory of `params` at `zero`
  double params = 0;        // held by one device (0 for a tied projection the embedding holds)
  double block_params = 0;  // counted in its block's size (ZeRO-3 gathers a whole block, tied weight included)
  Bytes saved = 0;          // activations of one micro-batch kept for backward without recompute
  Bytes kept = 0;           // kept under its block's recompute mode (the ILP's activation memory)
  Bytes boundary = 0;       // the block's output on this device (the block's last node only)
  double forward_flops = 0;  // op_work's, on this device
  double flops = 0;          // hardware FLOPs per micro-batch: forward, backward (2x), recompute
  int zero = 0;  // weight-update sharding over the data axes (ZeRO level), 0: plain
  // Collectives it issues per micro-batch (one kernel launch each), forward and backward.
  int comm_forward = 0, comm_backward = 0;
  std::string name, kind;
};

// Strategies per node (followers: one per strategy of their leader, in its order).
// A node that repeats the node one identical block earlier (same op, tensors, markers,
// flags, block, offsets of its producer and skip input, and a leader whose list is the
// same) shares that node's list: the enumeration reads nothing else, so the values are
// the ones a fresh enumeration gives, and a stage of k identical layers is enumerated
// about twice instead of k times (the first layer and the second differ at their input).
struct NodeStrategies {
  std::vector<std::shared_ptr<const std::vector<Strategy>>> lists;  // one per node
  const std::vector<Strategy>& operator[](std::size_t v) const { return *lists[v]; }
  std::size_t size() const { return lists.size(); }
  std::size_t distinct() const;  // lists actually enumerated (the rest are shared)
};

// `unshardable` receives the first op with no strategy that divides evenly ("" if none).
// `share` false enumerates every node afresh (tests compare the two).
NodeStrategies enumerate_strategies(const IntraOpProblem& p, const LoweredStage& st, std::string* unshardable,
                                    bool share = true);

// Seconds to turn a tensor of `bytes` held as `from` into `to` (forward) plus its
// gradient back: per axis an all-gather where a split is dropped, an all-to-all where
// it moves to the other dimension, nothing where only slicing.
Seconds reshard(const ClusterModel& c, const LogicalMesh& m, const Spec& from, const Spec& to, double bytes);

}  // namespace clustersim::search
