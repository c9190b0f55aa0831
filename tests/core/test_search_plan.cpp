// The whole search on a small scenario: the Alpa-style plan is never slower than the
// best manual plan under the same cost model, the plan file round-trips and its
// evaluation reproduces the searched iteration time, bad plan files name the bad field.
#include <catch2/catch.hpp>

#include "scenarios/json_reader.hpp"
#include "strategies/search/search.hpp"

using namespace clustersim;
using namespace clustersim::search;

namespace {

Scenario small_scenario(std::int64_t nodes, std::int64_t gpus, bool tight = false) {
  nlohmann::json doc = parse_json_text(default_scenario_text(), "<test>");
  doc["model"] = {{"family", "gpt"}, {"hidden", 512}, {"layers", 4}, {"heads", 8}, {"seq_len", 256}, {"vocab", 1024}};
  doc["training"] = {{"global_batch", 32}, {"micro_batch", 1}, {"precision", "mixed-bf16"}, {"recompute", "none"}};
  if (tight) {
    // 16 GB GPUs and a model whose weights and activations crowd them.
    doc["model"] = {{"family", "gpt"}, {"hidden", 4096}, {"layers", 4}, {"heads", 32}, {"seq_len", 1024}, {"vocab", 1024}};
    doc["training"] = {{"global_batch", 64}, {"micro_batch", 1}, {"precision", "mixed-fp16"}, {"recompute", "none"}};
    doc["cluster"]["gpu"] = "v100-sxm2-16gb";
    doc["cluster"]["intra_node"] = {{"fabric", "nvlink-mesh"}};
  }
  doc["cluster"]["nodes"] = nodes;
  doc["cluster"]["gpus_per_node"] = gpus;
  if (nodes == 1) doc["cluster"].erase("inter_node");
  doc["plan"] = {{"dp", nodes * gpus}, {"tp", 1}, {"pp", 1}};
  Diagnostics diag("<test>");
  Scenario s = parse_scenario(doc, diag);
  REQUIRE(diag.ok());
  return s;
}

SearchOptions small_options() {
  SearchOptions o;
  o.layer_clusters = 3;
  o.micro_batch_counts = {4, 8};
  o.ilp.time_limit_s = 600;  // exact
  return o;
}

}  // namespace

TEST_CASE("search: the Alpa-style plan is at least as fast as the best manual plan", "[search][plan]") {
  for (auto [nodes, gpus] : {std::pair<std::int64_t, std::int64_t>{1, 4}, {2, 2}}) {
    const Scenario s = small_scenario(nodes, gpus);
    const SearchReport r = run_search(s, small_options());
    INFO(nodes << " x " << gpus << ": alpa " << r.alpa.iteration_time << " s, manual " << r.manual.iteration_time
                << " s (dp " << r.manual.dp << " tp " << r.manual.tp << " pp " << r.manual.pp << ")");
    REQUIRE(r.alpa.feasible);
    REQUIRE(r.manual.feasible);
    CHECK(r.timings.unproven == 0);
    CHECK(r.alpa.iteration_time <= r.manual.iteration_time * (1 + 1e-9));
    // The stages cover the model once and use every GPU.
    std::int64_t devices = 0;
    int next = 0;
    for (const auto& st : r.alpa.stages) {
      CHECK(st.first_block == next);
      next = st.last_block + 1;
      devices += st.submesh.devices();
    }
    CHECK(next == int(r.block_names.size()));
    CHECK(devices == nodes * gpus);
  }
}

TEST_CASE("search: lazy stage latencies give the same optimum as solving every candidate", "[search][plan]") {
  for (auto [nodes, gpus] : {std::pair<std::int64_t, std::int64_t>{1, 4}, {2, 2}}) {
    const Scenario s = small_scenario(nodes, gpus, true);
    SearchOptions o = small_options();
    o.micro_batch_counts = {8, 16};
    o.manual_baseline = false;
    const SearchReport lazy = run_search(s, o);
    o.lazy = false;
    const SearchReport eager = run_search(s, o);
    INFO(nodes << " x " << gpus << ": lazy " << lazy.alpa.iteration_time << " s (" << lazy.timings.ilp_solves
                << " ILPs), eager " << eager.alpa.iteration_time << " s (" << eager.timings.ilp_solves << " ILPs)");
    REQUIRE(lazy.alpa.feasible == eager.alpa.feasible);
    CHECK(lazy.alpa.iteration_time == Approx(eager.alpa.iteration_time).epsilon(1e-12));
    CHECK(lazy.timings.ilp_solves <= eager.timings.ilp_solves);
    CHECK(lazy.timings.unproven == 0);
    CHECK(eager.timings.unproven == 0);
  }
}

TEST_CASE("search: the plan file round-trips and re-evaluates to the searched time", "[search][plan]") {
  const Scenario s = small_scenario(1, 4);
  const SearchReport r = run_search(s, small_options());
  REQUIRE(r.alpa.feasible);
  const nlohmann::json doc = to_json(r.alpa, r.block_names);
  const SearchPlan back = plan_from_json(parse_json_text(doc.dump(), "<plan>"), "<plan>");
  const SearchPlan e = evaluate_plan(s, back, "<plan>");
  INFO("searched " << r.alpa.iteration_time << " s, re-evaluated " << e.iteration_time << " s");
  CHECK(e.iteration_time == Approx(r.alpa.iteration_time).epsilon(1e-12));
  CHECK(e.feasible);
  // Same for the manual plan.
  const SearchPlan m = evaluate_plan(s, plan_from_json(to_json(r.manual, r.block_names), "<manual>"), "<manual>");
  CHECK(m.iteration_time == Approx(r.manual.iteration_time).epsilon(1e-12));
}

TEST_CASE("search: bad plan files name the file, the path and the bad value", "[search][plan]") {
  const Scenario s = small_scenario(1, 4);
  const SearchReport r = run_search(s, small_options());
  nlohmann::json doc = to_json(r.alpa, r.block_names);
  nlohmann::json bad = doc;
  bad["stages"][0]["ops"][0]["strategy"] = "SS = nonsense";
  CHECK_THROWS_WITH(evaluate_plan(s, plan_from_json(bad, "p.json"), "p.json"),
                    Catch::Contains("p.json: /stages/0/ops/0/strategy") && Catch::Contains("SS = nonsense"));
  bad = doc;
  bad["stages"][0]["logical_mesh"] = {3, 3};
  CHECK_THROWS_WITH(evaluate_plan(s, plan_from_json(bad, "p.json"), "p.json"), Catch::Contains("/stages/0/logical_mesh"));
  bad = doc;
  bad["stages"][0]["submesh"] = "big";
  CHECK_THROWS_WITH(plan_from_json(bad, "p.json"), Catch::Contains("/stages/0/submesh: expected two integers"));
  bad = doc;
  bad["samples_per_micro_batch"] = 5;
  CHECK_THROWS_WITH(evaluate_plan(s, plan_from_json(bad, "p.json"), "p.json"), Catch::Contains("/samples_per_micro_batch"));
}

TEST_CASE("search: a scenario's plan may ask for the search or name a plan file", "[search][plan][scenario]") {
  nlohmann::json doc = parse_json_text(default_scenario_text(), "<test>");
  doc["plan"] = {{"search", "alpa"}};
  Diagnostics diag("s.json");
  Scenario s = parse_scenario(doc, diag);
  CHECK(diag.ok());
  CHECK(s.plan.search == "alpa");
  CHECK(to_json(s)["plan"] == nlohmann::json{{"search", "alpa"}});

  doc["plan"] = {{"file", "x.plan.json"}};
  Diagnostics d2("s.json");
  s = parse_scenario(doc, d2);
  CHECK(d2.ok());
  CHECK(s.plan.file == "x.plan.json");

  doc["plan"] = {{"search", "genetic"}};
  Diagnostics d3("s.json");
  (void)parse_scenario(doc, d3);
  REQUIRE_FALSE(d3.ok());
  CHECK_THAT(d3.problems().front().to_string(), Catch::Contains("/plan/search") && Catch::Contains("genetic"));

  doc["plan"] = {{"search", "alpa"}, {"file", "x.plan.json"}};
  Diagnostics d4("s.json");
  (void)parse_scenario(doc, d4);
  CHECK_FALSE(d4.ok());
}
