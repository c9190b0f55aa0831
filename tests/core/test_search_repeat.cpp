// Identical layers in the intra-op pass: a node that repeats the node one identical layer
// earlier shares its strategy list (strategy_space.hpp NodeStrategies) and the request
// reuses its edge matrices. The shared lists must hold exactly what a fresh enumeration
// gives, every edge matrix exactly what resharding costs, and the work (lists
// enumerated) must not grow with the number of layers.
#include <catch2/catch.hpp>
#include <cstring>

#include "costmodel/cluster.hpp"
#include "scenarios/json_reader.hpp"
#include "strategies/search/intra_op.hpp"
#include "strategies/search/lowering.hpp"
#include "strategies/search/strategy_space.hpp"

using namespace clustersim;
using namespace clustersim::search;

namespace {

bool same_bits(double a, double b) { return std::memcmp(&a, &b, sizeof a) == 0; }

bool same_costs(const StageCosts& a, const StageCosts& b) {
  return same_bits(a.forward, b.forward) && same_bits(a.backward, b.backward) && same_bits(a.recompute, b.recompute) &&
         same_bits(a.comm, b.comm) && same_bits(a.ep_comm, b.ep_comm) && same_bits(a.zero3_gather, b.zero3_gather) &&
         same_bits(a.dp_sync, b.dp_sync) && same_bits(a.optimizer, b.optimizer);
}

bool same_strategy(const Strategy& a, const Strategy& b) {
  return a.out == b.out && a.in == b.in && a.assign == b.assign && same_costs(a.cost, b.cost) && same_bits(a.ilp_cost, b.ilp_cost) &&
         same_bits(a.weights.total(), b.weights.total()) && same_bits(a.params, b.params) &&
         same_bits(a.block_params, b.block_params) && same_bits(a.saved, b.saved) && same_bits(a.kept, b.kept) &&
         same_bits(a.boundary, b.boundary) && same_bits(a.flops, b.flops) && a.zero == b.zero && a.name == b.name &&
         a.kind == b.kind;
}

struct Case {
  Scenario s = default_scenario();
  ClusterModel cluster;
  ModelGraph graph;
  Case(Recompute rc) {
    Diagnostics diag("<test>");
    s.training.recompute = rc;
    cluster = resolve_cluster(s.cluster, diag);
    REQUIRE(diag.ok());
    graph = build_model_graph(s.model, 2, graph_style(s.training));
  }
  // The embedding (with_pre), k layers and the head (with_post) on a d0 x d1 mesh of
  // `hosts` hosts.
  IntraOpProblem problem(int k, bool with_pre, bool with_post, std::int64_t hosts, std::int64_t d0, std::int64_t d1) const {
    IntraOpProblem p;
    p.cluster = &cluster;
    p.rules = precision_rules(s.training.precision, s.training.optimizer);
    p.graph = &graph;
    if (with_pre) p.blocks = graph.pre;
    for (int i = 0; i < k; ++i) p.blocks.push_back(graph.layers[std::size_t(i)]);
    if (with_post) p.blocks.insert(p.blocks.end(), graph.post.begin(), graph.post.end());
    p.mesh = make_logical_mesh(cluster, hosts, cluster.gpus_per_node, d0, d1);
    p.micro_batches = 4;
    p.inflight = 2;
    p.memory_budget = cluster.gpu.usable_memory();
    p.heads = s.model.heads;
    p.recompute = s.training.recompute;
    return p;
  }
};

}  // namespace

TEST_CASE("intra-op: identical layers share their strategy lists, equal to a fresh enumeration", "[search][intra][repeat]") {
  for (Recompute rc : {Recompute::none, Recompute::selective, Recompute::full}) {
    const Case c(rc);
    REQUIRE(c.graph.layers.size() >= 8);
    const std::int64_t hosts = c.cluster.nodes >= 2 ? 2 : 1;
    const std::int64_t devices = hosts * c.cluster.gpus_per_node;
    for (std::int64_t d1 = 1; d1 <= c.cluster.gpus_per_node; d1 *= 2)
      for (bool pre : {false, true})
        for (bool post : {false, true}) {
          std::size_t distinct_at_4 = 0;
          for (int k : {1, 2, 3, 4, 8}) {
            const IntraOpProblem p = c.problem(k, pre, post, hosts, devices / d1, d1);
            const LoweredStage st = lower_stage(p);
            std::string bad_shared, bad_fresh;
            const NodeStrategies shared = enumerate_strategies(p, st, &bad_shared, true);
            const NodeStrategies fresh = enumerate_strategies(p, st, &bad_fresh, false);
            INFO("recompute " << int(rc) << ", mesh " << p.mesh.name() << ", pre " << pre << ", post " << post << ", k " << k);
            REQUIRE(bad_shared == bad_fresh);
            REQUIRE(shared.size() == st.nodes.size());
            REQUIRE(fresh.distinct() == st.nodes.size());
            for (std::size_t v = 0; v < st.nodes.size(); ++v) {
              REQUIRE(shared[v].size() == fresh[v].size());
              for (std::size_t i = 0; i < shared[v].size(); ++i) REQUIRE(same_strategy(shared[v][i], fresh[v][i]));
            }
            // Work: the first two layers are enumerated, the others share their lists.
            if (k == 4) distinct_at_4 = shared.distinct();
            if (k == 8) {
              std::printf("recompute %d, mesh %s, pre %d, post %d: %zu nodes, %zu lists enumerated (%zu with 4 layers)\n",
                          int(rc), p.mesh.name().c_str(), int(pre), int(post), st.nodes.size(), shared.distinct(),
                          distinct_at_4);
              CHECK(shared.distinct() == distinct_at_4);
              CHECK(shared.distinct() < st.nodes.size() / 2);
            }
            if (!bad_shared.empty()) continue;
            // Every edge of the request (built from shared lists, matrices reused between
            // identical layers) costs exactly what resharding the fresh lists costs.
            const IlpRequest r = build_intra_op_request(p);
            REQUIRE(r.nodes.size() == st.nodes.size());
            for (const IlpEdge& e : r.edges) {
              const auto& a = fresh[std::size_t(e.src.value)];
              const auto& b = fresh[std::size_t(e.dst.value)];
              const SNode& dst = st.nodes[std::size_t(e.dst.value)];
              const bool to_input = dst.pred == e.src.value && !dst.follows;
              REQUIRE(e.cost.size() == a.size() * b.size());
              for (std::size_t i = 0; i < a.size(); ++i)
                for (std::size_t j = 0; j < b.size(); ++j)
                  REQUIRE(same_bits(e.cost[i * b.size() + j],
                                    reshard(c.cluster, p.mesh, a[i].out, to_input ? b[j].in : b[j].out,
                                            st.nodes[std::size_t(e.src.value)].out.bytes)));
            }
            for (std::size_t v = 0; v < st.nodes.size(); ++v)
              for (std::size_t i = 0; i < fresh[v].size(); ++i) REQUIRE(same_bits(r.nodes[v].cost[i], fresh[v][i].ilp_cost));
          }
        }
  }
}
