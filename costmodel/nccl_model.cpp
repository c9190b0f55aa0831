#include "costmodel/nccl_model.hpp"

#include <algorithm>
#include <cmath>

namespace clustersim {
namespace {

// The profile's per-operation arrays follow the Collective enum.
static_assert(static_cast<int>(Collective::all_reduce) == 0 && static_cast<int>(Collective::all_gather) == 1 &&
              static_cast<int>(Collective::reduce_scatter) == 2 && static_cast<int>(Collective::all_to_all) == 3 &&
              static_cast<int>(Collective::broadcast) == 4 && static_cast<int>(Collective::send_recv) == 5);

const NcclOpFit& op_fit(const NcclLinkFit& fit, Collective op) { return fit.ops[static_cast<std::size_t>(op)]; }

// The shared curve at a size: linear in log2(bytes) between points (of the logarithm:
// efficiencies are ratios), flat outside the fitted sizes.
double curve_at(const NcclLinkFit& fit, Bytes bytes) {
  const auto& c = fit.curve;
  if (c.empty()) return 1;
  if (bytes <= c.front().bytes) return c.front().efficiency;
  if (bytes >= c.back().bytes) return c.back().efficiency;
  const auto hi = std::upper_bound(c.begin(), c.end(), bytes, [](Bytes b, const NcclLinkFit::Point& p) { return b < p.bytes; });
  const auto lo = hi - 1;
  const double w = std::log2(bytes / lo->bytes) / std::log2(hi->bytes / lo->bytes);
  return std::exp((1 - w) * std::log(lo->efficiency) + w * std::log(hi->efficiency));
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

double fitted_curve(const NcclLinkFit& fit, Collective op, Bytes bytes) {
  return std::pow(curve_at(fit, bytes), op_fit(fit, op).curve_exponent);
}

double fitted_efficiency(const NcclLinkFit& fit, BytesPerSecond link_bandwidth, Collective op, std::int64_t ranks,
                         Bytes bytes) {
  const NcclOpFit& f = op_fit(fit, op);
  const double F = bus_factor(op, std::min(ranks, std::max<std::int64_t>(fit.max_ranks, 2)));
  double inverse = 1 / f.bus_bandwidth;  // seconds per bus byte at the curve's top
  if (f.buffer_bandwidth > 0) inverse += 1 / (F * f.buffer_bandwidth);
  return fitted_curve(fit, op, bytes) / (link_bandwidth * inverse);
}

Seconds fitted_latency(const NcclLinkFit& fit, Collective op, std::int64_t ranks) {
  const NcclOpFit& f = op_fit(fit, op);
  return f.latency + f.latency_per_step * latency_steps(op, ranks);
}

Seconds fitted_time(const NcclLinkFit& fit, Collective op, std::int64_t ranks, Bytes bytes) {
  // Any reference bandwidth gives the same time; 1 B/s keeps it exact.
  return fitted_latency(fit, op, ranks) + bus_factor(op, ranks) * bytes / fitted_efficiency(fit, 1.0, op, ranks, bytes);
}

double collective_efficiency(const GpuProfile& gpu, LinkClass link, Collective op, std::int64_t ranks, Bytes bytes) {
  if (link == LinkClass::network) return gpu.efficiency.collective_network;
  if (!gpu.nccl.nvlink.present() || !(gpu.nvlink_bandwidth > 0)) return gpu.efficiency.collective_nvlink;
  return fitted_efficiency(gpu.nccl.nvlink, gpu.nvlink_bandwidth, op, ranks, bytes);
}

// The fit was measured on GPUs that all reach each other over NVLink/NVSwitch: it holds
// for switch fabrics. A hybrid cube mesh keeps its own model (rings laid along its links,
// all-to-all over the links each pair has), and PCIe has none.
bool nvlink_fit_applies(const ClusterModel& c) {
  return c.fabric == Fabric::nvswitch && c.gpu.nccl.nvlink.present() && c.gpu.nvlink_bandwidth > 0;
}

std::optional<NvlinkNcclTerms> nvlink_nccl_terms(const ClusterModel& c, Collective op, std::int64_t ranks, Bytes bytes) {
  if (ranks < 2 || !nvlink_fit_applies(c)) return std::nullopt;
  const double eff = collective_efficiency(c.gpu, LinkClass::nvlink, op, ranks, bytes);
  return NvlinkNcclTerms{c.gpu.efficiency.collective_nvlink / eff, fitted_latency(c.gpu.nccl.nvlink, op, ranks)};
}

}  // namespace clustersim
