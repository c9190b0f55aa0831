// Fitting the collective cost model to NCCL measurements (calibration/nccl output,
// "clustersim-nccl-bench/1"). Per link class (NVLink inside a node; the network when
// the data span nodes) it fits the alpha-beta model that costmodel/collectives.cpp uses,
//   time = latency_steps(op, n) * alpha + bus_factor(op, n) * bytes / bus_bandwidth,
// by least squares on relative error, then an efficiency-by-message-size curve: the
// median of (alpha-beta time / measured time) per power-of-two size, interpolated in
// log2(bytes), for the sizes where protocol changes make NCCL slower than the two
// numbers say. One-rank samples are local copies, not link measurements, and are skipped.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "costmodel/collectives.hpp"
#include "costmodel/hardware.hpp"

namespace clustersim {

enum class LinkClass { nvlink, network };
std::string_view to_string(LinkClass);

struct CollectiveSample {
  Collective op = Collective::all_reduce;
  std::int64_t ranks = 1;
  std::int64_t nodes = 1;
  Bytes bytes = 0;  // nccl-tests' size (see calibration/README.md)
  Seconds time = 0;
  LinkClass link() const { return nodes > 1 ? LinkClass::network : LinkClass::nvlink; }
};

struct CollectiveBenchmarks {
  std::string file;
  nlohmann::json provenance;
  std::vector<CollectiveSample> samples;
  bool checks_passed = true;  // the benchmark's correctness checks
};

// Reads a clustersim-nccl-bench/1 file; bad content is an InputError with JSON paths.
CollectiveBenchmarks read_collective_benchmarks(const std::string& file);

// nccl-tests' bus-bandwidth factor, and the alpha count of the ring algorithms that
// costmodel/collectives.cpp charges (all-reduce 2(n-1); all-gather, reduce-scatter,
// all-to-all, broadcast n-1; send/recv 1).
double bus_factor(Collective op, std::int64_t ranks);
double latency_steps(Collective op, std::int64_t ranks);
Seconds alpha_beta_time(Collective op, std::int64_t ranks, Bytes bytes, Seconds alpha, BytesPerSecond bus_bandwidth);

struct RelativeError {
  std::size_t count = 0;
  double median = 0, p90 = 0, max = 0;  // |predicted - measured| / measured
};

struct LinkFit {
  LinkClass link = LinkClass::nvlink;
  std::size_t train = 0, held_back = 0;
  Seconds alpha = 0;
  BytesPerSecond bus_bandwidth = 0;
  struct SizePoint {
    double log2_bytes = 0;
    double efficiency = 1;  // alpha-beta time / measured time (median over ops, rank counts)
    std::size_t samples = 0;
  };
  std::vector<SizePoint> efficiency_by_size;  // ascending log2_bytes
  RelativeError alpha_beta_error;  // on held-back samples (all samples when none are held back)
  RelativeError curve_error;       // the same samples, with the efficiency curve

  // Efficiency at a message size: linear in log2(bytes) between points, flat outside.
  double efficiency(Bytes bytes) const;
  Seconds predict(Collective op, std::int64_t ranks, Bytes bytes) const;
};

struct CollectiveFitOptions {
  int holdout_every = 5;  // every Nth multi-rank sample (file order) is held back; 0: none
};

struct CollectiveFit {
  std::string source;
  nlohmann::json provenance;
  std::vector<LinkFit> links;  // the classes the data cover, nvlink first
  const LinkFit* find(LinkClass l) const;
};

// Throws InputError when the data hold no sample with two or more ranks.
CollectiveFit fit_collectives(const CollectiveBenchmarks& data, const CollectiveFitOptions& options);

// `base` with the NVLink fit applied: nvlink latency = alpha and efficiency.collective_nvlink
// = bus bandwidth / nvlink bandwidth (the cost model's ring term is bytes / (that product)),
// capped at 1 with a note in `notes`. The network class has no GPU-profile field: its
// figures belong in a scenario's inter_node block and are only reported.
GpuProfile apply_collective_fit(const GpuProfile& base, const CollectiveFit& fit, std::vector<std::string>* notes);

nlohmann::json to_json(const CollectiveFit& fit);

}  // namespace clustersim
