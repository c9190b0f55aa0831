// The inter-op pass (Alpa Sec. 5): layer clustering (Eq. 6) and the stage-construction
// DP over layer ranges and submeshes (Eq. 2-5) with t_max enumeration and early
// pruning. Stage latencies come from a callback (the intra-op pass in production, a
// table in tests), so the DP is tested against brute force on its own.
#pragma once
#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "scenarios/units.hpp"

namespace clustersim::search {

struct Submesh {
  std::int64_t hosts = 1, gpus = 1;  // n x m
  std::int64_t devices() const { return hosts * gpus; }
  std::string name() const;  // "(2,8)"
};

// Which whole-host submeshes the inter-op DP offers (Alpa's AutoStageOption
// submesh_physical_shape_space; Alpa's default is power_of_two).
enum class SubmeshSpace {
  power_of_two,  // (2,M), (4,M), (8,M) ... up to N hosts
  all,           // (2,M), (3,M) ... (N,M)
};
// (1,1), (1,2), (1,4) ... (1,M) inside one host, then whole hosts per `space`. Every
// host count is a sum of powers of two, so both spaces tile the cluster (power_of_two
// with as many stages as N has binary ones, at least).
std::vector<Submesh> submesh_shapes(std::int64_t hosts, std::int64_t gpus_per_host,
                                    SubmeshSpace space = SubmeshSpace::all);
// "power-of-two" / "all" and back; parse throws std::invalid_argument.
std::string submesh_space_name(SubmeshSpace s);
SubmeshSpace parse_submesh_space(const std::string& name);

// Latency per micro-batch of layers [first, last] (inclusive) on submesh `submesh` as
// the `from_end`-th stage counted from the last (1 = last stage: 1F1B keeps `from_end`
// micro-batches of activations in flight). Infinite when it does not fit.
using StageLatency = std::function<Seconds(int first, int last, int submesh, int from_end)>;

struct InterOpProblem {
  int layers = 0;                  // K (after clustering)
  std::vector<Submesh> submeshes;
  std::int64_t devices = 1;        // N x M: the stages' submeshes must use all of them
  std::int64_t micro_batches = 1;  // B
  int max_stages = 0;              // 0: up to K
};

struct StageChoice {
  int first = 0, last = 0;  // layer range, inclusive
  int submesh = 0;
  Seconds latency = 0;
};

struct InterOpResult {
  bool feasible = false;
  Seconds iteration_time = std::numeric_limits<double>::infinity();  // Eq. 2 with the real max
  std::vector<StageChoice> stages;
  int t_max_tried = 0, t_max_candidates = 0;
};

// Eq. 2: sum of stage latencies + (B - 1) x the slowest (rules::pipeline_makespan of a
// plain pipeline).
Seconds pipeline_latency(const std::vector<StageChoice>& stages, std::int64_t micro_batches);

InterOpResult solve_inter_op(const InterOpProblem& p, const StageLatency& latency);
// Every split into consecutive ranges and every submesh assignment that uses all devices.
InterOpResult brute_force_inter_op(const InterOpProblem& p, const StageLatency& latency);

// Eq. 6: groups `flops.size()` operators (blocks, in order) into `clusters` consecutive
// layers minimising the largest communication across a cut (`cut_bytes[i]`: bytes
// leaving operator i), each layer's FLOPs at most (1 + eps) x the average; ties go to
// the split with the smallest largest layer. Returns the first operator of each layer.
// Falls back to the FLOP-balanced split if the bound admits none.
std::vector<int> cluster_layers(const std::vector<double>& flops, const std::vector<double>& cut_bytes, int clusters,
                                double eps = 0.5);

}  // namespace clustersim::search
