#include "runner/measured_import.hpp"

#include <set>

#include "scenarios/json_reader.hpp"
#include "scenarios/scenario.hpp"
#include "strategies/validation.hpp"

namespace clustersim::runner {

using nlohmann::json;

results::MeasuredRecord parse_measured_run(const json& doc, const std::string& file) {
  Diagnostics diag(file);
  ObjectReader r(doc, "", diag, {"format", "name", "source", "scenario", "measured", "environment", "command_line", "error"});
  results::MeasuredRecord m;
  m.file = file;
  if (!r.valid()) diag.throw_if_errors();
  if (const auto fmt_name = r.string("format"); fmt_name && *fmt_name != "clustersim-measured-run/1")
    diag.error(r.path("format"), "expected \"clustersim-measured-run/1\", got \"" + *fmt_name + "\"");
  m.name = r.string("name").value_or("");
  m.source = r.string("source").value_or("");
  if (const auto* sc = r.object("scenario")) {
    json s = *sc;
    if (!s.contains("name")) s["name"] = m.name;
    // The attention kernels the run forced, as its environment recorded them.
    if (const auto k = recorded_attention_kernel(doc.value("environment", json::object()));
        k && s.contains("training") && s["training"].is_object() && !s["training"].contains("attention_kernel"))
      s["training"]["attention_kernel"] = *k;
    // Paths inside the scenario are reported below /scenario.
    Diagnostics sd(file);
    const Scenario scenario = parse_scenario(s, sd);
    for (const auto& p : sd.problems()) diag.error("/scenario" + p.path, p.message);
    if (sd.ok()) m.scenario = to_json(scenario);
  }
  if (const auto* me_all = r.object("measured")) {
    // The format names these keys; producers may add more (per-step series, loss...),
    // which are kept with the run but not checked.
    static const std::set<std::string> known{"step_time_s", "forward_time_s", "backward_time_s", "optimizer_time_s",
                                             "peak_memory_bytes", "peak_reserved_bytes", "tokens_per_s", "parameters",
                                             "steps_measured", "step_times_s"};
    // (Edit distance cannot tell a typo from such a series: "forward_times_s" is a
    // legitimate neighbour of "forward_time_s". The required step_time_s is the guard.)
    json checked = json::object();
    for (const auto& [k, v] : me_all->items())
      if (known.count(k)) checked[k] = v;
    const json* me = &checked;
    ObjectReader mr(*me, "/measured", diag,
                    {"step_time_s", "forward_time_s", "backward_time_s", "optimizer_time_s", "peak_memory_bytes",
                     "peak_reserved_bytes", "tokens_per_s", "parameters", "steps_measured", "step_times_s"});
    mr.number("step_time_s", 1e-12, 1e9);
    for (const char* k : {"forward_time_s", "backward_time_s", "optimizer_time_s"}) mr.number(k, 0, 1e9, false);
    for (const char* k : {"peak_memory_bytes", "peak_reserved_bytes", "tokens_per_s", "parameters"})
      mr.number(k, 0, 1e300, false);
    mr.integer("steps_measured", 1, 1'000'000'000, false);
    if (const auto* st = mr.get("step_times_s")) {
      if (!st->is_array()) diag.error(mr.path("step_times_s"), "expected a list of seconds, got " + describe(*st));
      else
        for (std::size_t i = 0; i < st->size(); ++i)
          if (!(*st)[i].is_number() || (*st)[i].get<double>() <= 0)
            diag.error(json_path(mr.path("step_times_s"), i), "expected a positive number, got " + describe((*st)[i]));
    }
    m.measured = *me_all;
  }
  // The environment is free-form provenance: the known keys become columns, every key is kept.
  if (const auto* env = r.object("environment")) {
    for (const auto& [k, v] : env->items())
      if (!(v.is_string() || v.is_number() || v.is_boolean() || v.is_null()))
        diag.error(json_path("/environment", k), "expected a string, number or true/false, got " + describe(v));
    m.environment = *env;
  }
  // The producer's command line is provenance too; a run that failed has nothing to import.
  if (const auto cmd = r.string("command_line", false)) m.environment["command_line"] = *cmd;
  if (const auto* err = r.get("error"))
    diag.error(r.path("error"), "the measurement failed (" + describe(*err) + "): nothing to import");
  diag.throw_if_errors();
  return m;
}

std::vector<results::MeasuredRecord> read_measured_runs(const std::vector<std::string>& files) {
  std::vector<results::MeasuredRecord> records;
  std::vector<Problem> problems;
  for (const auto& f : files) {
    try {
      const json doc = read_json_file(f);
      // calibration/training/run_all.sh writes many runs in one file.
      if (doc.is_object() && doc.value("format", "") == "clustersim-measured-runs/1") {
        const auto& runs = doc.value("runs", json::array());
        if (!runs.is_array() || runs.empty()) throw InputError(f, "/runs", "expected a non-empty list of measured runs");
        for (std::size_t i = 0; i < runs.size(); ++i) {
          try {
            records.push_back(parse_measured_run(runs[i], f));
          } catch (const InputError& e) {
            for (auto p : e.problems()) {
              p.path = json_path("/runs", i) + p.path;
              problems.push_back(p);
            }
          }
        }
        continue;
      }
      records.push_back(parse_measured_run(doc, f));
    } catch (const InputError& e) {
      problems.insert(problems.end(), e.problems().begin(), e.problems().end());
    }
  }
  if (!problems.empty()) throw InputError(problems);
  return records;
}

std::vector<ImportedRun> store_in_one_transaction(const std::string& db_file, std::size_t n,
                                                  const std::function<ImportedRun(results::Database&, std::size_t)>& add) {
  results::Database db(db_file, results::Database::Mode::read_write);
  db.begin();
  std::vector<ImportedRun> imported;
  try {
    for (std::size_t i = 0; i < n; ++i) imported.push_back(add(db, i));
    db.commit();
  } catch (...) {
    db.rollback();
    throw;
  }
  return imported;
}

std::vector<ImportedRun> store_measured_runs(const std::string& db_file,
                                             const std::vector<results::MeasuredRecord>& records) {
  return store_in_one_transaction(db_file, records.size(), [&](results::Database& db, std::size_t i) {
    const auto& m = records[i];
    return ImportedRun{m.file, db.add_measured(m), results::scenario_hash(m.scenario)};
  });
}

}  // namespace clustersim::runner
