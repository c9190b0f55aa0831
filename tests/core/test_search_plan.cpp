// The whole search on a small scenario: the Alpa-style plan is never slower than the
// best manual plan under the same cost model (also when only ZeRO makes a manual plan
// fit), the plan file round-trips (with the manual schedule and ZeRO level) and its
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
    SearchOptions o = small_options();
    // Every block its own cluster, so every manual plan's stage cut is open to the DP
    // and the manual plans lie in the Alpa space (with 3 clusters the best manual
    // plan, dp 2 x pp 2 with ZeRO-3, cuts where no cluster boundary is).
    o.layer_clusters = 6;
    const SearchReport r = run_search(s, o);
    INFO(nodes << " x " << gpus << ": alpa " << r.alpa.iteration_time << " s, manual " << r.manual.iteration_time
                << " s (dp " << r.manual.dp << " tp " << r.manual.tp << " pp " << r.manual.pp << ", "
                << r.manual.schedule << ", ZeRO " << r.manual.zero << ")");
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

namespace {

// 4 V100s (16 GB) and a 1.7B-parameter GPT with 3 layers and GPT-2's odd vocabulary:
// Megatron's vocab-parallel embedding cannot split 50257 rows, so tp = 1, and pp must
// divide both the 3 layers and the 4 GPUs, so pp = 1. Every manual plan is dp 4, and
// without ZeRO each GPU holds every parameter at 16 bytes (fp16 weight 2, gradient 2,
// fp32 master 4, Adam 8): more than the GPU has.
Scenario zero_only_scenario() {
  nlohmann::json doc = parse_json_text(default_scenario_text(), "<test>");
  doc["model"] = {{"family", "gpt"}, {"hidden", 6144}, {"layers", 3}, {"heads", 48}, {"seq_len", 1024}, {"vocab", 50257}};
  doc["training"] = {{"global_batch", 16}, {"micro_batch", 1}, {"precision", "mixed-fp16"}, {"recompute", "none"}};
  doc["cluster"]["gpu"] = "v100-sxm2-16gb";
  doc["cluster"]["intra_node"] = {{"fabric", "nvlink-mesh"}};
  doc["cluster"]["nodes"] = 1;
  doc["cluster"]["gpus_per_node"] = 4;
  doc["cluster"].erase("inter_node");
  doc["plan"] = {{"dp", 4}, {"tp", 1}, {"pp", 1}};
  Diagnostics diag("<test>");
  Scenario s = parse_scenario(doc, diag);
  REQUIRE(diag.ok());
  return s;
}

}  // namespace

TEST_CASE("search: when only ZeRO fits, the manual baseline shards the weight update", "[search][plan][zero]") {
  const Scenario s = zero_only_scenario();
  // Parameters as the search counts them (tied embedding weights in both places).
  const ModelGraph g = build_model_graph(s.model, 1, 2);
  double P = 0;
  for (const auto& b : g.blocks)
    for (const auto& op : b.ops) P += op.params;
  Diagnostics diag("<test>");
  const double capacity = resolve_cluster(s.cluster, diag).gpu.usable_memory();
  INFO("parameters " << P << ", ZeRO-0 weights " << P * 16 * 1e-9 << " GB, capacity " << capacity * 1e-9 << " GB");
  REQUIRE(P * (2 + 2 + 4 + 8) > capacity);  // no dp-4 plan without ZeRO fits
  SearchOptions o = small_options();
  o.layer_clusters = 5;  // every block: the manual plans lie in the Alpa space
  const SearchReport r = run_search(s, o);
  REQUIRE(r.manual.feasible);
  INFO("manual dp " << r.manual.dp << " tp " << r.manual.tp << " pp " << r.manual.pp << ", " << r.manual.schedule
                    << ", ZeRO " << r.manual.zero << ": " << r.manual.iteration_time << " s; alpa " << r.alpa.iteration_time
                    << " s");
  CHECK(r.manual.dp == 4);
  CHECK(r.manual.zero > 0);
  CHECK(r.manual.stages.front().memory <= capacity);
  REQUIRE(r.alpa.feasible);
  CHECK(r.timings.unproven == 0);
  CHECK(r.alpa.iteration_time <= r.manual.iteration_time * (1 + 1e-9));
  // The Alpa-style plan shards the weights too, by ZeRO or by partitioning the matmuls
  // (its replicated-weight strategies would need the same 16 bytes per parameter); which
  // one is cheaper depends on the GPU's collective costs.
  bool sharded = false;
  for (const auto& st : r.alpa.stages)
    for (const auto& [kind, n] : st.kind_counts) {
      UNSCOPED_INFO("alpa stage strategy " << kind << " x " << n);
      sharded = sharded || kind.find("+zero-") != std::string::npos || kind.starts_with("column@") ||
                kind.starts_with("row@");
    }
  CHECK(sharded);
  for (const auto& st : r.alpa.stages) CHECK(st.memory <= capacity);

  // The plan file keeps the schedule and the ZeRO level, and re-evaluates to the same time.
  const nlohmann::json doc = to_json(r.manual, r.block_names);
  CHECK(doc["manual"]["zero"] == r.manual.zero);
  CHECK(doc["manual"]["schedule"] == "1f1b");
  const SearchPlan back = plan_from_json(parse_json_text(doc.dump(), "<plan>"), "<plan>");
  CHECK(back.zero == r.manual.zero);
  CHECK(back.schedule == "1f1b");
  const SearchPlan e = evaluate_plan(s, back, "<plan>");
  CHECK(e.iteration_time == Approx(r.manual.iteration_time).epsilon(1e-12));
  CHECK(e.stages.front().memory == Approx(r.manual.stages.front().memory).epsilon(1e-12));
  CHECK(e.zero == r.manual.zero);
  CHECK(e.feasible);
  // The same strategies at ZeRO 0 are not strategies of the Megatron space.
  nlohmann::json plain = doc;
  plain["manual"]["zero"] = 0;
  CHECK_THROWS_WITH(evaluate_plan(s, plan_from_json(plain, "z.json"), "z.json"),
                    Catch::Contains("z.json: /stages/0/ops/") && Catch::Contains("is not a strategy"));
}

TEST_CASE("search: a manual plan re-costed as GPipe keeps every micro-batch in flight", "[search][plan][zero]") {
  // dp 2 x pp 2 with 4 micro-batches: stages whose 1F1B in-flight counts differ.
  Scenario s = small_scenario(1, 4);
  s.plan.dp = 2;
  s.plan.pp = 2;
  s.training.micro_batch = 4;
  const SearchPlan manual = cost_manual_plan(s);
  REQUIRE(manual.micro_batches == 4);
  // Re-costed from its plan file as 1F1B and as GPipe.
  nlohmann::json doc = to_json(manual, {});
  const SearchPlan one_f_one_b = evaluate_plan(s, plan_from_json(doc, "<plan>"), "<plan>");
  doc["manual"]["schedule"] = "gpipe";
  const SearchPlan gpipe = evaluate_plan(s, plan_from_json(doc, "<plan>"), "<plan>");
  CHECK(gpipe.schedule == "gpipe");
  // Eq. 2 is the same for both schedules; only the memory differs.
  CHECK(gpipe.iteration_time == Approx(one_f_one_b.iteration_time).epsilon(1e-12));
  CHECK(one_f_one_b.iteration_time == Approx(manual.iteration_time).epsilon(1e-12));
  const std::size_t n = gpipe.stages.size();
  REQUIRE(n == 2);
  for (std::size_t j = 0; j < n; ++j) {
    const PlanStage& g = gpipe.stages[j];
    const PlanStage& f = one_f_one_b.stages[j];
    INFO("stage " << j << " of " << n);
    CHECK(g.in_flight == 4);                   // all B
    CHECK(f.in_flight == double(n - j));       // min(B, pp - j)
    CHECK(g.memory_breakdown.activations == Approx(4 * g.activation_memory).epsilon(1e-12));
    CHECK(f.memory_breakdown.activations == Approx(double(n - j) * f.activation_memory).epsilon(1e-12));
    CHECK(g.memory - f.memory == Approx((4 - double(n - j)) * f.activation_memory).epsilon(1e-9));
  }
}

TEST_CASE("search: bad manual schedule and ZeRO values name the file and path", "[search][plan][zero]") {
  const Scenario s = small_scenario(1, 4);
  const SearchReport r = run_search(s, small_options());
  REQUIRE(r.manual.feasible);
  const nlohmann::json doc = to_json(r.manual, r.block_names);
  nlohmann::json bad = doc;
  bad["manual"]["zero"] = 5;
  CHECK_THROWS_WITH(plan_from_json(bad, "p.json"), Catch::Contains("p.json: /manual/zero") && Catch::Contains("got 5"));
  bad["manual"]["zero"] = "two";
  CHECK_THROWS_WITH(plan_from_json(bad, "p.json"), Catch::Contains("p.json: /manual/zero") && Catch::Contains("two"));
  bad = doc;
  bad["manual"]["schedule"] = "interleaved";
  CHECK_THROWS_WITH(plan_from_json(bad, "p.json"),
                    Catch::Contains("p.json: /manual/schedule") && Catch::Contains("interleaved"));
  // ZeRO shards over data parallelism: a manual plan with dp 1 cannot have it.
  bad = doc;
  bad["manual"]["dp"] = 1;
  bad["manual"]["zero"] = 2;
  CHECK_THROWS_WITH(evaluate_plan(s, plan_from_json(bad, "p.json"), "p.json"),
                    Catch::Contains("p.json: /manual/zero") && Catch::Contains("dp > 1"));
  // Plan files from before the knobs (no "zero", no "schedule") are 1F1B without ZeRO.
  nlohmann::json old = doc;
  old["manual"].erase("zero");
  old["manual"].erase("schedule");
  const SearchPlan p = plan_from_json(old, "old.json");
  CHECK(p.schedule == "1f1b");
  CHECK(p.zero == 0);
}

TEST_CASE("search: Alpa's power-of-two submeshes cut the ILPs (every host count: a superset)", "[search][plan]") {
  // 4 hosts x 2 GPUs: power-of-two offers (2,2) and (4,2), all adds (3,2). The narrower
  // space solves fewer ILPs and cannot find a faster plan; both report their peak memory.
  const Scenario s = small_scenario(4, 2);
  SearchOptions o = small_options();
  o.manual_baseline = false;
  const SearchReport p2 = run_search(s, o);
  o.submeshes = SubmeshSpace::all;
  const SearchReport all = run_search(s, o);
  INFO("power-of-two: " << p2.alpa.iteration_time << " s, " << p2.timings.ilp_solves << " ILPs, "
                        << p2.timings.submeshes << " shapes; all: " << all.alpa.iteration_time << " s, "
                        << all.timings.ilp_solves << " ILPs, " << all.timings.submeshes << " shapes");
  REQUIRE(p2.alpa.feasible);
  REQUIRE(all.alpa.feasible);
  CHECK(p2.timings.submeshes == 2 + 2);
  CHECK(all.timings.submeshes == 2 + 3);
  CHECK(p2.timings.ilp_solves < all.timings.ilp_solves);
  CHECK(all.alpa.iteration_time <= p2.alpa.iteration_time * (1 + 1e-12));
  for (const auto& st : p2.alpa.stages) CHECK(st.submesh.hosts != 3);
  CHECK(p2.timings.peak_rss_bytes > 0);
}
