#include "costmodel/collective_fit.hpp"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <map>
#include <optional>

#include "scenarios/json_reader.hpp"

namespace clustersim {
namespace {

// The benchmark's operation names (calibration/nccl/src/nccl_bench.cu).
std::optional<Collective> op_from(const std::string& s) {
  if (s == "all_reduce") return Collective::all_reduce;
  if (s == "all_gather") return Collective::all_gather;
  if (s == "reduce_scatter") return Collective::reduce_scatter;
  if (s == "all_to_all") return Collective::all_to_all;
  if (s == "broadcast") return Collective::broadcast;
  if (s == "send_recv") return Collective::send_recv;
  return std::nullopt;
}

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

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

// Weighted least squares of t = a * alpha + b * inv_bw on relative error: each sample is
// the row (a/t, b/t) = 1, so small and large messages weigh the same.
void fit_alpha_beta(const std::vector<const CollectiveSample*>& train, LinkFit& fit) {
  double s11 = 0, s12 = 0, s22 = 0, r1 = 0, r2 = 0;
  for (const auto* s : train) {
    const double x1 = latency_steps(s->op, s->ranks) / s->time;
    const double x2 = bus_factor(s->op, s->ranks) * s->bytes / s->time;
    s11 += x1 * x1, s12 += x1 * x2, s22 += x2 * x2, r1 += x1, r2 += x2;
  }
  const double det = s11 * s22 - s12 * s12;
  double alpha = det > 0 ? (r1 * s22 - r2 * s12) / det : 0;
  double inv_bw = det > 0 ? (s11 * r2 - s12 * r1) / det : 0;
  // A negative latency means the sizes cannot separate the two terms: refit bandwidth alone.
  if (!(alpha > 0)) alpha = 0, inv_bw = s22 > 0 ? r2 / s22 : 0;
  if (!(inv_bw > 0)) {
    // Bandwidth not identified (only tiny messages): latency alone, on the bandwidth
    // term's behalf; the error report shows how poor that is.
    inv_bw = 0;
    alpha = s11 > 0 ? r1 / s11 : 0;
  }
  fit.alpha = alpha;
  fit.bus_bandwidth = inv_bw > 0 ? 1 / inv_bw : 0;
}

}  // namespace

std::string_view to_string(LinkClass l) { return l == LinkClass::nvlink ? "nvlink" : "network"; }

double bus_factor(Collective op, std::int64_t ranks) {
  const double n = double(ranks);
  switch (op) {
    case Collective::all_reduce: return 2 * (n - 1) / n;
    case Collective::all_gather:
    case Collective::reduce_scatter:
    case Collective::all_to_all: return (n - 1) / n;
    case Collective::broadcast:
    case Collective::send_recv: return 1;
  }
  return 1;
}

double latency_steps(Collective op, std::int64_t ranks) {
  const double n = double(ranks);
  switch (op) {
    case Collective::all_reduce: return 2 * (n - 1);
    case Collective::all_gather:
    case Collective::reduce_scatter:
    case Collective::all_to_all:
    case Collective::broadcast: return n - 1;
    case Collective::send_recv: return 1;
  }
  return 1;
}

Seconds alpha_beta_time(Collective op, std::int64_t ranks, Bytes bytes, Seconds alpha, BytesPerSecond bus_bandwidth) {
  const double transfer = bus_bandwidth > 0 ? bus_factor(op, ranks) * bytes / bus_bandwidth : 0;
  return latency_steps(op, ranks) * alpha + transfer;
}

double LinkFit::efficiency(Bytes bytes) const {
  if (efficiency_by_size.empty()) return 1;
  const double x = std::log2(std::max(bytes, 1.0));
  if (x <= efficiency_by_size.front().log2_bytes) return efficiency_by_size.front().efficiency;
  if (x >= efficiency_by_size.back().log2_bytes) return efficiency_by_size.back().efficiency;
  const auto hi = std::upper_bound(efficiency_by_size.begin(), efficiency_by_size.end(), x,
                                   [](double v, const SizePoint& p) { return v < p.log2_bytes; });
  const auto lo = hi - 1;
  const double w = (x - lo->log2_bytes) / (hi->log2_bytes - lo->log2_bytes);
  // Interpolate the logarithm: efficiencies are ratios.
  return std::exp((1 - w) * std::log(lo->efficiency) + w * std::log(hi->efficiency));
}

Seconds LinkFit::predict(Collective op, std::int64_t ranks, Bytes bytes) const {
  return alpha_beta_time(op, ranks, bytes, alpha, bus_bandwidth) / efficiency(bytes);
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

CollectiveFit fit_collectives(const CollectiveBenchmarks& data, const CollectiveFitOptions& options) {
  CollectiveFit out;
  out.source = data.file;
  out.provenance = data.provenance;
  for (LinkClass link : {LinkClass::nvlink, LinkClass::network}) {
    std::vector<const CollectiveSample*> all, train, test;
    for (const auto& s : data.samples)
      if (s.ranks >= 2 && s.link() == link) all.push_back(&s);
    if (all.empty()) continue;
    for (std::size_t i = 0; i < all.size(); ++i) {
      const bool hold = options.holdout_every > 0 && all.size() >= 2 * std::size_t(options.holdout_every) &&
                        i % std::size_t(options.holdout_every) == std::size_t(options.holdout_every) - 1;
      (hold ? test : train).push_back(all[i]);
    }
    if (test.empty()) test = all;  // too few samples to hold any back: report the fit error
    LinkFit fit;
    fit.link = link;
    fit.train = train.size();
    fit.held_back = test.size() == all.size() ? 0 : test.size();
    fit_alpha_beta(train, fit);
    // Efficiency by size: per power-of-two bin of the training samples.
    std::map<int, std::vector<double>> bins;
    for (const auto* s : train)
      bins[int(std::lround(std::log2(s->bytes)))].push_back(
          alpha_beta_time(s->op, s->ranks, s->bytes, fit.alpha, fit.bus_bandwidth) / s->time);
    for (auto& [log2_bytes, ratios] : bins) fit.efficiency_by_size.push_back({double(log2_bytes), median(ratios), ratios.size()});
    std::vector<double> e_ab, e_curve;
    for (const auto* s : test) {
      e_ab.push_back(std::abs(alpha_beta_time(s->op, s->ranks, s->bytes, fit.alpha, fit.bus_bandwidth) - s->time) / s->time);
      e_curve.push_back(std::abs(fit.predict(s->op, s->ranks, s->bytes) - s->time) / s->time);
    }
    fit.alpha_beta_error = relative_error(e_ab);
    fit.curve_error = relative_error(e_curve);
    out.links.push_back(std::move(fit));
  }
  if (out.links.empty())
    throw InputError(data.file, "/runs",
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
  p.nvlink_latency = nv->alpha;
  if (nv->bus_bandwidth > 0 && p.nvlink_bandwidth > 0) {
    double eff = nv->bus_bandwidth / p.nvlink_bandwidth;
    if (eff > 1) {
      note(fmt::format("measured bus bandwidth {} exceeds the profile's NVLink bandwidth {}: collective_nvlink capped at 1",
                       format_bandwidth(nv->bus_bandwidth), format_bandwidth(p.nvlink_bandwidth)));
      eff = 1;
    }
    p.efficiency.collective_nvlink = std::max(eff, 0.01);
  } else {
    note("no bandwidth fitted or the profile has no NVLink bandwidth: collective_nvlink unchanged");
  }
  p.sources.push_back(fmt::format("NCCL collectives fitted from {}", fit.source));
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
    nlohmann::json curve = nlohmann::json::array();
    for (const auto& pt : f.efficiency_by_size)
      curve.push_back({{"log2_bytes", pt.log2_bytes}, {"efficiency", pt.efficiency}, {"samples", pt.samples}});
    links.push_back({{"link", std::string(to_string(f.link))},
                     {"alpha_s", f.alpha},
                     {"bus_bandwidth_Bps", f.bus_bandwidth},
                     {"train_samples", f.train},
                     {"held_back_samples", f.held_back},
                     {"efficiency_by_size", curve},
                     {"alpha_beta_error", err(f.alpha_beta_error)},
                     {"curve_error", err(f.curve_error)}});
  }
  return {{"format", "clustersim-collective-fit/1"},
          {"model", "time = latency_steps(op, n) * alpha + bus_factor(op, n) * bytes / bus_bandwidth, divided by "
                    "efficiency(bytes)"},
          {"source", fit.source},
          {"provenance", fit.provenance},
          {"links", links}};
}

}  // namespace clustersim
