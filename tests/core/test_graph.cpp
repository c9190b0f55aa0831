// Model graphs against published parameter counts and closed forms.
#include <catch2/catch.hpp>
#include <cstdio>
#include <string>

#include "costmodel/graph.hpp"
#include "costmodel/kernels.hpp"

using namespace clustersim;

namespace {
ModelSpec gpt(std::int64_t h, std::int64_t l, std::int64_t a, std::int64_t s, std::int64_t v) {
  ModelSpec m;
  m.family = ModelFamily::gpt;
  m.hidden = h;
  m.layers = l;
  m.heads = m.kv_heads = a;
  m.seq_len = s;
  m.vocab = v;
  m.ffn_hidden = 4 * h;
  m.tie_embeddings = true;
  return m;
}
ModelSpec llama(std::int64_t h, std::int64_t l, std::int64_t a, std::int64_t kv, std::int64_t f, std::int64_t v) {
  ModelSpec m;
  m.family = ModelFamily::llama;
  m.hidden = h;
  m.layers = l;
  m.heads = a;
  m.kv_heads = kv;
  m.ffn_hidden = f;
  m.seq_len = 4096;
  m.vocab = v;
  m.tie_embeddings = false;
  return m;
}
ModelSpec wresnet(std::int64_t depth, std::int64_t channels, std::int64_t width) {
  ModelSpec m;
  m.family = ModelFamily::wresnet;
  m.depth = depth;
  m.channels = channels;
  m.width = width;
  m.image_size = 224;
  m.classes = 1000;
  return m;
}
}  // namespace

TEST_CASE("GPT parameters match Megatron's closed form", "[graph]") {
  // P = 12 l h^2 (1 + 13/12h + (V+s)/12lh), plus the final layer norm (2h).
  const double h = 12288, l = 96, s = 2048, V = 50257;
  const double megatron = 12 * l * h * h * (1 + 13 / (12 * h) + (V + s) / (12 * l * h));
  const double p = parameter_count(gpt(12288, 96, 96, 2048, 50257));
  INFO("GPT-3 175B: expected " << (megatron + 2 * h) / 1e9 << " B, graph " << p / 1e9 << " B");
  CHECK(p == Approx(megatron + 2 * h).epsilon(1e-12));
  CHECK(p / 1e9 == Approx(174.6).epsilon(5e-4));
}

TEST_CASE("Llama parameters match the published checkpoints", "[graph]") {
  // Llama-2-7B and Llama-2-70B as counted by their released checkpoints.
  CHECK(parameter_count(llama(4096, 32, 32, 32, 11008, 32000)) == 6738415616.0);
  CHECK(parameter_count(llama(8192, 80, 64, 8, 28672, 32000)) == 68976648192.0);
}

TEST_CASE("ResNet parameters match torchvision", "[graph]") {
  CHECK(parameter_count(wresnet(50, 64, 1)) == 25557032.0);   // resnet50
  CHECK(parameter_count(wresnet(50, 64, 2)) == 68883240.0);   // wide_resnet50_2
  CHECK(parameter_count(wresnet(101, 64, 2)) == 126886696.0); // wide_resnet101_2
}

TEST_CASE("Wide-ResNet parameters of Alpa's benchmark model match its suite sizes", "[graph]") {
  // alpa/model/wide_resnet.py: stem conv 7x7x3xC + BN; per bottleneck with f = C 2^i
  // filters and input c: 1x1 c->f, 3x3 f->fW, 1x1 fW->4f, each with BN (2 per channel),
  // plus a 1x1 c->4f projection with BN when c != 4f; head 4f->1000 with bias.
  auto closed_form = [](int depth, double C, double W) {
    const std::vector<int> stages = depth == 50 ? std::vector<int>{3, 4, 6, 3} : std::vector<int>{3, 4, 23, 3};
    double p = 49 * 3 * C + 2 * C, c = C;
    for (std::size_t i = 0; i < stages.size(); ++i) {
      const double f = C * double(1 << i);
      for (int j = 0; j < stages[i]; ++j) {
        p += c * f + 2 * f + 9 * f * f * W + 2 * f * W + f * W * 4 * f + 8 * f;
        if (c != 4 * f) p += c * 4 * f + 8 * f;
        c = 4 * f;
      }
    }
    return p + c * 1000 + 1000;
  };
  struct Case {
    int depth;
    std::int64_t C, W;
    double published_b;  // Alpa (OSDI'22) Table 4 label, billions
  };
  for (const Case& k : {Case{50, 160, 2, 0.25}, Case{50, 320, 2, 1}, Case{50, 448, 2, 2}, Case{50, 640, 2, 4},
                        Case{50, 320, 16, 6.8}, Case{101, 320, 16, 13}}) {
    ModelSpec m = wresnet(k.depth, k.C, k.W);
    m.bottleneck = BottleneckStyle::alpa;
    const double p = parameter_count(m);
    INFO("WRN-" << k.depth << " C" << k.C << " W" << k.W << ": closed form " << closed_form(k.depth, double(k.C), double(k.W)) / 1e9
                << " B, graph " << p / 1e9 << " B, Alpa's label " << k.published_b << " B");
    CHECK(p == Approx(closed_form(k.depth, double(k.C), double(k.W))).epsilon(1e-12));
    CHECK(p / 1e9 == Approx(k.published_b).epsilon(0.03));  // the labels are rounded
  }
}

TEST_CASE("MoE parameters: experts replace every other MLP", "[graph]") {
  ModelSpec m = gpt(768, 8, 16, 1024, 32000);
  m.family = ModelFamily::moe;
  m.experts = 8;
  m.top_k = 2;
  m.moe_every = 2;
  m.tie_embeddings = true;
  const double h = 768, f = 3072, E = 8;
  const double attention = 2 * h + (3 * h * h + 3 * h) + (h * h + h) + 2 * h;  // ln1, qkv, out, ln2
  const double dense = attention + (h * f + f) + (f * h + h);
  const double moe = attention + h * E + E * ((h * f + f) + (f * h + h));
  const double expected = 4 * dense + 4 * moe + 32000 * h + 1024 * h + 2 * h;
  CHECK(parameter_count(m) == Approx(expected).epsilon(1e-12));
}

TEST_CASE("GPT layer saves 34 s b h + 5 a s^2 b bytes (Korthikanti et al. 2022)", "[graph]") {
  ModelSpec m = gpt(4096, 4, 32, 2048, 51200);
  m.attention = AttentionImpl::standard;
  m.dropout = 0.1;
  const std::int64_t b = 2;
  const ModelGraph g = build_model_graph(m, b, 2);
  const double s = 2048, h = 4096, a = 32;
  const double expected = 34 * s * b * h + 5 * a * s * s * b;
  const double saved = g.blocks[static_cast<std::size_t>(g.layers[0])].saved_bytes();
  INFO("expected " << expected << " bytes, graph " << saved);
  CHECK(saved == Approx(expected).epsilon(1e-12));
}

TEST_CASE("forward FLOPs match 24 b s h^2 l (1 + s/6h) + 2 b s h V", "[graph]") {
  ModelSpec m = gpt(2304, 24, 24, 2048, 51200);
  m.attention = AttentionImpl::standard;
  const ModelGraph g = build_model_graph(m, 4, 2);
  const double b = 4, s = 2048, h = 2304, l = 24, V = 51200;
  const double expected = 24 * b * s * h * h * l * (1 + s / (6 * h)) + 2 * b * s * h * V;
  CHECK(g.fwd_flops() == Approx(expected).epsilon(1e-12));
  // Flash attention is counted the same way (the causal half it skips is a time effect).
  m.attention = AttentionImpl::flash;
  CHECK(build_model_graph(m, 4, 2).fwd_flops() == Approx(expected).epsilon(1e-12));
}

TEST_CASE("identical layers are stored once", "[graph]") {
  const ModelGraph g = build_model_graph(gpt(1024, 24, 16, 1024, 51200), 1, 2);
  CHECK(g.layers.size() == 24);
  CHECK(g.blocks.size() == 3);  // embedding, layer, head
  const ModelGraph r = build_model_graph(wresnet(50, 64, 1), 1, 2);
  CHECK(r.layers.size() == 16);  // 3 + 4 + 6 + 3 bottlenecks
}

TEST_CASE("tensor-parallel entry all-reduces move the norm output's element size", "[graph]") {
  // The tensor entering a tensor-parallel region is the norm's output: 16-bit in Megatron's
  // fused style, fp32 under autocast (eager PyTorch keeps norms in fp32), so the backward
  // all-reduce of its gradient is s b h x 2 or x 4 bytes. The exit all-reduce is the 16-bit
  // matmul output in both.
  const ModelSpec m = gpt(2560, 2, 32, 2048, 50304);
  const double b = 2, s = 2048, h = 2560;
  for (const auto& [precision, entry_bytes] : {std::pair{Precision::mixed_bf16, 2.0}, {Precision::amp_bf16, 4.0}}) {
    const ModelGraph g = build_model_graph(m, 2, graph_style(precision));
    const Block& layer = g.blocks[static_cast<std::size_t>(g.layers[0])];
    int entries = 0, exits = 0;
    for (const Op& op : layer.ops) {
      if (op.kind == OpKind::tp_enter) {
        INFO(op.name << ": expected " << s * b * h * entry_bytes << " bytes, graph " << op.comm_bytes);
        CHECK(op.comm_bytes == Approx(s * b * h * entry_bytes).epsilon(1e-12));
        ++entries;
      }
      if (op.kind == OpKind::tp_exit) {
        INFO(op.name << ": expected " << s * b * h * 2 << " bytes, graph " << op.comm_bytes);
        CHECK(op.comm_bytes == Approx(s * b * h * 2).epsilon(1e-12));
        ++exits;
      }
    }
    CHECK(entries == 2);
    CHECK(exits == 2);
  }
}

namespace {
double bytes_of(const Block& b, const std::string& name, bool forward) {
  for (const Op& op : b.ops)
    if (op.name == name) return forward ? op.fwd_bytes : op.bwd_bytes;
  return -1;
}
double sum_bytes(const Block& b, bool forward) {
  double s = 0;
  for (const Op& op : b.ops) s += forward ? op.fwd_bytes : op.bwd_bytes;
  return s;
}
}  // namespace

TEST_CASE("megatron-2019: scale and mask passes, bias adds and fp32 logits beyond the eager kernels", "[graph]") {
  // Megatron-LM's 2019 code (commit a0368ddf) on the paper's 1.2B baseline, batch 8, with
  // dropout 0.1 and standard attention: the score tensor of b a s^2 fp16 elements gets three
  // more passes forward (divide, mask multiply, shift) and two backward; each of the four
  // biased GEMMs is followed by an add over its output; the logits are cast to fp32 and
  // run through a cross entropy of separate passes.
  ModelSpec m = gpt(1536, 40, 16, 1024, 51200);
  m.attention = AttentionImpl::standard;
  m.dropout = 0.1;
  const double b = 8, s = 1024, h = 1536, a = 16, V = 51200, e = 2;
  TrainingSpec t;
  t.precision = Precision::mixed_fp16;
  t.framework.name = Framework::megatron_2019;
  const GraphStyle style = graph_style(t);
  CHECK(style.eager);
  CHECK(style.residual_bytes == 2);  // FP16_Module: the whole model in fp16
  CHECK_FALSE(style.autocast_casts);
  const ModelGraph g = build_model_graph(m, 8, style);
  const Block& layer = g.blocks[static_cast<std::size_t>(g.layers[0])];
  const double probs = b * a * s * s;
  std::printf("score scale and mask: forward expected %.6g bytes, graph %.6g; backward expected %.6g, graph %.6g\n",
              6 * probs * e, bytes_of(layer, "attn-scale-mask", true), 4 * probs * e,
              bytes_of(layer, "attn-scale-mask", false));
  CHECK(bytes_of(layer, "attn-scale-mask", true) == Approx(6 * probs * e).epsilon(1e-12));
  CHECK(bytes_of(layer, "attn-scale-mask", false) == Approx(4 * probs * e).epsilon(1e-12));
  // Bias adds read and write 3h (qkv), h (attention output), 4h (fc1) and h (fc2) per token.
  const double bias_adds = bytes_of(layer, "qkv-bias-add", true) + bytes_of(layer, "attn-out-bias-add", true) +
                           bytes_of(layer, "fc1-bias-add", true) + bytes_of(layer, "fc2-bias-add", true);
  std::printf("bias adds: expected %.6g bytes, graph %.6g\n", 2 * b * s * 9 * h * e, bias_adds);
  CHECK(bias_adds == Approx(2 * b * s * 9 * h * e).epsilon(1e-12));
  const Block& head = g.blocks[static_cast<std::size_t>(g.post[0])];
  const double logits = b * s * V;
  std::printf("fp32 cross entropy: forward expected %.6g bytes, graph %.6g\n", logits * (e + 36),
              bytes_of(head, "cross-entropy", true));
  CHECK(bytes_of(head, "cross-entropy", true) == Approx(logits * (e + 36)).epsilon(1e-12));
  CHECK(bytes_of(head, "cross-entropy", false) == Approx(logits * (12 + e)).epsilon(1e-12));
  // Everything else is the eager graph of the same precision: the 2019 layer moves exactly
  // the added passes more.
  GraphStyle eager = graph_style(Precision::mixed_fp16);
  eager.eager = true;
  const ModelGraph plain_graph = build_model_graph(m, 8, eager);
  const Block& plain = plain_graph.blocks[static_cast<std::size_t>(g.layers[0])];
  const double layout = 2 * (4 * b * s * h * e);
  const double added_f = 6 * probs * e + layout + 2 * b * s * 9 * h * e;
  std::printf("2019 layer over eager: forward expected %.6g bytes more, graph %.6g\n", added_f,
              sum_bytes(layer, true) - sum_bytes(plain, true));
  CHECK(sum_bytes(layer, true) - sum_bytes(plain, true) == Approx(added_f).epsilon(1e-9));
  CHECK(sum_bytes(layer, false) - sum_bytes(plain, false) == Approx(4 * probs * e + layout).epsilon(1e-9));
}

TEST_CASE("megatron-2019: PyTorch 1.1's elementwise kernels take the unvectorized path", "[graph]") {
  // PyTorch 1.1's TensorIterator GPU loop loads, computes and stores one element per
  // thread at a time (pytorch/pytorch issue 31975; vectorized in 2020), so under
  // megatron-2019 every kernel the eager graph times as vectorized elementwise runs at the
  // unvectorized contiguous rate (MemoryKind::mixed_add), both ways; norms (apex) and the
  // softmax keep their own kinds.
  ModelSpec m = gpt(1536, 40, 16, 1024, 51200);
  m.attention = AttentionImpl::standard;
  m.dropout = 0.1;
  TrainingSpec t;
  t.precision = Precision::mixed_fp16;
  t.framework.name = Framework::megatron_2019;
  const GraphStyle style = graph_style(t);
  CHECK(style.scalar_elementwise);
  GraphStyle vectorized = style;
  vectorized.scalar_elementwise = false;
  const ModelGraph g = build_model_graph(m, 8, style);
  const ModelGraph v = build_model_graph(m, 8, vectorized);
  int moved = 0;
  for (std::size_t b = 0; b < g.blocks.size(); ++b)
    for (std::size_t i = 0; i < g.blocks[b].ops.size(); ++i) {
      const Op& op = g.blocks[b].ops[i];
      const Op& was = v.blocks[b].ops[i];
      REQUIRE(op.name == was.name);
      const bool memory = op.kind == OpKind::memory;  // GEMMs, collectives and lookups keep theirs
      const auto expect = [memory](MemoryKind k) {
        return memory && k == MemoryKind::elementwise ? MemoryKind::mixed_add : k;
      };
      INFO(op.name);
      CHECK(op.memory_kind == expect(was.memory_kind));
      CHECK(op.bwd_memory_kind() == expect(was.bwd_memory_kind()));
      moved += op.kind == OpKind::memory && was.memory_kind == MemoryKind::elementwise;
    }
  CHECK(moved >= 10);
  const Block& layer = g.blocks[static_cast<std::size_t>(g.layers[0])];
  for (const Op& op : layer.ops)
    if (op.name == "attn-layernorm") CHECK(op.memory_kind == MemoryKind::norm);
    else if (op.name == "scale-mask-softmax") CHECK(op.memory_kind == MemoryKind::softmax);
  // The score scale and mask on the transferred V100: 6 b a s^2 fp16 bytes at the
  // unvectorized kind's rate, its half size once, three launches.
  const GpuProfile gpu = *find_gpu_profile("v100-sxm2-32gb");
  const auto k = static_cast<std::size_t>(MemoryKind::mixed_add);
  const double rate = gpu.memory_bandwidth * gpu.efficiency.memory_by_kind[k];
  const double bytes = 6.0 * 8 * 16 * 1024 * 1024 * 2;
  const double expected =
      (bytes + gpu.efficiency.memory_half_size_by_kind[k]) / rate + 3 * gpu.efficiency.kernel_overhead;
  const double model = KernelModel(gpu).memory(bytes, 3, MemoryKind::mixed_add);
  std::printf("megatron-2019 score scale and mask on %s: expected %.4f ms, model %.4f ms (vectorized: %.4f ms)\n",
              gpu.name.c_str(), 1e3 * expected, 1e3 * model, 1e3 * KernelModel(gpu).memory(bytes, 3, MemoryKind::elementwise));
  CHECK(model == Approx(expected).epsilon(1e-12));
  CHECK(model > KernelModel(gpu).memory(bytes, 3, MemoryKind::elementwise));
}

TEST_CASE("megatron-deepspeed: each micro-batch's gradients are accumulated in one pass per block", "[graph]") {
  // DeepSpeed's BF16_Optimizer.update_hp_grads after every micro-batch's backward:
  // hp.add_(lp.grad.to(fp32)) moves 2 + 4 + 4 + 8 = 18 bytes per parameter; under fp16
  // autograd adds into .grad in place, 6 bytes.
  const ModelSpec m = gpt(2048, 4, 16, 2048, 51200);
  for (const auto& [precision, per_param] : {std::pair{Precision::mixed_bf16, 18.0}, {Precision::mixed_fp16, 6.0}}) {
    TrainingSpec t;
    t.precision = precision;
    t.framework.name = Framework::megatron_deepspeed;
    const ModelGraph g = build_model_graph(m, 1, graph_style(t));
    for (const Block& b : g.blocks) {
      INFO(b.name << ": expected " << b.params() * per_param << " bytes, graph " << bytes_of(b, "grad-accumulation", false));
      CHECK(bytes_of(b, "grad-accumulation", false) == Approx(b.params() * per_param).epsilon(1e-12));
      CHECK(bytes_of(b, "grad-accumulation", true) == 0);
    }
  }
  TrainingSpec megatron;
  megatron.precision = Precision::mixed_bf16;
  const ModelGraph fused = build_model_graph(m, 1, graph_style(megatron));
  for (const Block& b : fused.blocks) CHECK(bytes_of(b, "grad-accumulation", false) == -1);
}

TEST_CASE("megatron without gradient accumulation fusion: the micro-batch's 16-bit gradients summed outside the GEMMs", "[graph]") {
  // Megatron-LM before --gradient-accumulation-fusion (83b1e42f, 2022-02): under bf16 its
  // DDP hook runs main_grad.add_(grad) into fp32 buffers, 2 + 4 + 4 bytes per parameter;
  // under fp16 without fp32 accumulation autograd adds into .grad, 2 + 2 + 2.
  const ModelSpec m = gpt(2048, 4, 16, 2048, 51200);
  for (const auto& [precision, per_param] : {std::pair{Precision::mixed_bf16, 10.0}, {Precision::mixed_fp16, 6.0}}) {
    TrainingSpec t;
    t.precision = precision;
    t.framework.gradient_accumulation_fusion = false;
    const ModelGraph g = build_model_graph(m, 1, graph_style(t));
    for (const Block& b : g.blocks) {
      std::printf("%s %s: expected %.6g bytes (%.0f per parameter), graph %.6g\n", std::string(to_string(precision)).c_str(), b.name.c_str(),
                  b.params() * per_param, per_param, bytes_of(b, "grad-accumulation", false));
      CHECK(bytes_of(b, "grad-accumulation", false) == Approx(b.params() * per_param).epsilon(1e-12));
      CHECK(bytes_of(b, "grad-accumulation", true) == 0);
    }
    t.framework.gradient_accumulation_fusion = true;  // the default: the wgrad GEMM accumulates
    for (const Block& b : build_model_graph(m, 1, graph_style(t)).blocks) CHECK(bytes_of(b, "grad-accumulation", false) == -1);
  }
}

TEST_CASE("ALiBi under standard attention: the bias copied into the scores and read back by the GEMM", "[graph]") {
  // BLOOM's baddbmm(alibi, q, k^T, beta=1): per layer and micro-batch b, one write and one
  // read of the b x a x s x s scores in 16 bits forward, nothing backward.
  ModelSpec m = gpt(2048, 2, 16, 2048, 51200);
  m.attention = AttentionImpl::standard;
  m.alibi = true;
  const std::int64_t b = 2;
  const ModelGraph g = build_model_graph(m, b, graph_style(Precision::mixed_bf16));
  const Block& layer = g.blocks[static_cast<std::size_t>(g.layers[0])];
  const double expected = 2.0 * double(b) * 16 * 2048.0 * 2048.0 * 2;
  std::printf("alibi bias bytes per layer: expected 2 b a s^2 e = %.6g, graph %.6g\n", expected,
              bytes_of(layer, "alibi-bias", true));
  CHECK(bytes_of(layer, "alibi-bias", true) == Approx(expected).epsilon(1e-12));
  CHECK(bytes_of(layer, "alibi-bias", false) == 0);
  // Without ALiBi, or under flash attention (which takes the slopes in the kernel), no pass.
  m.alibi = false;
  CHECK(bytes_of(build_model_graph(m, b, graph_style(Precision::mixed_bf16)).blocks[static_cast<std::size_t>(g.layers[0])],
                 "alibi-bias", true) == -1);
  m.alibi = true;
  m.attention = AttentionImpl::flash;
  const ModelGraph flash = build_model_graph(m, b, graph_style(Precision::mixed_bf16));
  CHECK(bytes_of(flash.blocks[static_cast<std::size_t>(flash.layers[0])], "alibi-bias", true) == -1);
}

TEST_CASE("eager Llama layer: kernels by access path, RoPE and SwiGLU written out, norm backward twice", "[graph]") {
  // Llama-1.1B widths, micro-batch 4 (T tokens), amp-bf16: X = q + k bytes that
  // RoPE rotates, ff the SwiGLU width's elements, norms over the fp32 residual stream.
  const ModelSpec m = llama(2048, 2, 32, 4, 5632, 32000);
  const double T = 4.0 * double(m.seq_len), e = 2, r = 4;
  const double X = T * (2048 + 4 * 64) * e, ff = T * 5632, th = T * 2048;
  const ModelGraph g = build_model_graph(m, 4, graph_style(Precision::amp_bf16));
  const Block& layer = g.blocks[static_cast<std::size_t>(g.layers[0])];
  double rope_f = 0, rope_b = 0, rope_broadcast = 0, swiglu_f = 0, swiglu_b = 0, swiglu_strided = 0, norm_b = 0;
  int rope_kernels_f = 0;
  for (const Op& op : layer.ops) {
    if (op.name.rfind("rotary", 0) == 0) {
      rope_f += op.fwd_bytes;
      rope_b += op.bwd_bytes;
      if (op.memory_kind == MemoryKind::broadcast) rope_broadcast += op.fwd_bytes + op.bwd_bytes;
      if (op.fwd_bytes > 0) rope_kernels_f += op.kernels;
    }
    if (op.name.find("silu") != std::string::npos || op.name == "swiglu-grads") {
      swiglu_f += op.fwd_bytes;
      swiglu_b += op.bwd_bytes;
      if (op.bwd_memory_kind() == MemoryKind::strided) swiglu_strided += op.bwd_bytes;
    }
    if (op.name == "attn-rmsnorm") norm_b = op.bwd_bytes;
  }
  std::printf("RoPE forward: expected %.4g bytes (9X), graph %.4g; backward 15X %.4g, graph %.4g\n", 9 * X, rope_f,
              15 * X, rope_b);
  CHECK(rope_f == Approx(9 * X));
  CHECK(rope_b == Approx(15 * X));
  CHECK(rope_broadcast == Approx(8 * X));  // the four multiplies each way
  CHECK(rope_kernels_f == 14);
  std::printf("SwiGLU forward: expected %.4g bytes (5 ff e), graph %.4g; backward 13 ff e %.4g, graph %.4g\n",
              5 * ff * e, swiglu_f, 13 * ff * e, swiglu_b);
  CHECK(swiglu_f == Approx(5 * ff * e));
  CHECK(swiglu_b == Approx(13 * ff * e));
  CHECK(swiglu_strided == Approx(6 * ff * e));  // dy * up and silu's gradient read the strided halves
  std::printf("RMSNorm backward: expected %.4g bytes (5 passes over s b h fp32), graph %.4g\n", 5 * th * r, norm_b);
  CHECK(norm_b == Approx(5 * th * r));
  // Megatron's fused style keeps none of the unvectorized kinds.
  const ModelGraph fused = build_model_graph(m, 4, graph_style(Precision::mixed_bf16));
  for (const Op& op : fused.blocks[static_cast<std::size_t>(fused.layers[0])].ops) {
    INFO(op.name);
    CHECK((op.memory_kind == MemoryKind::elementwise || op.memory_kind == MemoryKind::norm ||
           op.memory_kind == MemoryKind::softmax));
    CHECK(op.bwd_memory_kind() == op.memory_kind);
  }
}

TEST_CASE("pytorch-tp: separate ColwiseParallel projections, each all-reducing its fp32 input gradient", "[graph]") {
  // measure_parallel.py's DTensor blocks: GPT q, k, v, fc1 ColwiseParallel and proj, fc2
  // RowwiseParallel; Llama wq, wk, wv, w1, w3 and wo, w2 (host-dtblocks-2026-11-26.json's
  // census: 4 / 5 fp32 backward all-reduces, 2 bf16 forward ones, one copy per collective).
  TrainingSpec t;
  t.precision = Precision::amp_bf16;
  t.framework.name = Framework::pytorch_tp;
  const GraphStyle dtp = graph_style(t);
  CHECK(dtp.dtensor_projections);
  const struct {
    const char* name;
    ModelSpec m;
    int colwise;
  } cases[] = {{"gpt-1.3b", gpt(2048, 24, 16, 2048, 50304), 4}, {"llama-1.1b", llama(2048, 22, 32, 4, 5632, 32000), 5}};
  for (const auto& c : cases) {
    const ModelGraph g = build_model_graph(c.m, 4, dtp);
    const ModelGraph megatron_style = build_model_graph(c.m, 4, graph_style(Precision::amp_bf16));
    const Block& layer = g.blocks[static_cast<std::size_t>(g.layers[0])];
    int enter = 0, exit = 0, styled = 0, copies = 0, matmuls = 0;
    for (const Op& op : layer.ops) {
      if (op.kind == OpKind::tp_enter) {
        ++enter;
        // The norm's output under autocast: fp32 gradients, 4 bytes an element.
        CHECK(op.comm_bytes == Approx(4.0 * 4 * double(c.m.seq_len) * 2048));
      }
      if (op.kind == OpKind::tp_exit) ++exit;
      if (op.parallel_style) ++styled;
      if (op.name.find("funcol-copy") != std::string::npos) ++copies;
      if (op.kind == OpKind::matmul) ++matmuls;
    }
    std::printf("%s: %d ColwiseParallel entries (expected %d), %d RowwiseParallel exits (expected 2), %d copies\n",
                c.name, enter, c.colwise, exit, copies);
    CHECK(enter == c.colwise);
    CHECK(exit == 2);
    CHECK(styled == enter + exit);
    CHECK(copies == enter + exit);
    // The same weights as the fused layout, split into one matmul per projection.
    CHECK(g.params() == Approx(megatron_style.params()));
    CHECK(matmuls == c.colwise + 2);
  }
}

TEST_CASE("mixed-fp8: the inputs the weight GEMMs keep for their weight gradients are fp8", "[graph]") {
  // Transformer Engine keeps the fp8 cast of each weight GEMM's input for wgrad: per layer of
  // a GPT block that is the qkv and fc1 inputs (s b h each), the attention output (s b h) and
  // the fc2 input (s b 4h), 7 s b h elements, 1 byte each instead of 2. Nothing else changes.
  const ModelSpec m = gpt(2560, 2, 32, 2048, 50304);
  const double sbh = 2.0 * 2048 * 2560;
  const ModelGraph bf16 = build_model_graph(m, 2, graph_style(Precision::mixed_bf16));
  const ModelGraph fp8 = build_model_graph(m, 2, graph_style(Precision::mixed_fp8));
  const Block& a = bf16.blocks[static_cast<std::size_t>(bf16.layers[0])];
  const Block& b = fp8.blocks[static_cast<std::size_t>(fp8.layers[0])];
  std::printf("fp8 saved GEMM inputs: expected %.0f B fewer per layer, graph %.0f B fewer\n", 7 * sbh,
              a.saved_bytes() - b.saved_bytes());
  CHECK(a.saved_bytes() - b.saved_bytes() == Approx(7 * sbh).epsilon(1e-12));
}

TEST_CASE("Transformer Engine's fused cross entropy keeps the 16-bit logits only, with the gradient written into them",
          "[graph][fp8]") {
  // Llama 3 8B's head, micro-batch 2 of 4,096 tokens: T V logits.
  const ModelSpec m = llama(4096, 2, 32, 8, 14336, 128256);
  const double logits = 2.0 * 4096 * 128256, e = 2;
  TrainingSpec t;
  t.precision = Precision::mixed_fp8;
  t.framework.name = Framework::megatron;
  const ModelGraph native = build_model_graph(m, 2, graph_style(t));
  t.framework.cross_entropy = CrossEntropyImpl::te;
  CHECK(graph_style(t).te_cross_entropy);
  const ModelGraph te = build_model_graph(m, 2, graph_style(t));
  const Block& hn = native.blocks[static_cast<std::size_t>(native.post[0])];
  const Block& ht = te.blocks[static_cast<std::size_t>(te.post[0])];
  const auto saved = [](const Block& b) {
    for (const Op& op : b.ops)
      if (op.name == "cross-entropy") return op.saved_bytes;
    return -1.0;
  };
  // Megatron's vocab-parallel cross entropy keeps the fp32 softmax (4 B) and allocates the
  // fp32 gradient in backward (4 B); TE's keeps the 16-bit logits, which hold the gradient.
  std::printf("native cross entropy: saved expected %.6g B, graph %.6g; backward-only expected %.6g, graph %.6g\n",
              4 * logits, saved(hn), 4 * logits, hn.transient_bytes);
  std::printf("TE cross entropy: saved expected %.6g B, graph %.6g; backward-only expected 0, graph %.6g\n", e * logits,
              saved(ht), ht.transient_bytes);
  CHECK(saved(hn) == Approx(4 * logits).epsilon(1e-12));
  CHECK(hn.transient_bytes == Approx(4 * logits).epsilon(1e-12));
  CHECK(saved(ht) == Approx(e * logits).epsilon(1e-12));
  CHECK(ht.transient_bytes == 0);
  // Its traffic: online softmax (read), loss and in-place gradient (read + write); backward
  // the in-place scale (read + write).
  std::printf("TE cross entropy bytes: forward expected %.6g, graph %.6g; backward expected %.6g, graph %.6g\n",
              3 * e * logits, bytes_of(ht, "cross-entropy", true), 2 * e * logits, bytes_of(ht, "cross-entropy", false));
  CHECK(bytes_of(ht, "cross-entropy", true) == Approx(3 * e * logits).epsilon(1e-12));
  CHECK(bytes_of(ht, "cross-entropy", false) == Approx(2 * e * logits).epsilon(1e-12));
  // Nothing else changes: the layers are the same.
  CHECK(sum_bytes(te.blocks[std::size_t(te.layers[0])], true) == sum_bytes(native.blocks[std::size_t(native.layers[0])], true));
}

TEST_CASE("mixed-fp8: Megatron's output layer is no Transformer Engine module, its GEMM and weight stay bf16", "[graph][fp8]") {
  const ModelSpec m = llama(4096, 2, 32, 8, 14336, 128256);
  const ModelGraph g = build_model_graph(m, 1, graph_style(Precision::mixed_fp8));
  const Block& head = g.blocks[static_cast<std::size_t>(g.post[0])];
  const Block& layer = g.blocks[static_cast<std::size_t>(g.layers[0])];
  double head_fp8 = 0, layer_fp8 = 0, layer_weights = 0;
  for (const Op& op : head.ops) {
    head_fp8 += fp8_cast_params(op, DType::bf16, DType::fp8);
    if (op.name == "logits") CHECK(gemm_dtype(op, DType::bf16, DType::fp8) == DType::bf16);
  }
  for (const Op& op : layer.ops) {
    layer_fp8 += fp8_cast_params(op, DType::bf16, DType::fp8);
    if (op.kind == OpKind::matmul && op.weight) layer_weights += op.params;
  }
  std::printf("fp8-cast parameters: head expected 0, graph %.6g; layer expected %.6g (its GEMM weights), graph %.6g\n",
              head_fp8, layer_weights, layer_fp8);
  CHECK(head_fp8 == 0);
  CHECK(layer_fp8 == Approx(layer_weights).epsilon(1e-12));
  CHECK(layer_fp8 > 0);
  // Under bf16 nothing is cast.
  for (const Op& op : layer.ops) CHECK(fp8_cast_params(op, DType::bf16, DType::bf16) == 0);
}
