// Collective algorithms as flows on the platform. One file per algorithm under
// sim/collectives/, all with the same signature, listed in a name table
// (`clustersim simulate --list-collectives`).
//
// A call runs `groups.size()` collectives of the same kind and size at the same time
// (the data-parallel all-reduce of every tensor-parallel rank, for instance), blocking
// the calling actor until all of them are done. `bytes` is the per-rank buffer as
// costmodel's collective_time() takes it.
//
// Aggregation: the "pipelined" algorithms move each phase of a ring (or tree) as one
// flow per edge carrying the whole phase, with the per-step latencies added as a
// delay. For a chunked, perfectly pipelined ring that is exact (2(n-1)/n B/bw +
// 2(n-1) alpha) while costing n flows instead of 2n(n-1); contention still emerges,
// because the edge flows share links with everything else in flight.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "costmodel/collectives.hpp"
#include "sim/network.hpp"

namespace clustersim::sim {

struct CollectiveCall {
  Collective kind = Collective::all_reduce;
  Bytes bytes = 0;
  std::vector<std::vector<std::int64_t>> groups;  // global GPU ranks of each group, in rank order
  std::string label;                               // for the trace
  bool nccl_fitted = false;  // already scaled by the profile's NCCL fit (run_nccl_fitted)
};

using CollectiveAlgorithm = void (*)(Network& net, const CollectiveCall& call);

struct AlgorithmInfo {
  std::string_view name;
  std::string_view description;
  std::vector<Collective> kinds;  // what it implements
  CollectiveAlgorithm run;
};

// The name table, in name order.
const std::vector<AlgorithmInfo>& collective_algorithms();
const AlgorithmInfo* find_collective_algorithm(std::string_view name);

// Runs a call with the algorithm named by the scenario's `simulation.collectives`
// ("auto", "ring", "tree", "hierarchical" or any table name). all-to-all and
// send-recv always use their own algorithms; a kind the chosen algorithm does not
// implement falls back to ring-pipelined. "auto" picks what NCCL's tuner would on the
// closed forms: the double binary tree for latency-bound all-reduces, otherwise the
// pipelined ring, aggregated to one activity (node-aggregated) when every group sits
// inside one switched node.
void run_collective(Network& net, std::string_view setting, const CollectiveCall& call);

// Algorithm bodies (one file each under sim/collectives/).
void ring_stepwise(Network& net, const CollectiveCall& call);
void ring_pipelined(Network& net, const CollectiveCall& call);
void double_binary_tree(Network& net, const CollectiveCall& call);
void hierarchical(Network& net, const CollectiveCall& call);
void node_aggregated(Network& net, const CollectiveCall& call);
void all_to_all_direct(Network& net, const CollectiveCall& call);
void point_to_point(Network& net, const CollectiveCall& call);
// NCCL as measured inside one node (the profile's nccl section): false, doing nothing,
// unless every group sits inside one NVLink node and the profile has the fit.
bool run_nccl_fitted(Network& net, std::string_view setting, const CollectiveCall& call);

// Shared by the ring algorithms: the ring orders ("channels") of a group and the share
// of the data each carries. Inside one node of an NVLink mesh: the rings costmodel
// packs on the node's wiring (hybrid_cube_mesh_rings), each carrying its width's share
// and capped at its width of NVLinks, so both sides use the same rings; otherwise one
// ring in rank order. A group with several ranks per node spanning nodes gets one
// channel per local rank (per ring on a mesh), each leaving every node from a different
// GPU (and so a different NIC), as NCCL's rings do.
struct RingChannel {
  std::vector<std::int64_t> order;  // global ranks: order[i] sends to order[i+1], wrapping
  double share = 1;                 // fraction of the collective's data it carries
  double max_rate = 0;              // bytes/s its edge flows may not exceed; 0: no cap
};
// A group's ranks split by node, in rank order (a new part wherever the node changes).
std::vector<std::vector<std::int64_t>> split_by_node(const Network& net, const std::vector<std::int64_t>& group);
std::vector<RingChannel> ring_channels(const Network& net, const std::vector<std::int64_t>& group);
// What "auto" judges an all-reduce's ring by (choose_all_reduce's bandwidth and alpha):
// the rate (bytes/s per rank) the call's rings stream at on their own, and a step's
// latency (the slowest ring edge's route).
struct RingRate {
  double bandwidth = 0;
  Seconds latency = 0;
};
RingRate ring_rate(Network& net, const CollectiveCall& call);
// Steps a ring collective takes over n ranks: 2(n-1) for all-reduce, n-1 otherwise.
std::int64_t ring_steps(Collective kind, std::int64_t n);
// Bytes one ring edge carries per step (of the per-rank buffer, per channel).
Bytes ring_step_bytes(Collective kind, Bytes bytes, std::int64_t n);
// Blocks the calling actor for `seconds` (a latency term of an aggregated phase).
void delay(Seconds seconds);

}  // namespace clustersim::sim
