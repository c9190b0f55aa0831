// The plan file: what `clustersim search` writes and `clustersim run --plan` reads (see
// strategies/search/README.md). Readers accept files from before the newer optional keys.
#include <cmath>
#include <fmt/format.h>

#include "scenarios/json_reader.hpp"
#include "strategies/search/search.hpp"

namespace clustersim::search {

using i64 = std::int64_t;

nlohmann::json to_json(const SearchPlan& p, const std::vector<std::string>& block_names) {
  using nlohmann::json;
  json stages = json::array();
  for (const auto& st : p.stages) {
    json ops = json::array();
    for (const auto& d : st.decisions) ops.push_back({{"op", d.op}, {"strategy", d.strategy}, {"kind", d.kind}});
    json names = json::array();
    for (int b = st.first_block; b <= st.last_block && b < int(block_names.size()); ++b) names.push_back(block_names[std::size_t(b)]);
    stages.push_back({{"blocks", {st.first_block, st.last_block}},
                      {"block_names", names},
                      {"submesh", {st.submesh.hosts, st.submesh.gpus}},
                      {"logical_mesh", {st.mesh0, st.mesh1}},
                      {"latency_s", st.latency},
                      {"memory_per_gpu_bytes", st.memory},
                      {"weight_memory_bytes", st.weight_memory},
                      {"activation_memory_bytes", st.activation_memory},
                      {"temporary_memory_bytes", st.memory_breakdown.temporary},
                      {"strategy_counts", st.kind_counts},
                      {"ops", ops}});
  }
  json out{{"format", "clustersim-plan"}, {"version", 1}, {"method", p.method},
           {"micro_batches", p.micro_batches}, {"samples_per_micro_batch", p.samples_per_micro_batch},
           {"iteration_time_s", p.prediction.method.empty() ? p.iteration_time : p.prediction.iteration_time},
           {"objective_s", p.iteration_time}, {"stages", stages}};
  if (p.method == "manual")
  {
    out["manual"] = {{"dp", p.dp}, {"tp", p.tp}, {"pp", p.pp}, {"schedule", p.schedule}, {"zero", p.zero}};
    if (p.recompute) out["manual"]["recompute"] = std::string(to_string(*p.recompute));
  }
  return out;
}

SearchPlan plan_from_json(const nlohmann::json& doc, const std::string& file) {
  Diagnostics diag(file);
  SearchPlan p;
  ObjectReader r(doc, "", diag,
                 {"format", "version", "method", "micro_batches", "samples_per_micro_batch", "iteration_time_s", "objective_s", "stages",
                  "manual"});
  if (!r.valid()) diag.throw_if_errors();
  if (auto f = r.choice("format", {"clustersim-plan"})) (void)f;
  (void)r.integer("version", 1, 1);
  p.method = r.choice("method", {"alpa", "manual"}).value_or("alpa");
  p.samples_per_micro_batch = r.integer("samples_per_micro_batch", 1, INT64_MAX).value_or(1);
  // At most a scenario's largest global batch (2^32 samples), one sample each.
  p.micro_batches = r.integer("micro_batches", 1, std::int64_t{1} << 32, false).value_or(0);
  // What the file recorded; evaluate_plan recomputes both.
  p.iteration_time = r.number("objective_s", 0, INFINITY, false).value_or(r.number("iteration_time_s", 0, INFINITY, false).value_or(0));
  if (const auto* m = r.object("manual", false)) {
    ObjectReader mr(*m, "/manual", diag, {"dp", "tp", "pp", "schedule", "zero", "recompute"});
    p.dp = mr.integer("dp", 1, INT64_MAX).value_or(0);
    p.tp = mr.integer("tp", 1, INT64_MAX).value_or(0);
    p.pp = mr.integer("pp", 1, INT64_MAX).value_or(0);
    // Both optional: plan files from before the schedule and ZeRO knobs are 1F1B, ZeRO 0.
    p.schedule = mr.choice("schedule", {"1f1b", "gpipe"}, false).value_or("1f1b");
    p.zero = int(mr.integer("zero", 0, 3, false).value_or(0));
    // Optional too: without it, the scenario's training.recompute.
    if (const auto rc = mr.choice("recompute", {"none", "selective", "full"}, false))
      p.recompute = *rc == "none" ? Recompute::none : *rc == "selective" ? Recompute::selective : Recompute::full;
  }
  const auto* stages = r.get("stages");
  if (!stages || !stages->is_array() || stages->empty()) {
    diag.error("/stages", "expected a non-empty array of stages");
    diag.throw_if_errors();
  }
  auto pair = [&](const nlohmann::json& j, const std::string& path, i64& a, i64& b) {
    if (!j.is_array() || j.size() != 2 || !j[0].is_number_integer() || !j[1].is_number_integer()) {
      diag.error(path, "expected two integers, got " + describe(j));
      return;
    }
    a = j[0].get<i64>();
    b = j[1].get<i64>();
  };
  for (std::size_t i = 0; i < stages->size(); ++i) {
    const std::string path = json_path("/stages", i);
    ObjectReader sr((*stages)[i], path, diag,
                    {"blocks", "block_names", "submesh", "logical_mesh", "latency_s", "memory_per_gpu_bytes",
                     "weight_memory_bytes", "activation_memory_bytes", "temporary_memory_bytes", "strategy_counts", "ops"});
    if (!sr.valid()) continue;
    PlanStage st;
    i64 a = 0, b = 0;
    if (const auto* j = sr.get("blocks")) pair(*j, sr.path("blocks"), a, b);
    else diag.error(sr.path("blocks"), "required");
    st.first_block = int(a);
    st.last_block = int(b);
    if (const auto* j = sr.get("submesh")) pair(*j, sr.path("submesh"), st.submesh.hosts, st.submesh.gpus);
    else diag.error(sr.path("submesh"), "required");
    if (const auto* j = sr.get("logical_mesh")) pair(*j, sr.path("logical_mesh"), st.mesh0, st.mesh1);
    else diag.error(sr.path("logical_mesh"), "required");
    const auto* ops = sr.get("ops");
    if (!ops || !ops->is_array()) {
      diag.error(sr.path("ops"), "expected an array of {\"op\", \"strategy\"} objects");
      continue;
    }
    for (std::size_t k = 0; k < ops->size(); ++k) {
      ObjectReader orr((*ops)[k], json_path(sr.path("ops"), k), diag, {"op", "strategy", "kind"});
      OpDecision d;
      d.op = orr.string("op").value_or("");
      d.strategy = orr.string("strategy").value_or("");
      d.kind = orr.string("kind", false).value_or("");
      st.decisions.push_back(std::move(d));
    }
    p.stages.push_back(std::move(st));
  }
  diag.throw_if_errors();
  return p;
}

}  // namespace clustersim::search
