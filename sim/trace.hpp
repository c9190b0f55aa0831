// Chrome / Perfetto trace (the JSON "traceEvents" format): one process per GPU, one
// thread (track) per stream of that GPU, one complete ("X") slice per op, collective
// and transfer. Times are written in microseconds, as the format wants.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace clustersim::sim {

enum class Stream { compute = 0, tp_comm = 1, pp_comm = 2, dp_comm = 3, ep_comm = 4, network = 5 };

class Trace {
 public:
  void slice(std::int64_t gpu, Stream stream, std::string name, double start_s, double end_s);
  std::size_t size() const { return slices_.size(); }
  // Writes the file; slices sorted by (gpu, stream, start, name) for byte-stable output.
  void write(const std::string& file) const;
  // The slices of GPUs below `max_gpus` on the compute and communication streams (not
  // the per-transfer track), in the same order: [{"gpu", "start_s", "end_s", "kind",
  // "name"}], the timeline format results/README.md describes.
  nlohmann::json timeline(std::int64_t max_gpus) const;

 private:
  struct Slice {
    std::int64_t gpu;
    Stream stream;
    std::string name;
    double start, end;
  };
  std::vector<Slice> sorted() const;
  std::vector<Slice> slices_;
};

}  // namespace clustersim::sim
