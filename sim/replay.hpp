// The replay of a ReplayPlan on a platform, inside a running SimGrid engine: one actor
// per tensor-parallel group of a pipeline stage and data-parallel replica (its GPUs
// run the same program in lock-step, so they share an actor; their collectives and
// sends are still flows between the individual GPUs), plus one communication-stream
// actor per group for bucketed gradient reduction overlapping backward and for ZeRO-3
// parameter gathers.
#pragma once
#include <cstdint>
#include <vector>

#include "sim/network.hpp"
#include "sim/replay_plan.hpp"

namespace clustersim::sim {

// Busy time of one tensor-parallel group (each of its GPUs) over the iteration.
struct GroupStats {
  std::int64_t stage = 0, replica = 0;
  Seconds forward = 0, backward = 0, recompute = 0;
  Seconds tp_comm = 0, ep_comm = 0, pp_comm = 0, dp_comm = 0, optimizer = 0;
  Seconds cp_comm = 0;         // context parallelism: ring sends beyond the attention beside them, all-to-alls
  Seconds host_wait = 0;       // the GPU idle until the host launched the next kernels
  Seconds offload_forward = 0, offload_backward = 0;  // waiting for activation offload's host copies
  Seconds end = 0;             // when its last work finished
  bool finished = false;       // its compute stream reached the end of the iteration
  Bytes peak_activations = 0;  // most activations alive at once
  std::int64_t compute_activities = 0, collectives = 0;
  Seconds compute() const { return forward + backward + recompute + optimizer; }
  Seconds comm() const { return tp_comm + ep_comm + cp_comm + pp_comm + dp_comm; }
  Seconds offload() const { return offload_forward + offload_backward; }
};

struct ReplayResult {
  Seconds iteration_time = 0;
  std::vector<GroupStats> groups;  // stage-major: index stage * dp + replica
};

// Creates the actors; run the engine afterwards, then call finish().
class Replay {
 public:
  Replay(const ReplayPlan& plan, Network& net, Trace* trace);
  ~Replay();
  void start();
  ReplayResult finish() const;

 private:
  struct Impl;
  Impl* impl_;
};

}  // namespace clustersim::sim
