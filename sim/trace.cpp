#include "sim/trace.hpp"


#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <stdexcept>
#include <tuple>

#include "scenarios/output_file.hpp"

namespace clustersim::sim {
namespace {
const char* stream_name(Stream s) {
  switch (s) {
    case Stream::compute: return "compute";
    case Stream::tp_comm: return "comm: tensor-parallel";
    case Stream::pp_comm: return "comm: pipeline";
    case Stream::dp_comm: return "comm: data-parallel";
    case Stream::ep_comm: return "comm: expert all-to-all";
    case Stream::network: return "transfers sent";
  }
  return "?";
}
}  // namespace

void Trace::slice(std::int64_t gpu, Stream stream, std::string name, double start_s, double end_s) {
  slices_.push_back({gpu, stream, std::move(name), start_s, end_s});
}

std::vector<Trace::Slice> Trace::sorted() const {
  auto sorted = slices_;
  std::stable_sort(sorted.begin(), sorted.end(), [](const Slice& a, const Slice& b) {
    return std::tie(a.gpu, a.stream, a.start, a.name) < std::tie(b.gpu, b.stream, b.start, b.name);
  });
  return sorted;
}

nlohmann::json Trace::timeline(std::int64_t max_gpus) const {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& s : sorted())
    if (s.gpu < max_gpus && s.stream != Stream::network)
      out.push_back({{"gpu", s.gpu}, {"start_s", s.start}, {"end_s", s.end}, {"kind", stream_name(s.stream)}, {"name", s.name}});
  return out;
}

void Trace::write(const std::string& file) const {
  const auto sorted = this->sorted();
  OutputFile out(file);
  out << "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n";
  bool first = true;
  const auto emit = [&](const nlohmann::json& ev) {
    out << (first ? "" : ",\n") << ev.dump();
    first = false;
  };
  std::set<std::pair<std::int64_t, int>> tracks;
  for (const auto& s : sorted) tracks.insert({s.gpu, static_cast<int>(s.stream)});
  std::set<std::int64_t> gpus;
  for (const auto& [gpu, stream] : tracks) {
    if (gpus.insert(gpu).second)
      emit({{"ph", "M"}, {"name", "process_name"}, {"pid", gpu}, {"tid", 0}, {"args", {{"name", fmt::format("GPU {}", gpu)}}}});
    emit({{"ph", "M"}, {"name", "thread_name"}, {"pid", gpu}, {"tid", stream},
          {"args", {{"name", stream_name(static_cast<Stream>(stream))}}}});
  }
  for (const auto& s : sorted)
    emit({{"ph", "X"}, {"name", s.name}, {"cat", stream_name(s.stream)}, {"pid", s.gpu},
          {"tid", static_cast<int>(s.stream)}, {"ts", s.start * 1e6}, {"dur", (s.end - s.start) * 1e6}});
  out << "\n]}\n";
  out.close();
}

}  // namespace clustersim::sim
