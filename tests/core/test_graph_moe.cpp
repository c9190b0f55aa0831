// The llama-moe family (SwiGLU experts, shared experts, dense first layers, multi-head
// latent attention, multi-token prediction) against published parameter counts and the
// closed forms of its FLOPs and KV cache.
#include <catch2/catch.hpp>
#include <cmath>

#include "costmodel/graph.hpp"
#include "costmodel/hardware.hpp"
#include "strategies/op_timing.hpp"

using namespace clustersim;

namespace {
// Mixtral 8x7B (Mistral AI's config.json: hidden 4096, 32 layers, 32 heads, 8 kv heads,
// intermediate 14336, 8 local experts, 2 per token, vocab 32000, untied).
ModelSpec mixtral_8x7b() {
  ModelSpec m;
  m.family = ModelFamily::llama_moe;
  m.hidden = 4096;
  m.layers = 32;
  m.heads = 32;
  m.kv_heads = 8;
  m.ffn_hidden = m.expert_ffn_hidden = 14336;
  m.experts = 8;
  m.top_k = 2;
  m.moe_every = 1;
  m.seq_len = 4096;
  m.vocab = 32000;
  m.tie_embeddings = false;
  return m;
}

// DeepSeek-V3 (arXiv 2412.19437 Sec. 4.2 "Model Hyper-Parameters", and the released
// config.json): 61 layers, hidden 7168, 128 heads, q latent 1536, kv latent 512, head
// dims 128 (no position) + 64 (rotary) for queries and keys, 128 for values, the first 3
// layers dense (18432), then 1 shared + 256 routed experts of 2048, 8 per token, vocab
// 129280, untied, one MTP module.
ModelSpec deepseek_v3(std::int64_t mtp) {
  ModelSpec m;
  m.family = ModelFamily::llama_moe;
  m.hidden = 7168;
  m.layers = 61;
  m.heads = m.kv_heads = 128;
  m.ffn_hidden = 18432;
  m.expert_ffn_hidden = 2048;
  m.experts = 256;
  m.shared_experts = 1;
  m.top_k = 8;
  m.moe_every = 1;
  m.first_dense_layers = 3;
  m.max_nodes_per_token = 4;
  m.seq_len = 4096;
  m.vocab = 129280;
  m.tie_embeddings = false;
  m.mla = ModelSpec::Mla{1536, 512, 128, 64, 128};
  m.mtp_modules = mtp;
  return m;
}

// Multi-head latent attention's parameters per layer, with its input RMSNorm.
double mla_params(double h, double a, double qr, double kr, double dn, double dr, double dv) {
  return h + h * qr + qr + qr * a * (dn + dr) + h * (kr + dr) + kr + kr * a * (dn + dv) + a * dv * h;
}
}  // namespace

TEST_CASE("Mixtral 8x7B: 46.7 B parameters, 12.9 B active (Mistral AI)", "[graph][moe]") {
  const ModelSpec m = mixtral_8x7b();
  const double h = 4096, f = 14336, E = 8, V = 32000;
  const double attention = h + h * (h + 2 * 8 * 128) + h * h;  // norm, qkv, out
  const double expert = 3 * h * f;                            // gate, up, down
  const double layer = attention + h + h * E + E * expert;     // + moe norm, router
  const double expected = 32 * layer + 2 * V * h + h;
  const double active = expected - 32 * (E - 2) * expert;
  const double p = parameter_count(m), a = active_parameter_count(m);
  INFO("total: closed form " << expected / 1e9 << " B, graph " << p / 1e9 << " B; active: closed form "
                             << active / 1e9 << " B, graph " << a / 1e9 << " B");
  CHECK(p == Approx(expected).epsilon(1e-12));
  CHECK(a == Approx(active).epsilon(1e-12));
  // Mistral AI, "Mixtral of experts" (2023-12-11): "46.7B total parameters but only uses
  // 12.9B parameters per token".
  CHECK(p / 1e9 == Approx(46.7).margin(0.05));
  CHECK(a / 1e9 == Approx(12.9).margin(0.05));
  // The old GPT-style moe family of the same shapes: 2-matrix GeLU experts every other
  // layer, the 31.7 B that issue 17 reported.
  ModelSpec gpt_style = m;
  gpt_style.family = ModelFamily::moe;
  gpt_style.moe_every = 2;
  CHECK(parameter_count(gpt_style) < 0.75 * p);
}

TEST_CASE("Qwen1.5-MoE-A2.7B: fine-grained and shared experts, 14.3 B total, 2.7 B active", "[graph][moe]") {
  // Qwen/Qwen1.5-MoE-A2.7B config.json: hidden 2048, 24 layers, 16 heads (16 kv), 60
  // experts of moe_intermediate_size 1408, 4 per token, shared_expert_intermediate_size
  // 5632 (= 4 experts of 1408), vocab 151936, untied. The Qwen team's release post
  // ("Qwen1.5-MoE: Matching 7B Model Performance with 1/3 Activated Parameters", 2024-03-28)
  // states 14.3 B parameters, 2.7 B activated (2.0 B of them outside the embeddings).
  // Not modelled: the q/k/v biases (147 k) and the shared experts' sigmoid gate (49 k).
  ModelSpec m;
  m.family = ModelFamily::llama_moe;
  m.hidden = 2048;
  m.layers = 24;
  m.heads = m.kv_heads = 16;
  m.ffn_hidden = 5632;
  m.expert_ffn_hidden = 1408;
  m.experts = 60;
  m.shared_experts = 4;
  m.top_k = 4;
  m.moe_every = 1;
  m.seq_len = 4096;
  m.vocab = 151936;
  m.tie_embeddings = false;
  const double h = 2048, f = 1408, E = 60, V = 151936;
  const double layer = (h + 4 * h * h) + h + h * E + (E + 4) * 3 * h * f;
  const double expected = 24 * layer + 2 * V * h + h;
  const double active = expected - 24 * (E - 4) * 3 * h * f;
  const double p = parameter_count(m), a = active_parameter_count(m);
  INFO("total: closed form " << expected / 1e9 << " B, graph " << p / 1e9 << " B; active: closed form "
                             << active / 1e9 << " B, graph " << a / 1e9 << " B");
  CHECK(p == Approx(expected).epsilon(1e-12));
  CHECK(a == Approx(active).epsilon(1e-12));
  CHECK(p / 1e9 == Approx(14.3).margin(0.05));
  CHECK(a / 1e9 == Approx(2.7).margin(0.05));
  CHECK((a - 2 * V * h) / 1e9 == Approx(2.0).margin(0.1));
}

TEST_CASE("DeepSeek-V3: 671 B parameters, 37 B active, the MTP module apart", "[graph][moe]") {
  const double h = 7168, a = 128, V = 129280, E = 256, fe = 2048;
  const double mla = mla_params(h, a, 1536, 512, 128, 64, 128);
  const double dense = mla + h + 3 * h * 18432;
  const double moe = mla + h + h * E + (E + 1) * 3 * h * fe;
  const double main = 3 * dense + 58 * moe + 2 * V * h + h;
  const double active = main - 58 * (E - 8) * 3 * h * fe;
  const double p = parameter_count(deepseek_v3(0)), act = active_parameter_count(deepseek_v3(0));
  INFO("main model: closed form " << main / 1e9 << " B, graph " << p / 1e9 << " B; active: closed form " << active / 1e9
                                  << " B, graph " << act / 1e9 << " B");
  CHECK(p == Approx(main).epsilon(1e-12));
  CHECK(act == Approx(active).epsilon(1e-12));
  // The report's abstract: "671B total parameters with 37B activated for each token";
  // Sec. 4.2 counts the 671 B without the MTP module. Activated: 37.55 B with the input
  // embedding, 36.63 B without it; the report rounds to 37.
  CHECK(p / 1e9 == Approx(671).margin(0.5));
  CHECK(act / 1e9 == Approx(37).margin(0.6));
  CHECK((act - V * h) / 1e9 == Approx(37).margin(0.6));

  // The MTP module: two RMSNorms, the 2h -> h projection, one MoE layer, its final norm;
  // embedding and output head are shared with the main model (no new parameters).
  const double mtp = 2 * h + 2 * h * h + moe + h;
  const double with_mtp = parameter_count(deepseek_v3(1));
  INFO("MTP module: closed form " << mtp / 1e9 << " B, graph " << (with_mtp - p) / 1e9 << " B");
  CHECK(with_mtp - p == Approx(mtp).epsilon(1e-9));
  // The released checkpoint (DeepSeek-V3 README: "685B, which includes 671B of the Main
  // Model weights and 14B of the Multi-Token Prediction (MTP) Module weights") stores the
  // shared embedding and head again inside the module: 11.6 + 1.85 = 13.5 B.
  CHECK((mtp + 2 * V * h) / 1e9 == Approx(14).margin(0.6));
  CHECK((with_mtp + 2 * V * h) / 1e9 == Approx(685).margin(0.6));
}

TEST_CASE("DeepSeek-V3 graph: dense first layers, MLA FLOPs, MTP on the last stage", "[graph][moe]") {
  const ModelSpec m = deepseek_v3(1);
  const ModelGraph g = build_model_graph(m, 1, 2);
  REQUIRE(g.layers.size() == 61);
  CHECK(g.blocks[std::size_t(g.layers[0])].name == "llama-layer");
  CHECK(g.blocks[std::size_t(g.layers[2])].name == "llama-layer");
  CHECK(g.blocks[std::size_t(g.layers[3])].name == "moe-layer");
  CHECK(g.blocks[std::size_t(g.layers[60])].name == "moe-layer");
  REQUIRE(g.post.size() == 2);
  CHECK(g.blocks[std::size_t(g.post[1])].name == "mtp-module");
  CHECK(g.tied_params == 129280.0 * 7168);  // the module's embedding is the first stage's

  // Forward FLOPs of one MLA layer's attention, s tokens: the four projections, the
  // output projection, and the causal-agnostic core 2 s^2 a (dqk + dv) (Megatron counts
  // the full square).
  const double s = 4096, h = 7168, a = 128;
  const double projections = 2 * s * (h * 1536 + h * (512 + 64) + 1536 * a * 192 + 512 * a * 256 + a * 128 * h);
  const double core = 2 * s * s * a * (192 + 128);
  double attn = 0;
  for (const Op& op : g.blocks[std::size_t(g.layers[0])].ops) {
    if (op.name == "q-down" || op.name == "kv-down" || op.name == "q-up" || op.name == "kv-up" ||
        op.name == "attn-out" || op.kind == OpKind::attention)
      attn += op.fwd_flops();
  }
  INFO("MLA forward FLOPs: closed form " << (projections + core) / 1e12 << " TFLOP, graph " << attn / 1e12);
  CHECK(attn == Approx(projections + core).epsilon(1e-12));

  // A MoE layer's expert GEMMs at capacity factor 1: exactly top_k experts' work per token.
  double experts = 0;
  for (const Op& op : g.blocks[std::size_t(g.layers[3])].ops)
    if (op.expert && op.kind == OpKind::matmul) experts += op.fwd_flops();
  const double routed = 2 * s * 8 * 3 * h * 2048;
  INFO("routed experts' forward FLOPs: closed form " << routed / 1e12 << " TFLOP, graph " << experts / 1e12);
  CHECK(experts == Approx(routed).epsilon(1e-12));
}

TEST_CASE("KV cache per token: MLA keeps the latent, GQA its key and value heads", "[graph][moe]") {
  // DeepSeek-V3's authors (Zhao et al., "Insights into DeepSeek-V3", ISCA 2025, Table 1)
  // list the BF16 KV cache per token: DeepSeek-V3 70.272 KB, Qwen-2.5 72B 327.680 KB,
  // LLaMA-3.1 405B 516.096 KB.
  CHECK(kv_cache_elements_per_token(deepseek_v3(1)) * 2 == 70272.0);
  ModelSpec llama405;
  llama405.family = ModelFamily::llama;
  llama405.hidden = 16384;
  llama405.layers = 126;
  llama405.heads = 128;
  llama405.kv_heads = 8;
  CHECK(kv_cache_elements_per_token(llama405) * 2 == 516096.0);
  ModelSpec qwen72;
  qwen72.family = ModelFamily::llama;
  qwen72.hidden = 8192;
  qwen72.layers = 80;
  qwen72.heads = 64;
  qwen72.kv_heads = 8;
  CHECK(kv_cache_elements_per_token(qwen72) * 2 == 327680.0);
}

TEST_CASE("node-limited routing: the expert all-to-all's share of a plain exchange", "[moe][rules]") {
  // DeepSeek-V3: top-8 over an EP group of 8 nodes reaches 8 (1 - (7/8)^8) = 5.25 nodes on
  // average, capped at 4: half the bytes of sending all 8 copies.
  const double reached = 8 * (1 - std::pow(7.0 / 8.0, 8));
  INFO("distinct nodes reached: closed form " << reached);
  CHECK(expert_all_to_all_share(8, 4, 8) == Approx(4.0 / 8.0).epsilon(1e-12));
  // Not binding: two nodes, reached 2 (1 - 2^-8) = 1.992; per-node dispatch still sends one copy per node.
  CHECK(expert_all_to_all_share(8, 4, 2) == Approx(2 * (1 - std::pow(0.5, 8)) / 8).epsilon(1e-12));
  CHECK(expert_all_to_all_share(8, 0, 8) == 1.0);  // no limit: a plain all-to-all
  CHECK(expert_all_to_all_share(8, 4, 1) == 1.0);  // one node: nothing crosses the network
  CHECK(expert_all_to_all_share(1, 4, 8) == Approx(1.0).epsilon(1e-12));

  // time_op applies it to the dispatch and combine of a sharded plan.
  const ModelGraph g = build_model_graph(deepseek_v3(0), 1, 2);
  const Op* dispatch = nullptr;
  for (const Op& op : g.blocks[std::size_t(g.layers[3])].ops)
    if (op.kind == OpKind::all_to_all) dispatch = &op;
  REQUIRE(dispatch);
  const KernelModel km(*find_gpu_profile("h800-sxm5-80gb"));
  ShardingContext ctx{1, 64, false, DType::bf16, DType::bf16, expert_all_to_all_share(8, 4, 8)};
  const OpTiming t = time_op(*dispatch, ctx, km);
  CHECK(t.forward_comm.bytes == Approx(dispatch->comm_bytes / 2).epsilon(1e-12));
  CHECK(t.backward_comm.bytes == Approx(dispatch->comm_bytes / 2).epsilon(1e-12));
}

TEST_CASE("mixed-fp8: expert and MLA up-projection GEMMs keep fp8 inputs for their weight gradients", "[graph][moe]") {
  // Under mixed-fp8 every weight GEMM keeps the fp8 cast of its input for wgrad (Transformer
  // Engine's Linear and GroupedLinear; DeepSeek-V3 Sec. 3.3.3 caches Linear inputs in FP8):
  // 1 byte an element instead of 2. Per DeepSeek-V3 MoE layer of s tokens at capacity
  // factor 1: the q and kv latents (1536 + 512), the output projection's input (128 heads x
  // 128), the shared expert's gate-up and down inputs (h + 2048) and the routed experts'
  // (top-8 tokens: 8 (h + 2048)). The down-projections' shared input and the router's stay.
  const ModelSpec m = deepseek_v3(0);
  const ModelGraph bf16 = build_model_graph(m, 1, graph_style(Precision::mixed_bf16));
  const ModelGraph fp8 = build_model_graph(m, 1, graph_style(Precision::mixed_fp8));
  const Block& a = bf16.blocks[std::size_t(bf16.layers[3])];
  const Block& b = fp8.blocks[std::size_t(fp8.layers[3])];
  REQUIRE(b.name == "moe-layer");
  const double s = 4096, h = 7168;
  const double expected = s * ((1536 + 512) + 128 * 128 + (h + 2048) + 8 * (h + 2048));
  std::printf("DeepSeek-V3 MoE layer, fp8 saved GEMM inputs: expected %.0f B fewer, graph %.0f B fewer\n", expected,
              a.saved_bytes() - b.saved_bytes());
  CHECK(a.saved_bytes() - b.saved_bytes() == Approx(expected).epsilon(1e-12));
}
