// Storing computed runs: the hardware profile's provenance comes from the profile the
// run used (built-in or file), the tool's from the build.
#include "runner/store.hpp"

#include <map>
#include <mutex>

#include "costmodel/hardware.hpp"
#include "runner/provenance.hpp"
#include "sim/simgrid_info.hpp"

namespace clustersim::runner {
namespace {

results::HardwareRecord hardware_of(const std::string& gpu) {
  // Profiles are files or built-ins that do not change during a process: resolve each once.
  static std::mutex mutex;
  static std::map<std::string, results::HardwareRecord> cache;
  std::lock_guard lock(mutex);
  if (auto it = cache.find(gpu); it != cache.end()) return it->second;
  results::HardwareRecord h{gpu, "unknown", nlohmann::json::object()};
  if (const auto p = find_gpu_profile(gpu)) {
    h.name = p->name;
    h.status = p->status;
    h.provenance = {{"display_name", p->display_name}, {"sources", p->sources}, {"profile", gpu}};
  }
  return cache.emplace(gpu, h).first->second;
}

// The simulator's version and configuration that the result's "tool" object carries.
void read_simgrid_provenance(results::RunRecord& r) {
  if (!r.result.contains("tool") || !r.result["tool"].is_object()) return;
  const auto& tool = r.result["tool"];
  if (tool.contains("simgrid_version") && tool["simgrid_version"].is_string())
    r.provenance.simgrid_version = tool["simgrid_version"].get<std::string>();
  if (tool.contains("simgrid_config")) r.provenance.simgrid_config = tool["simgrid_config"];
}

}  // namespace

results::RunRecord make_run_record(const Scenario& s, const nlohmann::json& result, std::string_view method) {
  return make_run_record(s, to_json(s), result, method);
}

results::RunRecord make_run_record(const Scenario& s, nlohmann::json canonical, nlohmann::json result,
                                   std::string_view method) {
  results::RunRecord r;
  r.method = std::string(method);
  r.scenario = std::move(canonical);
  r.result = std::move(result);
  r.hardware = hardware_of(s.cluster.gpu);
  r.provenance.tool_version = tool_version;
  r.provenance.git_revision = git_revision;
  read_simgrid_provenance(r);
  if (method == "simulated" && r.provenance.simgrid_version.empty()) r.provenance.simgrid_version = sim::simgrid_version();
  return r;
}

std::int64_t store_run(const std::string& db_file, const Scenario& s, const nlohmann::json& result,
                       std::string_view method) {
  results::Database db(db_file, results::Database::Mode::read_write);
  const auto record = make_run_record(s, result, method);
  db.begin();
  try {
    const std::int64_t id = db.add_run(record);
    db.commit();
    return id;
  } catch (...) {
    db.rollback();
    throw;
  }
}

std::int64_t store_serving_run(const std::string& db_file, const ServingScenario& s, const nlohmann::json& result) {
  results::RunRecord r;
  r.method = "served";
  r.scenario = to_json(s);
  r.result = result;
  r.hardware = hardware_of(s.cluster.gpu);
  r.provenance.tool_version = tool_version;
  r.provenance.git_revision = git_revision;
  // A disaggregated run's KV transfers and cross-node pipeline sends run on SimGrid: its
  // version and configuration.
  read_simgrid_provenance(r);
  results::Database db(db_file, results::Database::Mode::read_write);
  db.begin();
  try {
    const std::int64_t id = db.add_run(r);
    db.commit();
    return id;
  } catch (...) {
    db.rollback();
    throw;
  }
}

}  // namespace clustersim::runner
