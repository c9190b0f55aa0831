#include "strategies/rules.hpp"

#include <algorithm>
#include <fmt/format.h>
#include <stdexcept>

namespace clustersim {
namespace {
using i64 = std::int64_t;
constexpr int kOptimizerKernels = 8;
}  // namespace

Fp8WeightBytes fp8_weights(const PrecisionRules& r) {
  if (r.weight_gemm != DType::fp8) return {r.weight_bytes, 0.0, 0.0};
  constexpr double fp8 = 1;  // e4m3 / e5m2
  Fp8WeightBytes b;
  b.stored = r.fp8_param_gather ? fp8 : r.weight_bytes;
  b.copy = r.fp8_param_gather ? fp8 : 2 * fp8;
  b.cast = b.stored + b.copy;
  return b;
}

WeightMemory weight_memory(double params, double fp8_params, const PrecisionRules& r, int zero, i64 dp) {
  const double d = double(std::max<i64>(1, dp));
  const Fp8WeightBytes fp8 = fp8_weights(r);
  WeightMemory m;
  m.weights = ((params - fp8_params) * r.weight_bytes + fp8_params * fp8.stored) / (zero >= 3 ? d : 1.0);
  m.gradients = params * r.grad_bytes / (zero >= 2 ? d : 1.0);
  m.optimizer_states = params * (r.master_bytes + r.optimizer_state_bytes) / (zero >= 1 ? d : 1.0);
  m.autocast_copy = params * r.autocast_copy_bytes + (fp8_copy_follows_gather(r, zero) ? 0.0 : fp8_params * fp8.copy);
  return m;
}

bool fp8_copy_follows_gather(const PrecisionRules& r, int zero) { return zero >= 3 && r.weight_gemm == DType::fp8; }

namespace {
// The bytes of `params` weights as ZeRO gathers them: the gather's element type, or under
// fp8_param_gather the fp8 parameters TE's cast weights are.
Bytes gathered_weight_bytes(double params, double fp8_params, const PrecisionRules& r) {
  return (params - fp8_params) * r.gather_bytes + fp8_params * (r.fp8_param_gather ? fp8_weights(r).stored : r.gather_bytes);
}
}  // namespace

Bytes gathered_block_bytes(double params, double fp8_params, const PrecisionRules& r, int zero) {
  if (zero < 3) return 0.0;
  return gathered_weight_bytes(params, fp8_params, r) +
         (fp8_copy_follows_gather(r, zero) ? fp8_params * fp8_weights(r).copy : 0.0);
}

GradientSync gradient_sync(double params, double fp8_params, const PrecisionRules& r, int zero, i64 dp, i64 shard) {
  GradientSync s;
  if (dp <= 1 || params <= 0) return s;
  s.reduce_bytes = params * r.grad_comm_bytes;
  if (zero == 0) return s;
  s.reduce = zero < 3 && r.zero_reduce_all ? Collective::all_reduce : Collective::reduce_scatter;
  if (zero < 3) s.gather_bytes = gathered_weight_bytes(params, fp8_params, r);
  else s.gather_per_pass = gathered_weight_bytes(params, fp8_params, r);
  if (shard >= 1 && shard < dp) s.replica_reduce_bytes = params / double(shard) * r.grad_comm_bytes;
  return s;
}

i64 gradient_ranks(i64 dp, i64 cp, Schedule schedule) { return dp * std::max<i64>(1, cp) * model_copies(schedule); }
i64 gradient_ranks(const PlanSpec& p) { return gradient_ranks(p.dp, p.cp, p.schedule); }

i64 shard_group_size(const FrameworkSpec& f, const PlanSpec& p, i64 dp_per_node) {
  const i64 ranks = gradient_ranks(p);
  if (!f.hybrid()) return ranks;
  const i64 shard = f.shard_size > 0 ? f.shard_size : dp_per_node;
  return std::clamp<i64>(shard, 1, ranks);
}

double updated_params(double params, int zero, i64 dp) {
  return zero >= 1 ? params / double(std::max<i64>(1, dp)) : params;
}

OverlapSlowdown overlap_slowdown(bool comm_in_flight, bool computing, const OverlapInterference& f) {
  return {comm_in_flight ? f.compute : 1.0, computing ? f.comm : 1.0};
}

Seconds overlap_exposed(Seconds compute, Seconds comm, const OverlapInterference& f) {
  if (compute <= 0 || comm <= 0) return std::max(0.0, comm);
  const OverlapSlowdown both = overlap_slowdown(true, true, f);
  const double fc = both.compute, fn = both.comm;
  if (comm * fn <= compute * fc)  // the collective ends first; the compute's rest runs alone
    return comm * fn * (1.0 - 1.0 / fc);
  return comm + compute * fc * (1.0 - 1.0 / fn) - compute;  // the compute ends first
}

Seconds ring_exchange_exposed(Seconds collective, Seconds gemm, i64 tp) {
  if (tp <= 1 || collective <= 0) return 0.0;
  const Seconds step = collective / double(tp - 1), chunk = std::max(0.0, gemm) / double(tp);
  return double(tp - 1) * std::max(0.0, step - chunk);
}

PipelinedReduceScatter pipelined_reduce_scatter(Seconds reduce_scatter, Seconds gemm, int splits, int rs_sms, int sms) {
  PipelinedReduceScatter p;
  if (reduce_scatter <= 0) return p;
  splits = std::max(1, splits);
  if (sms > 0 && rs_sms > 0 && rs_sms < sms) p.gemm_extra = std::max(0.0, gemm) * (double(sms) / double(sms - rs_sms) - 1.0);
  const Seconds r = reduce_scatter / double(splits), g = (std::max(0.0, gemm) + p.gemm_extra) / double(splits);
  p.exposed = r + double(splits - 1) * std::max(0.0, r - g);
  return p;
}

Seconds zero3_gather_exposed(Seconds gather, Seconds forward, Seconds backward, const OverlapInterference& f) {
  return overlap_exposed(forward, gather, f) + overlap_exposed(backward, gather, f);
}

double gradient_bucket_elements(const FrameworkSpec& f, const PrecisionRules& r) {
  if (f.name == Framework::pytorch_ddp) return f.bucket_cap_bytes / r.grad_bytes;
  return 40e6;
}

DdpBuckets ddp_buckets(const FrameworkSpec& f, i64 dp) {
  if (f.name != Framework::pytorch_ddp || dp <= 1) return {};
  return {true, !f.gradient_as_bucket_view};
}

Bytes ddp_gradient_scaling_bytes(const FrameworkSpec& f, double params, i64 dp, const PrecisionRules& r) {
  // Megatron-LM 2019 (model/distributed.py at a0368ddf, wrapped around every run, one GPU
  // too): _flatten_dense_tensors copies the gradients into one buffer, `coalesced /=
  // world size` scales it before the all-reduce (reduce_after=False), and each gradient
  // copies its slice back: three passes, each read and written.
  if (f.name == Framework::megatron_2019) return params * r.grad_bytes * 2 * 3;
  if (f.name != Framework::pytorch_ddp || dp <= 1) return 0;
  return params * r.grad_bytes * 2 * (f.gradient_as_bucket_view ? 1 : 2);
}

Seconds ddp_gradient_scaling(const KernelModel& km, const FrameworkSpec& f, double params, i64 dp,
                             const PrecisionRules& r) {
  const Bytes bytes = ddp_gradient_scaling_bytes(f, params, dp, r);
  if (bytes <= 0) return 0.0;
  return km.memory_stream(bytes, scalar_elementwise(f.name) ? kScalarElementwiseKind : MemoryKind::elementwise);
}

Seconds overlapped_sync_exposed(Seconds reduce, Seconds gather, Seconds backward, Seconds forward, double params,
                                double bucket_elements, const OverlapInterference& f) {
  // All but the last bucket run beside compute; the last one after it.
  const double last_bucket = std::min(1.0, bucket_elements / std::max(1.0, params));
  return overlap_exposed(backward, reduce * (1 - last_bucket), f) + reduce * last_bucket +
         overlap_exposed(forward, gather * (1 - last_bucket), f) + gather * last_bucket;
}

namespace {
double optimizer_bytes(double params, const PrecisionRules& r) {
  return params * (r.optimizer_step_bytes() + r.grad_bytes + r.optimizer_extra_bytes);
}
}  // namespace

Seconds optimizer_step(const KernelModel& km, double params, const PrecisionRules& r) {
  return km.memory(optimizer_bytes(params, r), kOptimizerKernels, MemoryKind::optimizer);
}

Seconds optimizer_step_marginal(const KernelModel& km, double params, const PrecisionRules& r) {
  return km.memory_stream(optimizer_bytes(params, r), MemoryKind::optimizer);
}

Seconds optimizer_step_fixed(const KernelModel& km) { return km.memory_fixed(kOptimizerKernels, MemoryKind::optimizer); }

Seconds autograd_grad_accumulation(const KernelModel& km, double params, std::int64_t micro_batches,
                                   const PrecisionRules& r) {
  if (micro_batches <= 1 || params <= 0 || r.autograd_accumulation_bytes <= 0) return 0;
  return double(micro_batches - 1) * km.memory(params * r.autograd_accumulation_bytes, 1, MemoryKind::elementwise);
}

Seconds fp8_weight_cast(const KernelModel& km, double fp8_params_held, const PrecisionRules& r) {
  const double bytes = fp8_params_held * fp8_weights(r).cast;
  if (bytes <= 0) return 0.0;
  return km.memory_stream(bytes, MemoryKind::elementwise);
}

Recompute block_recompute(Recompute requested, bool is_layer) { return is_layer ? requested : Recompute::none; }

bool op_recomputed(const Op& op, Recompute rc, bool in_repeated_layer) {
  if (!in_repeated_layer) return false;
  return rc == Recompute::full || (rc == Recompute::selective && op.core_attention);
}

KeptActivations kept_activations(Recompute rc, Bytes saved_all, Bytes saved_core, Bytes boundary, Bytes transient) {
  KeptActivations k;
  switch (rc) {
    case Recompute::none:
      k.kept = saved_all;
      k.working = 2 * boundary + transient;
      break;
    case Recompute::selective:
      k.kept = saved_all - saved_core;
      k.working = saved_core + 2 * boundary + transient;
      break;
    case Recompute::full:
      k.kept = boundary;
      k.working = saved_all + 2 * boundary + transient;
      break;
  }
  return k;
}

ActivationOffload activation_offload(const std::vector<OffloadLayer>& chunk_layers, i64 requested, BytesPerSecond d2h,
                                     BytesPerSecond h2d) {
  ActivationOffload o;
  const i64 n = std::clamp<i64>(requested, 0, i64(chunk_layers.size()) - 1);
  if (n <= 0 || d2h <= 0 || h2d <= 0) return o;
  o.layers = n;
  Bytes largest = 0, second = 0;
  for (i64 i = 0; i < n; ++i) {
    const OffloadLayer& l = chunk_layers[static_cast<std::size_t>(i)];
    const OffloadLayer& next = chunk_layers[static_cast<std::size_t>(i + 1)];
    o.offloaded += l.kept;
    if (l.kept > largest) {
      second = largest;
      largest = l.kept;
    } else {
      second = std::max(second, l.kept);
    }
    o.d2h.push_back(l.kept / d2h);
    o.h2d.push_back(l.kept / h2d);
    o.exposed_forward += overlap_exposed(next.forward, o.d2h.back(), OverlapInterference{});
    o.exposed_backward += overlap_exposed(next.backward, o.h2d.back(), OverlapInterference{});
  }
  o.buffer = largest + second;
  return o;
}

MemoryBreakdown stage_memory(const StageMemoryInputs& in, const PrecisionRules& r) {
  WeightMemory w = weight_memory(in.params - in.expert_params, in.fp8_params - in.expert_fp8_params, r, in.zero, in.dp);
  if (in.expert_params > 0) {
    const WeightMemory e = weight_memory(in.expert_params, in.expert_fp8_params, r, in.zero, in.expert_dp);
    w.weights += e.weights;
    w.gradients += e.gradients;
    w.optimizer_states += e.optimizer_states;
    w.autocast_copy += e.autocast_copy;
  }
  MemoryBreakdown m;
  m.weights = w.weights;
  m.gradients = w.gradients;
  m.optimizer_states = w.optimizer_states;
  m.activations = in.in_flight * in.kept_per_micro_batch;
  m.gradients += in.ddp.copy ? in.params * r.grad_bytes : 0.0;
  // The offload copy buffer is the micro-batch being computed: its layers in transit
  // exist before its kept layers do (forward) or after they are freed (backward), so it
  // adds only what exceeds them.
  const Bytes in_transit = std::max(0.0, in.offload_buffer - in.kept_per_micro_batch);
  m.temporary = in.working + in_transit + w.autocast_copy + 2 * gathered_block_bytes(in.largest_block_params, in.largest_block_fp8_params, r, in.zero);
  if (!r.persistent_grads && !in.ddp.persistent && in.micro_batches == 1) {
    MemoryBreakdown activation_peak = m, step_peak = m;
    activation_peak.gradients = 0;
    step_peak.activations = step_peak.temporary = 0;
    m = activation_peak.total() >= step_peak.total() ? activation_peak : step_peak;
  }
  return m;
}

std::vector<i64> layers_per_virtual_stage(i64 layers, i64 p, i64 v, const PipelineSplit& split) {
  if (p < 1 || v < 1) throw std::invalid_argument("pipeline stages and chunks must be >= 1");
  const i64 n = p * v;
  std::vector<i64> out(static_cast<std::size_t>(n));
  switch (split.kind) {
    case StageSplit::even:
      if (v > 1 && layers % n != 0)
        throw std::invalid_argument("layers do not split evenly over the virtual pipeline stages");
      for (i64 vs = 0; vs < n; ++vs) out[static_cast<std::size_t>(vs)] = layers / n + (v == 1 && vs < layers % n ? 1 : 0);
      return out;
    case StageSplit::lighten_ends: {
      if ((layers + 2) % n != 0)
        throw std::invalid_argument("layers + 2 (embedding and output layer) do not split evenly over the virtual stages");
      const i64 each = (layers + 2) / n;
      for (auto& x : out) x = each;
      out.front() -= 1;
      out.back() -= 1;  // with one virtual stage: layers + 2 - 2
      return out;
    }
    case StageSplit::listed: {
      i64 sum = 0;
      for (i64 x : split.layers) sum += x;
      if (i64(split.layers.size()) != n || sum != layers)
        throw std::invalid_argument("the listed layers per stage do not match the virtual stages or the layers");
      return split.layers;
    }
  }
  return out;
}

i64 layers_of_stage(i64 layers, i64 p, i64 v, i64 s, const PipelineSplit& split) {
  // The estimator and the search call this for every stage of every plan they cost: the
  // common even split without the vector.
  if (p < 1 || v < 1) throw std::invalid_argument("pipeline stages and chunks must be >= 1");
  if (split.kind == StageSplit::even && v == 1) return layers / p + (s < layers % p ? 1 : 0);
  const std::vector<i64> per = layers_per_virtual_stage(layers, p, v, split);
  i64 sum = 0;
  for (i64 c = 0; c < v; ++c) sum += per[static_cast<std::size_t>(c * p + s)];
  return sum;
}

i64 microbatch_group(i64 p, i64 group) { return group > 0 ? group : p; }

// Interleaved chunks are counted at 1/v of the stage's activations each: exact for equal
// chunks; with uneven ones (layers_per_stage, or the embedding on chunk 0) the replay,
// which counts each chunk's own, differs by a few percent (tests/sim/test_plans.cpp).
double micro_batches_in_flight(Schedule schedule, i64 p, i64 v, i64 m, i64 s, i64 group) {
  switch (schedule) {
    case Schedule::gpipe: return double(m);
    case Schedule::one_f_one_b:
    case Schedule::zb_h1: return double(std::min<i64>(m, p - s));
    case Schedule::dualpipe: return double(std::min<i64>(m, p + 1)) / 2.0;
    case Schedule::interleaved:
      if (p == 1 || v == 1) return double(std::min<i64>(m, p - s));
      return double(std::min<i64>(m * v, 2 * (p - s - 1) + (v - 1) * microbatch_group(p, group) + 1)) / double(v);
  }
  return 1;
}

PipelineSend pipeline_send(Bytes activation, i64 tp, bool sequence_parallel, Framework framework) {
  PipelineSend s;
  s.per_rank = activation / double(std::max<i64>(1, tp));
  if (tp > 1 && !sequence_parallel) s.gather_after = activation;
  if (framework == Framework::megatron_deepspeed) {
    s.blocking = true;
    if (tp > 1) s.regather_output = activation;
  }
  return s;
}

Seconds pipeline_comm_per_micro_batch(const PipelineSend& send, Seconds transfer, Seconds gather, i64 v) {
  const double gathers = (send.gather_after > 0 ? 2.0 : 0.0) + (send.regather_output > 0 ? 1.0 : 0.0);
  return double(std::max<i64>(1, v)) * (double(send.transfers()) * transfer + gathers * gather);
}

Bytes tied_embedding_sync_bytes(double tied_params, i64 tp, i64 pp, const PrecisionRules& r) {
  if (pp <= 1 || tied_params <= 0) return 0;
  return tied_params / double(std::max<i64>(1, tp)) * r.grad_comm_bytes;
}


Seconds pipeline_makespan(Seconds sum, Seconds slowest, i64 m, i64 v) {
  return double(m) * slowest + (sum - slowest) / double(std::max<i64>(1, v));
}

Seconds pipeline_fill(Schedule schedule, Seconds per_micro_batch, Seconds forward, Seconds weight_grad) {
  if (schedule == Schedule::zb_h1) return std::max(forward, per_micro_batch - 2 * weight_grad);
  return per_micro_batch;
}

Seconds pipeline_makespan(const std::vector<Seconds>& per_micro_batch, i64 m, i64 v) {
  Seconds sum = 0, slowest = 0;
  for (Seconds t : per_micro_batch) {
    sum += t;
    slowest = std::max(slowest, t);
  }
  return pipeline_makespan(sum, slowest, m, v);
}

OpKernels op_kernels(const Op& op) {
  switch (op.kind) {
    case OpKind::matmul: return {1, 2};  // forward GEMM; dgrad and wgrad
    case OpKind::attention: return {1, 1};
    case OpKind::embedding: return {1, 1};
    case OpKind::memory:
      return {op.fwd_bytes > 0 ? op.kernels : 0, op.bwd_bytes > 0 ? op.bwd_kernels() : 0};
    case OpKind::tp_enter:
    case OpKind::tp_exit:
    case OpKind::all_to_all: return {0, 0};
  }
  return {0, 0};
}

Seconds host_bound_time(Seconds gpu_f, Seconds gpu_b, Seconds host_f, Seconds host_b, i64 m) {
  const Seconds gpu = gpu_f + gpu_b;
  const Seconds first = std::max({gpu, host_f + gpu_b, host_f + host_b});
  const Seconds total = first + double(std::max<i64>(0, m - 1)) * std::max(gpu, host_f + host_b);
  return std::max(0.0, total - double(m) * gpu);
}

Seconds host_per_kernel(const FrameworkSpec& f, const HostDispatch& h) { return f.launch_blocking ? 0.0 : h.eager_per_kernel; }

Seconds launch_blocking_gap(const Efficiency& e, const HostDispatch& h) {
  if (!(e.sync_launch_latency > 0)) return h.eager_per_kernel + e.kernel_overhead;
  return std::max(e.kernel_overhead, h.eager_per_kernel - e.launch_submit + e.sync_launch_latency);
}

AttentionKernel pytorch_sdpa_kernel(const GpuProfile& gpu) {
  const bool prefers_cudnn = gpu.compute_capability == "9.0" || gpu.compute_capability == "10.0";
  return prefers_cudnn && gpu.calibration.attention_cudnn.calibrated() ? AttentionKernel::cudnn : AttentionKernel::flash2;
}

void use_attention_kernel(GpuProfile& gpu, AttentionKernel k) {
  if (k != AttentionKernel::cudnn || !gpu.calibration.attention_cudnn.calibrated()) return;
  gpu.calibration.attention = gpu.calibration.attention_cudnn;
  gpu.efficiency.attention = gpu.calibration.attention.forward_max;
}

AttentionKernel fused_attention_kernel(const TrainingSpec& t, const GpuProfile& gpu) {
  switch (t.attention_kernel) {
    case AttentionKernelChoice::flash2: return AttentionKernel::flash2;
    case AttentionKernelChoice::cudnn: return AttentionKernel::cudnn;
    case AttentionKernelChoice::automatic: break;
  }
  const Framework f = t.framework.name;
  const bool sdpa = f == Framework::pytorch || f == Framework::pytorch_ddp || f == Framework::pytorch_fsdp ||
                    f == Framework::pytorch_tp;
  return sdpa ? pytorch_sdpa_kernel(gpu) : AttentionKernel::flash2;
}

ClusterModel scenario_cluster(const Scenario& s, Diagnostics& diag) {
  ClusterModel c = resolve_cluster(s.cluster, diag);
  if (s.training.framework.launch_blocking)
    c.gpu.efficiency.kernel_overhead = launch_blocking_gap(c.gpu.efficiency, c.gpu.host);
  if (fused_attention_kernel(s.training, c.gpu) == AttentionKernel::cudnn) {
    if (!c.gpu.calibration.attention_cudnn.calibrated()) {
      diag.error("/training/attention_kernel",
                 fmt::format("cudnn: the {} profile has no measured cuDNN attention curve (none was measured on its "
                             "architecture, compute capability {}); use flash2 or auto",
                             c.gpu.name, c.gpu.compute_capability.empty() ? "not stated" : c.gpu.compute_capability));
    } else {
      use_attention_kernel(c.gpu, AttentionKernel::cudnn);
    }
  }
  return c;
}

OpHost op_host_overhead(const Op& op, const FrameworkSpec& f, const HostDispatch& h, i64 tp) {
  if (f.name != Framework::pytorch_tp || tp <= 1) return {};
  if (op.loss_parallel) return {h.dtensor_loss_forward, h.dtensor_loss_backward, 0.0};
  if (!op.parallel_style) return {};
  // A bias is measured as one figure; it splits between the passes as the module's own cost.
  const Seconds module = h.dtensor_module_forward + h.dtensor_module_backward;
  const double bias_forward = module > 0 ? h.dtensor_module_forward / module : 0.5;
  // dtensor_bias was measured on whole one-micro-batch steps: it holds the bias's share of
  // the optimizer step, which is paid once per iteration, not per micro-batch.
  const int params = op.biased ? 2 : 1;
  const Seconds bias = op.biased ? std::max(0.0, h.dtensor_bias - h.dtensor_optimizer_param) : 0.0;
  return {h.dtensor_module_forward + bias * bias_forward, h.dtensor_module_backward + bias * (1 - bias_forward),
          params * h.dtensor_optimizer_param};
}

Seconds optimizer_host_wait(Seconds host_lead, Seconds sync, Seconds host_optimizer) {
  return std::max(0.0, host_optimizer - std::max(0.0, host_lead) - sync);
}

Seconds host_hooks_per_layer(const FrameworkSpec& f, const HostDispatch& h, i64 dp) {
  switch (f.name) {
    case Framework::pytorch_ddp: return dp > 1 ? h.ddp_per_layer : 0.0;
    case Framework::pytorch_fsdp:
      if (f.fsdp_version == 2) return h.fsdp2_per_unit;
      return f.param_dtype && *f.param_dtype != ElementType::fp32 ? h.fsdp_mixed_per_unit : h.fsdp_per_unit;
    default: return 0.0;
  }
}

StageLaunches& StageLaunches::operator+=(const StageLaunches& o) {
  kernels_forward += o.kernels_forward;
  kernels_backward += o.kernels_backward;
  extra_forward += o.extra_forward;
  extra_backward += o.extra_backward;
  optimizer += o.optimizer;
  return *this;
}

StageLaunches op_launches(const Op& op, int comm_forward, int comm_backward, bool recomputed, const FrameworkSpec& f,
                          const HostDispatch& h, i64 tp) {
  const OpKernels k = op_kernels(op);
  const OpHost extra = op_host_overhead(op, f, h, tp);
  StageLaunches l;
  l.kernels_forward = k.forward + comm_forward;
  l.kernels_backward = k.backward + comm_backward + (recomputed ? k.forward + comm_forward : 0);
  l.extra_forward = extra.forward;
  l.extra_backward = extra.backward + (recomputed ? extra.forward : 0.0);
  l.optimizer = extra.optimizer;
  return l;
}

StageHost stage_host(const StageLaunches& l, int layers, const FrameworkSpec& f, const HostDispatch& h, i64 ranks) {
  const Seconds per_kernel = host_per_kernel(f, h);
  const Seconds hooks = double(layers) * host_hooks_per_layer(f, h, ranks);
  StageHost s;
  s.forward = l.kernels_forward * per_kernel + l.extra_forward + hooks / 2;
  s.total = s.forward + l.kernels_backward * per_kernel + l.extra_backward + hooks / 2;
  return s;
}

namespace {
// After the last micro-batch: each stage's gradient sync, the wait for its host to prepare
// the optimizer step, and the step; the iteration ends with the longest of them (the first
// of equals). `pipeline` + breakdown.host_bound is when the GPUs finish the micro-batches,
// whose launches took the host `micro_batches` x each stage's host time.
void add_step_tail(Prediction& e, Seconds pipeline, i64 micro_batches) {
  auto& bd = e.breakdown;
  const Seconds end = pipeline + bd.host_bound;
  std::size_t tail_stage = 0;
  Seconds longest = -1, wait = 0;
  for (std::size_t s = 0; s < e.stages.size(); ++s) {
    const StagePrediction& st = e.stages[s];
    const Seconds w = optimizer_host_wait(end - double(micro_batches) * st.host, st.dp_exposed, st.host_optimizer);
    if (st.dp_exposed + w + st.optimizer > longest) {
      longest = st.dp_exposed + w + st.optimizer;
      tail_stage = s;
      wait = w;
    }
  }
  const StagePrediction& t = e.stages[tail_stage];
  bd.dp_comm_exposed += t.dp_exposed;
  bd.optimizer = t.optimizer;
  bd.host_bound += wait;
  e.iteration_time = pipeline + (t.dp_exposed + t.optimizer) + bd.host_bound;
}
}  // namespace

void compose_dualpipe(Prediction& e, i64 m, const OverlapInterference& f) {
  e.breakdown = TimeBreakdown{};
  if (e.stages.empty()) return;
  std::vector<DualPipeChunk> chunks;
  for (const StagePrediction& st : e.stages) {
    const Seconds comm = (st.tp_comm + st.ep_comm + st.p2p + st.zero3_gather) / 4;  // per chunk and direction
    // The offload's exposed copies hold the GPU like compute does.
    chunks.push_back({(st.forward + st.offload_forward) / 2, comm, (st.backward + st.recompute + st.offload_backward) / 2, comm,
                      st.weight_grad / 2});
  }
  std::vector<Seconds> busy;
  const Seconds pipeline = dualpipe_makespan(chunks, m, f, &busy);
  std::size_t crit = 0;
  for (std::size_t s = 0; s < e.stages.size(); ++s)
    if (busy[s] > busy[crit]) crit = s;
  const StagePrediction& c = e.stages[crit];
  const double half = double(m) / 2;  // micro-batches through both chunks of a rank
  auto& bd = e.breakdown;
  bd.compute_forward = half * c.forward;
  bd.compute_backward = half * c.backward;
  bd.compute_recompute = half * c.recompute;
  bd.offload_exposed = half * (c.offload_forward + c.offload_backward);
  // What communication the busiest rank leaves exposed, shared out by kind.
  const Seconds comm = c.tp_comm + c.ep_comm + c.p2p + c.zero3_gather;
  const Seconds exposed =
      std::max(0.0, busy[crit] - bd.compute_forward - bd.compute_backward - bd.compute_recompute - bd.offload_exposed);
  if (comm > 0) {
    bd.tp_comm_exposed = exposed * c.tp_comm / comm;
    bd.ep_comm_exposed = exposed * c.ep_comm / comm;
    bd.pp_comm_exposed = exposed * c.p2p / comm;
    bd.dp_comm_exposed = exposed * c.zero3_gather / comm;
  }
  bd.bubble = pipeline - busy[crit];
  const auto m_half = static_cast<i64>(m / 2);
  for (const auto& st : e.stages)
    bd.host_bound = std::max(bd.host_bound, host_bound_time(st.forward + st.tp_comm / 2 + st.ep_comm / 2,
                                                            st.backward + st.recompute + st.tp_comm / 2 + st.ep_comm / 2,
                                                            st.host_forward, st.host - st.host_forward, m_half));
  add_step_tail(e, pipeline, m_half);
}

void compose_iteration(Prediction& e, i64 m, i64 v, Schedule schedule, const OverlapInterference& f) {
  if (schedule == Schedule::dualpipe) return compose_dualpipe(e, m, f);
  // A stage's forward with half of its communication (the other half runs in backward).
  const auto forward_of = [](const StagePrediction& st) {
    return st.forward + st.offload_forward + (st.tp_comm + st.ep_comm + st.cp_comm + st.p2p) / 2;
  };
  e.breakdown = TimeBreakdown{};
  if (e.stages.empty()) return;
  std::size_t crit = 0;  // the slowest stage (first of equals)
  Seconds fill = 0;
  for (std::size_t s = 0; s < e.stages.size(); ++s) {
    const StagePrediction& st = e.stages[s];
    fill += pipeline_fill(schedule, st.per_micro_batch(), forward_of(st), st.weight_grad);
    if (st.per_micro_batch() > e.stages[crit].per_micro_batch()) crit = s;
  }
  const StagePrediction& c = e.stages[crit];
  // m x the slowest stage, plus the other stages' fill and drain.
  const Seconds pipeline = pipeline_makespan(fill - pipeline_fill(schedule, c.per_micro_batch(), forward_of(c), c.weight_grad) +
                                                 c.per_micro_batch(), c.per_micro_batch(), m, v);
  auto& bd = e.breakdown;
  const double md = double(m);
  bd.compute_forward = md * c.forward;
  bd.compute_backward = md * c.backward;
  bd.compute_recompute = md * c.recompute;
  bd.tp_comm_exposed = md * c.tp_comm;
  bd.ep_comm_exposed = md * c.ep_comm;
  bd.cp_comm_exposed = md * c.cp_comm;
  bd.pp_comm_exposed = md * c.p2p;
  bd.offload_exposed = md * (c.offload_forward + c.offload_backward);
  bd.bubble = pipeline - md * c.per_micro_batch();
  bd.dp_comm_exposed = md * c.zero3_gather;
  for (const auto& st : e.stages)
    bd.host_bound = std::max(bd.host_bound, host_bound_time(st.forward + (st.tp_comm + st.ep_comm + st.cp_comm) / 2,
                                                            st.backward + st.recompute + (st.tp_comm + st.ep_comm + st.cp_comm) / 2,
                                                            st.host_forward, st.host - st.host_forward, m));
  add_step_tail(e, pipeline, m);
}

i64 plan_rank(i64 dp, i64 tp, i64 stage, i64 replica, i64 tp_rank) { return plan_rank(dp, tp, 1, stage, replica, 0, tp_rank); }

i64 model_copies(Schedule schedule) { return schedule == Schedule::dualpipe ? 2 : 1; }

i64 dualpipe_stage(i64 p, i64 rank, int direction) { return direction == 0 ? rank : p - 1 - rank; }

std::vector<DualPipeStep> dualpipe_order(i64 p, i64 m, i64 r) {
  // DualPipe.step with its "phases": phase 0 is direction 0 on the first half of the ranks
  // and direction 1 on the second half (the schedule is mirrored around the middle).
  using K = DualPipeStep::Kind;
  const i64 half = p / 2, h = std::min(r, p - 1 - r), chunks = m / 2;
  const int flip = r >= half ? 1 : 0;
  const bool middle = r == half - 1 || r == half;
  std::vector<DualPipeStep> out;
  i64 next_f[2] = {0, 0}, next_b[2] = {0, 0};
  std::vector<std::pair<int, i64>> deferred;  // weight passes waiting, first in first out
  std::size_t next_w = 0;
  const auto F = [&](int phase, bool overlap = false) {
    const int d = phase ^ flip;
    out.push_back({K::forward, d, next_f[d]++, false, overlap});
  };
  const auto B = [&](int phase, bool zb = false) {
    const int d = phase ^ flip;
    if (zb) deferred.push_back({d, next_b[d]});
    out.push_back({K::backward, d, next_b[d]++, zb, false});
  };
  const auto W = [&]() {
    const auto [d, mb] = deferred.at(next_w++);
    out.push_back({K::weight, d, mb, false, false});
  };
  for (i64 i = 0; i < (half - h - 1) * 2; ++i) F(0);  // step 1: nF0
  for (i64 i = 0; i < h + 1; ++i) {                    // step 2: nF0F1
    F(0);
    F(1);
  }
  for (i64 i = 0; i < half - h - 1; ++i) {  // step 3: nB1W1F1 (zero bubble)
    B(1, true);
    W();
    F(1);
  }
  for (i64 i = 0; i < chunks - p + h + 1; ++i) {  // step 4 (main): nF0B1F1B0
    // The middle ranks do not overlap their first pair, to shorten the bubble.
    F(0, !(i == 0 && middle));
    B(1);
    F(1, true);
    B(0);
  }
  for (i64 i = 0; i < half - h - 1; ++i) {  // step 5: nB1F1B0
    B(1);
    F(1, true);
    B(0);
  }
  bool zb = false;  // step 6: nB1B0, the second half zero bubble
  for (i64 i = 0; i < h + 1; ++i) {
    if (i == (h + 1) / 2 && h % 2 == 1) zb = true;
    B(1, zb);
    if (i == (h + 1) / 2 && h % 2 == 0) zb = true;
    B(0, zb);
  }
  for (i64 i = 0; i < half - h - 1; ++i) {  // step 7: nWB0 (zero bubble)
    W();
    B(0, true);
  }
  while (next_w < deferred.size()) W();  // step 8: nW
  return out;
}

Seconds dualpipe_pair_time(const DualPipeChunk& c, const OverlapInterference& f) {
  const Seconds compute = c.forward + c.backward;
  return compute + overlap_exposed(compute, c.forward_comm + c.backward_comm, f);
}

Seconds dualpipe_makespan(const std::vector<DualPipeChunk>& per_rank, i64 m, const OverlapInterference& f,
                          std::vector<Seconds>* busy) {
  const i64 p = static_cast<i64>(per_rank.size());
  if (p < 2 || p % 2 != 0 || m < 2 * p || m % 2 != 0)
    throw std::invalid_argument("dualpipe needs an even p >= 2 and an even m >= 2p");
  using K = DualPipeStep::Kind;
  const i64 chunks = m / 2;
  std::vector<std::vector<DualPipeStep>> order;
  for (i64 r = 0; r < p; ++r) order.push_back(dualpipe_order(p, m, r));
  // done[kind][direction][stage][micro-batch]: when a chunk finished (-1: not yet).
  const auto at = [&](int kind, int d, i64 stage, i64 mb) {
    return static_cast<std::size_t>(((kind * 2 + d) * p + stage) * chunks + mb);
  };
  std::vector<Seconds> done(static_cast<std::size_t>(2 * 2 * p * chunks), -1.0);
  std::vector<std::size_t> pos(static_cast<std::size_t>(p), 0);
  std::vector<Seconds> clock(static_cast<std::size_t>(p), 0.0), work(static_cast<std::size_t>(p), 0.0);
  // When a step's input is ready (or -1): a forward waits for the previous stage's forward,
  // a backward for the next stage's backward, of the same micro-batch and direction.
  const auto input_ready = [&](i64 r, const DualPipeStep& s) -> Seconds {
    const i64 st = dualpipe_stage(p, r, s.direction);
    if (s.kind == K::forward) return st == 0 ? 0.0 : done[at(0, s.direction, st - 1, s.micro_batch)];
    if (s.kind == K::backward) return st == p - 1 ? 0.0 : done[at(1, s.direction, st + 1, s.micro_batch)];
    return 0.0;
  };
  for (bool progress = true; progress;) {
    progress = false;
    for (i64 r = 0; r < p; ++r) {
      const auto ri = static_cast<std::size_t>(r);
      const DualPipeChunk& c = per_rank[ri];
      while (pos[ri] < order[ri].size()) {
        const DualPipeStep& s = order[ri][pos[ri]];
        const bool pair = s.overlap_next;
        Seconds start = clock[ri];
        const Seconds in = input_ready(r, s);
        if (in < 0) break;
        start = std::max(start, in);
        Seconds length = 0;
        if (pair) {
          const Seconds in2 = input_ready(r, order[ri][pos[ri] + 1]);
          if (in2 < 0) break;
          start = std::max(start, in2);
          length = dualpipe_pair_time(c, f);
        } else if (s.kind == K::forward) {
          length = c.forward + c.forward_comm;
        } else if (s.kind == K::backward) {
          length = c.backward + c.backward_comm - (s.defer_weight ? c.weight_grad : 0.0);
        } else {
          length = c.weight_grad;
        }
        const Seconds end = start + length;
        for (std::size_t k = 0; k < (pair ? 2u : 1u); ++k) {
          const DualPipeStep& x = order[ri][pos[ri] + k];
          if (x.kind != K::weight)
            done[at(x.kind == K::forward ? 0 : 1, x.direction, dualpipe_stage(p, r, x.direction), x.micro_batch)] = end;
        }
        clock[ri] = end;
        work[ri] += length;
        pos[ri] += pair ? 2 : 1;
        progress = true;
      }
    }
  }
  Seconds makespan = 0;
  for (i64 r = 0; r < p; ++r) {
    if (pos[static_cast<std::size_t>(r)] != order[static_cast<std::size_t>(r)].size())
      throw std::logic_error("dualpipe schedule deadlocked");
    makespan = std::max(makespan, clock[static_cast<std::size_t>(r)]);
  }
  if (busy) *busy = work;
  return makespan;
}

PlanGroups plan_groups(const ClusterModel& c, const PlanSpec& p) {
  PlanGroups g;
  const i64 gpn = c.gpus_per_node;
  // The layout of one stage's replicas (DualPipe's second copy of a stage sits on another
  // stage's GPUs: the estimator widens the group by model_copies where it reduces).
  const i64 cp = std::max<i64>(1, p.cp), ranks = gradient_ranks(p.dp, p.cp);
  g.tp = {p.tp, std::min(p.tp, gpn)};
  // The gradient group: dp x cp ranks, tp apart (cp innermost), as many per node as fit.
  const i64 dp_local = p.tp >= gpn ? 1 : std::max<i64>(1, std::min(ranks, gpn / p.tp));
  g.dp = {ranks, dp_local};
  g.dp_share = double(dp_local) / double(gpn);
  // Expert-parallel ranks are data-parallel ranks: tp x cp apart.
  const i64 ep_local = p.tp * cp >= gpn ? 1 : std::max<i64>(1, std::min(p.ep, gpn / (p.tp * cp)));
  g.ep = {p.ep, ep_local};
  g.ep_share = double(ep_local) / double(gpn);
  g.pp_cross_node = ranks * p.tp >= gpn;
  g.ends_cross_node = ranks * p.tp * p.pp > gpn;
  return g;
}

i64 plan_rank(i64 dp, i64 tp, i64 cp, i64 stage, i64 replica, i64 cp_rank, i64 tp_rank) {
  return ((stage * dp + replica) * cp + cp_rank) * tp + tp_rank;
}

ContextGroups context_groups(const ClusterModel& c, const PlanSpec& p) {
  ContextGroups g;
  const i64 gpn = c.gpus_per_node, cp = std::max<i64>(1, p.cp);
  const i64 local = p.tp >= gpn ? 1 : std::max<i64>(1, std::min(cp, gpn / p.tp));
  g.cp = {cp, local, p.tp};
  g.cp_share = double(local) / double(gpn);
  return g;
}

Seconds ring_attention_exposed(Seconds send, Seconds attention_step, i64 steps, const OverlapInterference& f) {
  if (steps <= 0) return 0;
  return double(steps) * overlap_exposed(attention_step, send, f);
}

HybridGroups hybrid_groups(const Group& dp, i64 shard, i64 gpus_per_node) {
  HybridGroups h;
  shard = std::clamp<i64>(shard, 1, dp.size);
  const i64 replicas = dp.size / shard;
  const i64 shard_local = std::min(shard, dp.per_node);
  // Members of a replica group are `shard` gradient-group members apart: several share a
  // node only when a node holds more than one shard group.
  const i64 replica_local = std::max<i64>(1, std::min(replicas, dp.per_node / shard));
  h.shard = {shard, shard_local, dp.stride};
  h.replicas = {replicas, replica_local, dp.stride * shard};
  h.shard_share = double(shard_local) / double(gpus_per_node);
  h.replica_share = double(replica_local) / double(gpus_per_node);
  return h;
}

}  // namespace clustersim
