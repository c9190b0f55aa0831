// clustersim gpus: the built-in GPU profiles; clustersim version: provenance.
#include <fmt/format.h>

#include <algorithm>

#include "cli/command.hpp"
#include "costmodel/hardware.hpp"
#include "results/sqlite_info.hpp"
#include "runner/provenance.hpp"
#include "sim/simgrid_info.hpp"

namespace clustersim::cli {
namespace {

int list_gpus() {
  // The name column is as wide as the longest name ("h100-sxm5-80gb-datasheet" pushed
  // its row out of line with a fixed width).
  std::size_t width = 4;
  for (const auto& name : builtin_gpu_names()) width = std::max(width, find_gpu_profile(name)->name.size());
  fmt::print("{:<{}} {:>10} {:>10} {:>9} {:>11} {:>10}  {}\n", "name", width, "bf16", "fp16", "memory", "HBM", "NVLink",
             "status");
  for (const auto& name : builtin_gpu_names()) {
    const auto p = find_gpu_profile(name);
    fmt::print("{:<{}} {:>10} {:>10} {:>9} {:>11} {:>10}  {}\n", p->name, width,
               p->peak_bf16 > 0 ? fmt::format("{:.1f} TF", p->peak_bf16 / 1e12) : "-",
               fmt::format("{:.1f} TF", p->peak_fp16 / 1e12), format_bytes(p->memory_capacity),
               format_bandwidth(p->memory_bandwidth), format_bandwidth(p->nvlink_bandwidth), p->status);
  }
  return 0;
}

const Registration gpus_command{"gpus", "list the built-in GPU profiles",
                                [](CLI::App&) -> Runner { return [] { return list_gpus(); }; }};

const Registration version_command{"version", "print versions and provenance", [](CLI::App&) -> Runner {
                                     return [] {
                                       fmt::print("clustersim {} (git {})\nSimGrid {}\nSQLite {}\n", runner::tool_version,
                                                  runner::git_revision, sim::simgrid_version(),
                                                  results::sqlite_version());
                                       return 0;
                                     };
                                   }};

}  // namespace
}  // namespace clustersim::cli
