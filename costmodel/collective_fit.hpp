// Fitting NCCL's cost model (costmodel/nccl_model.hpp, which has the equations) to NCCL
// measurements (calibration/nccl output, "clustersim-nccl-bench/1"): per link class (NVLink
// inside a node; the network when the data span nodes), per operation a latency and its
// growth per ring step, an asymptotic bus bandwidth and a per-buffer-byte term, and one
// efficiency-by-size curve shared by all operations (each climbing it with its own
// exponent). One-rank samples are local copies, not link measurements, and are skipped.
//
// The fit alternates two steps, all in relative error (1 KiB and 4 GiB weigh the same):
//   (1) per operation, with the curve fixed: latency, per-step latency, 1/bus bandwidth
//       and 1/buffer bandwidth by linear least squares (each sample the row
//       (1, steps, F S / e, S / e) / t = 1); a term that comes out negative is dropped
//       and the rest refitted; the curve exponent by a grid search (all-reduce's is 1:
//       the curve is its shape). Terms the data cannot separate are not fitted: the
//       per-step latency when every sample has the same step count (send/recv), the
//       buffer term when the bus factor never changes (broadcast, send/recv).
//   (2) with the operations fixed: per power-of-two size, the median over operations and
//       group sizes of the efficiency each sample implies, capped at 1.
// A fixed number of rounds; the same data give the same fit, bit for bit.
#pragma once
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "costmodel/collectives.hpp"
#include "costmodel/hardware.hpp"
#include "costmodel/nccl_model.hpp"

namespace clustersim {

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

struct RelativeError {
  std::size_t count = 0;
  double median = 0, p90 = 0, max = 0;  // |predicted - measured| / measured
};
RelativeError relative_error(std::vector<double> errors);

struct PredictedSample {
  CollectiveSample sample;
  Seconds predicted = 0;
  double error() const { return std::abs(predicted - sample.time) / sample.time; }
};

struct LinkFit {
  LinkClass link = LinkClass::nvlink;
  std::size_t train = 0, held_back = 0;
  NcclLinkFit model;
  // The held-back samples with their predictions (every sample when none was held back).
  std::vector<PredictedSample> tested;

  Seconds predict(Collective op, std::int64_t ranks, Bytes bytes) const { return fitted_time(model, op, ranks, bytes); }
  // Error over the tested samples with min_bytes <= bytes < max_bytes (and one op).
  RelativeError error(Bytes min_bytes = 0, Bytes max_bytes = 1e300, std::optional<Collective> op = std::nullopt) const;
};

struct CollectiveFitOptions {
  int holdout_every = 5;   // every Nth multi-rank sample of a link class (file order) is held back; 0: none
  int holdout_offset = -1;  // which of each N: i % N == offset; -1 the last (N - 1)
  int rounds = 25;          // alternations of the two steps
};

struct CollectiveFit {
  std::vector<std::string> sources;
  nlohmann::json provenance = nlohmann::json::array();  // per source, the lines that identify the run
  std::vector<LinkFit> links;                            // the classes the data cover, nvlink first
  const LinkFit* find(LinkClass l) const;
};

// Fits all files together (e.g. the 2- and 4-GPU runs), samples taken in file order.
// Throws InputError when the data hold no sample with two or more ranks, or a link class
// lacks an operation (the profile section needs all six).
CollectiveFit fit_collectives(const std::vector<CollectiveBenchmarks>& data, const CollectiveFitOptions& options);

// `base` with the NVLink fit as its nccl section, and collective_nvlink (the platform's
// NVLink flow rate and the constant that multi-node rings use) set to the highest
// asymptotic efficiency of any operation, capped at 1 (with a note in `notes`), so that
// the fitted factor on it is >= 1 and flows are never faster than NCCL was measured. The
// network class has no GPU-profile field: its figures are only reported.
GpuProfile apply_collective_fit(const GpuProfile& base, const CollectiveFit& fit, std::vector<std::string>* notes);

nlohmann::json to_json(const CollectiveFit& fit);

}  // namespace clustersim
