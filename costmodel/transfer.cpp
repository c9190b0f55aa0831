// The transfer rules of transfer.hpp, one function each, applied in transfer_profile().
#include "costmodel/transfer.hpp"

#include <algorithm>
#include <string_view>
#include <fmt/format.h>

namespace clustersim {
namespace {

constexpr double kMaxFraction = 0.98;  // no kernel reaches its datasheet peak

double capped(double fraction) { return std::min(fraction, kMaxFraction); }

// fp16 and bf16 run on the same tensor cores at the same rate: a benchmark published
// for one stands for both.
const PublishedPair& gemm_pair(const TransferSpec& spec, DType t) {
  const auto i = static_cast<std::size_t>(t);
  if (spec.gemm[i].present()) return spec.gemm[i];
  if (t == DType::fp16) return spec.gemm[static_cast<std::size_t>(DType::bf16)];
  if (t == DType::bf16) return spec.gemm[static_cast<std::size_t>(DType::fp16)];
  return spec.gemm[i];
}

}  // namespace

double published_fraction_ratio(const PublishedPair& pair, double target_peak, double reference_peak) {
  if (!pair.present() || target_peak <= 0 || reference_peak <= 0) return 1.0;
  return (pair.target / target_peak) / (pair.reference / reference_peak);
}

double published_ceiling(const PublishedPair& pair, double target_peak) {
  if (!pair.present() || target_peak <= 0) return 0.0;
  return capped(pair.target / target_peak);
}

double per_sm_throughput_ratio(const GpuProfile& target, const GpuProfile& reference, DType t) {
  const double tp = target.peak(t), rp = reference.peak(t);
  if (tp <= 0 || rp <= 0 || target.sms <= 0 || reference.sms <= 0) return 1.0;
  return (tp / target.sms) / (rp / reference.sms);
}

// The first source transfer_profile appends; everything after it is the transfer's too.
constexpr std::string_view kTransferredLine = "efficiency figures transferred from the calibrated";

GpuProfile transfer_profile(const GpuProfile& ref, const GpuProfile& target, std::vector<std::string>* notes) {
  GpuProfile p = target;  // datasheet: SMs, L2, peaks, memory, NVLink, PCIe, sources
  const TransferSpec& spec = target.transfer;
  auto note = [&](std::string line) {
    if (notes) notes->push_back(std::move(line));
  };
  const auto dt = [](DType t) { return static_cast<std::size_t>(t); };

  // GEMM per compute type: the reference's measured fraction of peak, moved by the
  // published pair; k_half by throughput per SM; residuals by shape kept.
  p.calibration = Calibration{};
  p.calibration.source = ref.calibration.source;
  p.calibration.provenance = {{"transferred_from", ref.name}, {"reference", ref.calibration.provenance}};
  for (DType t : {DType::fp32, DType::tf32, DType::fp16, DType::bf16, DType::fp8}) {
    const auto& rc = ref.calibration.gemm[dt(t)];
    if (!rc.calibrated() || target.peak(t) <= 0) continue;
    auto& c = p.calibration.gemm[dt(t)];
    const PublishedPair& pair = gemm_pair(spec, t);
    const double ratio = published_fraction_ratio(pair, target.peak(t), ref.peak(t));
    c.gemm_max = capped(rc.gemm_max * ratio);
    c.k_half = rc.k_half * per_sm_throughput_ratio(target, ref, t);
    c.points = rc.points;
    c.ceiling = published_ceiling(pair, target.peak(t));
    note(fmt::format("gemm {}: max {:.3f} (reference {:.3f} x published ratio {:.3f}), k_half {:.0f} (reference {:.0f}), "
                     "ceiling {:.3f}",
                     to_string(t), c.gemm_max, rc.gemm_max, ratio, c.k_half, rc.k_half, c.ceiling));
  }
  // The uncalibrated-dtype default follows the 16-bit tensor-core figure.
  const DType half = target.peak_bf16 > 0 ? DType::bf16 : DType::fp16;
  const double gemm_ratio = published_fraction_ratio(gemm_pair(spec, half), target.peak(half), ref.peak(half));
  p.efficiency.gemm_max = capped(ref.efficiency.gemm_max * gemm_ratio);
  p.efficiency.gemm_k_half = ref.efficiency.gemm_k_half * per_sm_throughput_ratio(target, ref, half);

  // Fused attention: the measured curve over sequence length, moved by the published pair.
  const double att_ratio = published_fraction_ratio(spec.attention, target.peak(half), ref.peak(half));
  p.efficiency.attention = capped(ref.efficiency.attention * att_ratio);
  if (ref.calibration.attention.calibrated()) {
    auto& a = p.calibration.attention;
    a = ref.calibration.attention;
    a.forward_max = capped(a.forward_max * att_ratio);
    a.backward_max = capped(a.backward_max * att_ratio);
    note(fmt::format("attention: forward max {:.3f}, backward max {:.3f} (published ratio {:.3f})", a.forward_max,
                     a.backward_max, att_ratio));
  }
  // cuDNN's fused attention runs kernels of its own per architecture (sm90's are built on
  // wgmma and TMA): its measured curve carries over only to a GPU of the reference's
  // compute capability (the H200 and H800 from the H100), unchanged, as no public
  // benchmark pairs it; elsewhere the target has none.
  if (ref.calibration.attention_cudnn.calibrated() && !target.compute_capability.empty() &&
      target.compute_capability == ref.compute_capability) {
    p.calibration.attention_cudnn = ref.calibration.attention_cudnn;
    note(fmt::format("cuDNN attention: the reference's curve (compute capability {})", ref.compute_capability));
  }

  // Memory-bound kernels: fraction of HBM bandwidth moved by the published pair, half
  // sizes scaled with the bandwidth (the same latency needs more bytes in flight).
  const double mem_ratio = published_fraction_ratio(spec.memory, target.memory_bandwidth, ref.memory_bandwidth);
  const double bw_ratio = target.memory_bandwidth > 0 && ref.memory_bandwidth > 0
                              ? target.memory_bandwidth / ref.memory_bandwidth
                              : 1.0;
  auto& e = p.efficiency;
  const auto& re = ref.efficiency;
  e.memory = capped(re.memory * mem_ratio);
  e.memory_half_size = re.memory_half_size * bw_ratio;
  for (MemoryKind k : kMemoryKinds) {
    const auto i = static_cast<std::size_t>(k);
    e.memory_by_kind[i] = re.memory_by_kind[i] > 0 ? capped(re.memory_by_kind[i] * mem_ratio) : 0;
    e.memory_half_size_by_kind[i] = re.memory_half_size_by_kind[i] * bw_ratio;
  }
  note(fmt::format("memory: efficiency {:.3f} (published ratio {:.3f}), half sizes x {:.3f}", e.memory, mem_ratio,
                   bw_ratio));

  // What the GPU's generation does not change in the model: the kernel launch cost, the
  // host's dispatch, and how NCCL kernels and compute slow each other.
  e.kernel_overhead = re.kernel_overhead;
  e.sync_launch_latency = re.sync_launch_latency;
  e.launch_submit = re.launch_submit;
  e.collective_nvlink = re.collective_nvlink;
  e.collective_network = re.collective_network;
  p.host = ref.host;
  p.interference = ref.interference;

  // NCCL over NVLink: bus bandwidth with the links, the per-buffer term with HBM.
  p.nccl = NcclCalibration{};
  if (ref.nccl.present() && target.nvlink_bandwidth > 0 && ref.nvlink_bandwidth > 0) {
    p.nccl = ref.nccl;
    const double link_ratio = target.nvlink_bandwidth / ref.nvlink_bandwidth;
    for (auto& op : p.nccl.nvlink.ops) {
      op.bus_bandwidth *= link_ratio;
      op.buffer_bandwidth *= bw_ratio;
    }
    // The efficiency-by-size curve is latency hiding: the same latency on slower links is
    // covered by proportionally fewer bytes, so the curve moves along the size axis.
    for (auto& pt : p.nccl.nvlink.curve) pt.bytes *= link_ratio;
    note(fmt::format("nccl: bus bandwidth and curve sizes x {:.3f} (NVLink), buffer term x {:.3f} (HBM)", link_ratio,
                     bw_ratio));
  }

  p.status = "transferred";
  p.sources.push_back(fmt::format(
      "{} {} profile by costmodel/transfer (fractions of peak x "
      "published ratios: gemm {:.3f}, attention {:.3f}, HBM {:.3f}; k_half x {:.3f}; memory half sizes x {:.3f})",
      kTransferredLine, ref.name, gemm_ratio, att_ratio, mem_ratio, per_sm_throughput_ratio(target, ref, half),
      bw_ratio));
  for (const auto* pair : {&spec.gemm[dt(DType::fp16)], &spec.gemm[dt(DType::bf16)], &spec.gemm[dt(DType::fp8)],
                           &spec.attention, &spec.memory})
    if (pair->present() && !pair->source.empty() &&
        std::find(p.sources.begin(), p.sources.end(), pair->source) == p.sources.end())
      p.sources.push_back(pair->source);
  return p;
}

std::vector<std::string> datasheet_sources(const GpuProfile& transferred) {
  std::vector<std::string> out;
  for (const auto& s : transferred.sources) {
    if (s.rfind(kTransferredLine, 0) == 0) break;
    out.push_back(s);
  }
  return out;
}

}  // namespace clustersim
