// Operator-level training graphs. A model is a sequence of blocks (a transformer layer,
// an embedding, a bottleneck...). Identical blocks are stored once and referenced by
// index, so a 128-layer model costs one layer's work to evaluate.
//
// Ops are logical (unsharded). Each op says how Megatron-style tensor parallelism
// splits it (`split`), which the estimator applies for manual plans; the Alpa search
// enumerates its own shardings from the same shapes.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "costmodel/hardware.hpp"
#include "scenarios/scenario.hpp"
#include "scenarios/units.hpp"

namespace clustersim {

enum class OpKind {
  matmul,       // C[batch,m,n] = A[batch,m,k] B[batch,k,n]; B a weight when `weight`
  attention,    // fused (flash) attention over batch*heads
  memory,       // memory-bound kernel: norm, softmax, activation, dropout, residual, loss, pool
  embedding,    // table lookup (forward gather, backward scatter-add)
  tp_enter,     // Megatron "f": identity forward, all-reduce of the input grad backward
  tp_exit,      // Megatron "g": all-reduce forward, identity backward
  all_to_all,   // expert dispatch / combine over the expert-parallel group
};

// What an op is to the passes that transform the graph (the search's lowering, the
// recompute rules): set by the graph builder, never inferred from the op's name.
enum class OpRole {
  plain,          // nothing beyond its kind
  residual,       // adds a skip connection: reads the block input (or the previous residual)
  row_reduction,  // statistics per row over the features (norm, softmax, loss): a split of
                  // the features all-reduces them
  saved_marker,   // no work: activations kept for the preceding matmul's backward
  weight_cast,    // reads and writes its block's weights, not activations: split as they are
};

// How Megatron tensor parallelism (degree t) shards an op.
enum class Split {
  none,     // replicated on every TP rank, never split
  seq,      // replicated, split along the sequence only under sequence parallelism
  column,   // matmul: n / t (column-parallel linear, or any op on its sharded output)
  row,      // matmul: k / t (row-parallel linear; produces partial sums)
  heads,    // batch of heads / t (attention, and ops on per-head tensors)
};

struct Op {
  std::string name;
  OpKind kind = OpKind::memory;
  Split split = Split::none;
  OpRole role = OpRole::plain;
  bool expert = false;          // batch dimension = experts: split over the EP group
  bool core_attention = false;  // recomputed under selective recompute
  // matmul / attention shape. For attention: batch = b*heads, m = query length,
  // n = key length, k = head dim; `causal` halves the work actually done.
  std::int64_t batch = 1, m = 0, n = 0, k = 0;
  bool weight = false;
  bool causal = false;
  // The weight is the word embedding's, held on the first stage and again on the last one
  // (a tied output projection, or a multi-token-prediction module's embedding): the two
  // copies' gradients are all-reduced between the stages.
  bool tied = false;
  // memory-bound ops and comm markers: bytes moved (read + written) forward / backward
  double fwd_bytes = 0, bwd_bytes = 0;
  int kernels = 1;  // kernels launched per forward pass
  int backward_kernels = -1;  // kernels launched per backward pass; -1: 2 x kernels
  MemoryKind memory_kind = MemoryKind::elementwise;  // for memory-bound ops
  // The backward pass's kind when it differs (a cast's gradient casts the other way).
  std::optional<MemoryKind> memory_kind_backward;
  int bwd_kernels() const { return backward_kernels >= 0 ? backward_kernels : 2 * kernels; }
  MemoryKind bwd_memory_kind() const { return memory_kind_backward.value_or(memory_kind); }
  double params = 0;       // parameters owned by this op
  double saved_bytes = 0;  // activations kept for backward (before any sharding)
  double comm_bytes = 0;   // tp_enter / tp_exit / all_to_all: tensor size in bytes
  // tp_enter / tp_exit: the boundary of a DTensor ParallelStyle module (a ColwiseParallel or
  // RowwiseParallel Linear under parallelize_module), whose hooks and redistributes cost host
  // time of their own (rules.hpp op_host).
  bool parallel_style = false;
  // parallel_style: the module's Linear has a bias (a DTensor parameter of its own, cast,
  // reduced and updated like the weight: rules.hpp op_host_overhead).
  bool biased = false;
  // The cross entropy runs under DTensor's loss_parallel (pytorch-tp: the head's logits stay
  // sharded over the vocabulary): its handlers cost host time of their own (rules.hpp
  // op_host_overhead).
  bool loss_parallel = false;
  // attention: bytes of its keys and values together (what context parallelism's ring
  // passes from GPU to GPU); the queries and the output make up the rest of fwd_bytes.
  double kv_bytes = 0;
  // A weight GEMM outside Transformer Engine's modules, which mixed-fp8 leaves in the
  // compute precision (no fp8 GEMM, no cached fp8 weight): Megatron-Core's output layer is
  // its own tensor_parallel.ColumnParallelLinear, not a TE module
  // (megatron/core/models/gpt/gpt_model.py, GPTModel.__init__, core_r0.14.0); DeepSeek-V3
  // keeps its output head in BF16 too (arXiv 2412.19437, sec. 3.3.1).
  bool compute_precision_gemm = false;

  double fwd_flops() const;  // FLOPs of the forward pass (0 for memory-bound ops)
  double bwd_flops() const;  // FLOPs of the backward pass
};

struct Block {
  std::string name;  // "gpt-layer", "moe-layer", "embedding", "head", "bottleneck-s2-first"
  std::vector<Op> ops;
  double params() const;
  double fwd_flops() const;
  double saved_bytes() const;
  // Bytes of the tensor leaving this block (pipeline send size), per micro-batch.
  double output_bytes = 0;
  // Extra bytes alive only while this block runs backward (before any sharding; split
  // over TP like a column-parallel output), e.g. the loss's gradient buffers.
  double transient_bytes = 0;
};

struct ModelGraph {
  std::vector<Block> blocks;   // distinct blocks
  std::vector<int> pre;        // blocks before the repeated layers (first pipeline stage)
  std::vector<int> layers;     // the repeated layers, split across pipeline stages
  std::vector<int> post;       // blocks after them (last pipeline stage)
  std::int64_t micro_batch = 0;
  std::int64_t tokens_per_sample = 0;  // seq_len for transformers, 1 for images
  double activation_bytes = 2;
  // Parameters shared by the first and last stage (tied embeddings), counted once.
  double tied_params = 0;
  // Share of an expert op's parameters that one token uses: top_k / experts (1 without).
  double expert_active_fraction = 1;

  double params() const;           // total, tied weights counted once
  double active_params() const;    // used by one token: the routed experts' top_k / experts share
  double fwd_flops() const;        // per micro-batch
  double model_flops() const { return 3.0 * fwd_flops(); }  // forward + backward, per micro-batch
};

// Which kernels a training implementation launches. Megatron (mixed-* precisions) fuses
// bias + GeLU, bias + dropout + residual, RoPE, and keeps 16-bit activations end to end.
// Eager PyTorch under autocast (amp-*) keeps the residual stream and LayerNorm in fp32,
// casts each weight and each matmul input to 16 bits every forward (and the gradients
// back), reduces bias gradients separately, and runs RoPE, SwiGLU and attention layout
// changes as separate kernels; plain fp32 training is eager without the casts.
// (calibration/data/h100-sxm5-80gb/kernel-profile-*.json shows these kernels.)
struct GraphStyle {
  double activation_bytes = 2;  // element size of matmul inputs/outputs and most activations
  double residual_bytes = 2;    // element size of the residual stream and norms
  bool autocast_casts = false;  // cast kernels for weights and matmul inputs
  bool eager = false;           // unfused elementwise kernels and layout copies
  // Megatron-LM of 2019 (training.framework megatron-2019) beyond the eager kernels: the
  // attention scores divided by sqrt(d), multiplied by the causal mask and shifted by
  // -10000 (1 - mask) as three passes, q, k, v and the context copied to contiguous
  // layouts around the batched matmuls; each bias added after its GEMM (PyTorch 1.1's
  // F.linear on 3-D inputs is matmul then add_); the logits cast to fp32 by FP16_Module
  // and an unfused vocab-parallel cross entropy over them.
  bool unfused_score_mask = false;
  bool bias_add_kernels = false;
  bool fp32_logits = false;
  // Transformer Engine's fused cross entropy (Megatron-Core's cross_entropy_loss_fusion with
  // cross_entropy_fusion_impl "te": training.framework cross_entropy "te"). TE's
  // parallel_cross_entropy (transformer_engine/pytorch/cross_entropy.py and
  // triton/cross_entropy.py, v2.7) runs an online-softmax pass over the 16-bit logits, then a
  // kernel that writes the loss and the logits' gradient into the logits tensor itself,
  // which is all it saves; backward scales that gradient in place by the loss's gradient.
  // No fp32 softmax is kept and no separate gradient allocated.
  bool te_cross_entropy = false;
  // PyTorch before 1.5 (megatron-2019 runs 1.1): TensorIterator's GPU loop computes each
  // element's address, loads, computes and stores it one element per thread at a time,
  // with neither vectorized loads nor loads hoisted ahead of the stores (pytorch/pytorch
  // issue 31975, January 2020, "current status of gpu loop"; vectorized access came with
  // pull request 32383, 2020), and dropout's fused kernel loads one element at a time
  // too. Every elementwise kernel then runs on the unvectorized path: the rate calibrated
  // for a contiguous binary op that takes it (MemoryKind::mixed_add), an upper bound for
  // the older loop. Norms (apex FusedLayerNorm), softmax and the optimizer keep theirs.
  bool scalar_elementwise = false;
  // Bytes per parameter read and written every micro-batch to accumulate the weight
  // gradients outside the GEMMs (megatron-deepspeed; 0: accumulated by the wgrad GEMM).
  double grad_accumulation_bytes = 0;
  // PyTorch DTensor tensor parallelism (training.framework pytorch-tp, parallelize_module):
  // each projection is its own nn.Linear (ColwiseParallel q, k, v and fc1, or gate and up;
  // RowwiseParallel out and fc2/down), since a ColwiseParallel fused QKV would split q, k and
  // v across ranks. Each ColwiseParallel input is its own Replicate DTensor, so backward
  // all-reduces each one's input gradient separately (in the input's type: fp32 under
  // autocast, the norm's output) and autograd sums them; autocast casts the input once per
  // projection and each keeps its own 16-bit copy for backward; every DTensor collective
  // (functional collectives) copies its input first.
  bool dtensor_projections = false;
  // Element size of the input a weight GEMM keeps for its weight gradient (0: the
  // activation's). Under mixed-fp8 Transformer Engine keeps the fp8 cast it fed the
  // forward GEMM, 1 byte (TE's Linear/LayerNormLinear save the quantized input or its
  // transpose for wgrad), as fp8_cast_traffic already prices the backward transpose.
  double gemm_input_saved_bytes = 0;
  // transformers' modeling code for Llama-family models, in inference (forward only: no
  // backward bytes, nothing saved), as its eager forward launches it under
  // torch.inference_mode (calibration/serving/profile_batches.py): seven GEMMs a layer (q, k,
  // v, o, gate, up, down: each projection its own nn.Linear); LlamaRMSNorm in fp32 as eight
  // kernels (to-fp32, pow, mean, add eps, rsqrt, multiply by the row's scale, to-bf16, the
  // weight's multiply); apply_rotary_pos_emb on q and k (q * cos, rotate_half's negation and
  // concatenation, * sin, the add); silu and its multiply on contiguous tensors; the
  // attention output left in the [b, s, h, d] layout SDPA writes. Other families and
  // multi-head latent attention keep the eager kernels.
  bool transformers_inference = false;
};
GraphStyle graph_style(Precision p);
// The element type of an op's GEMM: a weight GEMM runs in `weight_gemm` (fp8 under
// mixed-fp8) unless it is compute_precision_gemm; every other GEMM in `compute`.
DType gemm_dtype(const Op& op, DType compute, DType weight_gemm);
// Of an op's parameters, those whose GEMM runs in fp8 while the compute type is wider:
// the weights Transformer Engine caches an fp8 copy of.
double fp8_cast_params(const Op& op, DType compute, DType weight_gemm);
// The precision's style with the framework's kernels (training.framework).
GraphStyle graph_style(const TrainingSpec& t);
// GraphStyle::scalar_elementwise of a framework (megatron-2019: PyTorch 1.1), and the
// calibrated kind its elementwise kernels run at: also what its gradient passes outside
// the graph take (rules.hpp ddp_gradient_scaling).
bool scalar_elementwise(Framework f);
constexpr MemoryKind kScalarElementwiseKind = MemoryKind::mixed_add;

// Builds the graph of one micro-batch of `micro_batch` samples.
ModelGraph build_model_graph(const ModelSpec& m, std::int64_t micro_batch, const GraphStyle& style);
// Megatron's fused style with activations of `activation_bytes` each.
ModelGraph build_model_graph(const ModelSpec& m, std::int64_t micro_batch, double activation_bytes);

// Parameter count of the model from the graph (tied weights counted once).
double parameter_count(const ModelSpec& m);
// Parameters one token uses (a MoE's routed experts counted top_k of `experts`).
double active_parameter_count(const ModelSpec& m);

// Elements each token keeps in an inference KV cache over all layers: 2 kv_heads x
// head_dim per layer for multi-head / grouped-query attention; for multi-head latent
// attention only the compressed latent (kv_lora_rank) and the shared rotary key
// (qk_rope_head_dim), since the key and value up-projections are absorbed into the query
// and output projections at decode time. Multi-token-prediction modules are not counted
// (they serve speculative decoding only when enabled).
double kv_cache_elements_per_token(const ModelSpec& m);

}  // namespace clustersim
