// Replica symmetry (sim/symmetry.hpp): the replay of one representative per class of
// identical data-parallel replicas gives the full replay's result, where it applies;
// where it does not, every replica is replayed; contention still emerges on the folded
// platform.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdio>
#include <string>

#include "scenarios/json_reader.hpp"
#include "sim/simulate.hpp"

using namespace clustersim;
using nlohmann::json;

namespace {

// A 4-layer GPT on nodes of 8 GPUs with 4 NICs each (so two GPUs share each NIC and the
// data-parallel rings of two tensor-parallel ranks meet on it), tp 8, pp 2.
json base_doc(std::int64_t dp, const std::string& topology, double oversubscription) {
  return {{"name", "symmetry"},
          {"model", {{"family", "gpt"}, {"hidden", 2048}, {"layers", 4}, {"heads", 16}, {"seq_len", 1024}, {"vocab", 51200}}},
          {"training",
           {{"global_batch", 8 * dp}, {"micro_batch", 1}, {"precision", "mixed-bf16"}, {"optimizer", "adam"},
            {"recompute", "none"}}},
          {"cluster",
           {{"gpu", "a100-sxm4-80gb"},
            {"nodes", 2 * dp},
            {"gpus_per_node", 8},
            {"intra_node", {{"fabric", "nvswitch"}}},
            {"inter_node",
             {{"topology", topology}, {"nics_per_node", 4}, {"nic_bandwidth", "100Gbps"}, {"latency", "5us"},
              {"oversubscription", oversubscription}}}}},
          {"plan", {{"dp", dp}, {"tp", 8}, {"pp", 2}, {"schedule", "1f1b"}, {"zero", 0}}},
          {"simulation", {{"collectives", "auto"}, {"seed", 1}}}};
}

Scenario scenario(const json& doc) {
  Diagnostics diag("<test>");
  Scenario s = parse_scenario(doc, diag);
  REQUIRE(diag.ok());
  return s;
}

json simulate(const Scenario& s, bool symmetry) {
  sim::SimulateOptions o;
  o.replica_symmetry = symmetry;
  return sim::to_json(sim::simulate(s, o));
}

// Relative difference, 0 for two zeros.
double rel(double a, double b) { return a == b ? 0.0 : std::abs(a - b) / std::max(std::abs(a), std::abs(b)); }

// The folded replay against the full one: iteration time, breakdown, every GPU's
// figures, every link's load, bytes moved; to 1e-9 (the solver's sums in another order).
// `same_links`: the busiest links are the same links; false for a flow set the shift
// does not map onto itself (the tree), whose every copy carries its most loaded node's
// load: the same loads, on other nodes' links.
void check_same(const json& fast, const json& full, const char* what, bool same_links = true) {
  REQUIRE(fast["simulator"]["replica_symmetry"]["applied"] == true);
  REQUIRE(full["simulator"]["replica_symmetry"]["applied"] == false);
  const double tf = fast["iteration_time_s"].get<double>(), tu = full["iteration_time_s"].get<double>();
  std::printf("%-58s every replica %.9f s, representatives (%lld of %lld replicas) %.9f s; flows %lld against %lld\n",
              what, tu, fast["simulator"]["replica_symmetry"]["simulated_replicas"].get<long long>(),
              fast["simulator"]["replica_symmetry"]["replicas"].get<long long>(), tf,
              fast["simulator"]["events"]["flows"].get<long long>(), full["simulator"]["events"]["flows"].get<long long>());
  CHECK(rel(tf, tu) < 1e-9);
  for (const auto& [k, v] : full["breakdown"].items()) {
    INFO(what << ": breakdown " << k);
    CHECK(rel(fast["breakdown"][k].get<double>(), v.get<double>()) < 1e-9);
  }
  const auto& gf = fast["simulator"]["gpus"];
  const auto& gu = full["simulator"]["gpus"];
  REQUIRE(gf.size() == gu.size());
  for (std::size_t i = 0; i < gu.size(); ++i)
    for (const auto& [k, v] : gu[i].items()) {
      INFO(what << ": gpu " << i << " " << k);
      CHECK(rel(gf[i][k].get<double>(), v.get<double>()) < 1e-9);
    }
  CHECK(fast["simulator"]["links_used"] == full["simulator"]["links_used"]);
  CHECK(rel(fast["simulator"]["bytes_moved"].get<double>(), full["simulator"]["bytes_moved"].get<double>()) < 1e-9);
  const auto& lf = fast["simulator"]["busiest_links"];
  const auto& lu = full["simulator"]["busiest_links"];
  REQUIRE(lf.size() == lu.size());
  for (std::size_t i = 0; i < lu.size(); ++i) {
    INFO(what << ": link " << lu[i]["link"]);
    if (same_links) CHECK(lf[i]["link"] == lu[i]["link"]);
    CHECK(rel(lf[i]["bytes"].get<double>(), lu[i]["bytes"].get<double>()) < 1e-9);
    CHECK(rel(lf[i]["utilisation"].get<double>(), lu[i]["utilisation"].get<double>()) < 1e-9);
  }
}

}  // namespace

TEST_CASE("replica symmetry: the representatives' replay is the full replay", "[sim][symmetry]") {
  SECTION("fat tree, gradient all-reduce after the pipeline") {
    const Scenario s = scenario(base_doc(4, "fat-tree", 1.0));
    check_same(simulate(s, true), simulate(s, false), "fat tree, dp 4, all-reduce");
  }
  SECTION("oversubscribed fat tree, bucketed reduce-scatter overlapping the pipeline sends") {
    json doc = base_doc(4, "fat-tree", 2.0);
    doc["plan"]["zero"] = 1;
    doc["plan"]["overlap_grad_reduce"] = true;
    const Scenario s = scenario(doc);
    check_same(simulate(s, true), simulate(s, false), "fat tree 2:1, dp 4, ZeRO-1, overlap");
  }
  SECTION("rail-optimized, oversubscribed, interleaved, ZeRO-3 gathers") {
    json doc = base_doc(4, "rail-optimized", 4.0);
    doc["plan"]["zero"] = 3;
    doc["plan"]["overlap_grad_reduce"] = true;
    doc["plan"]["schedule"] = "interleaved";
    doc["plan"]["virtual_stages"] = 2;
    const Scenario s = scenario(doc);
    check_same(simulate(s, true), simulate(s, false), "rail-optimized 4:1, dp 4, ZeRO-3, interleaved");
  }
  SECTION("the double binary tree, folded by its most loaded rank") {
    json doc = base_doc(8, "fat-tree", 1.0);
    doc["simulation"]["collectives"] = "tree";
    const Scenario s = scenario(doc);
    check_same(simulate(s, true), simulate(s, false), "fat tree, dp 8, tree all-reduce", false);
  }
  SECTION("tensor parallelism over two nodes (tp 16)") {
    json doc = base_doc(4, "fat-tree", 1.0);
    doc["plan"]["tp"] = 16;
    doc["plan"]["pp"] = 1;
    doc["model"]["heads"] = 16;
    const Scenario s = scenario(doc);
    check_same(simulate(s, true), simulate(s, false), "fat tree, dp 4, tp 16 across two nodes");
  }
}

TEST_CASE("replica symmetry: left out where the platform does not treat replicas alike", "[sim][symmetry]") {
  const auto reason = [](const json& doc) {
    const json r = simulate(scenario(doc), true);
    const auto& sym = r["simulator"]["replica_symmetry"];
    CHECK(sym["applied"] == false);
    std::printf("not applied: %s\n", sym["reason"].get<std::string>().c_str());
    return sym["reason"].get<std::string>();
  };
  CHECK(reason(base_doc(4, "leaf-spine", 2.0)) == "leaf-spine topology");
  json small_tp = base_doc(2, "fat-tree", 1.0);
  small_tp["plan"]["tp"] = 4;
  small_tp["plan"]["dp"] = 4;
  CHECK(reason(small_tp) == "tp 4 does not fill whole nodes of 8 GPUs");
}

TEST_CASE("replica symmetry: contention still emerges on the folded platform", "[sim][symmetry][contention]") {
  // dp 8 of tp 8 x pp 1, gradient ring all-reduce after the step: every node's 8 GPUs
  // send their rings through 4 NICs (2 rings per NIC), and the fat tree's uplink carries
  // 4 NICs' worth / oversubscription. With oversubscription 2 the uplink, not the NICs,
  // is the bottleneck: 8 rings share 2 NICs' worth, half of what the NICs give them.
  const auto dp_comm = [](double oversubscription) {
    json doc = base_doc(8, "fat-tree", oversubscription);
    doc["plan"]["pp"] = 1;
    doc["cluster"]["nodes"] = 8;
    doc["simulation"]["collectives"] = "ring";
    const json r = simulate(scenario(doc), true);
    REQUIRE(r["simulator"]["replica_symmetry"]["applied"] == true);
    return r["breakdown"]["dp_comm_exposed_s"].get<double>();
  };
  const double one = dp_comm(1.0), two = dp_comm(2.0);
  // The ring's bandwidth term: 2(n-1)/n B per rank at 2 rings per NIC (1:1) or 8 rings per
  // uplink of two NICs' worth (2:1); the latency term 2(n-1) alpha is the same.
  std::printf("gradient all-reduce, 8 rings through 4 NICs per node: 1:1 %.6f s, 2:1 %.6f s (bandwidth term doubles)\n",
              one, two);
  CHECK(two > 1.9 * one);
  CHECK(two < 2.0 * one);
}
