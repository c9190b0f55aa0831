// Lowering of a stage's blocks onto the search's graph: one node per op that does work,
// with the tensor its sharding specs split, its producer (and a residual's skip input),
// and what the plan-level rules need per block (recompute mode, output, transient
// buffers). Megatron's tp_enter / tp_exit markers are dropped (the search places its
// own collectives); saved-activation markers are folded into the matmul whose input or
// output they keep.
#pragma once
#include <cstdint>
#include <vector>

#include "costmodel/graph.hpp"
#include "strategies/search/intra_op.hpp"

namespace clustersim::search {

enum class NodeKind { matmul, batched, elementwise, embedding, exchange };

struct Tensor {
  std::int64_t rows_q = 1, cols_q = 1;  // the counts a split must divide (samples, heads, features...)
  double bytes = 0;
  // Per-head tensors (attention scores, probabilities): a row reduction over them stays
  // inside a head, so splitting the heads needs no all-reduce of row statistics.
  bool cols_are_heads = false;
};

// Activations kept for a matmul's backward, recorded by a marker op: the matmul's input
// (split as its rows and contraction) or, for a marker split like a column-parallel
// output (graph.hpp: Split::column or heads), its output (rows and columns).
struct SavedMarker {
  const Op* op = nullptr;
  bool output = false;
};

struct SNode {
  const Op* op = nullptr;
  NodeKind kind = NodeKind::elementwise;
  int pred = -1, skip = -1;
  bool follows = false;  // follows pred
  Tensor in, out;
  std::vector<SavedMarker> markers;
  // The output projection whose weight is the word embedding's (tied) in a stage that
  // also holds the embedding: the embedding's strategy holds and updates the weight.
  bool tied = false;
  // The word embedding or the tied output projection of a stage that holds only one of
  // the two: its weight's gradient is all-reduced with the other stage's every iteration.
  bool tied_sync = false;
  int block = 0;            // position in IntraOpProblem::blocks
  bool recomputed = false;  // rules::op_recomputed: its forward runs again before backward
  bool core = false;        // core attention (dropped from the kept activations by selective recompute)
  // A weight matmul's Megatron markers in the graph (tp_enter before it, tp_exit after it):
  // the search places its own collectives, but takes their bytes (entry: the input
  // gradient's all-reduce, in the input's type before autocast casts it) and their host
  // costs (DTensor's parallel styles, rules.hpp op_host_overhead) from them.
  const Op* entry = nullptr;
  const Op* exit = nullptr;
  // Autocast's weight casts (OpRole::weight_cast): they follow the block's last weight
  // matmul and are split as its weight is, not as the activations.
  bool weight_cast = false;
};

struct BlockInfo {
  const Block* block = nullptr;
  Recompute recompute = Recompute::none;  // rules::block_recompute
  int last_node = -1;  // the node whose output leaves the block (the boundary full recompute keeps)
};

struct LoweredStage {
  std::vector<SNode> nodes;
  std::vector<BlockInfo> blocks;  // one per IntraOpProblem::blocks entry
  int leader(int v) const;        // the node whose strategy v follows (v itself for a leader)
};

LoweredStage lower_stage(const IntraOpProblem& p);

// A lower bound of the memory per device of every strategy choice for the stage of `p`
// (its blocks, in-flight count and recompute mode) on `devices` GPUs, from the graph
// alone: no strategy splits an op's parameters, saved activations or output more than
// `devices` ways, and rules::weight_memory and rules::kept_activations grow with each.
// A candidate above the budget is infeasible without enumerating or solving it.
Bytes memory_floor(const IntraOpProblem& p, std::int64_t devices);

}  // namespace clustersim::search
