// What the simulator replays: per pipeline stage and model chunk, the forward and
// backward programs of one micro-batch on one GPU (compute segments separated by the
// collectives they trigger), built from the same op timings as the analytical
// estimator (strategies/op_timing.hpp), plus the schedule order of each stage.
// No SimGrid here: tests build synthetic plans (uniform stages, no communication).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "scenarios/scenario.hpp"
#include "strategies/estimator.hpp"
#include "strategies/rules.hpp"
#include "strategies/op_timing.hpp"

namespace clustersim::sim {

enum class Work { forward, backward, recompute };

struct OpSlice {  // for the trace: one op's share of a compute segment
  std::string name;
  Seconds duration = 0;
};

struct Segment {
  Work work = Work::forward;
  Seconds compute = 0;   // GPU time before the collective
  CommStep comm;         // then this collective (inactive when none)
  double grad_params = 0;  // backward: parameters (on this GPU) whose gradients are done after this segment
  double gather_params = 0;  // > 0: a block starts here; ZeRO-3 gathers its parameters (on this GPU) first
  std::vector<OpSlice> ops;
  Seconds host = 0;      // host time to launch this segment's kernels (rules.hpp host dispatch)
  // Context parallelism: this segment's compute is one attention op's, beside its ring
  // sends (context.steps sends of context_bytes to the next GPU of the cp group, each
  // overlapping 1/cp of the compute) or after its all-to-alls (context.calls of
  // context_bytes / calls over the cp group). Inactive otherwise.
  ContextExchange context{};
  Bytes context_bytes = 0;
  // Activation offload (rules.hpp activation_offload), a layer's copy to or from pinned
  // host memory on the GPU's copy engine, beside compute. Forward: after this segment
  // (a layer's last), wait for the copy in flight (`offload_wait`, the previous layer's),
  // then start this layer's D2H of `offload_copy` seconds. Backward: before this segment
  // (a layer's first), wait for this layer's prefetch, then start the H2D of the layer
  // below.
  bool offload_wait = false;
  Seconds offload_copy = 0;
  bool offload_marked() const { return offload_wait || offload_copy > 0; }
  // Of gather_params, those Transformer Engine casts (rules.hpp gradient_sync).
  double gather_fp8_params = 0;
};

struct ChunkProgram {
  std::vector<Segment> forward, backward;  // backward includes the recompute, first
  // ZB-H1, DualPipe: the weight gradients, split off backward (which then computes the
  // input gradients only) and run later as a pass of their own; empty otherwise.
  std::vector<Segment> weight_grad;
  Bytes saved = 0;       // activations kept per micro-batch until its backward
  PipelineSend send;     // activation (and gradient) sent to the neighbouring stage
};

struct StageProgram {
  std::vector<ChunkProgram> chunks;  // v model chunks (1 unless interleaved)
  double params = 0;                 // parameters on one GPU of the stage
  double fp8_params = 0;             // of them, those Transformer Engine casts (rules.hpp gradient_sync)
  Seconds optimizer = 0;
  Seconds optimizer_host = 0;  // host time the step needs before its kernels (rules.hpp op_host_overhead)
  MemoryBreakdown static_memory;     // weights, gradients, optimizer states, temporary (no activations)
};

struct ReplayPlan {
  std::int64_t dp = 1, tp = 1, pp = 1, ep = 1, virtual_stages = 1, micro_batches = 1;
  // Context parallelism: each (stage, replica) is cp x tp GPUs (tp-cp-dp-pp rank order);
  // gradients are reduced over dp x cp, in HSDP shard groups of `shard` of those (0: all).
  std::int64_t cp = 1, shard = 0;
  std::int64_t microbatch_group = 0;  // interleaved: micro-batch group (0: pp)
  Schedule schedule = Schedule::one_f_one_b;
  int zero = 0;
  bool sequence_parallel = false;
  bool overlap_grad_reduce = false;
  PrecisionRules precision;      // bytes per parameter of weights and gradients
  FrameworkSpec framework;       // gradient buckets
  Bytes tied_sync_bytes = 0;     // per GPU: the tied embedding's gradient all-reduce (first and last stage)
  std::string collectives = "auto";
  // How a data-parallel collective and the compute beside it slow each other on a GPU
  // (rules.hpp overlap_slowdown); factors of 1 (the default): overlap is free.
  OverlapInterference interference;
  std::vector<StageProgram> stages;
};

// The plan of a scenario. `e` is the estimator's result for the same plan: the static
// memory and the optimizer step are taken from it (the same rules; neither depends on
// timing).
ReplayPlan build_replay_plan(const Scenario& s, const Estimator& est, const Prediction& e);

struct WorkItem {
  bool forward = true;
  std::int64_t chunk = 0, micro_batch = 0;
  bool weight = false;  // ZB-H1: the weight-gradient pass (forward is false)
  // DualPipe (chunk = direction): a backward that leaves its weight gradients to a later
  // weight pass; a forward that runs overlapped with the next item (a backward).
  bool defer_weight = false, overlap_next = false;
};
// The order stage `stage` runs forward and backward passes in: GPipe (all forwards,
// then all backwards), 1F1B (p-s-1 warm-up forwards, then alternating), interleaved
// 1F1B (Megatron-LM's warm-up of 2(p-s-1) + (v-1)N chunk forwards, chunks taken in
// groups of N micro-batches, N = `group` or p), ZB-H1 (1F1B's order with stage s's
// first s weight passes W deferred to its drain), DualPipe (rules.hpp dualpipe_order;
// chunk c is direction c: stage s for c 0, stage p-1-s for c 1).
std::vector<WorkItem> schedule_order(Schedule schedule, std::int64_t stages, std::int64_t chunks,
                                     std::int64_t micro_batches, std::int64_t stage, std::int64_t group = 0);

}  // namespace clustersim::sim
