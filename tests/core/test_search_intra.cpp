// The intra-op pass on a transformer MLP block (layernorm, fc1, gelu, fc2, residual) on
// a 1 x 8 mesh: under memory pressure it must find Megatron's column-then-row split
// (one all-reduce in forward), with ample memory and a large batch pure data
// parallelism; and the ILP's optimum must never lose to either fixed plan.
#include <catch2/catch.hpp>

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
  for (const auto& d : r.decisions) INFO(d.op << ": " << d.strategy << " [" << d.kind << "]");
  CHECK(strategy_of(r, "fc1") == "S1R = S1R x RR");
  CHECK(strategy_of(r, "fc2") == "S1R = S1R x RR");
  // Every op (the stage-opening layernorm, fc1, fc2) splits the batch: nothing else.
  REQUIRE(r.kind_counts.size() == 1);
  CHECK(r.kind_counts.begin()->first == "batch@1");
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
