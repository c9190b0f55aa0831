// The intra-op pass on a transformer MLP block (layernorm, fc1, gelu, fc2, residual) on
// a 1 x 8 mesh: under memory pressure it must find Megatron's column-then-row split
// (one all-reduce in forward), with ample memory and a large batch pure data
// parallelism; and the ILP's optimum must never lose to either fixed plan. The
// weight-update-sharded (ZeRO) variants: how many there are, and their memory per
// device in closed form.
#include <catch2/catch.hpp>
#include <stdexcept>

#include "costmodel/cluster.hpp"
#include "scenarios/json_reader.hpp"
#include "strategies/search/intra_op.hpp"

using namespace clustersim;
using namespace clustersim::search;

namespace {

ClusterModel one_node_cluster() {
  Diagnostics diag("<test>");
  const Scenario s = default_scenario();
  ClusterSpec spec = s.cluster;
  spec.nodes = 1;
  ClusterModel c = resolve_cluster(spec, diag);
  REQUIRE(diag.ok());
  return c;
}

// A graph whose only block is the MLP half of a GPT layer.
ModelGraph mlp_graph(std::int64_t hidden, std::int64_t micro_batch) {
  ModelSpec m;
  m.family = ModelFamily::gpt;
  m.hidden = hidden;
  m.layers = 1;
  m.heads = 16;
  m.kv_heads = 16;
  m.seq_len = 2048;
  m.vocab = 51200;
  m.ffn_hidden = 4 * hidden;
  ModelGraph g = build_model_graph(m, micro_batch, 2);
  Block mlp;
  mlp.name = "mlp";
  bool in = false;
  for (const Op& op : g.blocks[std::size_t(g.layers[0])].ops) {
    if (op.name == "mlp-layernorm") in = true;
    if (in) mlp.ops.push_back(op);
  }
  mlp.output_bytes = g.blocks[std::size_t(g.layers[0])].output_bytes;
  g.blocks = {mlp};
  g.pre.clear();
  g.post.clear();
  g.layers = {0};
  return g;
}

std::string strategy_of(const IntraOpResult& r, const std::string& op) {
  for (const auto& d : r.decisions)
    if (d.op == op) return d.strategy;
  return "<missing>";
}

// The sharding part of a strategy name, without its ZeRO suffix (" [zero-2 @ 1]").
std::string sharding_of(const IntraOpResult& r, const std::string& op) {
  const std::string s = strategy_of(r, op);
  return s.substr(0, s.find(" [zero-"));
}

IntraOpProblem problem(const ClusterModel& c, const ModelGraph& g, double budget, std::int64_t micro_batches) {
  IntraOpProblem p;
  p.cluster = &c;
  p.rules = precision_rules(Precision::mixed_bf16, OptimizerKind::adam);
  p.graph = &g;
  p.blocks = {0};
  p.mesh = make_logical_mesh(c, 1, 8, 1, 8);
  p.micro_batches = micro_batches;
  p.memory_budget = budget;
  p.heads = 16;
  return p;
}

}  // namespace

TEST_CASE("intra-op: an MLP block under memory pressure gets Megatron's column-then-row split", "[search][intra]") {
  const ClusterModel c = one_node_cluster();
  const ModelGraph g = mlp_graph(8192, 1);
  const double params = 2.0 * 8192 * 4 * 8192;  // fc1 + fc2 weights (biases aside)
  const double bytes_per_param = 2 + 4 + 4 + 8;  // bf16 weight, fp32 grad, master, Adam
  // Replicated weights need ~9.7 GB; a budget of 1/4 of that forces sharding them.
  const double budget = params * bytes_per_param / 4;
  const IntraOpResult r = solve_intra_op(problem(c, g, budget, 1));
  REQUIRE(r.feasible);
  for (const auto& d : r.decisions) INFO(d.op << ": " << d.strategy << " [" << d.kind << "]");
  INFO("budget " << budget * 1e-9 << " GB, used " << (r.weight_memory + r.activation_memory) * 1e-9 << " GB");
  CHECK(strategy_of(r, "fc1") == "RS1 = RR x RS1");
  CHECK(strategy_of(r, "fc2") == "RR = RS1 x S1R (all-reduce @ 1)");
  // One all-reduce in forward: only fc2's strategy names one.
  int forward_all_reduces = 0;
  for (const auto& d : r.decisions) forward_all_reduces += d.strategy.find("all-reduce") != std::string::npos ? 1 : 0;
  CHECK(forward_all_reduces == 1);
  CHECK(r.weight_memory + r.activation_memory <= budget);
}

TEST_CASE("intra-op: ample memory and a large batch give pure data parallelism", "[search][intra]") {
  const ClusterModel c = one_node_cluster();
  const ModelGraph g = mlp_graph(1024, 16);  // small weights, 32k tokens per micro-batch
  const IntraOpResult r = solve_intra_op(problem(c, g, 1e12, 16));
  REQUIRE(r.feasible);
  std::string chosen;
  for (const auto& d : r.decisions) chosen += d.op + ": " + d.strategy + " [" + d.kind + "]\n";
  INFO(chosen);
  // Data parallelism may shard its weight update (ZeRO): with this much compute per
  // micro-batch ZeRO-3's weight gathers hide behind it and its per-iteration traffic
  // (a reduce-scatter) is below the plain all-reduce, so the sharding is checked
  // without the ZeRO suffix.
  CHECK(sharding_of(r, "fc1") == "S1R = S1R x RR");
  CHECK(sharding_of(r, "fc2") == "S1R = S1R x RR");
  // Every op (the stage-opening layernorm, fc1, fc2) splits the batch: nothing else.
  for (const auto& [kind, ops] : r.kind_counts) {
    INFO(kind << " x" << ops);
    CHECK((kind == "batch@1" || kind.rfind("batch@1+zero-", 0) == 0));
  }
}

TEST_CASE("intra-op: the ILP optimum is no worse than the Megatron-only space", "[search][intra]") {
  const ClusterModel c = one_node_cluster();
  const ModelGraph g = mlp_graph(4096, 2);
  for (double budget : {2e9, 8e9, 1e12}) {
    IntraOpProblem p = problem(c, g, budget, 4);
    const IntraOpResult full = solve_intra_op(p);
    p.space = StrategySpace::megatron;
    const IntraOpResult manual = solve_intra_op(p);
    INFO("budget " << budget << ": full " << full.latency << " s, megatron " << manual.latency << " s");
    if (manual.feasible) {
      REQUIRE(full.feasible);
      CHECK(full.latency <= manual.latency * (1 + 1e-9));
    }
  }
}

TEST_CASE("intra-op: a budget below every plan is infeasible with the smallest memory that fits", "[search][intra]") {
  const ClusterModel c = one_node_cluster();
  const ModelGraph g = mlp_graph(8192, 1);
  const IntraOpResult r = solve_intra_op(problem(c, g, 1e8, 1));
  REQUIRE_FALSE(r.feasible);
  INFO(r.message);
  CHECK(r.min_memory > 1e8);
  // The reported minimum is itself feasible.
  const IntraOpResult again = solve_intra_op(problem(c, g, r.min_memory * (1 + 1e-6), 1));
  CHECK(again.feasible);
}

namespace {

// Strategies of `op` in a request (its node's cost vector), -1 when absent.
int strategies_of(const IntraOpProblem& p, const std::string& op) {
  std::vector<OpDecision> names;
  const IlpRequest r = build_intra_op_request(p, &names);
  for (std::size_t v = 0; v < names.size(); ++v)
    if (names[v].op == op) return int(r.nodes[v].cost.size());
  return -1;
}

}  // namespace

TEST_CASE("intra-op: ZeRO variants of the strategies of a matmul on a 2 x 4 mesh", "[search][intra][zero]") {
  const ClusterModel c = one_node_cluster();
  const ModelGraph g = mlp_graph(1024, 16);
  IntraOpProblem p = problem(c, g, 1e12, 4);
  p.mesh = make_logical_mesh(c, 1, 8, 2, 4);
  // Each axis goes to rows, n, k or nothing: 4 x 4 = 16 shardings. The weight is
  // replicated over data axes in the 16 - 3 x 3 = 7 that put rows on an axis; each of
  // those also comes as ZeRO-2 and ZeRO-3 (ZeRO-1 is dominated): 16 + 2 x 7 = 30.
  CHECK(strategies_of(p, "fc1") == 16 + 2 * 7);
  CHECK(strategies_of(p, "fc2") == 16 + 2 * 7);
  // The Megatron space keeps one sharding (rows on axis 0, Megatron's split on axis 1)
  // at exactly the problem's ZeRO level.
  p.space = StrategySpace::megatron;
  for (int zero = 0; zero <= 3; ++zero) {
    p.zero = zero;
    CHECK(strategies_of(p, "fc1") == 1);
    const IntraOpResult r = solve_intra_op(p);
    REQUIRE(r.feasible);
    const std::string suffix = zero > 0 ? " [zero-" + std::to_string(zero) + " @ 0]" : "";
    CHECK(strategy_of(r, "fc1") == "S0S1 = S0R x RS1" + suffix);
    CHECK(strategy_of(r, "fc2") == "S0R = S0S1 x S1R (all-reduce @ 1)" + suffix);
  }
  p.zero = 4;
  // A level out of range is the caller's bug (the plan readers check what users write).
  CHECK_THROWS_AS(solve_intra_op(p), std::invalid_argument);
  CHECK_THROWS_WITH(solve_intra_op(p), Catch::Contains("ZeRO") && Catch::Contains("got 4"));
}

TEST_CASE("intra-op: ZeRO memory per device in closed form", "[search][intra][zero]") {
  const ClusterModel c = one_node_cluster();
  const std::int64_t H = 1024;
  const ModelGraph g = mlp_graph(H, 4);
  // Pure data parallelism over 8 GPUs: Megatron's space on an 8 x 1 mesh.
  IntraOpProblem p = problem(c, g, 1e12, 4);
  p.mesh = make_logical_mesh(c, 1, 8, 8, 1);
  p.space = StrategySpace::megatron;
  // Parameters of the block: layernorm 2H, fc1 H x 4H + 4H, fc2 4H x H + H.
  const double P = 2.0 * H + (4.0 * H * H + 4 * H) + (4.0 * H * H + H);
  const double d = 8;
  // mixed-bf16 with Adam: bf16 weights 2, fp32 grads 4, master 4 + states 8 bytes.
  const double expected[4] = {
      P * (2 + 4 + 4 + 8),          // ZeRO-0: everything replicated
      P * (2 + 4 + (4 + 8) / d),    // ZeRO-1: master weights and optimizer states / d
      P * (2 + (4 + 4 + 8) / d),    // ZeRO-2: and gradients / d
      P * (2 + 4 + 4 + 8) / d,      // ZeRO-3: and weights / d
  };
  IntraOpResult r[4];
  for (int zero = 0; zero <= 3; ++zero) {
    p.zero = zero;
    r[zero] = solve_intra_op(p);
    REQUIRE(r[zero].feasible);
    INFO("ZeRO-" << zero << ": " << r[zero].weight_memory << " bytes, closed form " << expected[zero]);
    CHECK(r[zero].weight_memory == Approx(expected[zero]).epsilon(1e-12));
    // Activations do not depend on the weight update.
    CHECK(r[zero].activation_memory == Approx(r[0].activation_memory).epsilon(1e-12));
  }
  // ZeRO-1 and ZeRO-2 move the same bytes (a reduce-scatter of gradients, an all-gather
  // of weights) and step the same 1/d of the parameters: the same time.
  CHECK(r[1].latency == Approx(r[2].latency).epsilon(1e-12));
  // Here (bf16 weights gathered, fp32 gradients reduced, ring collectives) the sharded
  // update is cheaper than the all-reduce and the full optimizer step.
  CHECK(r[2].latency < r[0].latency);
  // The full space offers ZeRO-0, 2 and 3 of the data-parallel sharding and finds the
  // fastest of them at least.
  p.space = StrategySpace::full;
  const IntraOpResult full = solve_intra_op(p);
  REQUIRE(full.feasible);
  CHECK(full.latency <= std::min({r[0].latency, r[2].latency, r[3].latency}) * (1 + 1e-12));
}

TEST_CASE("intra-op: tied embeddings are held once when the embedding and the head share a stage", "[search][intra]") {
  // A one-layer GPT whose output projection is the word embedding (V x H). On one GPU in a
  // single stage the plan holds that weight once: the weight memory drops by exactly
  // V H x (weight + gradient + master + optimizer state bytes) against the untied model,
  // and the stage's other ops are unchanged.
  const ClusterModel c = one_node_cluster();
  auto graph = [](bool tied) {
    ModelSpec m;
    m.family = ModelFamily::gpt;
    m.hidden = 1024;
    m.layers = 1;
    m.heads = 16;
    m.kv_heads = 16;
    m.seq_len = 1024;
    m.vocab = 32000;
    m.ffn_hidden = 4096;
    m.tie_embeddings = tied;
    return build_model_graph(m, 2, 2);
  };
  const ModelGraph tied = graph(true), untied = graph(false);
  auto solve = [&](const ModelGraph& g, std::vector<int> blocks) {
    IntraOpProblem p = problem(c, g, INFINITY, 8);
    p.blocks = std::move(blocks);
    p.mesh = make_logical_mesh(c, 1, 1, 1, 1);
    const IntraOpResult r = solve_intra_op(p);
    REQUIRE(r.feasible);
    return r;
  };
  const auto rules = precision_rules(Precision::mixed_bf16, OptimizerKind::adam);
  const double per_param = rules.weight_bytes + rules.grad_bytes + rules.master_bytes + rules.optimizer_state_bytes +
                           rules.autocast_copy_bytes;
  const double VH = 32000.0 * 1024;
  const IntraOpResult a = solve(tied, {0, 1, 2}), b = solve(untied, {0, 1, 2});
  INFO("tied " << a.weight_memory << " B, untied " << b.weight_memory << " B, expected difference " << VH * per_param);
  CHECK(b.weight_memory - a.weight_memory == Approx(VH * per_param).epsilon(1e-12));
  // Split over two stages each stage keeps its copy (Megatron's first and last stage).
  CHECK(solve(tied, {1, 2}).weight_memory == Approx(solve(untied, {1, 2}).weight_memory).epsilon(1e-12));
}
