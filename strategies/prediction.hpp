// The one typed answer of every consumer of the cost model: the estimator, the SimGrid
// replay and the search's plan evaluation each return a Prediction; the CLI and the
// results store read it (one to_json, one from_json), never strings.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "scenarios/json_writer.hpp"
#include "scenarios/units.hpp"
#include "strategies/uncertainty.hpp"

namespace clustersim {

struct TimeBreakdown {
  Seconds compute_forward = 0;    // critical stage (or GPU), all micro-batches
  Seconds compute_backward = 0;
  Seconds compute_recompute = 0;
  Seconds tp_comm_exposed = 0;    // tensor-parallel collectives (not overlapped)
  Seconds ep_comm_exposed = 0;    // expert all-to-all
  Seconds cp_comm_exposed = 0;    // context parallelism: ring sends not hidden by attention, Ulysses all-to-alls
  Seconds pp_comm_exposed = 0;    // pipeline sends on the critical path
  Seconds offload_exposed = 0;    // activation offload: host copies not hidden behind the next layer
  Seconds bubble = 0;             // pipeline fill and drain, and waiting
  Seconds dp_comm_exposed = 0;    // gradient reduction (and ZeRO gathers) not hidden
  Seconds optimizer = 0;
  Seconds host_bound = 0;         // the host launching kernels slower than the GPU runs them
  Seconds total() const;
};

struct MemoryBreakdown {
  Bytes weights = 0, gradients = 0, optimizer_states = 0, activations = 0, temporary = 0;
  Bytes total() const { return weights + gradients + optimizer_states + activations + temporary; }
};

struct StagePrediction {
  int first_layer = 0, layers = 0;  // layer range [first, first + layers)
  // Per micro-batch on one GPU of the stage. zero3_gather: ZeRO-3 parameter gathers
  // not hidden behind compute.
  Seconds forward = 0, backward = 0, recompute = 0, tp_comm = 0, ep_comm = 0, p2p = 0, zero3_gather = 0;
  Seconds cp_comm = 0;  // context parallelism's exposed exchange
  // Activation offload's copies not hidden, in forward (D2H) and backward (H2D prefetch).
  Seconds offload_forward = 0, offload_backward = 0;
  Seconds per_micro_batch() const {
    return forward + backward + recompute + tp_comm + ep_comm + cp_comm + p2p + zero3_gather + offload_forward + offload_backward;
  }
  Seconds weight_grad = 0;  // of backward, per micro-batch: the weight gradients (deferred by zero-bubble schedules)
  // Once per iteration, after the last micro-batch. optimizer: the weight update on the
  // compute stream, autograd's gradient accumulation over the micro-batches included
  // (rules.hpp autograd_grad_accumulation).
  Seconds dp_exposed = 0, optimizer = 0;
  Seconds grad_accumulation = 0;  // of optimizer: autograd's adds over the micro-batches
  Seconds host = 0;                       // host time to launch one micro-batch's kernels
  Seconds host_forward = 0;               // of which its forward
  Seconds host_optimizer = 0;             // host time the optimizer step needs before its kernels (once)
  double params_per_gpu = 0;
  double fp8_params_per_gpu = 0;  // of them, those Transformer Engine casts (rules.hpp fp8_weights)
  MemoryBreakdown memory;
};

struct Prediction {
  std::string method;               // "analytical", "simulated" or "search"
  Seconds iteration_time = 0;
  double tokens_per_s = 0, samples_per_s = 0;
  double tflops_per_gpu = 0;        // hardware FLOPs (recompute counted) / time / GPUs, in TFLOP/s
  double model_tflops_per_gpu = 0;  // model FLOPs (3x forward) / time / GPUs, in TFLOP/s
  double mfu = 0;                   // model FLOP/s over the GPU's peak for the compute type
  Bytes memory_per_gpu = 0;         // the most loaded stage
  Bytes memory_capacity = 0;        // usable: capacity minus the profile's reserve
  bool fits = true;
  Bytes overflow = 0;               // how much over capacity when it does not fit
  TimeBreakdown breakdown;
  MemoryBreakdown memory;           // of the most loaded stage
  std::int64_t micro_batches = 0;
  double parameters = 0;
  double hardware_flops = 0, model_flops = 0;  // per iteration, whole cluster
  std::vector<StagePrediction> stages;
  // How far to trust iteration_time: the validation residuals of this prediction's
  // regime (strategies/uncertainty), set by finish().
  Interval interval;

  // Sets the throughput figures from iteration_time and the memory figures from the
  // stages (the most loaded one), and the interval from the built-in uncertainty
  // table: one rule for every consumer.
  struct Workload {
    std::int64_t global_batch = 0, tokens_per_sample = 1, gpus = 1;
    double peak_flops = 0;  // the GPU's peak for the compute type, FLOP/s
    std::string gpu_status = "datasheet";  // the GPU profile's status (for the interval's regime)
    std::int64_t gpus_per_node = 1;
  };
  void finish(const Workload& w);
  Workload workload;  // what finish() used (not serialised)
};

// The prediction's members, written into the open object of `w` (a caller adds its own,
// such as the sweep's "tool"): the one serialiser of a Prediction. to_json_text is the
// object alone, byte for byte nlohmann's dump() of to_json, which is parsed from it.
void write_members(JsonWriter& w, const Prediction& p);
std::string to_json_text(const Prediction& p);
nlohmann::json to_json(const Prediction& p);
// Reads what to_json wrote (the simulator's child process sends it this way).
Prediction prediction_from_json(const nlohmann::json& j);

}  // namespace clustersim
