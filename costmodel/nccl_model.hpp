// What NCCL achieves on a link class, as the cost model charges it. One place for the
// estimator and the search (through collective_time) and the simulator (which scales its
// flows by the same figures), so the three cannot drift.
//
// A collective of S bytes (nccl-tests' size) over a group of n ranks takes
//   time = latency(op, n) + bus_factor(op, n) S / (W efficiency(op, n, S))
// with W the link bandwidth per rank and direction (ClusterModel::intra_bandwidth, the
// profile's NVLink bandwidth unless the scenario says otherwise).
//
// Without a fit (every profile but a calibrated one, and the network class), efficiency
// is the profile's constant collective_nvlink or collective_network and the latency
// latency_steps(op, n) hop latencies, as costmodel/collectives.cpp has always charged.
//
// With the profile's nccl section (NVLink groups inside one node), per operation op:
//   latency(op, n)       = a_op + b_op latency_steps(op, n)
//   1 / efficiency       = W (1 / B_op + 1 / (F C_op)) / e(S)^k_op,   F = bus_factor(op, min(n, n_max))
//   e(S)                 = the fitted efficiency-by-size curve, shared by all operations,
//                          linear in log2(S) between fitted sizes and flat outside them
// a_op: NCCL's fixed cost (launch, flag handshakes); b_op: its cost per ring step;
// B_op: the asymptotic bus bandwidth; C_op: a cost per byte of the buffer that does not
// shrink with more ranks (copies and reductions through HBM that the link transfer does
// not hide: what makes 2-GPU rings reach a lower bus bandwidth than 4-GPU ones); k_op: how
// steeply the op climbs the shared curve (LL, then LL128/Simple as messages grow, then the
// pipeline filling: the curve is all-reduce's, k = 1). n_max, the largest group measured,
// caps F: the buffer term's trend over n is not extrapolated. The curve, with S rather than
// S/n as its size, fits both measured group sizes best (calibration/nccl/README.md).
#pragma once
#include <cstdint>
#include <optional>
#include <string_view>

#include "costmodel/collectives.hpp"

namespace clustersim {

enum class LinkClass { nvlink, network };
std::string_view to_string(LinkClass);

// nccl-tests' bus-bandwidth factor: 2(n-1)/n for all-reduce, (n-1)/n for all-gather,
// reduce-scatter and all-to-all, 1 for broadcast and send/recv.
double bus_factor(Collective op, std::int64_t ranks);
// Latency hops of NCCL's ring algorithms: all-reduce 2(n-1); all-gather, reduce-scatter,
// all-to-all, broadcast n-1; send/recv 1.
double latency_steps(Collective op, std::int64_t ranks);

// The model above with a fitted section: efficiency as a fraction of `link_bandwidth`
// (the bandwidth the fit is relative to: the profile's NVLink bandwidth) and latency.
double fitted_efficiency(const NcclLinkFit& fit, BytesPerSecond link_bandwidth, Collective op, std::int64_t ranks,
                         Bytes bytes);
Seconds fitted_latency(const NcclLinkFit& fit, Collective op, std::int64_t ranks);
// The shared curve at this size, to the operation's exponent: e(S)^k_op.
double fitted_curve(const NcclLinkFit& fit, Collective op, Bytes bytes);
// The fitted time of one collective (what the fit compares with the measurements).
Seconds fitted_time(const NcclLinkFit& fit, Collective op, std::int64_t ranks, Bytes bytes);

// The one function both consumers ask: NCCL's efficiency (fraction of the link's
// bandwidth) for this operation, group size and message size on a link class.
double collective_efficiency(const GpuProfile& gpu, LinkClass link, Collective op, std::int64_t ranks, Bytes bytes);

// For a group inside one node: when the profile has a fitted NVLink section and the
// node's fabric is NVLink (not PCIe), the factor on the constant-efficiency ring term
// (collective_nvlink / collective_efficiency) and the fitted latency that replaces the
// hop latencies. nullopt otherwise: today's model applies unchanged.
struct NvlinkNcclTerms {
  double ring_factor = 1;
  Seconds latency = 0;
};
bool nvlink_fit_applies(const ClusterModel& c);
std::optional<NvlinkNcclTerms> nvlink_nccl_terms(const ClusterModel& c, Collective op, std::int64_t ranks, Bytes bytes);

}  // namespace clustersim
