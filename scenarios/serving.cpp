#include "scenarios/serving.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fmt/format.h>
#include <utility>

#include "scenarios/json_reader.hpp"
#include "scenarios/sections.hpp"

namespace clustersim {
namespace {

template <typename E>
using Names = std::vector<std::pair<E, std::string_view>>;

const Names<SchedulerKind>& scheduler_names() {
  static const Names<SchedulerKind> n{{SchedulerKind::static_batching, "static"},
                                      {SchedulerKind::orca, "orca"},
                                      {SchedulerKind::vllm, "vllm"},
                                      {SchedulerKind::sarathi, "sarathi"},
                                      {SchedulerKind::transformers_fifo, "transformers-fifo"}};
  return n;
}
const Names<RouterKind>& router_names() {
  static const Names<RouterKind> n{{RouterKind::round_robin, "round-robin"},
                                   {RouterKind::least_outstanding_tokens, "least-outstanding-tokens"}};
  return n;
}
const Names<Preemption>& preemption_names() {
  static const Names<Preemption> n{{Preemption::recompute, "recompute"}, {Preemption::swap, "swap"}};
  return n;
}
const Names<LaunchMode>& launch_names() {
  static const Names<LaunchMode> n{{LaunchMode::eager, "eager"}, {LaunchMode::cuda_graphs, "cuda-graphs"}};
  return n;
}
const Names<KvLayout>& kv_names() {
  static const Names<KvLayout> n{{KvLayout::paged, "paged"}, {KvLayout::concat, "concat"}, {KvLayout::concat_view, "concat-view"}};
  return n;
}
// An eager engine runs transformers' model code unless the scenario says otherwise; one that
// launches CUDA graphs runs fused kernels.
EngineKernels default_kernels(LaunchMode launch) {
  return launch == LaunchMode::eager ? EngineKernels::transformers : EngineKernels::fused;
}
const Names<EngineKernels>& kernels_names() {
  static const Names<EngineKernels> n{{EngineKernels::transformers, "transformers"}, {EngineKernels::fused, "fused"}};
  return n;
}
const Names<GqaMode>& gqa_names() {
  static const Names<GqaMode> n{
      {GqaMode::native, "native"}, {GqaMode::repeat_kv, "repeat-kv"}, {GqaMode::masked_repeat_kv, "masked-repeat-kv"}};
  return n;
}
const Names<AttentionMode>& attention_names() {
  static const Names<AttentionMode> n{{AttentionMode::per_request, "per-request"}, {AttentionMode::packed, "packed"}};
  return n;
}
const Names<ArrivalKind>& arrival_names() {
  static const Names<ArrivalKind> n{{ArrivalKind::trace, "trace"},
                                    {ArrivalKind::poisson, "poisson"},
                                    {ArrivalKind::gamma, "gamma"},
                                    {ArrivalKind::fixed_rate, "fixed-rate"}};
  return n;
}
const Names<LengthKind>& length_names() {
  static const Names<LengthKind> n{{LengthKind::fixed, "fixed"}, {LengthKind::uniform, "uniform"}, {LengthKind::zipf, "zipf"}};
  return n;
}


constexpr std::int64_t kMaxTokens = std::int64_t{1} << 24;
constexpr QuantityRange kLatency{0, 1e6};

void parse_engine(const nlohmann::json& j, EngineSpec& e, Diagnostics& diag) {
  ObjectReader r(j, "/serving/engine", diag,
                 {"launch", "kernels", "kv_cache", "gqa", "attention", "host_calibration", "iteration_overhead",
                  "memory_fraction"});
  if (!r.valid()) return;
  e.launch = read_enum(r, "launch", launch_names(), false).value_or(LaunchMode::eager);
  e.kernels = read_enum(r, "kernels", kernels_names(), false).value_or(default_kernels(e.launch));
  e.kv_layout = read_enum(r, "kv_cache", kv_names(), false).value_or(KvLayout::paged);
  e.gqa = read_enum(r, "gqa", gqa_names(), false).value_or(GqaMode::native);
  e.attention = read_enum(r, "attention", attention_names(), false).value_or(AttentionMode::per_request);
  if (const auto* h = r.object("host_calibration", false)) {
    ObjectReader hr(*h, "/serving/engine/host_calibration", diag, {"file", "model"});
    if (hr.valid()) {
      e.host.enabled = true;
      e.host.file = hr.string("file", true).value_or("");
      e.host.model = hr.string("model", true).value_or("");
    }
  }
  if (e.host.enabled && r.get("iteration_overhead"))
    diag.error("/serving/engine/iteration_overhead",
               "give either iteration_overhead or host_calibration: the calibrated host cost includes the overhead");
  else
    e.iteration_overhead = r.quantity("iteration_overhead", Dimension::time, false, kLatency).value_or(0);
  e.memory_fraction = r.number("memory_fraction", 0.01, 1.0, false).value_or(0.9);
}

void parse_scheduler(const nlohmann::json& j, SchedulerSpec& s, Diagnostics& diag) {
  ObjectReader r(j, "/serving/scheduler", diag,
                 {"policy", "max_batch_size", "max_batched_tokens", "block_size", "watermark", "preemption",
                  "safety_margin", "num_blocks"});
  if (!r.valid()) return;
  if (auto k = read_enum(r, "policy", scheduler_names(), true)) s.kind = *k;
  s.max_batch_size = r.integer("max_batch_size", 1, 1 << 20, false).value_or(256);
  s.max_batched_tokens = r.integer("max_batched_tokens", 1, kMaxTokens, false).value_or(8192);
  s.block_size = r.integer("block_size", 1, 1 << 16, false).value_or(16);
  s.watermark = r.number("watermark", 0.0, 0.5, false).value_or(0.01);
  s.preemption = read_enum(r, "preemption", preemption_names(), false).value_or(Preemption::recompute);
  const bool tf = s.kind == SchedulerKind::transformers_fifo;
  for (const char* key : {"safety_margin", "num_blocks"})
    if (!tf && r.get(key))
      r.diagnostics().error(r.path(key), "only the transformers-fifo policy has this knob");
  s.safety_margin = r.number("safety_margin", 0.0, 0.99, false).value_or(0.15);
  s.num_blocks = r.integer("num_blocks", 1, std::int64_t{1} << 40, false).value_or(0);
  if (tf && s.preemption == Preemption::swap)
    r.diagnostics().error(r.path("preemption"),
                          "transformers-fifo evicts by recompute (soft reset); its CPU offload is not modelled");
}

void parse_pool(ObjectReader& r, PoolSpec& p, const char* replicas, const char* tp, const char* pp, bool required) {
  p.replicas = r.integer(replicas, 1, 1 << 20, required).value_or(1);
  p.tp = r.integer(tp, 1, 1024, false).value_or(1);
  p.pp = r.integer(pp, 1, 1024, false).value_or(1);
}

void parse_length(const nlohmann::json& j, const std::string& path, LengthSpec& l, Diagnostics& diag) {
  ObjectReader r(j, path, diag, {"dist", "value", "min", "max", "exponent"});
  if (!r.valid()) return;
  l.kind = read_enum(r, "dist", length_names(), true).value_or(LengthKind::fixed);
  if (l.kind == LengthKind::fixed) {
    l.value = r.integer("value", 1, kMaxTokens).value_or(1);
    l.min = l.max = l.value;
    for (auto key : {"min", "max", "exponent"})
      if (r.has(key)) diag.error(r.path(key), "not a key of the fixed distribution (it uses value)");
    return;
  }
  if (r.has("value")) diag.error(r.path("value"), "only the fixed distribution has a value (use min and max)");
  l.min = r.integer("min", 1, kMaxTokens).value_or(1);
  l.max = r.integer("max", 1, kMaxTokens).value_or(1);
  if (l.max < l.min) diag.error(r.path("max"), fmt::format("expected max >= min ({}), got {}", l.min, l.max));
  if (l.kind == LengthKind::zipf) l.exponent = r.number("exponent", 0.0, 10.0, false).value_or(1.0);
  else if (r.has("exponent")) diag.error(r.path("exponent"), "only the zipf distribution has an exponent");
}

void parse_workload(const nlohmann::json& j, WorkloadSpec& w, Diagnostics& diag) {
  ObjectReader r(j, "/workload", diag,
                 {"arrival", "trace", "rate", "cv", "requests", "duration", "prompt", "output", "seed", "warmup"});
  if (!r.valid()) return;
  w.arrival = read_enum(r, "arrival", arrival_names(), true).value_or(ArrivalKind::poisson);
  w.seed = static_cast<std::uint64_t>(r.integer("seed", 0, INT64_MAX, false).value_or(1));
  w.warmup = r.quantity("warmup", Dimension::time, false, kLatency).value_or(0);
  if (w.arrival == ArrivalKind::trace) {
    w.trace = r.string("trace").value_or("");
    for (auto key : {"rate", "cv", "requests", "duration", "prompt", "output"})
      if (r.has(key)) diag.error(r.path(key), "a trace workload takes arrivals and lengths from the trace file");
    return;
  }
  if (r.has("trace")) diag.error(r.path("trace"), "only the trace arrival reads a file");
  w.rate = r.number("rate", 1e-6, 1e7).value_or(1);
  if (w.arrival == ArrivalKind::gamma) w.cv = r.number("cv", 1e-3, 100.0, false).value_or(1.0);
  else if (r.has("cv")) diag.error(r.path("cv"), "only the gamma arrival has a cv");
  w.requests = r.integer("requests", 1, 100000000, false).value_or(0);
  w.duration = r.quantity("duration", Dimension::time, false, QuantityRange{0, 1e7}).value_or(0);
  if (w.requests == 0 && w.duration == 0 && diag.ok())
    diag.error(r.path(), "give requests or duration (how much load to generate)");
  if (const auto* p = r.object("prompt")) parse_length(*p, "/workload/prompt", w.prompt, diag);
  if (const auto* o = r.object("output")) parse_length(*o, "/workload/output", w.output, diag);
}

void parse_slo(const nlohmann::json& j, SloSpec& s, Diagnostics& diag) {
  ObjectReader r(j, "/slo", diag, {"ttft", "tpot", "e2e", "attainment"});
  if (!r.valid()) return;
  s.ttft = r.quantity("ttft", Dimension::time, false, kLatency).value_or(0);
  s.tpot = r.quantity("tpot", Dimension::time, false, kLatency).value_or(0);
  s.e2e = r.quantity("e2e", Dimension::time, false, kLatency).value_or(0);
  s.attainment = r.number("attainment", 0.0, 1.0, false).value_or(0.9);
}

void check_serving(const ServingScenario& s, Diagnostics& diag) {
  const auto& m = s.model;
  if (m.family != ModelFamily::llama && m.family != ModelFamily::gpt)
    diag.error("/model/family", fmt::format("serving models llama and gpt, got \"{}\"", to_string(m.family)));
  const auto check_pool = [&](const PoolSpec& p, const std::string& where) {
    if (m.heads && m.heads % p.tp != 0)
      diag.error(where + "/tp", fmt::format("tp ({}) must divide heads ({})", p.tp, m.heads));
    if (m.layers && m.layers < p.pp)
      diag.error(where + "/pp", fmt::format("pp ({}) exceeds layers ({})", p.pp, m.layers));
    if (p.tp * p.pp > s.cluster.gpus_per_node && p.tp > s.cluster.gpus_per_node)
      diag.error(where + "/tp", fmt::format("tp ({}) exceeds gpus_per_node ({})", p.tp, s.cluster.gpus_per_node));
  };
  check_pool(s.pool, "/serving");
  if (s.disaggregation.enabled) check_pool(s.disaggregation.prefill, "/serving/disaggregation");
  const std::int64_t gpus = s.pool.gpus() + (s.disaggregation.enabled ? s.disaggregation.prefill.gpus() : 0);
  if (gpus > s.cluster.total_gpus())
    diag.error("/serving/replicas", fmt::format("the replicas need {} GPUs, the cluster has {}", gpus, s.cluster.total_gpus()));
  const auto& w = s.workload;
  if (w.arrival != ArrivalKind::trace && m.seq_len) {
    const std::int64_t longest = w.prompt.max + w.output.max;
    if (longest > m.seq_len)
      diag.error("/workload/prompt/max",
                 fmt::format("prompt + output tokens ({}) exceed the model's seq_len ({}), its longest context", longest, m.seq_len));
  }
  if (s.scheduler.kind == SchedulerKind::sarathi && s.scheduler.max_batched_tokens < s.scheduler.max_batch_size)
    diag.error("/serving/scheduler/max_batched_tokens",
               fmt::format("the token budget ({}) must hold one decode token of each of max_batch_size ({}) requests",
                           s.scheduler.max_batched_tokens, s.scheduler.max_batch_size));
  const bool chunked = s.scheduler.kind == SchedulerKind::sarathi || s.scheduler.kind == SchedulerKind::transformers_fifo;
  if (!chunked && w.arrival != ArrivalKind::trace &&
      w.prompt.max > s.scheduler.max_batched_tokens)
    diag.error("/serving/scheduler/max_batched_tokens",
               fmt::format("a whole prompt ({} tokens) must fit the iteration's token budget without chunked prefill, got {}",
                           w.prompt.max, s.scheduler.max_batched_tokens));
}

}  // namespace

std::string_view to_string(SchedulerKind e) { return enum_name(scheduler_names(), e); }
std::string_view to_string(RouterKind e) { return enum_name(router_names(), e); }
std::string_view to_string(Preemption e) { return enum_name(preemption_names(), e); }

bool is_serving_scenario(const nlohmann::json& doc) { return doc.is_object() && doc.contains("serving"); }

ServingScenario parse_serving_scenario(const nlohmann::json& doc, Diagnostics& diag) {
  ServingScenario s;
  s.source = diag.file();
  ObjectReader r(doc, "", diag, {"name", "description", "model", "cluster", "serving", "workload", "slo"});
  if (!r.valid()) return s;
  s.name = r.string("name", false).value_or("unnamed");
  s.description = r.string("description", false).value_or("");
  const std::size_t before = diag.count();
  if (const auto* m = r.object("model")) parse_model_section(*m, s.model, diag);
  if (const auto* c = r.object("cluster")) parse_cluster_section(*c, s.cluster, diag);
  if (const auto* sv = r.object("serving")) {
    ObjectReader sr(*sv, "/serving", diag, {"engine", "replicas", "tp", "pp", "disaggregation", "scheduler", "router"});
    if (sr.valid()) {
      if (const auto* e = sr.object("engine", false)) parse_engine(*e, s.engine, diag);
      parse_pool(sr, s.pool, "replicas", "tp", "pp", true);
      if (const auto* d = sr.object("disaggregation", false)) {
        ObjectReader dr(*d, "/serving/disaggregation", diag, {"prefill_replicas", "tp", "pp"});
        if (dr.valid()) {
          s.disaggregation.enabled = true;
          parse_pool(dr, s.disaggregation.prefill, "prefill_replicas", "tp", "pp", true);
        }
      }
      if (const auto* sc = sr.object("scheduler")) parse_scheduler(*sc, s.scheduler, diag);
      s.router = read_enum(sr, "router", router_names(), false).value_or(RouterKind::round_robin);
    }
  }
  if (const auto* w = r.object("workload")) parse_workload(*w, s.workload, diag);
  if (const auto* slo = r.object("slo", false)) parse_slo(*slo, s.slo, diag);
  if (diag.count() == before) check_serving(s, diag);
  return s;
}

ServingScenario load_serving_scenario(const std::string& file) {
  const auto doc = read_json_file(file);
  Diagnostics diag(file);
  ServingScenario s = parse_serving_scenario(doc, diag);
  if (s.workload.arrival == ArrivalKind::trace && !s.workload.trace.empty()) {
    namespace fs = std::filesystem;
    fs::path p(s.workload.trace);
    if (p.is_relative()) p = fs::path(file).parent_path() / p;
    std::error_code ec;
    if (!fs::is_regular_file(p, ec))
      diag.error("/workload/trace", fmt::format("no such trace file \"{}\" (looked for {})", s.workload.trace, p.string()));
    s.workload.trace = p.lexically_normal().string();
  }
  if (s.engine.host.enabled && !s.engine.host.file.empty()) {
    namespace fs = std::filesystem;
    fs::path p(s.engine.host.file);
    if (p.is_relative()) p = fs::path(file).parent_path() / p;
    std::error_code ec;
    if (!fs::is_regular_file(p, ec)) {
      diag.error("/serving/engine/host_calibration/file",
                 fmt::format("no such calibration file \"{}\" (looked for {})", s.engine.host.file, p.string()));
    } else {
      s.engine.host.file = p.lexically_normal().string();
      read_engine_host_cost(s.engine.host);
      const auto& a = s.engine.host.attention;
      if (a.enabled && a.head_dim != s.model.head_dim())
        diag.error("/serving/engine/host_calibration/model",
                   fmt::format("the calibration's attention path was measured at head_dim {}, the model has {}",
                               a.head_dim, s.model.head_dim()));
    }
  }
  diag.throw_if_errors();
  return s;
}

namespace {
void read_attention_path(const nlohmann::json& j, const std::string& base, EngineAttentionPath& a, Diagnostics& diag) {
  if (!j.is_object()) {
    diag.error(base, "expected an object (calibration/serving/engine_attention_path.py)");
    return;
  }
  const auto number = [&](const nlohmann::json& o, const std::string& path, const char* key, double lo, double hi,
                          double& v) {
    if (!o.contains(key) || !o[key].is_number()) {
      diag.error(path + "/" + key, "expected a number");
      return false;
    }
    v = o[key].get<double>();
    if (!std::isfinite(v) || v < lo || v > hi) {
      diag.error(path + "/" + key, fmt::format("expected {} to {}, got {}", lo, hi, v));
      return false;
    }
    return true;
  };
  number(j, base, "repeat_kv_copy_Bps", 1e9, 1e14, a.repeat_kv_copy_rate);
  number(j, base, "graph_build_s", 0, 10, a.graph_build);
  const std::string sp = base + "/sdpa";
  if (!j.contains("sdpa") || !j["sdpa"].is_object()) {
    diag.error(sp, "missing");
    return;
  }
  const auto& o = j["sdpa"];
  double heads = 0, hd = 0, rows = 0, ctas = 0;
  number(o, sp, "heads", 1, 1 << 16, heads);
  number(o, sp, "head_dim", 1, 1 << 16, hd);
  number(o, sp, "query_rows_per_cta", 1, 1 << 16, rows);
  number(o, sp, "resident_ctas", 1, 1 << 20, ctas);
  a.heads = std::int64_t(heads);
  a.head_dim = std::int64_t(hd);
  a.query_rows_per_cta = std::int64_t(rows);
  a.resident_ctas = std::int64_t(ctas);
  if (!o.contains("points") || !o["points"].is_array() || o["points"].empty()) {
    diag.error(sp + "/points", "expected a non-empty array of [q, kv, seconds]");
    return;
  }
  for (std::size_t i = 0; i < o["points"].size(); ++i) {
    const auto& p = o["points"][i];
    const std::string pp = sp + "/points/" + std::to_string(i);
    if (!p.is_array() || p.size() != 3 || !p[0].is_number() || !p[1].is_number() || !p[2].is_number()) {
      diag.error(pp, "expected [q, kv, seconds]");
      continue;
    }
    const double q = p[0].get<double>(), kv = p[1].get<double>(), t = p[2].get<double>();
    if (!(q >= 1 && q <= 1e7 && kv >= 1 && kv <= 1e9 && t > 0 && t < 100)) {
      diag.error(pp, fmt::format("expected q and kv >= 1 and 0 < seconds < 100, got [{}, {}, {}]", q, kv, t));
      continue;
    }
    a.sdpa.push_back({std::int64_t(q), kv, t});
  }
  std::sort(a.sdpa.begin(), a.sdpa.end(),
            [](const auto& x, const auto& y) { return x.q != y.q ? x.q < y.q : x.kv < y.kv; });
  a.enabled = !a.sdpa.empty();
}
// launch_residual: {"probabilities": [0, ..., 1], "quantiles_s": [...]} of equal length.
void read_residual_quantiles(const nlohmann::json& j, const std::string& base, ResidualQuantiles& r, Diagnostics& diag) {
  if (!j.is_object()) {
    diag.error(base, "expected an object with probabilities and quantiles_s (calibration/serving/fit_engine_host.py)");
    return;
  }
  const auto numbers = [&](const char* key, std::vector<double>& out) {
    const std::string path = base + "/" + key;
    if (!j.contains(key) || !j[key].is_array() || j[key].size() < 2) {
      diag.error(path, "expected an array of at least two numbers");
      return false;
    }
    bool ok = true;
    for (std::size_t i = 0; i < j[key].size(); ++i) {
      const auto& v = j[key][i];
      if (!v.is_number() || !std::isfinite(v.get<double>())) {
        diag.error(path + "/" + std::to_string(i), fmt::format("expected a number, got {}", v.dump()));
        ok = false;
        continue;
      }
      out.push_back(v.get<double>());
    }
    return ok;
  };
  ResidualQuantiles q;
  if (!numbers("probabilities", q.probability) || !numbers("quantiles_s", q.value)) return;
  const std::string pp = base + "/probabilities", qp = base + "/quantiles_s";
  if (q.value.size() != q.probability.size()) {
    diag.error(qp, fmt::format("expected {} quantiles, one per probability, got {}", q.probability.size(), q.value.size()));
    return;
  }
  bool ok = true;
  if (q.probability.front() != 0 || q.probability.back() != 1) {
    diag.error(pp, fmt::format("expected the first probability 0 and the last 1, got {} and {}", q.probability.front(),
                               q.probability.back()));
    ok = false;
  }
  for (std::size_t i = 1; i < q.probability.size(); ++i) {
    if (!(q.probability[i] > q.probability[i - 1])) {
      diag.error(pp + "/" + std::to_string(i),
                 fmt::format("expected probabilities increasing, got {} after {}", q.probability[i], q.probability[i - 1]));
      ok = false;
    }
    if (!(q.value[i] >= q.value[i - 1])) {
      diag.error(qp + "/" + std::to_string(i),
                 fmt::format("expected quantiles non-decreasing, got {} after {}", q.value[i], q.value[i - 1]));
      ok = false;
    }
  }
  for (std::size_t i = 0; i < q.value.size(); ++i)
    if (std::fabs(q.value[i]) > 10) {
      diag.error(qp + "/" + std::to_string(i), fmt::format("expected -10 to 10 s, got {}", q.value[i]));
      ok = false;
    }
  if (ok) r = std::move(q);
}
}  // namespace

void read_engine_host_cost(EngineHostCost& h) {
  const auto doc = read_json_file(h.file);
  Diagnostics diag(h.file);
  if (!doc.is_object() || doc.value("format", "") != "clustersim-serving-engine-host/1") {
    diag.error("/format", "expected \"clustersim-serving-engine-host/1\" (calibration/serving/fit_engine_host.py)");
    diag.throw_if_errors();
  }
  const auto models = doc.find("models");
  if (models == doc.end() || !models->is_object() || !models->contains(h.model)) {
    std::vector<std::string> names;
    if (models != doc.end() && models->is_object())
      for (const auto& [k, v] : models->items()) names.push_back(k);
    std::string list;
    for (const auto& n : names) list += (list.empty() ? "" : ", ") + n;
    diag.error("/models/" + h.model, fmt::format("no model \"{}\" in the file (it has: {})", h.model, list));
    diag.throw_if_errors();
  }
  const auto& m = (*models)[h.model];
  const auto terms = [&](const char* phase, HostTerms& t) {
    const std::string base = "/models/" + h.model + "/" + phase;
    if (!m.contains(phase) || !m[phase].is_object()) {
      diag.error(base, "missing");
      return;
    }
    const auto& o = m[phase];
    const auto get = [&](const char* key, Seconds& v) {
      if (!o.contains(key) || !o[key].is_number()) {
        diag.error(base + "/" + key, "expected a number of seconds");
        return;
      }
      v = o[key].get<double>();
      if (!std::isfinite(v) || v < 0 || v > 10) diag.error(base + "/" + key, fmt::format("expected 0 to 10 s, got {}", v));
    };
    get("fixed_s", t.fixed);
    get("per_request_s", t.per_request);
    get("per_prefill_token_s", t.per_prefill_token);
    get("per_kv_token_s", t.per_kv_token);
  };
  terms("prepare_update", h.prepare_update);
  terms("launch", h.launch);
  if (m.contains("built_graph_launch_saving_s")) {
    const auto& v = m["built_graph_launch_saving_s"];
    const std::string path = "/models/" + h.model + "/built_graph_launch_saving_s";
    if (!v.is_number()) diag.error(path, "expected a number of seconds");
    else if (h.built_graph_saving = v.get<double>(); !std::isfinite(h.built_graph_saving) || h.built_graph_saving < 0 ||
                                                     h.built_graph_saving > 10)
      diag.error(path, fmt::format("expected 0 to 10 s, got {}", h.built_graph_saving));
  }
  if (m.contains("launch_residual"))
    read_residual_quantiles(m["launch_residual"], "/models/" + h.model + "/launch_residual", h.launch_residual, diag);
  if (m.contains("gpu_bound_probe")) {
    const std::string base = "/models/" + h.model + "/gpu_bound_probe/rows";
    const auto& g = m["gpu_bound_probe"];
    if (!g.is_object() || !g.contains("rows") || !g["rows"].is_array()) {
      diag.error(base, "expected an array of [decodes, kv_read, launch_plus_wait_s]");
    } else {
      for (std::size_t i = 0; i < g["rows"].size(); ++i) {
        const auto& row = g["rows"][i];
        const std::string path = base + "/" + std::to_string(i);
        if (!row.is_array() || row.size() != 3 || !row[0].is_number() || !row[1].is_number() || !row[2].is_number()) {
          diag.error(path, fmt::format("expected [decodes, kv_read, launch_plus_wait_s], got {}", row.dump()));
          continue;
        }
        const double n = row[0].get<double>(), kv = row[1].get<double>(), t = row[2].get<double>();
        if (!(n >= 1 && n <= 1e6 && n == std::floor(n) && kv >= 0 && kv <= 1e9 && t > 0 && t < 10)) {
          diag.error(path, fmt::format("expected a whole number of decodes >= 1, kv_read >= 0 and 0 < seconds < 10, "
                                       "got {}", row.dump()));
          continue;
        }
        h.gpu_bound.push_back({std::int64_t(n), kv, t});
      }
    }
  }
  if (m.contains("attention_path")) read_attention_path(m["attention_path"], "/models/" + h.model + "/attention_path",
                                                        h.attention, diag);
  diag.throw_if_errors();
}

nlohmann::json to_json(const ServingScenario& s) {
  using nlohmann::json;
  const auto pool = [](const PoolSpec& p) { return json{{"replicas", p.replicas}, {"tp", p.tp}, {"pp", p.pp}}; };
  const auto length = [](const LengthSpec& l) {
    return json{{"dist", enum_name(length_names(), l.kind)}, {"min", l.min}, {"max", l.max}, {"exponent", l.exponent}};
  };
  json j;
  j["name"] = s.name;
  j["model"] = {{"family", to_string(s.model.family)}, {"hidden", s.model.hidden},   {"layers", s.model.layers},
                {"heads", s.model.heads},                {"kv_heads", s.model.kv_heads}, {"ffn_hidden", s.model.ffn_hidden},
                {"vocab", s.model.vocab},                {"seq_len", s.model.seq_len}, {"tie_embeddings", s.model.tie_embeddings}};
  j["cluster"] = {{"gpu", s.cluster.gpu}, {"nodes", s.cluster.nodes}, {"gpus_per_node", s.cluster.gpus_per_node}};
  j["engine"] = {{"launch", enum_name(launch_names(), s.engine.launch)},
                 {"kv_cache", enum_name(kv_names(), s.engine.kv_layout)},
                 {"gqa", enum_name(gqa_names(), s.engine.gqa)},
                 {"iteration_overhead_s", s.engine.iteration_overhead},
                 {"memory_fraction", s.engine.memory_fraction}};
  // Keys added for the measured engine only, so earlier scenarios keep their hashes.
  if (s.engine.kernels != default_kernels(s.engine.launch))
    j["engine"]["kernels"] = enum_name(kernels_names(), s.engine.kernels);
  if (s.engine.attention != AttentionMode::per_request)
    j["engine"]["attention"] = enum_name(attention_names(), s.engine.attention);
  if (s.engine.host.enabled) {
    const auto terms = [](const HostTerms& t) {
      return json{{"fixed_s", t.fixed}, {"per_request_s", t.per_request}, {"per_prefill_token_s", t.per_prefill_token},
                  {"per_kv_token_s", t.per_kv_token}};
    };
    j["engine"]["host_calibration"] = {{"file", s.engine.host.file},
                                       {"model", s.engine.host.model},
                                       {"prepare_update", terms(s.engine.host.prepare_update)},
                                       {"launch", terms(s.engine.host.launch)}};
    if (s.engine.host.built_graph_saving > 0)
      j["engine"]["host_calibration"]["built_graph_launch_saving_s"] = s.engine.host.built_graph_saving;
    if (const auto& q = s.engine.host.launch_residual; !q.empty())
      j["engine"]["host_calibration"]["launch_residual"] = {{"probabilities", q.probability}, {"quantiles_s", q.value}};
    if (!s.engine.host.gpu_bound.empty()) {
      json rows = json::array();
      for (const auto& g : s.engine.host.gpu_bound) rows.push_back(json::array({g.decodes, g.kv, g.launch_and_wait}));
      j["engine"]["host_calibration"]["gpu_bound_probe"] = {{"rows", rows}};
    }
    if (const auto& a = s.engine.host.attention; a.enabled) {
      json points = json::array();
      for (const auto& p : a.sdpa) points.push_back(json::array({p.q, p.kv, p.time}));
      j["engine"]["host_calibration"]["attention_path"] = {
          {"graph_build_s", a.graph_build},
          {"repeat_kv_copy_Bps", a.repeat_kv_copy_rate},
          {"sdpa",
           {{"heads", a.heads},
            {"head_dim", a.head_dim},
            {"query_rows_per_cta", a.query_rows_per_cta},
            {"resident_ctas", a.resident_ctas},
            {"points", points}}}};
    }
  }
  j["pool"] = pool(s.pool);
  if (s.disaggregation.enabled) j["prefill_pool"] = pool(s.disaggregation.prefill);
  j["scheduler"] = {{"policy", to_string(s.scheduler.kind)},
                    {"max_batch_size", s.scheduler.max_batch_size},
                    {"max_batched_tokens", s.scheduler.max_batched_tokens},
                    {"block_size", s.scheduler.block_size},
                    {"watermark", s.scheduler.watermark},
                    {"preemption", to_string(s.scheduler.preemption)}};
  if (s.scheduler.kind == SchedulerKind::transformers_fifo) {
    j["scheduler"]["safety_margin"] = s.scheduler.safety_margin;
    j["scheduler"]["num_blocks"] = s.scheduler.num_blocks;
  }
  j["router"] = to_string(s.router);
  const auto& w = s.workload;
  j["workload"] = {{"arrival", enum_name(arrival_names(), w.arrival)}, {"seed", w.seed}, {"warmup_s", w.warmup}};
  if (w.arrival == ArrivalKind::trace) {
    j["workload"]["trace"] = w.trace;
  } else {
    j["workload"]["rate"] = w.rate;
    j["workload"]["cv"] = w.cv;
    j["workload"]["requests"] = w.requests;
    j["workload"]["duration_s"] = w.duration;
    j["workload"]["prompt"] = length(w.prompt);
    j["workload"]["output"] = length(w.output);
  }
  j["slo"] = {{"ttft_s", s.slo.ttft}, {"tpot_s", s.slo.tpot}, {"e2e_s", s.slo.e2e}, {"attainment", s.slo.attainment}};
  return j;
}

}  // namespace clustersim
