// The validation sets of validation.hpp, read from the repository.
#include "strategies/validation.hpp"

#include <algorithm>
#include <filesystem>
#include <fmt/format.h>

#include "costmodel/graph.hpp"
#include "costmodel/hardware.hpp"
#include "scenarios/json_reader.hpp"

namespace clustersim {
namespace {

std::vector<std::string> files_named(const std::string& dir, const std::string& prefix) {
  std::vector<std::string> files;
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) return files;
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir))
    if (e.is_regular_file() && e.path().filename().string().rfind(prefix, 0) == 0 && e.path().extension() == ".json")
      files.push_back(e.path().string());
  std::sort(files.begin(), files.end());
  return files;
}

// "96%", "up to 147", 147: the number a published figure states.
double stated_number(const nlohmann::json& v, const std::string& where) {
  if (v.is_number()) return v.get<double>();
  const std::string s = v.get<std::string>();
  const auto at = s.find_first_of("0123456789");
  if (at == std::string::npos) throw InputError(where, "", fmt::format("no number in {}", describe(v)));
  return std::stod(s.substr(at));
}

}  // namespace

std::optional<std::string> recorded_attention_kernel(const nlohmann::json& environment) {
  if (!environment.is_object()) return std::nullopt;
  const auto it = environment.find("attention_backend");
  if (it == environment.end() || !it->is_string()) return std::nullopt;
  if (*it == "flash") return std::string("flash2");
  if (*it == "cudnn") return std::string("cudnn");
  return std::nullopt;
}

Scenario measured_run_scenario(const nlohmann::json& run) {
  const nlohmann::json& sc = run.at("scenario");
  nlohmann::json doc = parse_json_text(default_scenario_text(), "<measured run>");
  doc["name"] = run.at("name");
  doc["model"] = sc.at("model");
  doc["model"]["attention"] = "flash";
  doc["model"]["dropout"] = 0.0;
  // The one-GPU smoke file predates the recorded tie_embeddings.
  if (!sc["model"].contains("tie_embeddings"))
    doc["model"]["tie_embeddings"] = sc["model"]["family"] == "gpt" && !run.at("environment").contains("tp");
  doc["training"] = sc.at("training");
  if (const auto k = recorded_attention_kernel(run.value("environment", nlohmann::json::object()));
      k && !doc["training"].contains("attention_kernel"))
    doc["training"]["attention_kernel"] = *k;
  doc["cluster"] = sc.at("cluster");
  doc["plan"] = sc.at("plan");
  Diagnostics diag(run.at("name").get<std::string>());
  Scenario s = parse_scenario(doc, diag);
  diag.throw_if_errors();
  return s;
}

double megatron_paper_flops(const Scenario& s) {
  const double B = double(s.training.global_batch), S = double(s.model.seq_len), l = double(s.model.layers),
               h = double(s.model.hidden), V = double(s.model.vocab);
  return 96 * B * S * l * h * h * (1 + S / (6 * h) + V / (16 * l * h));
}

std::vector<ValidationCase> validation_cases(const std::string& root) {
  std::vector<ValidationCase> cases;
  // One GPU, measured: each calibrated GPU's runs with the scenarios shipped for them.
  const std::pair<const char*, const char*> one_gpu_sets[] = {{"h100-sxm5-80gb", "measured-h100"},
                                                              {"h200-sxm-141gb", "measured-h200"}};
  for (const auto& [gpu, set] : one_gpu_sets)
    for (const auto& file : files_named(root + "/calibration/data/" + gpu, "measured-runs-")) {
      if (file.find("rerun") != std::string::npos || file.find("superseded") != std::string::npos) continue;
      const nlohmann::json doc = read_json_file(file);
      for (const auto& run : doc.at("runs")) {
        const std::string name = run.at("name");
        ValidationCase c{set, name, load_scenario(root + "/data/scenarios/" + set + "/" + name + ".json")};
        c.step_time = run.at("measured").at("step_time_s").get<double>();
        cases.push_back(std::move(c));
      }
    }
  // Several GPUs of one host, measured.
  for (const auto& file : files_named(root + "/calibration/data", "measured-parallel-")) {
    const nlohmann::json doc = read_json_file(file);
    for (const auto& run : doc.at("runs")) {
      ValidationCase c{"measured-parallel", run.at("name").get<std::string>(), measured_run_scenario(run)};
      c.step_time = run.at("measured").at("step_time_s").get<double>();
      cases.push_back(std::move(c));
    }
  }
  // The same runs of a GPU calibrated after its datasheet profile shipped, predicted with that
  // datasheet profile as transferred from the H100 (its name + "-datasheet"): the measured
  // error of a transferred profile, for the transferred regimes' intervals.
  const std::size_t measured = cases.size();
  for (std::size_t i = 0; i < measured; ++i) {
    const auto p = find_gpu_profile(cases[i].scenario.cluster.gpu + "-datasheet");
    if (!p || p->status != "transferred") continue;
    ValidationCase c = cases[i];
    c.dataset += "-transferred";
    c.scenario.cluster.gpu = p->name;
    cases.push_back(std::move(c));
  }
  // Megatron-LM SC'21 Table 1.
  const nlohmann::json megatron = read_json_file(root + "/data/published/megatron-sc21-table1.json");
  for (const auto& row : megatron.at("rows")) {
    const std::string file = row.at("scenario");
    ValidationCase c{"megatron-sc21", file, load_scenario(root + "/" + file)};
    c.paper_tflops_per_gpu = row.at("tflops_per_gpu").get<double>();
    cases.push_back(std::move(c));
  }
  // Published end-to-end throughput with a shipped scenario.
  const std::string published = root + "/data/published/training-throughput.json";
  const nlohmann::json throughput = read_json_file(published);
  for (const auto& row : throughput.at("rows")) {
    if (!row.contains("scenario") || !row.at("scenario").is_string()) continue;
    const std::string file = row.at("scenario");
    if (file.rfind("data/scenarios/", 0) != 0) continue;  // kept aside (FP8 runs)
    ValidationCase c{"published", row.at("id").get<std::string>(), load_scenario(root + "/" + file)};
    const auto& m = row.at("metric");
    const Scenario& s = c.scenario;
    if (m.contains("step_time_s")) c.step_time = m.at("step_time_s").get<double>();
    else if (m.contains("tokens_per_s_per_gpu"))
      // NeMo's tables: tokens per second per GPU, so a step of global batch x sequence tokens.
      c.step_time = double(s.training.global_batch) * double(s.model.seq_len) /
                    (stated_number(m.at("tokens_per_s_per_gpu"), published) * double(s.cluster.total_gpus()));
    else if (m.contains("gpu_hours_per_trillion_tokens"))
      // GPU hours per 10^12 tokens (DeepSeek-V3's cost figure): a step of global batch x
      // sequence tokens takes that share of the hours, spread over the run's GPUs.
      c.step_time = stated_number(m.at("gpu_hours_per_trillion_tokens"), published) * 3600.0 *
                    double(s.training.global_batch) * double(s.model.seq_len) / 1e12 / double(s.cluster.total_gpus());
    else {
      // Per-GPU rate relative to the one-GPU baseline the row names ("39 TFLOP/s ..."), or stated.
      const double tflops = m.contains("weak_scaling_efficiency")
                                ? stated_number(m.at("relative_to"), published) *
                                      stated_number(m.at("weak_scaling_efficiency"), published) / 100.0
                                : stated_number(m.at("tflops_per_gpu"), published);
      // "8NT": the source counts 8 FLOPs per parameter and token (forward, backward and the
      // recomputed forward, attention scores left out), so its figure fixes the step time;
      // otherwise the figure counts what the GPUs execute, as the prediction does.
      if (m.value("flops_counting", "") == "8NT")
        c.step_time = 8.0 * parameter_count(s.model) * double(s.training.global_batch) * double(s.model.seq_len) /
                      (tflops * 1e12 * double(s.cluster.total_gpus()));
      else c.hardware_tflops_per_gpu = tflops;
    }
    cases.push_back(std::move(c));
  }
  return cases;
}

Seconds real_step_time(const ValidationCase& c, const Prediction& p) {
  const double gpus = double(c.scenario.cluster.total_gpus());
  if (c.step_time > 0) return c.step_time;
  if (c.paper_tflops_per_gpu > 0) return megatron_paper_flops(c.scenario) / (c.paper_tflops_per_gpu * 1e12 * gpus);
  return p.hardware_flops / (c.hardware_tflops_per_gpu * 1e12 * gpus);
}

double relative_residual(const ValidationCase& c, const Prediction& p) {
  return real_step_time(c, p) / p.iteration_time - 1;
}

}  // namespace clustersim
