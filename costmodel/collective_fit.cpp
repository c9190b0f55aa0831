#include "costmodel/collective_fit.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <fmt/format.h>
#include <map>
#include <optional>

#include "costmodel/calibration.hpp"
#include "scenarios/json_reader.hpp"

namespace clustersim {
namespace {

constexpr std::array<Collective, 6> kOps{Collective::all_reduce, Collective::all_gather, Collective::reduce_scatter,
                                         Collective::all_to_all, Collective::broadcast,  Collective::send_recv};

// The benchmark's operation names (calibration/nccl/src/nccl_bench.cu), which the
// profile's nccl section uses too.
std::optional<Collective> op_from(const std::string& s) {
  for (Collective op : kOps)
    if (kNcclOpNames[static_cast<std::size_t>(op)] == s) return op;
  return std::nullopt;
}

std::string_view op_name(Collective op) { return kNcclOpNames[static_cast<std::size_t>(op)]; }

// Least squares of rows . p = 1 over the chosen columns (the others are 0), columns
// scaled to unit norm first: seconds and seconds per byte differ by 1e10.
std::optional<std::array<double, 4>> least_squares(const std::vector<std::array<double, 4>>& rows,
                                                   const std::array<bool, 4>& use) {
  std::vector<int> cols;
  for (int j = 0; j < 4; ++j)
    if (use[static_cast<std::size_t>(j)]) cols.push_back(j);
  const std::size_t k = cols.size();
  std::vector<double> scale(k, 0);
  for (const auto& r : rows)
    for (std::size_t a = 0; a < k; ++a) scale[a] += r[static_cast<std::size_t>(cols[a])] * r[static_cast<std::size_t>(cols[a])];
  for (auto& s : scale) s = s > 0 ? std::sqrt(s) : 1;
  std::vector<std::vector<double>> m(k, std::vector<double>(k + 1, 0));
  for (const auto& r : rows)
    for (std::size_t a = 0; a < k; ++a) {
      const double xa = r[static_cast<std::size_t>(cols[a])] / scale[a];
      m[a][k] += xa;
      for (std::size_t b = 0; b < k; ++b) m[a][b] += xa * r[static_cast<std::size_t>(cols[b])] / scale[b];
    }
  for (std::size_t c = 0; c < k; ++c) {  // Gauss-Jordan with partial pivoting
    std::size_t piv = c;
    for (std::size_t r = c + 1; r < k; ++r)
      if (std::abs(m[r][c]) > std::abs(m[piv][c])) piv = r;
    if (std::abs(m[piv][c]) < 1e-12) return std::nullopt;
    std::swap(m[c], m[piv]);
    for (std::size_t r = 0; r < k; ++r) {
      if (r == c) continue;
      const double f = m[r][c] / m[c][c];
      for (std::size_t q = c; q <= k; ++q) m[r][q] -= f * m[c][q];
    }
  }
  std::array<double, 4> p{};
  for (std::size_t a = 0; a < k; ++a) p[static_cast<std::size_t>(cols[a])] = m[a][k] / m[a][a] / scale[a];
  return p;
}

// F / F_capped: the buffer term's column; 1 for every measured group size.
double buffer_share(const NcclLinkFit& model, Collective op, std::int64_t ranks) {
  return bus_factor(op, ranks) / bus_factor(op, std::min(ranks, std::max<std::int64_t>(model.max_ranks, 2)));
}

// Step (1) for one operation: latency, per-step latency, 1/B, 1/C with the curve fixed.
void fit_operation(const std::vector<const CollectiveSample*>& rows, NcclLinkFit& model, Collective op) {
  NcclOpFit& f = model.ops[static_cast<std::size_t>(op)];
  std::vector<std::array<double, 4>> x;
  bool steps_vary = false, factor_varies = false;
  for (const auto* s : rows) {
    const double e = fitted_curve(model, op, s->bytes), t = s->time;
    x.push_back({1 / t, latency_steps(op, s->ranks) / t, bus_factor(op, s->ranks) * s->bytes / e / t,
                 buffer_share(model, op, s->ranks) * s->bytes / e / t});
    steps_vary |= latency_steps(op, s->ranks) != latency_steps(op, rows.front()->ranks);
    factor_varies |= bus_factor(op, s->ranks) != bus_factor(op, rows.front()->ranks);
  }
  std::array<bool, 4> use{true, steps_vary, true, factor_varies};
  std::optional<std::array<double, 4>> p;
  for (;;) {
    p = least_squares(x, use);
    if (!p) break;
    // Drop the most negative of the optional terms and refit.
    int worst = -1;
    for (int j : {0, 1, 3})
      if (use[static_cast<std::size_t>(j)] && (*p)[static_cast<std::size_t>(j)] < 0 &&
          (worst < 0 || (*p)[static_cast<std::size_t>(j)] < (*p)[static_cast<std::size_t>(worst)]))
        worst = j;
    if (worst < 0) break;
    use[static_cast<std::size_t>(worst)] = false;
  }
  if (!p || !((*p)[2] > 0))
    throw InputError("<collective fit>", std::string("/") + std::string(op_name(op)),
                     "no positive bus bandwidth fits these samples (are the times increasing with size?)");
  f.latency = (*p)[0];
  f.latency_per_step = (*p)[1];
  f.bus_bandwidth = 1 / (*p)[2];
  f.buffer_bandwidth = (*p)[3] > 0 ? 1 / (*p)[3] : 0;
}

double squared_error(const std::vector<const CollectiveSample*>& rows, const NcclLinkFit& model, Collective op) {
  double sum = 0;
  for (const auto* s : rows) {
    const double r = fitted_time(model, op, s->ranks, s->bytes) / s->time - 1;
    sum += r * r;
  }
  return sum;
}

// Step (2): the efficiency each sample implies, (modelled transfer / measured transfer)
// to the power 1/exponent, median per power-of-two size.
void fit_curve(const std::vector<const CollectiveSample*>& train, NcclLinkFit& model) {
  std::map<long, std::vector<double>> bins;  // ordered: deterministic
  for (const auto* s : train) {
    const auto& f = model.ops[static_cast<std::size_t>(s->op)];
    const double transfer = s->time - fitted_latency(model, s->op, s->ranks);
    if (!(transfer > 0)) continue;
    double at_top = bus_factor(s->op, s->ranks) * s->bytes / f.bus_bandwidth;
    if (f.buffer_bandwidth > 0) at_top += buffer_share(model, s->op, s->ranks) * s->bytes / f.buffer_bandwidth;
    bins[std::lround(std::log2(s->bytes))].push_back(std::pow(at_top / transfer, 1 / f.curve_exponent));
  }
  model.curve.clear();
  for (const auto& [log2_bytes, implied] : bins) {
    const double e = std::min(median_of(implied), 1.0);
    if (e > 0) model.curve.push_back({std::ldexp(1.0, int(log2_bytes)), e});
  }
}

NcclLinkFit fit_link(const std::vector<const CollectiveSample*>& train, const CollectiveFitOptions& options,
                     const std::string& where) {
  NcclLinkFit model;
  for (const auto* s : train) model.max_ranks = std::max(model.max_ranks, s->ranks);
  std::array<std::vector<const CollectiveSample*>, 6> by_op;
  for (const auto* s : train) by_op[static_cast<std::size_t>(s->op)].push_back(s);
  std::string missing;
  for (Collective op : kOps)
    if (by_op[static_cast<std::size_t>(op)].empty()) missing += (missing.empty() ? "" : ", ") + std::string(op_name(op));
  if (!missing.empty())
    throw InputError(where, "/runs", fmt::format("no multi-GPU samples of {}: the fit needs all six collectives", missing));
  for (int round = 0; round < std::max(1, options.rounds); ++round) {
    for (Collective op : kOps) {
      const auto& rows = by_op[static_cast<std::size_t>(op)];
      NcclOpFit& f = model.ops[static_cast<std::size_t>(op)];
      if (!model.curve.empty() && op != Collective::all_reduce) {
        // The exponent on a grid (0.5 to 2 by 0.05); the first of equal errors wins.
        double best = -1, best_k = f.curve_exponent;
        for (int i = 0; i <= 30; ++i) {
          f.curve_exponent = 0.5 + 0.05 * i;
          fit_operation(rows, model, op);
          const double err = squared_error(rows, model, op);
          if (best < 0 || err < best) best = err, best_k = f.curve_exponent;
        }
        f.curve_exponent = best_k;
      }
      fit_operation(rows, model, op);
    }
    fit_curve(train, model);
  }
  // The curve and the bandwidths trade a common scale; fix it by the curve's best size
  // reaching 1, so that the bandwidths are the ones reached there.
  double top = 0;
  for (const auto& pt : model.curve) top = std::max(top, pt.efficiency);
  if (top > 0 && top < 1) {
    for (auto& pt : model.curve) pt.efficiency /= top;
    for (auto& f : model.ops) {
      const double z = std::pow(top, f.curve_exponent);
      f.bus_bandwidth *= z;
      f.buffer_bandwidth *= z;
    }
  }
  return model;
}

nlohmann::json provenance_summary(const CollectiveBenchmarks& d) {
  const auto& p = d.provenance;
  nlohmann::json s{{"file", d.file}};
  for (const char* key : {"nccl_version", "cuda_runtime_version", "nvidia_driver", "hostname", "date_utc", "command_line"})
    if (p.contains(key)) s[key] = p[key];
  if (p.contains("gpus") && p["gpus"].is_array() && !p["gpus"].empty()) {
    s["gpu"] = p["gpus"][0].value("name", "?");
    s["gpu_count"] = p["gpus"].size();
  }
  if (p.contains("environment")) s["environment"] = p["environment"];
  return s;
}

}  // namespace

RelativeError relative_error(std::vector<double> e) {
  RelativeError r;
  r.count = e.size();
  if (e.empty()) return r;
  std::sort(e.begin(), e.end());
  r.median = e.size() % 2 ? e[e.size() / 2] : 0.5 * (e[e.size() / 2 - 1] + e[e.size() / 2]);
  r.p90 = e[std::min(e.size() - 1, static_cast<std::size_t>(0.9 * double(e.size() - 1) + 0.5))];
  r.max = e.back();
  return r;
}

RelativeError LinkFit::error(Bytes min_bytes, Bytes max_bytes, std::optional<Collective> op) const {
  std::vector<double> e;
  for (const auto& t : tested)
    if (t.sample.bytes >= min_bytes && t.sample.bytes < max_bytes && (!op || t.sample.op == *op)) e.push_back(t.error());
  return relative_error(std::move(e));
}

const LinkFit* CollectiveFit::find(LinkClass l) const {
  for (const auto& f : links)
    if (f.link == l) return &f;
  return nullptr;
}

CollectiveBenchmarks read_collective_benchmarks(const std::string& file) {
  const auto doc = read_json_file(file);
  if (!doc.is_object() || doc.value("format", "") != "clustersim-nccl-bench/1")
    throw InputError(file, "/format", "expected \"clustersim-nccl-bench/1\" (calibration/nccl output)");
  Diagnostics diag(file);
  CollectiveBenchmarks data;
  data.file = file;
  data.provenance = doc.value("provenance", nlohmann::json::object());
  const auto runs = doc.value("runs", nlohmann::json::array());
  if (runs.empty()) diag.error("/runs", "no runs");
  for (std::size_t i = 0; i < runs.size(); ++i) {
    const auto& run = runs[i];
    const std::string rpath = json_path("/runs", i);
    if (!run.is_object()) {
      diag.error(rpath, fmt::format("expected an object, got {}", describe(run)));
      continue;
    }
    if (!run.value("check_passed", false)) data.checks_passed = false;
    const std::int64_t nodes = run.value("nodes", 1);
    const auto results = run.value("results", nlohmann::json::array());
    for (std::size_t k = 0; k < results.size(); ++k) {
      const auto& r = results[k];
      const std::string path = json_path(json_path(rpath, "results"), k);
      const auto op = op_from(r.value("op", ""));
      if (!op) {
        diag.error(json_path(path, "op"), fmt::format("unknown collective {}", r.contains("op") ? describe(r["op"]) : "(none)"));
        continue;
      }
      CollectiveSample s;
      s.op = *op;
      s.nodes = nodes;
      s.ranks = r.value("gpus", std::int64_t{0});
      s.bytes = r.value("bytes", 0.0);
      s.time = r.value("time_s", 0.0);
      if (s.ranks < 1) diag.error(json_path(path, "gpus"), "expected a rank count of at least 1");
      if (!(s.bytes > 0)) diag.error(json_path(path, "bytes"), "expected a positive size");
      if (!(s.time > 0)) diag.error(json_path(path, "time_s"), "expected a positive time");
      data.samples.push_back(s);
    }
  }
  diag.throw_if_errors();
  return data;
}

CollectiveFit fit_collectives(const std::vector<CollectiveBenchmarks>& data, const CollectiveFitOptions& options) {
  CollectiveFit out;
  std::string where;
  for (const auto& d : data) {
    out.sources.push_back(d.file);
    out.provenance.push_back(provenance_summary(d));
    where += (where.empty() ? "" : " + ") + d.file;
  }
  const std::size_t every = options.holdout_every > 0 ? std::size_t(options.holdout_every) : 0;
  const std::size_t offset = options.holdout_offset >= 0 ? std::size_t(options.holdout_offset) : every - 1;
  for (LinkClass link : {LinkClass::nvlink, LinkClass::network}) {
    std::vector<const CollectiveSample*> all, train, test;
    for (const auto& d : data)
      for (const auto& s : d.samples)
        if (s.ranks >= 2 && s.link() == link) all.push_back(&s);
    if (all.empty()) continue;
    for (std::size_t i = 0; i < all.size(); ++i) {
      const bool hold = every > 0 && all.size() >= 2 * every && i % every == offset % every;
      (hold ? test : train).push_back(all[i]);
    }
    LinkFit fit;
    fit.link = link;
    fit.train = train.size();
    fit.held_back = test.size();
    if (test.empty()) test = all;  // nothing held back: report the fit's own error
    fit.model = fit_link(train, options, where);
    for (const auto* s : test) fit.tested.push_back({*s, fit.predict(s->op, s->ranks, s->bytes)});
    out.links.push_back(std::move(fit));
  }
  if (out.links.empty())
    throw InputError(where, "/runs",
                     "no sample with two or more GPUs: one-rank collectives are local copies and say nothing about links");
  return out;
}

GpuProfile apply_collective_fit(const GpuProfile& base, const CollectiveFit& fit, std::vector<std::string>* notes) {
  GpuProfile p = base;
  const LinkFit* nv = fit.find(LinkClass::nvlink);
  auto note = [&](std::string s) {
    if (notes) notes->push_back(std::move(s));
  };
  if (!nv) {
    note("no NVLink samples: the profile's NVLink figures are unchanged");
    return p;
  }
  if (!(p.nvlink_bandwidth > 0)) {
    note("the profile has no NVLink bandwidth to relate the fit to: unchanged");
    return p;
  }
  p.nccl.sources = fit.sources;
  p.nccl.provenance = fit.provenance;
  p.nccl.nvlink = nv->model;
  double top = 0;
  for (Collective op : kOps)
    top = std::max(top, fitted_efficiency(nv->model, p.nvlink_bandwidth, op, nv->model.max_ranks, 1e300));
  if (top > 1) {
    note(fmt::format("an operation's asymptotic bus bandwidth ({} of {}) exceeds the profile's NVLink bandwidth: "
                     "collective_nvlink capped at 1",
                     top, format_bandwidth(p.nvlink_bandwidth)));
    top = 1;
  }
  p.efficiency.collective_nvlink = std::max(top, 0.01);
  std::string files;
  for (const auto& s : fit.sources) files += (files.empty() ? "" : ", ") + s;
  p.sources.push_back(fmt::format("NCCL collectives on NVLink (latency, bus bandwidth and efficiency by size per "
                                  "operation) fitted from {}",
                                  files));
  if (fit.find(LinkClass::network))
    note("network fit reported only: put its latency and bandwidth in the scenario's inter_node block");
  return p;
}

nlohmann::json to_json(const CollectiveFit& fit) {
  nlohmann::json links = nlohmann::json::array();
  auto err = [](const RelativeError& e) {
    return nlohmann::json{{"count", e.count}, {"median", e.median}, {"p90", e.p90}, {"max", e.max}};
  };
  for (const auto& f : fit.links) {
    nlohmann::json per_op = nlohmann::json::object();
    for (Collective op : kOps) per_op[std::string(op_name(op))] = err(f.error(0, 1e300, op));
    links.push_back({{"link", std::string(to_string(f.link))},
                     {"train_samples", f.train},
                     {"held_back_samples", f.held_back},
                     {"model", to_json(f.model)},
                     {"error", {{"all", err(f.error())},
                                {"below_64KiB", err(f.error(0, 65536))},
                                {"from_64KiB", err(f.error(65536))},
                                {"per_operation", per_op}}}});
  }
  return {{"format", "clustersim-collective-fit/2"},
          {"model", "time = latency + latency_per_step * latency_steps(op, n) + bus_factor(op, n) * bytes * "
                    "(1 / bus_bandwidth + 1 / (bus_factor(op, min(n, max_ranks)) * buffer_bandwidth)) / "
                    "efficiency_by_size(bytes)^curve_exponent (costmodel/nccl_model.hpp)"},
          {"sources", fit.sources},
          {"provenance", fit.provenance},
          {"links", links}};
}

}  // namespace clustersim
