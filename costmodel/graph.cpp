// Graph builders for GPT (Megatron layout), Llama (RMSNorm, rotary, GQA, SwiGLU), MoE
// (GShard-style top-k experts every `moe_every` layers), Llama-style MoE (SwiGLU experts,
// shared experts, dense first layers; Mixtral, DeepSeek-V3 with multi-head latent
// attention and multi-token prediction) and Wide-ResNet (bottleneck).
//
// Saved activations follow Korthikanti et al. 2022 ("Reducing Activation Recomputation
// in Large Transformer Models", Sec. 4): a GPT layer saves 34 s b h + 5 a s^2 b bytes
// with 16-bit activations and 1-byte dropout masks; tests/test_graph.cpp checks it.
#include "costmodel/graph.hpp"

#include <cmath>
#include <utility>

namespace clustersim {
namespace {

using i64 = std::int64_t;

Op matmul(std::string name, i64 batch, i64 m, i64 n, i64 k, bool weight, Split split, double params,
          double saved) {
  Op op;
  op.name = std::move(name);
  op.kind = OpKind::matmul;
  op.batch = batch;
  op.m = m;
  op.n = n;
  op.k = k;
  op.weight = weight;
  op.split = split;
  op.params = params;
  op.saved_bytes = saved;
  return op;
}

Op memory_op(std::string name, Split split, double fwd_bytes, double bwd_bytes, double saved, double params = 0) {
  Op op;
  op.name = std::move(name);
  op.kind = OpKind::memory;
  op.split = split;
  op.fwd_bytes = fwd_bytes;
  op.bwd_bytes = bwd_bytes;
  op.saved_bytes = saved;
  op.params = params;
  return op;
}

// Autocast's cast of an fp32 tensor to 16 bits (vectorized) and, backward, of its
// gradient back to fp32 (unvectorized: LoadWithCast).
Op cast_op(std::string name, Split split, double bytes) {
  Op op = memory_op(std::move(name), split, bytes, bytes, 0);
  op.memory_kind_backward = MemoryKind::cast_up;
  return op;
}

Op comm(std::string name, OpKind kind, double bytes) {
  Op op;
  op.name = std::move(name);
  op.kind = kind;
  op.comm_bytes = bytes;
  op.kernels = 0;
  return op;
}

struct Dims {
  i64 B, S, H, A, KV, D, F, V;
  double e;      // activation element size
  double p;      // dropout probability
  double r;      // residual-stream element size
  bool casts;    // autocast cast kernels
  bool eager;    // unfused kernels
  bool score_mask;   // megatron-2019: scale and mask as separate passes, layout copies
  bool bias_adds;    // megatron-2019: bias added after each GEMM
  bool fp32_logits;  // megatron-2019: fp32 logits, unfused cross entropy
  bool dtp = false;  // pytorch-tp: DTensor projections (GraphStyle::dtensor_projections)
  bool te_ce = false;  // GraphStyle::te_cross_entropy
  double g = 2;      // saved weight-GEMM input element size (GraphStyle::gemm_input_saved_bytes)
  bool hf = false;   // transformers' Llama in inference (GraphStyle::transformers_inference)
  i64 T() const { return B * S; }
  double TH() const { return double(B) * S * H; }
};

// Functional collectives (what DTensor's redistribute calls) are out of place: the input
// is copied (clone) before NCCL reduces it in place, forward for a RowwiseParallel output
// or backward for a ColwiseParallel input gradient.
Op funcol_copy(const std::string& name, Split split, double bytes, bool forward) {
  Op op = memory_op(name + "-funcol-copy", split, forward ? 2 * bytes : 0.0, forward ? 0.0 : 2 * bytes, 0);
  op.kernels = forward ? 1 : 0;
  op.backward_kernels = forward ? 0 : 1;
  return op;
}

// The entry of a ColwiseParallel module under DTensor (its input made a Replicate
// DTensor; backward all-reduces the input gradient), with its functional-collective copy.
void colwise_entry(std::vector<Op>& ops, const std::string& name, const Dims& d, double bytes, bool bias) {
  Op f = comm(name, OpKind::tp_enter, bytes);
  f.parallel_style = d.dtp;
  f.biased = d.dtp && bias;
  ops.push_back(f);
  if (d.dtp) ops.push_back(funcol_copy(name, Split::seq, bytes, false));
}

// The exit of a RowwiseParallel module (Partial -> Replicate all-reduce forward).
void rowwise_exit(std::vector<Op>& ops, const std::string& name, const Dims& d, double bytes, bool bias) {
  Op g = comm(name, OpKind::tp_exit, bytes);
  g.parallel_style = d.dtp;
  g.biased = d.dtp && bias;
  ops.push_back(g);
  if (d.dtp) ops.push_back(funcol_copy(name, Split::seq, bytes, true));
}

// Several ColwiseParallel projections reading one input (q, k, v; gate and up): each casts
// it to 16 bits under autocast (the norm's own cast counts as the first) and, backward,
// autograd adds the n all-reduced input gradients (n - 1 adds in the input's type).
void extra_projection_inputs(std::vector<Op>& ops, const std::string& name, const Dims& d, int n) {
  if (n < 2) return;
  if (d.casts) {
    Op c = cast_op(name + "-input-casts", Split::seq, (n - 1) * d.TH() * (d.r + d.e));
    c.kernels = n - 1;
    c.backward_kernels = n - 1;
    ops.push_back(c);
  }
  Op sum = memory_op(name + "-input-grad-sum", Split::seq, 0, (n - 1) * 3 * d.TH() * d.r, 0);
  sum.kernels = 0;
  sum.backward_kernels = n - 1;
  ops.push_back(sum);
}

// Residual add, with Megatron's fused bias-dropout-add when dropout is on. Under
// sequence parallelism it runs on the sequence shard.
Op residual_op(const std::string& name, const Dims& d) {
  if (d.eager) {
    // x (residual dtype) + branch (activation dtype) -> residual dtype. Backward casts
    // the gradient for the branch and adds the two gradients flowing into x.
    const double fwd = d.TH() * (2 * d.r + d.e);
    const double bwd = d.TH() * ((d.casts ? d.r + d.e : 0.0) + 3 * d.r);
    Op op = memory_op(name + "-residual-add", Split::seq, fwd, bwd, 0);
    // fp32 + bf16 promotes on load (unvectorized); the backward's cast down and add are
    // vectorized.
    if (d.casts) {
      op.memory_kind = MemoryKind::mixed_add;
      op.memory_kind_backward = MemoryKind::elementwise;
    }
    if (d.p > 0) {
      op.fwd_bytes += d.TH() * (2 * d.e + 1);
      op.bwd_bytes += d.TH() * (2 * d.e + 1);
      op.saved_bytes = d.TH();
      op.kernels = 2;
    }
    return op;
  }
  if (d.p > 0) return memory_op(name + "-bias-dropout-add", Split::seq, d.TH() * (3 * d.e + 1), d.TH() * (2 * d.e + 1), d.TH());
  return memory_op(name + "-residual-add", Split::seq, 3 * d.TH() * d.e, 0, 0);
}

// A bias added by its own kernel after the GEMM (megatron-2019): reads and writes the
// GEMM's output of n features per token; its gradient passes through.
void bias_add(std::vector<Op>& ops, const std::string& name, const Dims& d, i64 n, Split split) {
  if (!d.bias_adds) return;
  ops.push_back(memory_op(name + "-bias-add", split, 2.0 * double(d.T()) * n * d.e, 0, 0));
}

Op residual(const std::string& name, const Dims& d) {
  Op op = residual_op(name, d);
  op.role = OpRole::residual;
  return op;
}

// Activations kept for the preceding matmul's backward (its input), as a marker op.
Op saved_marker(std::string name, Split split, double saved) {
  Op op = memory_op(std::move(name), split, 0, 0, saved);
  op.kernels = 0;
  op.role = OpRole::saved_marker;
  return op;
}

// A kernel of an inference forward (GraphStyle::transformers_inference): no backward, nothing
// saved.
Op forward_op(std::string name, Split split, double bytes, MemoryKind kind, int kernels, double params = 0) {
  Op op = memory_op(std::move(name), split, bytes, 0, 0, params);
  op.memory_kind = kind;
  op.kernels = kernels;
  op.backward_kernels = 0;
  return op;
}

// transformers' LlamaRMSNorm in inference over `width` features per token, in d.e bytes:
// x.to(fp32) (a cast on load); x.pow(2); .mean(-1) (a row reduction); + eps and rsqrt over
// one fp32 per token; x * rsqrt (the [t, 1] factor broadcast over the row takes the
// unvectorized loop, but reads one value a row: the rate of an unvectorized binary op over
// contiguous operands, mixed_add's; profiled at 2.25 TB/s, serving-batch-profile-prefill-
// 2026-11-28.json); .to(bf16); weight * x (the weight broadcast over the tokens). Forward only.
void hf_rms_norm(std::vector<Op>& ops, const std::string& name, const Dims& d, i64 width, Split split) {
  const double x = double(d.T()) * width;  // elements
  const double rows = double(d.T());
  const auto pass = [&](const char* what, double bytes, MemoryKind kind, int kernels, double params = 0) {
    ops.push_back(forward_op(name + "-" + what, split, bytes, kind, kernels, params));
  };
  pass("to-fp32", x * (d.e + 4), MemoryKind::cast_up, 1);
  pass("pow", 8 * x, MemoryKind::elementwise, 1);
  pass("mean", 4 * x + 4 * rows, MemoryKind::norm, 1);
  ops.back().role = OpRole::row_reduction;
  pass("eps-rsqrt", 16 * rows, MemoryKind::elementwise, 2);
  pass("scale", 8 * x + 4 * rows, MemoryKind::mixed_add, 1);
  pass("to-bf16", x * (4 + d.e), MemoryKind::elementwise, 1);
  pass("weight", 2 * x * d.e + double(width) * d.e, MemoryKind::broadcast, 1, double(width));
}

// Norm over the residual stream; under autocast it runs in fp32 and a cast kernel makes
// the 16-bit copy the next matmul reads (and casts its gradient back).
void norm(std::vector<Op>& ops, const std::string& name, const Dims& d, bool rms) {
  if (d.hf && rms) return hf_rms_norm(ops, name, d, d.H, Split::seq);
  // Reads x, writes y (statistics are negligible); backward reads x and dy, writes dx,
  // and reduces the weight gradients.
  // Eager backward runs two kernels that each read x and dy: the input gradient (writes
  // dx) and the gamma/beta gradient: five passes where a fused backward makes three.
  const double bwd_passes = d.eager ? 5 : 3;
  ops.push_back(memory_op(name, Split::seq, 2 * d.TH() * d.r, bwd_passes * d.TH() * d.r, d.TH() * d.r, rms ? d.H : 2.0 * d.H));
  ops.back().memory_kind = MemoryKind::norm;
  ops.back().role = OpRole::row_reduction;
  if (d.eager) ops.back().kernels = 2;  // as the host-dispatch fits count eager norms
  if (d.casts) ops.push_back(cast_op(name + "-cast", Split::seq, d.TH() * (d.r + d.e)));
}

// Eager PyTorch reduces each bias gradient with its own kernel over the tokens.
void bias_grad(std::vector<Op>& ops, const std::string& name, const Dims& d, i64 n, Split split) {
  if (!d.eager) return;
  Op op = memory_op(name + "-bias-grad", split, 0, double(d.T()) * n * d.e, 0);
  ops.push_back(op);
}

// Autocast casts every fp32 weight to 16 bits each forward and the 16-bit weight
// gradient back to fp32 in backward.
void weight_casts(Block& b, const Dims& d) {
  if (!d.casts) return;
  double weights = 0;
  int tensors = 0;
  for (const auto& op : b.ops)
    if (op.kind == OpKind::matmul && op.weight) {
      weights += op.params;
      ++tensors;
    }
  if (tensors == 0) return;
  Op op = cast_op("autocast-weight-casts", Split::column, weights * (4 + d.e));
  op.kernels = tensors;
  op.role = OpRole::weight_cast;
  b.ops.push_back(op);
}

// The core of attention (scores, softmax, context) over tensors of these sizes in bytes,
// with query/key head dim `dqk` and value head dim `dv`.
struct AttentionTensors {
  double q, k, v, o;
  i64 dqk, dv;
};

void attention_core(std::vector<Op>& ops, const ModelSpec& m, const Dims& d, const AttentionTensors& t) {
  if (m.attention == AttentionImpl::flash) {
    Op fa;
    fa.name = "flash-attention";
    fa.kind = OpKind::attention;
    fa.split = Split::heads;
    fa.batch = d.B * d.A;
    fa.m = d.S;
    fa.n = d.S;
    // The op's FLOPs are 4 b m n k (QK^T over dqk, PV over dv): the mean head dim makes
    // them 2 b m n (dqk + dv) when the two differ (multi-head latent attention).
    fa.k = (t.dqk + t.dv) / 2;
    fa.causal = true;
    fa.fwd_bytes = t.q + t.k + t.v + t.o;
    fa.kv_bytes = t.k + t.v;
    fa.bwd_bytes = 2 * (t.q + t.k + t.v + t.o);
    // Q, K, V, the output and the fp32 log-sum-exp per row.
    fa.saved_bytes = t.q + t.k + t.v + t.o + double(d.B) * d.A * d.S * 4;
    ops.push_back(fa);
    if (d.eager && !d.hf) {
      // The output's [b, h, s, d] -> [b, s, h*d] copy and its gradient's (transposed
      // reads), and the concatenation of dq, dk, dv into the fused QKV gradient.
      Op layout = memory_op("attn-layout-copies", Split::heads, 2 * t.o, 2 * t.o, 0);
      layout.memory_kind = MemoryKind::noncontiguous;
      layout.kernels = 2;
      layout.backward_kernels = 3;
      ops.push_back(layout);
      Op cat = memory_op("qkv-grad-concat", Split::heads, 0, 2 * (t.q + t.k + t.v), 0);
      cat.kernels = 0;
      cat.backward_kernels = 1;
      ops.push_back(cat);
    }
  } else {
    const double probs = double(d.B) * d.A * d.S * d.S;  // elements of the score matrix
    // Q, K and V are kept even under selective recompute (they are what it restarts
    // from), so they are saved on a marker op outside the core.
    ops.push_back(saved_marker("qkv-output-saved", Split::heads, t.q + t.k + t.v));
    Op scores = matmul("attn-scores", d.B * d.A, d.S, d.S, t.dqk, false, Split::heads, 0, 0);
    scores.core_attention = true;
    ops.push_back(scores);
    if (m.alibi) {
      // torch.baddbmm(alibi, q, k^T, beta=1) (bigscience Megatron-DeepSpeed,
      // megatron/model/transformer.py): the [b*h, 1, s] bias is expanded and copied into
      // the [b*h, s, s] result (one write of the scores), which the GEMM then reads as C
      // (one read). The bias has no gradient: nothing backward.
      Op bias = memory_op("alibi-bias", Split::heads, 2 * probs * d.e, 0, 0);
      bias.backward_kernels = 0;
      bias.core_attention = true;
      ops.push_back(bias);
    }
    if (d.score_mask) {
      // megatron-2019 (mpu/transformer.py at a0368ddf): scores / sqrt(d), then
      // scores * mask - 10000 (1 - mask): three passes forward; backward the division's
      // and the product's (the shift passes its gradient through). The mask is [1, 1, s, s].
      Op mask = memory_op("attn-scale-mask", Split::heads, 3 * 2 * probs * d.e, 2 * 2 * probs * d.e, 0);
      mask.kernels = 3;
      mask.core_attention = true;
      ops.push_back(mask);
      // torch.matmul copies the permuted q, k^T and v views into contiguous batches, and the
      // context is permuted back with .contiguous(); backward copies the context's gradient
      // and concatenates dq, dk, dv into the fused QKV gradient.
      Op layout = memory_op("attn-layout-copies", Split::heads, 2 * (t.q + t.k + t.v + t.o), 2 * (t.q + t.k + t.v + t.o), 0);
      layout.kernels = 4;
      layout.core_attention = true;
      ops.push_back(layout);
    }
    Op softmax = memory_op("scale-mask-softmax", Split::heads, 2 * probs * d.e, 3 * probs * d.e, probs * d.e);
    softmax.memory_kind = MemoryKind::softmax;
    softmax.role = OpRole::row_reduction;
    softmax.core_attention = true;
    ops.push_back(softmax);
    if (d.p > 0) {
      Op drop = memory_op("attn-dropout", Split::heads, probs * (2 * d.e + 1), probs * (2 * d.e + 1), probs);
      drop.core_attention = true;
      ops.push_back(drop);
    }
    Op context = matmul("attn-context", d.B * d.A, d.S, t.dv, d.S, false, Split::heads, 0,
                        d.p > 0 ? probs * d.e : 0.0);
    context.core_attention = true;
    ops.push_back(context);
  }
}

// The output projection (row-parallel, from heads x v_head_dim back to hidden) and the
// residual.
void attention_output(std::vector<Op>& ops, const Dims& d, i64 attn_width, bool bias) {
  ops.push_back(matmul("attn-out", 1, d.T(), d.H, attn_width, true, Split::row,
                       double(attn_width) * d.H + (bias ? d.H : 0), double(d.T()) * attn_width * d.g));
  if (bias) bias_grad(ops, "attn-out", d, d.H, Split::seq);
  rowwise_exit(ops, "attn-g", d, d.TH() * d.e, bias);
  // A row-parallel layer adds its bias after the all-reduce, on every rank.
  if (bias) bias_add(ops, "attn-out", d, d.H, Split::seq);
  ops.push_back(residual("attn", d));
}

void attention_ops(std::vector<Op>& ops, const ModelSpec& m, const Dims& d, bool llama) {
  const double q_bytes = d.TH() * d.e;
  const double kv_bytes = double(d.T()) * d.KV * d.D * d.e;  // one of K or V
  const i64 n_qkv = d.H + 2 * d.KV * d.D;
  const bool bias = !llama;
  norm(ops, llama ? "attn-rmsnorm" : "attn-layernorm", d, llama);
  // The tensor entering the tensor-parallel region is the norm's output, in the residual
  // stream's type (fp32 under autocast: the cast to 16 bits happens inside each matmul), so
  // its backward all-reduce moves d.r bytes an element.
  if (d.dtp) {
    // Separate q, k and v ColwiseParallel projections (GraphStyle::dtensor_projections).
    const i64 kv = d.KV * d.D;
    for (const auto& [name, n] : {std::pair<const char*, i64>{"q", d.H}, {"k", kv}, {"v", kv}}) {
      colwise_entry(ops, std::string("attn-f-") + name, d, d.TH() * d.r, bias);
      ops.push_back(matmul(name, 1, d.T(), n, d.H, true, Split::column, double(d.H) * n + (bias ? n : 0), 0));
      ops.push_back(saved_marker(std::string(name) + "-input-saved", Split::seq, d.TH() * d.g));
      if (bias) bias_grad(ops, name, d, n, Split::column);
    }
    extra_projection_inputs(ops, "qkv", d, 3);
  } else if (d.hf) {
    // q_proj, k_proj and v_proj, each its own GEMM on the norm's output.
    ops.push_back(comm("attn-f", OpKind::tp_enter, d.TH() * d.r));
    const i64 kv = d.KV * d.D;
    for (const auto& [name, n] : {std::pair<const char*, i64>{"q", d.H}, {"k", kv}, {"v", kv}})
      ops.push_back(matmul(name, 1, d.T(), n, d.H, true, Split::column, double(d.H) * n + (bias ? n : 0), 0));
  } else {
    ops.push_back(comm("attn-f", OpKind::tp_enter, d.TH() * d.r));
    ops.push_back(matmul("qkv", 1, d.T(), n_qkv, d.H, true, Split::column, double(d.H) * n_qkv + (bias ? n_qkv : 0), 0));
    // The saved input of a column-parallel matmul is the replicated activation: it is
    // sequence-split under SP, not TP-split, so it is recorded on a marker op of its own.
    ops.push_back(saved_marker("qkv-input-saved", Split::seq, d.TH() * d.g));
    if (bias) bias_grad(ops, "qkv", d, n_qkv, Split::column);
    if (bias) bias_add(ops, "qkv", d, n_qkv, Split::column);
  }
  if (llama && d.hf) {
    // apply_rotary_pos_emb on q and on k (X bytes together), each a [b, h, s, d] view of
    // its projection's [b, s, h, d] output: q * cos (cos broadcast over the heads), -q2 of the
    // second half (a strided half-width view), cat((-q2, q1), -1) (torch.cat of non-contiguous
    // halves), * sin (broadcast), and the sum of the two products, whose layouts differ (one
    // keeps q's strides): five kernels on each of q and k.
    const double X = q_bytes + kv_bytes;
    ops.push_back(forward_op("rotary-cos-sin-muls", Split::heads, 4 * X, MemoryKind::broadcast, 4));
    ops.push_back(forward_op("rotary-neg", Split::heads, X, MemoryKind::noncontiguous, 2));
    ops.push_back(forward_op("rotary-cat", Split::heads, 2 * X, MemoryKind::concat, 2));
    ops.push_back(forward_op("rotary-add", Split::heads, 3 * X, MemoryKind::strided, 2));
  } else if (llama) {
    if (d.eager) {
      // rotate-half written out on q and k (X bytes together), each [b, h, s, d] a
      // transposed view of the QKV output: cat(x1 * cos - x2 * sin, x2 * cos + x1 * sin)
      // with x1, x2 the halves. The four multiplies read a strided half and broadcast
      // cos/sin over batch and heads (X read + written, unvectorized); the subtract,
      // add and cat are contiguous (5X). Backward: four multiplies of the output
      // gradient's halves (4X, as forward), the adds of the halves' two gradients (3X),
      // the negation and the two slice gradients written into zeroed full tensors (3X
      // strided, 2X of fills), and their sum (3X).
      const double X = q_bytes + kv_bytes;
      Op muls = memory_op("rotary-muls", Split::heads, 4 * X, 4 * X, 2 * X);
      muls.memory_kind = MemoryKind::broadcast;
      muls.kernels = 8;
      muls.backward_kernels = 8;
      ops.push_back(muls);
      Op adds = memory_op("rotary-adds-cat", Split::heads, 5 * X, 8 * X, 0);
      adds.kernels = 6;
      adds.backward_kernels = 14;
      ops.push_back(adds);
      Op slices = memory_op("rotary-slice-grads", Split::heads, 0, 3 * X, 0);
      slices.memory_kind = MemoryKind::noncontiguous;
      slices.kernels = 0;
      slices.backward_kernels = 6;
      ops.push_back(slices);
    } else {
      ops.push_back(memory_op("rotary", Split::heads, 2 * (q_bytes + kv_bytes), 2 * (q_bytes + kv_bytes), 0));
    }
  }
  attention_core(ops, m, d, {q_bytes, kv_bytes, kv_bytes, q_bytes, d.D, d.D});
  attention_output(ops, d, d.H, bias);
}

// RMSNorm over a latent of `width` features per token (replicated over TP ranks).
void latent_norm(std::vector<Op>& ops, const std::string& name, const Dims& d, i64 width) {
  const double x = double(d.T()) * width * d.r;
  ops.push_back(memory_op(name, Split::none, 2 * x, (d.eager ? 5 : 3) * x, x, double(width)));
  ops.back().memory_kind = MemoryKind::norm;
  ops.back().role = OpRole::row_reduction;
  if (d.eager) ops.back().kernels = 2;
  if (d.casts) ops.push_back(cast_op(name + "-cast", Split::none, double(d.T()) * width * (d.r + d.e)));
}

// Multi-head latent attention as trained (DeepSeek-V2 Sec. 2.1, DeepSeek-V3 Sec. 2.1.1).
// The down-projections (hidden -> q latent, hidden -> kv latent + the shared rotary key)
// are small and replicated on every TP rank, as in Megatron-Core; the up-projections
// (latent -> per-head query, latent -> per-head no-position key and value) are
// column-parallel over heads. Training materialises every head's K and V (flash
// attention's backward needs them); the absorption of the up-projections into the query
// and output projections, which lets a KV cache hold only the latent, is a decode-time
// rewrite (kv_cache_elements_per_token).
void mla_attention_ops(std::vector<Op>& ops, const ModelSpec& m, const Dims& d) {
  const ModelSpec::Mla& a = *m.mla;
  const i64 dqk = a.qk_nope_head_dim + a.qk_rope_head_dim;
  const double T = double(d.T());
  norm(ops, "attn-rmsnorm", d, true);
  ops.push_back(comm("attn-f", OpKind::tp_enter, d.TH() * d.r));
  ops.push_back(matmul("q-down", 1, d.T(), a.q_lora_rank, d.H, true, Split::none, double(d.H) * a.q_lora_rank, 0));
  ops.push_back(matmul("kv-down", 1, d.T(), a.kv_lora_rank + a.qk_rope_head_dim, d.H, true, Split::none,
                       double(d.H) * (a.kv_lora_rank + a.qk_rope_head_dim), 0));
  // The normed hidden state both down-projections read, kept once.
  ops.push_back(saved_marker("attn-input-saved", Split::seq, d.TH() * d.e));
  latent_norm(ops, "q-latent-rmsnorm", d, a.q_lora_rank);
  latent_norm(ops, "kv-latent-rmsnorm", d, a.kv_lora_rank);
  ops.push_back(matmul("q-up", 1, d.T(), d.A * dqk, a.q_lora_rank, true, Split::column,
                       double(a.q_lora_rank) * d.A * dqk, 0));
  ops.push_back(saved_marker("q-latent-saved", Split::none, T * a.q_lora_rank * d.g));
  ops.push_back(matmul("kv-up", 1, d.T(), d.A * (a.qk_nope_head_dim + a.v_head_dim), a.kv_lora_rank, true,
                       Split::column, double(a.kv_lora_rank) * d.A * (a.qk_nope_head_dim + a.v_head_dim), 0));
  ops.push_back(saved_marker("kv-latent-saved", Split::none, T * a.kv_lora_rank * d.g));
  const double q = T * d.A * dqk * d.e, k = q, v = T * d.A * a.v_head_dim * d.e;
  // Rotary on each head's query part and on the one shared key, which is then broadcast
  // into every head's key next to its no-position part (the concatenation writes K).
  const double q_rope = T * d.A * a.qk_rope_head_dim * d.e, k_rope = T * a.qk_rope_head_dim * d.e;
  ops.push_back(memory_op("rotary-and-key-concat", Split::heads, 2 * (q_rope + k_rope) + 2 * k,
                          2 * (q_rope + k_rope) + 2 * k, 0));
  ops.back().kernels = 2;
  attention_core(ops, m, d, {q, k, v, v, dqk, a.v_head_dim});
  attention_output(ops, d, d.A * a.v_head_dim, false);
}

// SwiGLU MLP of width f on the tokens of the micro-batch: gate and up as one
// column-parallel GEMM, silu(gate) * up, the row-parallel down projection.
void swiglu_mlp(std::vector<Op>& ops, const Dims& d, i64 f, const std::string& prefix) {
  const double ff = double(d.T()) * f;
  if (d.dtp) {
    // Separate gate and up ColwiseParallel projections (w1, w3), the first entered by the caller.
    ops.push_back(matmul(prefix + "gate", 1, d.T(), f, d.H, true, Split::column, double(d.H) * f, 0));
    ops.push_back(saved_marker(prefix + "gate-input-saved", Split::seq, d.TH() * d.g));
    colwise_entry(ops, prefix + "mlp-f-up", d, d.TH() * d.r, false);
    ops.push_back(matmul(prefix + "up", 1, d.T(), f, d.H, true, Split::column, double(d.H) * f, 0));
    ops.push_back(saved_marker(prefix + "up-input-saved", Split::seq, d.TH() * d.g));
    extra_projection_inputs(ops, prefix + "gate-up", d, 2);
  } else if (d.hf) {
    // gate_proj and up_proj, then act_fn(gate) * up on contiguous tensors (vectorized).
    ops.push_back(matmul(prefix + "gate", 1, d.T(), f, d.H, true, Split::column, double(d.H) * f, 0));
    ops.push_back(matmul(prefix + "up", 1, d.T(), f, d.H, true, Split::column, double(d.H) * f, 0));
  } else {
    ops.push_back(matmul(prefix + "gate-up", 1, d.T(), 2 * f, d.H, true, Split::column, 2.0 * d.H * f, 0));
    ops.push_back(saved_marker(prefix + "mlp-input-saved", Split::seq, d.TH() * d.g));
  }
  if (d.hf) {
    ops.push_back(forward_op(prefix + "silu", Split::column, 2 * ff * d.e, MemoryKind::elementwise, 1));
    ops.push_back(forward_op(prefix + "silu-mul", Split::column, 3 * ff * d.e, MemoryKind::elementwise, 1));
  } else if (d.eager) {
    // gate and up are chunk() views of the fused output (rows of 2f): silu(gate) reads a
    // strided view (unvectorized unary), silu(gate) * up a strided operand. Backward:
    // dy * up (strided), silu's gradient from dgate and gate (strided), dy * silu(gate)
    // (contiguous) and the concatenation of the two halves' gradients (4 ff).
    // Saves gate, up and silu(gate).
    Op silu = memory_op(prefix + "silu", Split::column, 2 * ff * d.e, 3 * ff * d.e, 3 * ff * d.e);
    silu.memory_kind = MemoryKind::noncontiguous;
    silu.memory_kind_backward = MemoryKind::strided;
    silu.backward_kernels = 1;
    ops.push_back(silu);
    Op mul = memory_op(prefix + "silu-mul", Split::column, 3 * ff * d.e, 3 * ff * d.e, 0);
    mul.memory_kind = MemoryKind::strided;
    mul.backward_kernels = 1;
    ops.push_back(mul);
    Op grads = memory_op(prefix + "swiglu-grads", Split::column, 0, 7 * ff * d.e, 0);
    grads.kernels = 0;
    grads.backward_kernels = 2;
    ops.push_back(grads);
  } else {
    ops.push_back(memory_op(prefix + "swiglu", Split::column, 3 * ff * d.e, 5 * ff * d.e, 2 * ff * d.e));
  }
  ops.push_back(matmul(prefix + "down", 1, d.T(), d.H, f, true, Split::row, double(f) * d.H, ff * d.g));
}

void dense_mlp_ops(std::vector<Op>& ops, const Dims& d, bool llama) {
  const double ff = double(d.T()) * d.F;  // elements of the hidden activation
  norm(ops, llama ? "mlp-rmsnorm" : "mlp-layernorm", d, llama);
  colwise_entry(ops, "mlp-f", d, d.TH() * d.r, !llama);
  if (llama) {
    swiglu_mlp(ops, d, d.F, "");
  } else {
    ops.push_back(matmul("fc1", 1, d.T(), d.F, d.H, true, Split::column, double(d.H) * d.F + d.F, 0));
    ops.push_back(saved_marker("mlp-input-saved", Split::seq, d.TH() * d.g));
    bias_grad(ops, "fc1", d, d.F, Split::column);
    bias_add(ops, "fc1", d, d.F, Split::column);
    ops.push_back(memory_op(d.eager ? "gelu" : "bias-gelu", Split::column, 2 * ff * d.e, 3 * ff * d.e, ff * d.e));
    ops.push_back(matmul("fc2", 1, d.T(), d.H, d.F, true, Split::row, double(d.F) * d.H + d.H, ff * d.g));
    bias_grad(ops, "fc2", d, d.H, Split::seq);
  }
  rowwise_exit(ops, "mlp-g", d, d.TH() * d.e, !llama);
  if (!llama) bias_add(ops, "fc2", d, d.H, Split::seq);
  ops.push_back(residual("mlp", d));
}

// Top-k experts (GShard-style capacity buffers, all-to-all dispatch and combine).
// GPT-style experts are bias-GeLU MLPs of ffn_hidden; llama-moe experts are SwiGLU MLPs
// of expert_ffn_hidden, with `shared_experts` more of that width that every token passes
// through (one SwiGLU MLP of shared_experts x expert_ffn_hidden, tensor-parallel like a
// dense MLP and outside the all-to-all).
void moe_mlp_ops(std::vector<Op>& ops, const ModelSpec& m, const Dims& d) {
  const bool swiglu = m.family == ModelFamily::llama_moe;
  const i64 E = m.experts;
  const i64 F = swiglu ? m.expert_ffn_hidden : d.F;
  // Capacity: tokens each expert takes from this micro-batch.
  const i64 C = static_cast<i64>(std::ceil(m.capacity_factor * double(d.T()) * m.top_k / double(E)));
  const double buffer = double(E) * C * d.H * d.e;  // dispatched token buffer
  const double ff = double(E) * C * F;
  // What the expert GEMMs keep for their weight gradients: their inputs at the saved
  // GEMM-input size, fp8 under mixed-fp8 as for the dense GEMMs (Transformer Engine's
  // GroupedLinear keeps the quantized inputs; DeepSeek-V3 Sec. 3.3.3 caches the inputs of
  // its Linear operators in FP8, the MoE experts' included).
  const double buffer_saved = double(E) * C * d.H * d.g;
  norm(ops, swiglu ? "moe-rmsnorm" : "moe-layernorm", d, swiglu);
  if (swiglu && m.shared_experts > 0) {
    ops.push_back(comm("shared-f", OpKind::tp_enter, d.TH() * d.r));
    swiglu_mlp(ops, d, m.shared_experts * F, "shared-");
    ops.push_back(comm("shared-g", OpKind::tp_exit, d.TH() * d.e));
  }
  ops.push_back(matmul("router", 1, d.T(), E, d.H, true, Split::none, double(d.H) * E, d.TH() * d.e));
  ops.push_back(memory_op("router-softmax-topk", Split::none, 2.0 * d.T() * E * 4, 2.0 * d.T() * E * 4,
                          double(d.T()) * E * 4));
  ops.back().role = OpRole::row_reduction;
  ops.push_back(memory_op("dispatch-permute", Split::none, d.TH() * d.e + buffer, d.TH() * d.e + buffer, 0));
  ops.push_back(comm("dispatch", OpKind::all_to_all, buffer));
  ops.push_back(comm("expert-f", OpKind::tp_enter, buffer));
  if (swiglu) {
    Op gate_up = matmul("expert-gate-up", E, C, 2 * F, d.H, true, Split::column, double(E) * 2.0 * d.H * F, buffer_saved);
    gate_up.expert = true;
    ops.push_back(gate_up);
    Op act = memory_op("expert-swiglu", Split::column, 3 * ff * d.e, 5 * ff * d.e, 2 * ff * d.e);
    act.expert = true;
    ops.push_back(act);
    Op down = matmul("expert-down", E, C, d.H, F, true, Split::row, double(E) * F * d.H, ff * d.g);
    down.expert = true;
    ops.push_back(down);
  } else {
    Op fc1 = matmul("expert-fc1", E, C, d.F, d.H, true, Split::column, double(E) * (double(d.H) * d.F + d.F), buffer_saved);
    fc1.expert = true;
    ops.push_back(fc1);
    Op act = memory_op("expert-gelu", Split::column, 2 * ff * d.e, 3 * ff * d.e, ff * d.e);
    act.expert = true;
    ops.push_back(act);
    Op fc2 = matmul("expert-fc2", E, C, d.H, d.F, true, Split::row, double(E) * (double(d.F) * d.H + d.H), ff * d.g);
    fc2.expert = true;
    ops.push_back(fc2);
  }
  ops.push_back(comm("expert-g", OpKind::tp_exit, buffer));
  ops.push_back(comm("combine", OpKind::all_to_all, buffer));
  // The weighted sum of the top-k outputs, plus the shared experts' output.
  const double shared_out = swiglu && m.shared_experts > 0 ? d.TH() * d.e : 0.0;
  ops.push_back(memory_op("combine-weighted-sum", Split::seq, buffer + 2 * d.TH() * d.e + shared_out,
                          buffer + 2 * d.TH() * d.e + shared_out, double(d.T()) * m.top_k * 4));
  ops.push_back(residual("moe", d));
}

// The word embedding's lookup: a vocab-parallel table, Megatron all-reduces its output
// over TP.
Op embedding_lookup(const Dims& d) {
  Op lookup;
  lookup.name = "word-embedding";
  lookup.kind = OpKind::embedding;
  lookup.split = Split::column;
  lookup.params = double(d.V) * d.H;
  lookup.fwd_bytes = 2 * d.TH() * d.r;
  lookup.bwd_bytes = 2 * d.TH() * d.r;
  return lookup;
}

// Final norm, logits and the loss; returns the bytes alive only while its backward runs.
double output_head(std::vector<Op>& ops, const Dims& d, bool llama, const std::string& prefix, double logits_params) {
  norm(ops, prefix + (llama ? "final-rmsnorm" : "final-layernorm"), d, llama);
  colwise_entry(ops, prefix + "logits-f", d, d.TH() * d.r, false);
  const double logits = double(d.T()) * d.V;
  ops.push_back(matmul(prefix + "logits", 1, d.T(), d.V, d.H, true, Split::column, logits_params, 0));
  ops.back().compute_precision_gemm = true;
  ops.push_back(saved_marker(prefix + "logits-input-saved", Split::seq, d.TH() * d.e));
  if (d.fp32_logits) {
    // megatron-2019: FP16_Module casts the logits to fp32 (read 2, write 4 per element;
    // backward the reverse), then mpu/cross_entropy.py at a0368ddf runs max, sub_, exp,
    // sum and div_ as separate passes over them (32 bytes an element) and keeps the fp32
    // softmax; backward scales it in place (8) and casts the gradient back.
    ops.push_back(memory_op(prefix + "cross-entropy", Split::column, logits * (d.e + 4 + 32),
                            logits * (8 + 4 + d.e), logits * 4));
    ops.back().memory_kind = MemoryKind::softmax;
    ops.back().role = OpRole::row_reduction;
    ops.back().kernels = 6;
    return logits * d.e;  // the 16-bit gradient of the logits beside the saved fp32 softmax
  }
  if (d.eager) {
    // PyTorch's log_softmax reads and writes the logits' dtype (fp32 accumulation). While
    // its backward runs, the caller still holds the logits, and nll_loss's dense
    // gradient and log_softmax's input gradient exist next to the saved output.
    ops.push_back(memory_op(prefix + "cross-entropy", Split::column, 2 * logits * d.e, 3 * logits * d.e, logits * d.e));
    ops.back().memory_kind = MemoryKind::softmax;
    ops.back().role = OpRole::row_reduction;
    ops.back().loss_parallel = d.dtp;
    return 3 * logits * d.e;
  }
  if (d.te_ce) {
    // Transformer Engine's parallel_cross_entropy (GraphStyle::te_cross_entropy): forward
    // the online softmax reads the logits, then the loss kernel reads them again and writes
    // their gradient in place; backward scales it in place (read and write). It keeps the
    // 16-bit logits (holding the gradient) and allocates nothing for backward.
    ops.push_back(memory_op(prefix + "cross-entropy", Split::column, 3 * logits * d.e, 2 * logits * d.e, logits * d.e));
    ops.back().memory_kind = MemoryKind::softmax;
    ops.back().role = OpRole::row_reduction;
    ops.back().kernels = 2;
    ops.back().backward_kernels = 1;
    ops.back().loss_parallel = d.dtp;
    return 0;
  }
  // Megatron's vocab-parallel cross entropy in fp32: read logits, write and keep the
  // fp32 softmax.
  ops.push_back(memory_op(prefix + "cross-entropy", Split::column, logits * (d.e + 8), logits * (4 + d.e), logits * 4));
  ops.back().memory_kind = MemoryKind::softmax;
  ops.back().role = OpRole::row_reduction;
  ops.back().kernels = 4;
  ops.back().loss_parallel = d.dtp;
  return logits * 4;  // the fp32 gradient of the logits
}

// Weight gradients accumulated outside the GEMMs (GraphStyle::grad_accumulation_bytes):
// one pass over the block's gradients each micro-batch, after its backward. Weights
// shard over TP (the few replicated norm and bias parameters are counted as sharded) and
// experts over EP.
void add_grad_accumulation(Block& b, double bytes_per_param) {
  double dense = 0, expert = 0;
  for (const Op& op : b.ops) (op.expert ? expert : dense) += op.params;
  for (const auto& [params, is_expert] : {std::pair{dense, false}, std::pair{expert, true}}) {
    if (params <= 0) continue;
    Op acc = memory_op(is_expert ? "expert-grad-accumulation" : "grad-accumulation", Split::column, 0,
                       params * bytes_per_param, 0);
    acc.expert = is_expert;
    b.ops.push_back(acc);
  }
}

// GraphStyle::scalar_elementwise: every kernel timed at the vectorized elementwise rate
// runs on the unvectorized path instead, each way.
void scalar_elementwise_kernels(ModelGraph& g) {
  for (Block& b : g.blocks)
    for (Op& op : b.ops) {
      if (op.kind != OpKind::memory) continue;
      const MemoryKind backward = op.bwd_memory_kind();
      if (op.memory_kind == MemoryKind::elementwise) op.memory_kind = kScalarElementwiseKind;
      op.memory_kind_backward = backward == MemoryKind::elementwise ? kScalarElementwiseKind : backward;
    }
}

void layer_attention(std::vector<Op>& ops, const ModelSpec& m, const Dims& d, bool llama) {
  if (m.mla) mla_attention_ops(ops, m, d);
  else attention_ops(ops, m, d, llama);
}

ModelGraph transformer_graph(const ModelSpec& m, i64 micro_batch, const GraphStyle& style) {
  const bool llama_moe = m.family == ModelFamily::llama_moe;
  const bool llama = m.family == ModelFamily::llama || llama_moe;
  const double e = style.activation_bytes;
  Dims d{micro_batch,          m.seq_len,          m.hidden,          m.heads,     m.kv_heads,
         m.head_dim(),         m.ffn_hidden,       m.vocab,           e,           m.dropout,
         style.residual_bytes, style.autocast_casts, style.eager,     style.unfused_score_mask,
         style.bias_add_kernels, style.fp32_logits, style.dtensor_projections, style.te_cross_entropy};
  d.g = style.gemm_input_saved_bytes > 0 ? style.gemm_input_saved_bytes : e;
  // transformers' Llama code: dense Llama layers (a MoE's experts and MLA keep the eager kernels).
  d.hf = style.transformers_inference && m.family == ModelFamily::llama && !m.mla;
  ModelGraph g;
  g.micro_batch = micro_batch;
  g.tokens_per_sample = m.seq_len;
  g.activation_bytes = e;

  Block emb;
  emb.name = "embedding";
  emb.ops.push_back(embedding_lookup(d));
  // The lookup's output is in the table's type, the residual stream's (fp32 under autocast,
  // which leaves embeddings alone): so is its all-reduce over the vocab-parallel ranks.
  emb.ops.push_back(comm("embedding-g", OpKind::tp_exit, d.TH() * d.r));
  if (d.hf) {
    // LlamaRotaryEmbedding once per forward: the positions times inv_freq (a small fp32
    // GEMM), cat(freqs, freqs), cos and sin, each scaled by attention_scaling and cast to
    // 16 bits, after cache_position's arange and the position ids: ten small kernels,
    // about 54 bytes per token and head-dim element.
    emb.ops.push_back(forward_op("rotary-cos-sin", Split::none, 54.0 * double(d.T()) * d.D, MemoryKind::elementwise, 10));
  }
  if (!llama) emb.ops.push_back(memory_op("position-embedding-add", Split::seq, 3 * d.TH() * d.r, d.TH() * d.r, 0,
                                          double(d.S) * d.H));
  if (d.p > 0) emb.ops.push_back(memory_op("embedding-dropout", Split::seq, d.TH() * (2 * d.e + 1), d.TH() * (2 * d.e + 1), d.TH()));
  emb.output_bytes = d.TH() * d.e;

  Block dense;
  dense.name = llama ? "llama-layer" : (m.family == ModelFamily::moe ? "dense-layer" : "gpt-layer");
  layer_attention(dense.ops, m, d, llama);
  dense_mlp_ops(dense.ops, d, llama);
  dense.output_bytes = d.TH() * d.e;

  Block head;
  head.name = "head";
  head.transient_bytes = output_head(head.ops, d, llama, "", double(d.V) * d.H);
  if (m.tie_embeddings) {
    emb.ops.front().tied = true;
    for (Op& op : head.ops)
      if (op.kind == OpKind::matmul && op.weight) op.tied = true;
  }

  weight_casts(dense, d);
  weight_casts(head, d);
  g.blocks = {emb, dense, head};
  g.pre = {0};
  g.post = {2};
  if (m.has_experts()) {
    Block moe;
    moe.name = "moe-layer";
    layer_attention(moe.ops, m, d, llama);
    moe_mlp_ops(moe.ops, m, d);
    moe.output_bytes = d.TH() * d.e;
    weight_casts(moe, d);
    g.blocks.push_back(moe);
    const i64 dense_first = llama_moe ? m.first_dense_layers : 0;
    for (i64 l = 0; l < m.layers; ++l)
      g.layers.push_back(l >= dense_first && ((l - dense_first + 1) % m.moe_every == 0) ? 3 : 1);
    g.expert_active_fraction = double(m.top_k) / double(m.experts);
  } else {
    g.layers.assign(static_cast<std::size_t>(m.layers), 1);
  }
  if (m.tie_embeddings) g.tied_params = double(d.V) * d.H;

  // Multi-token prediction (DeepSeek-V3 Sec. 2.2): module k normalises the previous
  // depth's hidden state and the embedding of the token k ahead, concatenates them,
  // projects 2h -> h, runs one transformer layer (a MoE layer, as the released model's),
  // and predicts through the shared output head (its own final norm, the main head's
  // weight). The modules sit on the last pipeline stage; the embedding they share with
  // the first stage is a second copy there whose gradient is all-reduced with the
  // first stage's, as Megatron does for tied embeddings.
  for (i64 k = 0; k < m.mtp_modules; ++k) {
    Block mtp;
    mtp.name = "mtp-module";
    Op lookup = embedding_lookup(d);
    lookup.name = "mtp-word-embedding";
    lookup.tied = true;
    mtp.ops.push_back(lookup);
    mtp.ops.push_back(comm("mtp-embedding-g", OpKind::tp_exit, d.TH() * d.r));
    norm(mtp.ops, "mtp-hidden-rmsnorm", d, true);
    norm(mtp.ops, "mtp-embedding-rmsnorm", d, true);
    mtp.ops.push_back(comm("mtp-proj-f", OpKind::tp_enter, 2 * d.TH() * d.r));
    mtp.ops.push_back(matmul("mtp-projection", 1, d.T(), d.H, 2 * d.H, true, Split::row, 2.0 * d.H * d.H,
                             2 * d.TH() * d.e));
    mtp.ops.push_back(comm("mtp-proj-g", OpKind::tp_exit, d.TH() * d.e));
    layer_attention(mtp.ops, m, d, llama);
    if (m.has_experts()) moe_mlp_ops(mtp.ops, m, d);
    else dense_mlp_ops(mtp.ops, d, llama);
    mtp.transient_bytes = output_head(mtp.ops, d, llama, "mtp-", 0);
    mtp.output_bytes = d.TH() * d.e;
    weight_casts(mtp, d);
    if (k == 0) g.blocks.push_back(mtp);
    g.post.push_back(static_cast<int>(g.blocks.size()) - 1);
  }
  if (m.mtp_modules > 0 && !m.tie_embeddings) {
    g.tied_params = double(d.V) * d.H;
    g.blocks[0].ops.front().tied = true;
  }
  if (style.grad_accumulation_bytes > 0)
    for (Block& b : g.blocks) add_grad_accumulation(b, style.grad_accumulation_bytes);
  if (style.scalar_elementwise) scalar_elementwise_kernels(g);
  return g;
}

// --- Wide-ResNet ---------------------------------------------------------------------

struct ConvShape {
  i64 B, H, W, Cin, Cout, kernel, stride;
  i64 Ho() const { return (H + stride - 1) / stride; }
  i64 Wo() const { return (W + stride - 1) / stride; }
};

void conv_bn_relu(std::vector<Op>& ops, const std::string& name, const ConvShape& c, double e, bool relu) {
  const double in = double(c.B) * c.H * c.W * c.Cin * e;
  const double out = double(c.B) * c.Ho() * c.Wo() * c.Cout * e;
  ops.push_back(matmul(name, 1, c.B * c.Ho() * c.Wo(), c.Cout, c.Cin * c.kernel * c.kernel, true, Split::none,
                       double(c.Cin) * c.Cout * c.kernel * c.kernel, in));
  // Training batch norm: a statistics pass and a normalise pass (+ ReLU in place).
  ops.push_back(memory_op(name + "-bn" + (relu ? "-relu" : ""), Split::none, 3 * out, 4 * out, out, 2.0 * c.Cout));
  ops.back().memory_kind = MemoryKind::norm;
  ops.back().kernels = relu ? 3 : 2;
}

ModelGraph wresnet_graph(const ModelSpec& m, i64 micro_batch, double e) {
  ModelGraph g;
  g.micro_batch = micro_batch;
  g.tokens_per_sample = 1;
  g.activation_bytes = e;
  std::vector<i64> blocks_per_stage;
  switch (m.depth) {
    case 26: blocks_per_stage = {2, 2, 2, 2}; break;
    case 101: blocks_per_stage = {3, 4, 23, 3}; break;
    case 152: blocks_per_stage = {3, 8, 36, 3}; break;
    default: blocks_per_stage = {3, 4, 6, 3}; break;
  }
  const i64 B = micro_batch;
  i64 size = m.image_size;

  Block stem;
  stem.name = "stem";
  conv_bn_relu(stem.ops, "stem-conv7x7", {B, size, size, 3, m.channels, 7, 2}, e, true);
  size = (size + 1) / 2;
  const double pooled_in = double(B) * size * size * m.channels * e;
  size = (size + 1) / 2;
  const double pooled_out = double(B) * size * size * m.channels * e;
  stem.ops.push_back(memory_op("maxpool", Split::none, pooled_in + pooled_out, pooled_in + 2 * pooled_out, pooled_in));
  stem.output_bytes = pooled_out;
  g.blocks.push_back(stem);
  g.pre = {0};

  i64 in_channels = m.channels;
  for (std::size_t s = 0; s < blocks_per_stage.size(); ++s) {
    const i64 planes = m.channels << s;
    const i64 width = planes * m.width;
    const i64 out = planes * 4;
    for (int variant = 0; variant < 2; ++variant) {
      const bool first = variant == 0;
      const i64 stride = (first && s > 0) ? 2 : 1;
      const i64 cin = first ? in_channels : out;
      Block b;
      b.name = "bottleneck-s" + std::to_string(s) + (first ? "-first" : "");
      // torchvision widens the 1x1 reduction and the 3x3; Alpa's model only the 3x3's output.
      const i64 reduced = m.bottleneck == BottleneckStyle::alpa ? planes : width;
      conv_bn_relu(b.ops, "conv1x1a", {B, size, size, cin, reduced, 1, 1}, e, true);
      conv_bn_relu(b.ops, "conv3x3", {B, size, size, reduced, width, 3, stride}, e, true);
      const i64 so = (size + stride - 1) / stride;
      conv_bn_relu(b.ops, "conv1x1b", {B, so, so, width, out, 1, 1}, e, false);
      if (first && (stride != 1 || cin != out)) conv_bn_relu(b.ops, "downsample", {B, size, size, cin, out, 1, stride}, e, false);
      const double o = double(B) * so * so * out * e;
      b.ops.push_back(memory_op("residual-add-relu", Split::none, 3 * o, 3 * o, o));
      b.ops.back().role = OpRole::residual;
      b.output_bytes = o;
      g.blocks.push_back(b);
    }
    const int first_idx = static_cast<int>(g.blocks.size()) - 2;
    for (i64 i = 0; i < blocks_per_stage[s]; ++i) g.layers.push_back(i == 0 ? first_idx : first_idx + 1);
    in_channels = out;
    if (s > 0) size = (size + 1) / 2;
  }

  Block head;
  head.name = "head";
  const double features = double(B) * size * size * in_channels * e;
  head.ops.push_back(memory_op("global-avgpool", Split::none, features + double(B) * in_channels * e,
                               features + double(B) * in_channels * e, 0));
  Op fc = matmul("fc", 1, B, m.classes, in_channels, true, Split::none, double(in_channels) * m.classes + m.classes,
                 double(B) * in_channels * e);
  head.ops.push_back(fc);
  head.ops.push_back(memory_op("cross-entropy", Split::none, double(B) * m.classes * 12, double(B) * m.classes * 8, 0));
  head.ops.back().role = OpRole::row_reduction;
  g.blocks.push_back(head);
  g.post = {static_cast<int>(g.blocks.size()) - 1};
  return g;
}

}  // namespace

double Op::fwd_flops() const {
  if (kind == OpKind::matmul) return 2.0 * batch * m * n * k;
  if (kind == OpKind::attention) return 4.0 * batch * m * n * k;  // QK^T and PV, full (Megatron's convention)
  return 0;
}

double Op::bwd_flops() const { return 2.0 * fwd_flops(); }

double Block::params() const {
  double p = 0;
  for (const auto& op : ops) p += op.params;
  return p;
}

double Block::fwd_flops() const {
  double f = 0;
  for (const auto& op : ops) f += op.fwd_flops();
  return f;
}

double Block::saved_bytes() const {
  double s = 0;
  for (const auto& op : ops) s += op.saved_bytes;
  return s;
}

double ModelGraph::params() const {
  double p = 0;
  for (int b : pre) p += blocks[b].params();
  for (int b : layers) p += blocks[b].params();
  for (int b : post) p += blocks[b].params();
  return p - tied_params;
}

double ModelGraph::active_params() const {
  auto block = [&](int b) {
    double p = 0;
    for (const auto& op : blocks[static_cast<std::size_t>(b)].ops) p += op.expert ? op.params * expert_active_fraction : op.params;
    return p;
  };
  double p = 0;
  for (int b : pre) p += block(b);
  for (int b : layers) p += block(b);
  for (int b : post) p += block(b);
  return p - tied_params;
}

double ModelGraph::fwd_flops() const {
  double f = 0;
  for (int b : pre) f += blocks[b].fwd_flops();
  for (int b : layers) f += blocks[b].fwd_flops();
  for (int b : post) f += blocks[b].fwd_flops();
  return f;
}

DType gemm_dtype(const Op& op, DType compute, DType weight_gemm) {
  return op.weight && !op.compute_precision_gemm ? weight_gemm : compute;
}

double fp8_cast_params(const Op& op, DType compute, DType weight_gemm) {
  const bool cast = op.kind == OpKind::matmul && compute != DType::fp8 && gemm_dtype(op, compute, weight_gemm) == DType::fp8;
  return cast ? op.params : 0.0;
}

GraphStyle graph_style(const TrainingSpec& t) {
  GraphStyle s = graph_style(t.precision);
  switch (t.framework.name) {
    case Framework::megatron_2019:
      // FP16_Module runs the whole model in fp16: 16-bit residual stream, no autocast casts.
      s.eager = true;
      s.unfused_score_mask = true;
      s.bias_add_kernels = true;
      s.fp32_logits = true;
      break;
    case Framework::megatron:
      // Without gradient accumulation fusion (Megatron-LM before 83b1e42f) the wgrad GEMM
      // writes a 16-bit gradient and the sum over micro-batches is a pass of its own: under
      // bf16 Megatron keeps fp32 main_grad buffers (accumulate_allreduce_grads_in_fp32 is
      // forced) and its DistributedDataParallel hook runs main_grad.add_(grad): read 2,
      // read 4, write 4 (megatron/model/distributed.py _make_param_hook); under fp16 without
      // --accumulate-allreduce-grads-in-fp32 (the 2021 examples, pretrain_gpt3_175B.sh)
      // autograd adds into the 16-bit .grad: read 2 + 2, write 2.
      if (!t.framework.gradient_accumulation_fusion)
        s.grad_accumulation_bytes = t.precision == Precision::mixed_bf16 ? 10.0 : 6.0;
      s.te_cross_entropy = t.framework.cross_entropy == CrossEntropyImpl::te;
      break;
    case Framework::megatron_deepspeed:
      // bf16: BF16_Optimizer.update_hp_grads (deepspeed/runtime/bf16_optimizer.py), called
      // by the pipeline engine after each micro-batch's backward, runs
      // hp_grad.add_(lp.grad.to(fp32)): read the bf16 gradient (2), write its fp32 copy (4),
      // read it (4), read and write the fp32 accumulator (8). fp16: autograd's
      // AccumulateGrad adds the new 16-bit gradient into .grad (read 2 + 2, write 2).
      s.grad_accumulation_bytes = t.precision == Precision::mixed_fp16 ? 6.0 : 18.0;
      break;
    case Framework::pytorch_tp: s.dtensor_projections = true; break;
    default: break;
  }
  s.scalar_elementwise = scalar_elementwise(t.framework.name);
  return s;
}

bool scalar_elementwise(Framework f) { return f == Framework::megatron_2019; }

GraphStyle graph_style(Precision p) {
  switch (p) {
    case Precision::fp32: return {4, 4, false, true};
    case Precision::amp_bf16:
    case Precision::amp_fp16: return {2, 4, true, true};
    case Precision::mixed_bf16:
    case Precision::mixed_fp16: return {2, 2, false, false};
    case Precision::mixed_fp8: {
      GraphStyle s{2, 2, false, false};
      s.gemm_input_saved_bytes = 1;
      return s;
    }
  }
  return {};
}

ModelGraph build_model_graph(const ModelSpec& m, std::int64_t micro_batch, const GraphStyle& style) {
  if (m.family == ModelFamily::wresnet) return wresnet_graph(m, micro_batch, style.activation_bytes);
  return transformer_graph(m, micro_batch, style);
}

ModelGraph build_model_graph(const ModelSpec& m, std::int64_t micro_batch, double activation_bytes) {
  return build_model_graph(m, micro_batch, GraphStyle{activation_bytes, activation_bytes, false, false});
}

double parameter_count(const ModelSpec& m) { return build_model_graph(m, 1, 2).params(); }

double active_parameter_count(const ModelSpec& m) { return build_model_graph(m, 1, 2).active_params(); }

double kv_cache_elements_per_token(const ModelSpec& m) {
  if (m.family == ModelFamily::wresnet) return 0;
  const double per_layer = m.mla ? double(m.mla->kv_lora_rank + m.mla->qk_rope_head_dim)
                                 : 2.0 * double(m.kv_heads) * double(m.head_dim());
  return per_layer * double(m.layers);
}

}  // namespace clustersim
