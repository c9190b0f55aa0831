// clustersim calibrate fit MICROBENCH.json [--base PROFILE] [--name NAME] [--out FILE]
// fits a GPU profile to microbenchmark measurements and reports its error on the
// held-back samples.
#include <fmt/format.h>
#include <fstream>
#include <memory>

#include "cli/command.hpp"
#include "costmodel/calibration.hpp"
#include "scenarios/diagnostics.hpp"

namespace clustersim::cli {
namespace {

struct FitCommand {
  std::string data_file, attention_file, base = "h100-sxm5-80gb-datasheet", name, out;
  int holdout = 5;
};

std::string row(const char* what, const ErrorStats& e) {
  return fmt::format("  {:<34} n={:<4} median {:5.2f}%  p90 {:6.2f}%  max {:6.2f}%\n", what, e.count, 100 * e.median,
                     100 * e.p90, 100 * e.max);
}

int fit(const FitCommand& c) {
  const auto base = find_gpu_profile(c.base);
  if (!base) throw InputError("<command line>", "--base", fmt::format("no GPU profile \"{}\" (see clustersim gpus)", c.base));
  Microbenchmarks data = read_microbenchmarks(c.data_file);
  if (!c.attention_file.empty()) read_attention_benchmarks(c.attention_file, data);
  FitReport rep;
  const GpuProfile fitted = fit_profile(*base, data, {c.holdout, c.name}, &rep);
  fmt::print("calibrated profile {} from {} ({} GEMM and {} memory-bound samples, every {}th held back)\n",
             fitted.name, data.file, data.gemm.size(), data.memory.size(), c.holdout);
  fmt::print("memory-bound: efficiency {:.3f} of {}, half-rate size {}, kernel overhead {}\n", rep.memory_efficiency,
             format_bandwidth(fitted.memory_bandwidth), format_bytes(rep.memory_half_size),
             format_seconds(rep.kernel_overhead));
  for (MemoryKind k : kMemoryKinds) {
    const auto i = static_cast<std::size_t>(k);
    if (fitted.efficiency.memory_by_kind[i] > 0)
      fmt::print("  {:<12} efficiency {:.3f}, half-rate size {}\n", to_string(k), fitted.efficiency.memory_by_kind[i],
                 format_bytes(fitted.efficiency.memory_half_size_by_kind[i]));
  }
  fmt::print("{}", row("memory-bound kernels, held back", rep.memory_held_back));
  for (const auto& g : rep.gemm) {
    fmt::print("GEMM {:<5} gemm_max {:.3f}  k_half {:>3.0f}  ({} training shapes)\n", to_string(g.dtype), g.gemm_max,
               g.k_half, g.train);
    fmt::print("{}", row("  parametric model, held back", g.parametric));
    fmt::print("{}", row("  with interpolation, held back", g.held_back));
  }
  fmt::print("{}", row("all GEMMs with interpolation, held back", rep.gemm_held_back));
  if (!data.attention.empty()) {
    const auto& a = fitted.calibration.attention;
    fmt::print("flash attention: forward max {:.3f} s_half {:.0f}, backward max {:.3f} s_half {:.0f} ({} shapes)\n",
               a.forward_max, a.forward_s_half, a.backward_max, a.backward_s_half, data.attention.size());
    fmt::print("{}", row("  forward, held back", rep.attention_forward_held_back));
    fmt::print("{}", row("  backward, held back", rep.attention_backward_held_back));
  }
  fmt::print("{}", row("every held-back point", rep.all_held_back));
  if (!c.out.empty()) {
    std::ofstream(c.out) << to_json(fitted).dump(2) << '\n';
    fmt::print("wrote {}\n", c.out);
  }
  return 0;
}

const Registration calibrate_command{
    "calibrate", "fit GPU profiles to calibration measurements", [](CLI::App& sub) -> Runner {
      sub.require_subcommand(1);
      auto c = std::make_shared<FitCommand>();
      auto* f = sub.add_subcommand("fit", "fit a profile to a clustersim-microbench JSON file");
      f->add_option("FILE", c->data_file, "microbenchmark results (calibration/data/...)")->required();
      f->add_option("--attention", c->attention_file, "fused-attention timings (clustersim-sdpa-flash JSON)");
      f->add_option("--base", c->base, "profile whose datasheet figures the fit starts from");
      f->add_option("--name", c->name, "name of the fitted profile (default: the base's)");
      f->add_option("--out", c->out, "write the fitted profile to this file");
      f->add_option("--holdout", c->holdout, "hold back every Nth sample for the error report (0: none)")
          ->check(CLI::Range(0, 1000));
      return [c, f] { return f->parsed() ? fit(*c) : 2; };
    }};

}  // namespace
}  // namespace clustersim::cli
