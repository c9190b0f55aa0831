// Plan-level rules: what a parallel plan does with the per-op costs (op_timing), written
// once. The estimator (closed form), the SimGrid replay (flows and actors) and the search
// (ILP over shardings) differ in how they time and overlap work; what work, bytes and
// memory a plan implies comes from here, so the three cannot drift apart.
//
// Each rule is one function with a closed-form test in tests/core/test_rules.cpp.
#pragma once
#include <cstdint>
#include <vector>

#include "costmodel/cluster.hpp"
#include "costmodel/collectives.hpp"
#include "costmodel/graph.hpp"
#include "costmodel/kernels.hpp"
#include "costmodel/precision.hpp"
#include "scenarios/scenario.hpp"
#include "strategies/prediction.hpp"

namespace clustersim {

// ---------------------------------------------------------------------------------------
// Weight update: ZeRO 0-3 over `dp` data-parallel ranks (Rajbhandari et al. 2020).
// ZeRO-1 shards the master weights and optimizer states, ZeRO-2 also the gradients,
// ZeRO-3 also the weights. `params` are the parameters one GPU holds before ZeRO.
// ---------------------------------------------------------------------------------------
struct WeightMemory {
  Bytes weights = 0, gradients = 0, optimizer_states = 0;
  // The low-precision weight copies beside the stored weights: PyTorch autocast's copy of
  // every weight, Transformer Engine's fp8 copies of the weights it casts (fp8_weights).
  Bytes autocast_copy = 0;
  Bytes total() const { return weights + gradients + optimizer_states + autocast_copy; }
};

// Transformer Engine's fp8 weights (mixed-fp8), the one rule for what they cost, per
// parameter of the weights TE casts (`fp8_params`, graph.hpp fp8_cast_params: the weights
// of TE's Linear, LayerNormLinear, LayerNormMLP and GroupedLinear; Megatron's embedding,
// norms and output layer, a plain tensor_parallel.ColumnParallelLinear, stay bf16).
// TE keeps, per such module, its weight cast to fp8 and the transpose the backward's dgrad
// GEMM reads (rowwise and columnwise data), 1 byte each, across the micro-batches of a
// step, and recasts them at the first micro-batch: TransformerEngine v2.5 (f05f12c)
// transformer_engine/pytorch/module/linear.py _Linear.forward gets weightmat from
// get_weight_workspace(cache_name "weight", update_workspace = is_first_microbatch), which
// keeps it in the module's _fp8_workspaces (module/base.py); layernorm_linear.py,
// layernorm_mlp.py and grouped_linear.py do the same.
// Under Megatron's fp8_param_gather (--fp8-param-gather; Megatron-Bridge's fp8 precision
// recipes set it) the model is built under TE's fp8_model_init, so those parameters are
// themselves fp8 tensors: the DDP buffer holds them in 1 byte (torch.uint8,
// megatron/core/distributed/param_and_grad_buffer.py, modify_underlying_storage of a
// Float8Tensor; fp8_param = fp8_param_gather in megatron/training/arguments.py, Megatron-LM
// core_r0.14.0 32ad5c8), the distributed optimizer casts its fp32 master into them and
// all-gathers them in fp8, and no bf16 copy of them exists (TransformerBlock builds its
// layers under get_fp8_context(is_init=True), megatron/core/fp8_utils.py); TE's
// get_weight_workspace then only adds the columnwise usage, the transpose.
//  stored  bytes per cast parameter of the weight the optimizer writes and ZeRO gathers:
//          the precision's weight, or 1 under fp8_param_gather;
//  copy    bytes per cast parameter of TE's fp8 copies beside it: 2 (weight and
//          transpose), or 1 (the transpose) under fp8_param_gather;
//  cast    bytes read and written per cast parameter by the once-a-step cast: read the
//          stored weight, write the copies (a memory-bound cast-transpose stream).
// All 0 (copy, cast) and the weight's bytes (stored) without fp8 GEMMs.
struct Fp8WeightBytes {
  double stored = 0, copy = 0, cast = 0;
};
Fp8WeightBytes fp8_weights(const PrecisionRules& r);

// Weight memory of `params` parameters of which `fp8_params` are cast by Transformer
// Engine (fp8_weights), at ZeRO level `zero` over `dp` ranks.
// TE's fp8 copies are kept for every resident cast parameter, except under ZeRO-3 / FSDP
// (mixed-fp8, zero 3): there they are cast from the gathered weight and freed with it
// (Megatron-Bridge's FSDP recipes set ddp.keep_fp8_transpose_cache false:
// scripts/performance/utils/helpers.py, set_megatron_fsdp_overrides, v0.1.0rc3), so they
// live only for the gathered blocks and stage_memory counts them there
// (fp8_copy_follows_gather).
WeightMemory weight_memory(double params, double fp8_params, const PrecisionRules& r, int zero, std::int64_t dp);
bool fp8_copy_follows_gather(const PrecisionRules& r, int zero);
// One block's gathered weights under ZeRO-3 / FSDP, in bytes: its parameters as gathered
// (the gather's element type; fp8_weights' stored bytes for the cast ones) plus, when
// fp8_copy_follows_gather, TE's fp8 copies of the cast ones. 0 below ZeRO-3. stage_memory
// counts two blocks'.
Bytes gathered_block_bytes(double params, double fp8_params, const PrecisionRules& r, int zero);

// The data-parallel collectives of one iteration, in bytes per rank (as collective_time
// takes them). ZeRO-0: all-reduce of the gradients. ZeRO-1/2: reduce-scatter of the
// gradients and, after the step, an all-gather of the updated weights (DeepSpeed's
// BF16_Optimizer, PrecisionRules::zero_reduce_all: an all-reduce of the whole fp32
// gradient buffer instead of the reduce-scatter). ZeRO-3: the
// reduce-scatter, and an all-gather of each block's weights before its forward and again
// before its backward of every micro-batch (`gather_per_pass`).
//
// Hybrid sharding (HSDP: FSDP's HYBRID_SHARD, FSDP2's 2-D mesh; `shard` < dp): the ZeRO
// shards span groups of `shard` GPUs, replicated dp / shard times. The reduce-scatter and
// the parameter gathers stay inside the shard group; the reduced shard (1/shard of the
// gradients) is then all-reduced across the groups (`replica_reduce_bytes`). `shard` 0
// or dp: plain sharding over dp.
struct GradientSync {
  Collective reduce = Collective::all_reduce;
  Bytes reduce_bytes = 0;     // once per iteration (over the shard group)
  Bytes gather_bytes = 0;     // ZeRO-1/2: once per iteration, after the step
  Bytes gather_per_pass = 0;  // ZeRO-3: before every forward and every backward pass
  Bytes replica_reduce_bytes = 0;  // HSDP: all-reduce of the shard across the groups
  bool active() const { return reduce_bytes > 0; }
};
// `fp8_params`: of the parameters, those Transformer Engine casts; under fp8_param_gather
// they are gathered as the fp8 parameters they are (fp8_weights' stored bytes).
GradientSync gradient_sync(double params, double fp8_params, const PrecisionRules& r, int zero, std::int64_t dp,
                           std::int64_t shard = 0);

// The GPUs a plan's gradients are reduced over and its ZeRO shards span: Megatron-Core
// reduces gradients (and shards its distributed optimizer) over the data- and context-
// parallel ranks together, dp x cp (the cp GPUs hold the same weights). DualPipe's two
// copies of each stage (model_copies) reduce theirs together: dp x cp x 2.
std::int64_t gradient_ranks(const PlanSpec& p);
std::int64_t gradient_ranks(std::int64_t dp, std::int64_t cp, Schedule schedule = Schedule::one_f_one_b);
// The ZeRO shard group of a plan: gradient_ranks, or under pytorch-fsdp's hybrid sharding
// the framework's shard_size (default: the data-parallel GPUs of one node, `dp_per_node`).
std::int64_t shard_group_size(const FrameworkSpec& f, const PlanSpec& p, std::int64_t dp_per_node);

// Parameters whose optimizer step one GPU runs: all it holds, or 1/dp of them under ZeRO >= 1.
double updated_params(double params, int zero, std::int64_t dp);

// Overlap interference, the rule: NCCL runs as kernels, so on one GPU a collective and
// the compute beside it slow each other (OverlapInterference, measured). While a
// collective of the GPU is in flight its compute takes f.compute times as long as alone
// (it progresses at 1/f.compute of its speed); while the GPU computes, its collective
// takes f.comm times as long. The slowdowns for the state of the GPU; the estimator
// integrates them in closed form (overlap_exposed), the replay over the actual overlap
// intervals.
struct OverlapSlowdown {
  double compute = 1, comm = 1;
};
OverlapSlowdown overlap_slowdown(bool comm_in_flight, bool computing, const OverlapInterference& f);

// Compute and a collective started together on two streams, each slowed by
// overlap_slowdown while both run: when the collective ends first, at comm x f.comm, the compute has done
// comm x f.comm / f.compute of its work and finishes the rest alone; symmetrically when
// the compute ends first. Returns the time beyond `compute` (the overlap's exposed part).
// With factors of 1: max(0, comm - compute).
Seconds overlap_exposed(Seconds compute, Seconds comm, const OverlapInterference& f);

// Tensor-parallel communication overlapped with its GEMM (Transformer Engine's userbuffers,
// Megatron's --tp-comm-overlap: training.framework.tp_comm_overlap; docs/tp-comm-overlap.md).
// Ring exchange: the GEMM runs in tp chunks, chunk k on the shard that arrived at step k;
// the tp - 1 neighbour copies (one shard each, by copy engine: no SMs taken) run back to
// back, each next copy waiting only on the previous one, so each step exposes what its copy
// takes beyond one chunk of the GEMM. `collective`: the whole collective's time over the tp
// group (tp - 1 shard steps). Returns the time beyond `gemm`: (tp - 1) max(0, x - g) with
// x = collective / (tp - 1), g = gemm / tp.
Seconds ring_exchange_exposed(Seconds collective, Seconds gemm, std::int64_t tp);
// Pipelined reduce-scatter: the GEMM runs in `splits` chunks on the GPU's `sms` less
// `rs_sms` (set_sm_margin: the GEMM's SMs leave room for the communication kernels), each
// chunk's reduce-scatter on rs_sms SMs beside the next chunk. A two-stage pipeline of
// `splits` items: exposed = r + (splits - 1) max(0, r - g') beyond the slowed GEMM, r =
// reduce_scatter / splits, g' its chunk; `gemm_extra` the GEMM's slowdown on fewer SMs,
// gemm (sms / (sms - rs_sms) - 1) (a compute-bound GEMM's time goes as 1 / SMs).
struct PipelinedReduceScatter {
  Seconds exposed = 0, gemm_extra = 0;
};
PipelinedReduceScatter pipelined_reduce_scatter(Seconds reduce_scatter, Seconds gemm, int splits, int rs_sms, int sms);

// ZeRO-3 prefetch: a block's parameter gather runs behind the previous block's compute,
// so only what exceeds that compute is exposed, in forward and again in backward (and
// the two slow each other while they overlap).
Seconds zero3_gather_exposed(Seconds gather, Seconds forward, Seconds backward,
                             const OverlapInterference& f = OverlapInterference{});

// Gradient buckets, reduced while the last micro-batch runs backward; the last bucket
// cannot hide behind compute. Megatron-LM: 40 M elements; PyTorch DDP: bucket_cap bytes
// of gradients (25 MB by default).
double gradient_bucket_elements(const FrameworkSpec& f, const PrecisionRules& r);
// PyTorch DDP (dp > 1) keeps its gradient buckets allocated across steps, so gradients
// do not come and go with each step as in plain eager PyTorch; without
// gradient_as_bucket_view the buckets are a second copy of every gradient.
struct DdpBuckets {
  bool persistent = false, copy = false;
};
DdpBuckets ddp_buckets(const FrameworkSpec& f, std::int64_t dp);
// PyTorch DDP (dp > 1) averages the gradients: its Reducer scales each gradient by
// 1/world size as the gradient becomes ready (in place on the bucket view with
// gradient_as_bucket_view, else while copying it into its bucket, and after the
// all-reduce copies the bucket back into the gradient). One pass over every gradient read
// and written, two without the bucket view, at the vectorized elementwise rate, once per
// iteration (the micro-batch that synchronises). Megatron-LM 2019 (megatron-2019) wraps
// every run in its own DistributedDataParallel, which flattens the gradients into one
// buffer, scales it and copies it back: three passes at any dp, at its elementwise kernels'
// rate (graph.hpp scalar_elementwise). Returns the bytes moved; 0 for other frameworks
// (Megatron folds the 1/dp into its gradient buffer's reduction).
Bytes ddp_gradient_scaling_bytes(const FrameworkSpec& f, double params, std::int64_t dp, const PrecisionRules& r);
// Its GPU time at the elementwise rate (the launches, one per gradient tensor, are host
// time inside DDP's hooks: host_hooks_per_layer).
Seconds ddp_gradient_scaling(const KernelModel& km, const FrameworkSpec& f, double params, std::int64_t dp,
                             const PrecisionRules& r);
// Exposed data-parallel time when the reduction (and the ZeRO-1/2 parameter all-gather,
// which overlaps the next forward) overlap compute: at least the last bucket's share.
Seconds overlapped_sync_exposed(Seconds reduce, Seconds gather, Seconds backward, Seconds forward, double params,
                                double bucket_elements, const OverlapInterference& f = OverlapInterference{});

// The optimizer step over the `params` a GPU updates (after ZeRO): it reads and writes
// every state once (PrecisionRules::optimizer_step_bytes) and the gradient-norm pass
// reads the gradients again, in 8 fused multi-tensor kernels (clip, norm, Adam).
// The time is affine in params: `optimizer_step_marginal` per parameter plus
// `optimizer_step_fixed` once, so a consumer that sums it per op (the search) adds the
// marginal part per op and the fixed part once per stage, and gets the same total.
Seconds optimizer_step(const KernelModel& km, double params, const PrecisionRules& r);
Seconds optimizer_step_marginal(const KernelModel& km, double params, const PrecisionRules& r);
Seconds optimizer_step_fixed(const KernelModel& km);
// Autograd's sum of the weight gradients over an iteration's `micro_batches`
// (PrecisionRules::autograd_accumulation_bytes): the first micro-batch's backward hands
// each weight its gradient, each later one adds its gradient into .grad, one elementwise
// kernel per weight (AccumulateGrad). The time of those (micro_batches - 1) adds over the
// `params` of one weight op held by a GPU (a bias or a norm's second tensor is counted with
// its op: one kernel an op; the adds' host launches are not in the host time); 0 with one
// micro-batch or where the framework sums in buffers of its own. Consumers sum it over their
// ops and charge it to the iteration's weight update (the adds run on the compute stream
// between backward passes).
Seconds autograd_grad_accumulation(const KernelModel& km, double params, std::int64_t micro_batches,
                                   const PrecisionRules& r);
// Transformer Engine's once-a-step cast of the weights it casts (fp8_weights' cast bytes
// per parameter) that the GPU holds (ZeRO-1/2 do not shard them), a memory-bound stream at
// the elementwise rate. 0 without fp8 GEMMs. Charged with the optimizer step (once per
// iteration); affine with no fixed part, so a consumer summing it per op gets the same total.
Seconds fp8_weight_cast(const KernelModel& km, double fp8_params_held, const PrecisionRules& r);

// ---------------------------------------------------------------------------------------
// Activations.
// ---------------------------------------------------------------------------------------
// Recompute applies to the repeated layers only: Megatron checkpoints transformer
// layers, never the embedding or the logits and loss.
Recompute block_recompute(Recompute requested, bool is_layer);

// Whether an op's forward runs again before its backward: every op of a repeated layer
// under full recompute, the core-attention ops under selective recompute.
bool op_recomputed(const Op& op, Recompute rc, bool in_repeated_layer);

// What one block keeps per micro-batch until its backward (`kept`) and what is alive
// only while it runs backward (`working`), on one GPU, for the recompute mode:
//  none       keeps every op's saved activations;
//  selective  drops the core-attention ops' (recomputed), which come back in backward;
//  full       keeps the block's input (the previous block's output) only.
// Working memory: the input and output gradients of the block (2 x boundary), the
// block's transient buffers, and whatever recompute regenerates.
struct KeptActivations {
  Bytes kept = 0, working = 0;
};
KeptActivations kept_activations(Recompute rc, Bytes saved_all, Bytes saved_core, Bytes boundary, Bytes transient);

// Activation offload (Megatron-Core's cpu_offloading_num_layers; PyTorch's save_on_cpu
// does the same per tensor). Of a model chunk's repeated layers, in order, the first n =
// min(requested, layers - 1) send their saved activations to pinned host memory: layer i's
// copy (D2H, on a copy engine) starts when its forward ends and must be done when layer
// i+1's forward ends (Megatron's double-buffered handler waits there), so it exposes
// max(0, d2h_i - forward_{i+1}); in backward, layer i comes back (H2D) while layer i+1
// runs its backward (with its recompute) and must be there when layer i's starts:
// max(0, h2d_i - backward_{i+1}). The last layer never goes: its backward follows its
// forward. Per micro-batch in flight, `offloaded` bytes leave the GPU; the layers being
// copied stay resident as a buffer of two layers' activations (the one being computed or
// written back and the one being prefetched). That buffer and the micro-batch's kept
// layers are not resident together: in forward a layer's copy must end before the next
// layer's forward does, before the first kept layer's forward ends; in backward the
// prefetch of an offloaded layer starts once the kept layers' backward has freed them.
// So per micro-batch the peak is max(kept, buffer) (stage_memory). The copy engines read or write HBM at the
// PCIe rate (55 GB/s, under 2% of an H100's HBM bandwidth): not charged to the kernels.
struct OffloadLayer {
  Bytes kept = 0;                   // saved activations per micro-batch on one GPU
  Seconds forward = 0, backward = 0;  // wall time of its forward, of its backward (with recompute)
};
struct ActivationOffload {
  std::int64_t layers = 0;            // offloaded
  Bytes offloaded = 0;                // per micro-batch: kept bytes that leave the GPU
  Bytes buffer = 0;                   // resident while copying: the two largest offloaded layers
  std::vector<Seconds> d2h, h2d;      // per offloaded layer
  Seconds exposed_forward = 0, exposed_backward = 0;  // per micro-batch
};
ActivationOffload activation_offload(const std::vector<OffloadLayer>& chunk_layers, std::int64_t requested,
                                     BytesPerSecond d2h, BytesPerSecond h2d);

// Memory of one GPU of a stage at its peak:
//  weights, gradients, optimizer states by weight_memory();
//  activations: `in_flight` micro-batches of what the stage's blocks keep;
//  gradients: plus a second copy in DDP's buckets (ddp_buckets);
//  temporary: the largest block's working memory, what activation offload's copy buffer
//  exceeds the kept activations of one micro-batch by, autocast's weight copy and, under
//  ZeRO-3, two blocks' gathered weights (the one running and the one prefetched):
//  gathered_block_bytes of the largest.
// Eager PyTorch (PrecisionRules::persistent_grads false, no DDP buckets) allocates
// gradients in backward and frees them after the step: with one micro-batch the peak is
// the larger of the activation peak (no gradients yet) and the step (all gradients, no
// activations).
struct StageMemoryInputs {
  double params = 0;                // on one GPU of the stage, before ZeRO
  // The block with the largest gathered_block_bytes: its parameters and, of them, those
  // cast to fp8 (on one GPU before ZeRO).
  double largest_block_params = 0;
  double largest_block_fp8_params = 0;
  Bytes kept_per_micro_batch = 0;   // sum of the blocks' kept activations (what offload leaves)
  Bytes working = 0;                // largest working memory of a block
  double in_flight = 1;             // micro_batches_in_flight()
  int zero = 0;
  std::int64_t dp = 1;
  std::int64_t micro_batches = 1;   // per iteration and replica
  DdpBuckets ddp;                   // DDP's gradient buckets
  // Of `params`, the experts' weights. Expert parallelism already splits them over ep of
  // the dp GPUs, so each has only dp / ep replicas, and ZeRO shards their gradients and
  // optimizer states over those (Megatron's expert data-parallel group, DeepSpeed-MoE's
  // expert ZeRO), not over all dp.
  double expert_params = 0;
  std::int64_t expert_dp = 1;       // dp / ep
  Bytes offload_buffer = 0;         // activation_offload's copy buffers (temporary)
  // Of `params`, those Transformer Engine casts to fp8 (fp8_weights), and of those the
  // experts'.
  double fp8_params = 0, expert_fp8_params = 0;
};
MemoryBreakdown stage_memory(const StageMemoryInputs& in, const PrecisionRules& r);

// ---------------------------------------------------------------------------------------
// Pipeline.
// ---------------------------------------------------------------------------------------
// Repeated layers of each virtual stage (p stages x v chunks; virtual stage c*p + s is
// chunk c of stage s, as in Megatron-LM), by the plan's split (PipelineSplit):
//  even          layers / (p v) each; without interleaving the remainder goes to the first
//                stages; interleaved chunks must divide evenly;
//  lighten_ends  the embedding and the output layer + loss count as one layer each
//                (Megatron-Core's account_for_embedding/loss_in_pipeline_split): (layers + 2)
//                / (p v) layer-equivalents per virtual stage, so the first and the last hold
//                one layer fewer (Llama 3 405B: 126 layers, 16 stages -> 7, 8 x 14, 7);
//  listed        as given.
// Throws std::invalid_argument on a split that does not fit (scenario validation checks).
std::vector<std::int64_t> layers_per_virtual_stage(std::int64_t layers, std::int64_t p, std::int64_t v,
                                                   const PipelineSplit& split = {});
// Layers of physical stage s (all its chunks).
std::int64_t layers_of_stage(std::int64_t layers, std::int64_t p, std::int64_t v, std::int64_t s,
                             const PipelineSplit& split = {});

// Micro-batches whose activations are alive at once on stage s (of p, v chunks, m
// micro-batches): GPipe keeps all m; 1F1B and ZB-H1 keep min(m, p - s); interleaved 1F1B
// runs Megatron's warm-up of 2(p-s-1) + (v-1)N chunk forwards plus one, in chunks of 1/v,
// with N the micro-batch group (microbatch_group_size_per_vp_stage; 0: N = p).
// With one stage and 1F1B a micro-batch's backward follows its forward: 1.
// DualPipe keeps p + 1 chunks' forwards on every rank (DeepSeek-V3's Table 2), a chunk
// being half of a rank's two stages: (p + 1) / 2 of what one micro-batch keeps on both.
double micro_batches_in_flight(Schedule schedule, std::int64_t p, std::int64_t v, std::int64_t m, std::int64_t s,
                               std::int64_t group = 0);
// The interleaved schedule's micro-batch group: the plan's, or p when not given.
std::int64_t microbatch_group(std::int64_t p, std::int64_t group);

// The send between neighbouring pipeline stages of one micro-batch's activation (and,
// backward, its gradient). With tp > 1 Megatron sends 1/tp per tensor-parallel rank over
// its own path and all-gathers the whole activation over NVLink on arrival
// (scatter-gather), unless sequence parallelism already keeps it sharded.
// DeepSpeed's PipelineEngine (megatron-deepspeed) partitions the same way with tp > 1
// (deepspeed/runtime/pipe/engine.py: is_pipe_partitioned and is_grad_partitioned are on
// whenever the model is tensor-parallel, since 2021; PartitionedTensor over the
// slice-parallel group, full() an all-gather), and it keeps only its slice of each forward
// output it sent: _exec_backward_pass all-gathers that output again before the
// micro-batch's backward (part_output.full()). Its transfers are not paired either: where
// Megatron exchanges a send and the opposite receive in one batch_isend_irecv (two
// exchanges per micro-batch), TrainSchedule (pipe/schedule.py) issues SendGrad,
// RecvActivation, RecvGrad and SendActivation as four blocking dist.send / dist.recv
// (pipe/p2p.py), each holding the stage's stream for a whole transfer.
struct PipelineSend {
  Bytes per_rank = 0;        // bytes each tensor-parallel rank sends
  Bytes gather_after = 0;    // all-gather on arrival over the tp group (bytes per rank)
  Bytes regather_output = 0; // all-gather of the sent output before its backward (DeepSpeed)
  // Each transfer a blocking send met by a blocking receive (DeepSpeed), not paired with
  // the opposite one.
  bool blocking = false;
  // Transfers holding a stage's stream per micro-batch and chunk.
  std::int64_t transfers() const { return blocking ? 4 : 2; }
};
PipelineSend pipeline_send(Bytes activation, std::int64_t tp, bool sequence_parallel,
                           Framework framework = Framework::megatron);
// A stage's pipeline communication per micro-batch over v model chunks, from the time of
// one transfer of per_rank bytes and of one all-gather of the activation over the tp
// group: per chunk `transfers` transfers, the gathers on arrival of the activation
// (forward) and of its gradient (backward), and DeepSpeed's re-gather.
Seconds pipeline_comm_per_micro_batch(const PipelineSend& send, Seconds transfer, Seconds gather, std::int64_t v);
// Tied embeddings split over pipeline stages: the first and last stage all-reduce the
// shared weight's gradient each iteration (bytes per rank; 0 when they coincide).
Bytes tied_embedding_sync_bytes(double tied_params, std::int64_t tp, std::int64_t pp, const PrecisionRules& r);

// Makespan of the pipelined micro-batches from each stage's time per micro-batch:
// filling and draining cost the sum of the other stages once (1/v of it with v
// interleaved chunks), the steady state the slowest stage m times. For v = 1 this is
// Alpa's Eq. 2: sum + (m - 1) max.
Seconds pipeline_makespan(const std::vector<Seconds>& per_micro_batch, std::int64_t m, std::int64_t v);
// The same from the stages' sum and the slowest stage.
Seconds pipeline_makespan(Seconds sum, Seconds slowest, std::int64_t m, std::int64_t v);
// What a stage adds to the fill and drain of the pipeline (the sum of the other stages'
// shares, over v, is the bubble): its time per micro-batch t under GPipe, 1F1B and
// interleaving. ZB-H1 (m >= p) sends the input gradient B before computing the weight
// gradient W, and fills the drain with the deferred W's: t - 2W (Qi et al. 2024;
// DeepSeek-V3's Table 2: bubble (p-1)(F + B - 2W) for p equal stages, B the whole
// backward), but never less than the forward F, which cannot be deferred (the last stage
// waits (p-1)F for its first input).
Seconds pipeline_fill(Schedule schedule, Seconds per_micro_batch, Seconds forward, Seconds weight_grad);

// The iteration from its stages' figures (per micro-batch times, the per-iteration
// gradient sync and optimizer step, host launch times): the pipeline makespan of m
// micro-batches (v chunks), then the slowest stage's sync and step, then what the host
// adds (host_bound_time, the worst stage). Sets e.iteration_time and e.breakdown, whose
// compute and communication terms are the critical (slowest) stage's.
// DualPipe (compose_dualpipe): the stages are ranks holding two chunks each; `f` is the
// GPU's overlap interference, which slows the overlapped pairs.
void compose_iteration(Prediction& e, std::int64_t m, std::int64_t v, Schedule schedule = Schedule::one_f_one_b,
                       const OverlapInterference& f = OverlapInterference{});
// DualPipe's iteration: dualpipe_makespan over chunks of half of each rank's per
// micro-batch figures (its two stages taken alike), half of the communication in forward;
// the breakdown is the busiest rank's, m/2 micro-batches of both its chunks, its exposed
// communication what the unpaired chunks and the pairs leave, the rest of the makespan bubble.
void compose_dualpipe(Prediction& e, std::int64_t m, const OverlapInterference& f = OverlapInterference{});

// ---------------------------------------------------------------------------------------
// DualPipe (DeepSeek-V3, arXiv 2412.19437 Sec. 3.2.1; the schedule of deepseek-ai/DualPipe's
// DualPipe.step). p (even) ranks; the model splits into p stages; rank r holds stage r for
// the micro-batches that enter at rank 0 (direction 0) and stage p-1-r for those that enter
// at rank p-1 (direction 1): two copies of the parameters. m (even, >= 2p) micro-batches,
// half per direction. A rank runs forward chunks F, backward chunks B (input and weight
// gradients; "zero-bubble" ones defer the weight gradients to a later W, first in first
// out) and pairs of a forward and a backward chunk of different micro-batches overlapped
// (F&B: one's all-to-all and pipeline sends hide behind the other's compute).
// ---------------------------------------------------------------------------------------
struct DualPipeStep {
  enum class Kind { forward, backward, weight };
  Kind kind = Kind::forward;
  int direction = 0;               // 0: entered at rank 0; 1: entered at rank p-1
  std::int64_t micro_batch = 0;    // of its direction, 0 .. m/2-1
  bool defer_weight = false;       // backward: the weight gradients wait for a later W
  bool overlap_next = false;       // forward: runs overlapped with the next step (a backward)
};
// The steps of rank r in order (DualPipe.step's eight phases: warm-up forwards, forwards of
// both directions, zero-bubble backwards, the steady F&B pairs, and the drain).
std::vector<DualPipeStep> dualpipe_order(std::int64_t p, std::int64_t m, std::int64_t rank);
// The model stage that rank r runs for a direction (r for direction 0, p-1-r for 1).
std::int64_t dualpipe_stage(std::int64_t p, std::int64_t rank, int direction);
// Model copies each GPU holds under a schedule: 2 for DualPipe (both directions), else 1.
// The copies of a stage reduce their gradients together, so a stage's data-parallel group
// is dp x copies ranks (ZeRO shards over all of them).
std::int64_t model_copies(Schedule schedule);

// One chunk (one stage of one micro-batch) of a rank: compute, and the communication it
// triggers (tensor- and expert-parallel collectives, its pipeline send).
struct DualPipeChunk {
  Seconds forward = 0, forward_comm = 0;
  Seconds backward = 0, backward_comm = 0;  // backward: input and weight gradients
  Seconds weight_grad = 0;                  // of backward, the weight gradients
};
// An overlapped pair F&B: the two chunks' compute runs back to back on the GPU while each
// one's communication runs behind the other's compute (overlap_exposed with the GPU's
// interference factors); without communication F + B.
Seconds dualpipe_pair_time(const DualPipeChunk& c, const OverlapInterference& f = OverlapInterference{});
// The makespan of the schedule from each rank's chunk times (both directions of a rank
// alike): every step starts when its rank is free and its input (the previous stage's
// forward, the next stage's backward) is done. `busy` gets each rank's working time.
// DeepSeek-V3's Table 2 gives its bubble as (p/2-1)(F&B + B - 3W) over (m-p-1) F&B +
// (p+1)(F + B), exact when F = B - W (tests/core/test_rules.cpp); other ratios move the
// critical path, which this follows.
Seconds dualpipe_makespan(const std::vector<DualPipeChunk>& per_rank, std::int64_t m,
                          const OverlapInterference& f = OverlapInterference{}, std::vector<Seconds>* busy = nullptr);

// ---------------------------------------------------------------------------------------
// Host dispatch. Eager PyTorch launches every kernel from one CPU thread; the GPU cannot
// start a kernel before the host has launched it. With no synchronisation inside a step
// the host runs ahead, so a GPU's step takes max(GPU time, host time); the replay keeps
// the host clock per rank, the estimator applies the bound per iteration.
// ---------------------------------------------------------------------------------------
// Kernels an op launches forward and backward (collectives are counted where they are
// active: one kernel each).
struct OpKernels {
  int forward = 0, backward = 0;
};
OpKernels op_kernels(const Op& op);
// Host time per kernel launched: eager PyTorch (Megatron-LM is eager PyTorch too). Under
// launch_blocking the host never runs ahead of the GPU: its dispatch is in each kernel's
// launch gap instead (launch_blocking_gap), and this is 0.
Seconds host_per_kernel(const FrameworkSpec& f, const HostDispatch& h);
// CUDA_LAUNCH_BLOCKING=1 (training.framework launch_blocking; BLOOM's tr11-176B-ml.slurm
// exports it against a hang): every launch returns only when its kernel has finished, so
// the stream runs kernel, host, kernel, ... The gap between two kernels is the host's
// dispatch of the next one (the eager host time per kernel, less the asynchronous submit
// it contains) and a synchronous launch (submit, start, the empty kernel, completion seen
// by the host: calibration's sync_launch_latency), in place of the gap between queued
// kernels (kernel_overhead). Without a measured synchronous launch: the dispatch and that
// gap, one after the other.
Seconds launch_blocking_gap(const Efficiency& e, const HostDispatch& h);
// The fused-attention kernels a run's attention reaches (training.attention_kernel, else
// the software's own choice). Eager PyTorch (the pytorch* frameworks) calls SDPA, which
// puts its cuDNN backend first on compute capability 9.0 and 10.0 (aten sdp_utils.cpp
// check_prefer_cudnn_attention, cuDNN >= 9.9; the calibration's torch 2.11 and cuDNN 9.19
// ran cudnn_generated_fort_native_sdpa_sm90_flash_fprop/bprop under its defaults,
// kernel-profile-2026-11-26.json): cuDNN's curve there, where the profile has one for the
// GPU's architecture. Everything else, Megatron included, FlashAttention-2's: Transformer
// Engine also selects cuDNN on Hopper (dot_product_attention/utils.py), but with the cuDNN
// of its container, whose lead over FlashAttention-2 grew with the versions (20-50 % at
// cuDNN 9.3 by TE's own benchmark; 1.6-1.9x at head dim 128 with 9.19, measured here), and
// the published Megatron rows (NeMo 24.07 to Megatron-Bridge 25.11) are not matched by
// 9.19's curve (README, "fused attention"): a Megatron run on a recent cuDNN states cudnn.
AttentionKernel fused_attention_kernel(const TrainingSpec& t, const GpuProfile& gpu);
// PyTorch SDPA's own choice on this GPU (the rule above for the PyTorch frameworks, and for
// a serving engine that runs transformers' model code): cuDNN on compute capability 9.0 and
// 10.0 where the profile has its curve, else FlashAttention-2.
AttentionKernel pytorch_sdpa_kernel(const GpuProfile& gpu);
// Makes `k`'s measured curve the GPU's attention curve (cuDNN's, where the profile has it;
// FlashAttention-2's is the profile's own).
void use_attention_kernel(GpuProfile& gpu, AttentionKernel k);
// The cluster a scenario's kernels run on: its GPU's kernel_overhead is
// launch_blocking_gap under training.framework launch_blocking, and its attention curve
// the cuDNN one where fused_attention_kernel says so (a written cudnn the profile has no
// curve for is an error at /training/attention_kernel). Estimator, replay and search all
// resolve their cluster here.
ClusterModel scenario_cluster(const Scenario& s, Diagnostics& diag);
// Host time an op costs beyond its kernels: under pytorch-tp with tp > 1, each DTensor
// ParallelStyle module boundary (Op::parallel_style) costs the measured module overhead
// (hooks, from_local/to_local, sharding propagation, redistribute), forward and backward,
// and a biased module's Linear (Op::biased) its bias's measured cost, split between the
// passes as the module's own. The module's weight and bias are DTensor parameters: the
// fused AdamW step pays each one's measured dispatch once per iteration (`optimizer`; the
// bias's measured cost came from whole one-micro-batch steps, so its share of the step is
// taken out of the per-micro-batch part). The cross entropy under loss_parallel
// (Op::loss_parallel) costs the measured handlers' time beyond the plain ops, forward and
// backward.
// Under DTensor the host cost follows the modules, not the kernels: the same layer's
// kernels run at the eager rate.
struct OpHost {
  Seconds forward = 0, backward = 0;  // per micro-batch
  Seconds optimizer = 0;              // per iteration, before the optimizer step's kernels
};
OpHost op_host_overhead(const Op& op, const FrameworkSpec& f, const HostDispatch& h, std::int64_t tp);
// GPU time a stage loses to its host over m micro-batches: the host launches kernels in
// program order and never waits for the GPU, so kernel i starts at the earliest when the
// host has launched everything before it: g_i = max(g_{i-1}, h_i) + gpu_i. At phase
// granularity (forward gpu_f, host_f; backward gpu_b, host_b) one micro-batch from a
// standing start takes max(gpu_f + gpu_b, host_f + gpu_b, host_f + host_b); afterwards
// the host's lead (or lag) carries over, so each further micro-batch takes
// max(gpu_f + gpu_b, host_f + host_b). Returns the time beyond m (gpu_f + gpu_b).
Seconds host_bound_time(Seconds gpu_f, Seconds gpu_b, Seconds host_f, Seconds host_b, std::int64_t m);
// What the GPU waits for the host before the optimizer step, beyond the gradient sync: the
// step's kernels start once the gradients are synchronised (sync after the GPU's last
// micro-batch) and the host has prepared them (host_optimizer after its last launch, which
// came host_lead before the GPU's end): max(0, host_optimizer - host_lead - sync).
Seconds optimizer_host_wait(Seconds host_lead, Seconds sync, Seconds host_optimizer);
// Framework hooks per repeated layer and micro-batch (forward + backward): DDP's
// autograd hooks (dp > 1), FSDP's pre/post hooks of each wrapped layer.
Seconds host_hooks_per_layer(const FrameworkSpec& f, const HostDispatch& h, std::int64_t dp);
// A stage's launches per micro-batch, summed over its ops: kernels (op_kernels, one per
// active collective; a recomputed op's forward kernels again in backward) and the ops'
// extra host time (op_host_overhead; a recomputed op's forward extra again in backward).
struct StageLaunches {
  double kernels_forward = 0, kernels_backward = 0;
  Seconds extra_forward = 0, extra_backward = 0;
  Seconds optimizer = 0;  // op_host_overhead's per-iteration part
  StageLaunches& operator+=(const StageLaunches& o);
};
// One op's share: its kernels with `comm_forward` / `comm_backward` collective kernels,
// recomputed or not, and its op_host_overhead at tensor-parallel degree `tp`.
StageLaunches op_launches(const Op& op, int comm_forward, int comm_backward, bool recomputed, const FrameworkSpec& f,
                          const HostDispatch& h, std::int64_t tp);
// The stage's host time per micro-batch (StagePrediction::host, of which host_forward): the
// kernels at host_per_kernel, the extras, and `layers` x host_hooks_per_layer (over `ranks`
// gradient ranks), half in each pass. The estimator and the search both take it from here.
struct StageHost {
  Seconds forward = 0, total = 0;
};
StageHost stage_host(const StageLaunches& l, int layers, const FrameworkSpec& f, const HostDispatch& h, std::int64_t ranks);

// ---------------------------------------------------------------------------------------
// Ranks and groups.
// ---------------------------------------------------------------------------------------
// Megatron-LM's rank order: tensor-parallel ranks adjacent, then data-parallel, then
// pipeline stages.
std::int64_t plan_rank(std::int64_t dp, std::int64_t tp, std::int64_t stage, std::int64_t replica, std::int64_t tp_rank);

// Communication groups of a manual plan in that order: a TP group sits inside a node
// when tp <= gpus_per_node, a DP group has gpus_per_node/tp members per node, and
// pipeline neighbours are dp*tp ranks apart.
struct PlanGroups {
  Group tp, dp, ep;
  double dp_share = 1, ep_share = 1;  // fraction of a node's NICs each group gets
  bool pp_cross_node = false;         // pipeline neighbours sit on different nodes
  bool ends_cross_node = false;       // the first and last stage sit on different nodes
};
PlanGroups plan_groups(const ClusterModel& c, const PlanSpec& p);
// ---------------------------------------------------------------------------------------
// Context parallelism (plan.cp) and hybrid sharding.
// ---------------------------------------------------------------------------------------
// Megatron-Core's rank order with context parallelism: tensor-parallel ranks innermost,
// then context-parallel, then data-parallel, then pipeline stages (tp-cp-dp-pp).
std::int64_t plan_rank(std::int64_t dp, std::int64_t tp, std::int64_t cp, std::int64_t stage, std::int64_t replica,
                       std::int64_t cp_rank, std::int64_t tp_rank);
// The context-parallel group of a plan (cp GPUs, tp apart) and the share of a node's
// NICs it gets. In plan_groups, `dp` is the group gradients are reduced over: dp x cp.
struct ContextGroups {
  Group cp;
  double cp_share = 1;
};
ContextGroups context_groups(const ClusterModel& c, const PlanSpec& p);
// Ring attention's exposed communication in one pass of one attention op: the K, V block
// (backward: with the partial dK, dV) goes to the next GPU of the ring in `steps` = cp - 1
// sends, each launched as the GPU starts the attention of the block in hand (the first
// send beside the GPU's own block, as TransformerEngine's AttnFuncWithCPAndKVP2P does), so
// each step exposes what the send takes beyond one block's attention, `attention_step`
// (overlap_exposed: max(0, send - attention_step) with factors of 1).
Seconds ring_attention_exposed(Seconds send, Seconds attention_step, std::int64_t steps,
                               const OverlapInterference& f = OverlapInterference{});
// HSDP's groups inside the gradient group `dp` (ranks, per node, stride): the shard group
// (`shard` consecutive members) and the replica group (one member of each shard group,
// `shard` members apart), each with its share of a node's NICs.
struct HybridGroups {
  Group shard, replicas;
  double shard_share = 1, replica_share = 1;
};
HybridGroups hybrid_groups(const Group& dp, std::int64_t shard, std::int64_t gpus_per_node);

}  // namespace clustersim
