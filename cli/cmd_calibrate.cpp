// clustersim calibrate import MICROBENCH.json [--attention SDPA.json ...] --profile NAME [--db DB]
// stores the samples in the results database.
// clustersim calibrate fit (MICROBENCH.json [--attention SDPA.json ...] | --db DB --hardware NAME)
//   [--eager EAGER_KERNELS.json] [--host HOST_DISPATCH.json] [--nccl NCCL_BENCH.json ...] [--base PROFILE] [--name NAME] [--out FILE]
// fits a GPU profile to microbenchmark measurements (and NCCL collectives) and reports
// its error on the held-back samples.
// clustersim calibrate fit-collectives NCCL_BENCH.json... [--base PROFILE] [--out FILE]
// fits NCCL's per-operation latency, bus bandwidth and efficiency by size per link class
// (costmodel/nccl_model.hpp) to NCCL benchmark data (calibration/nccl) and applies the
// NVLink fit to a profile.
#include <cmath>
#include <fmt/format.h>
#include <fstream>
#include <memory>
#include <tuple>

#include "cli/command.hpp"
#include "costmodel/calibration.hpp"
#include "costmodel/collective_fit.hpp"
#include "runner/calibration_store.hpp"
#include "runner/uncertainty_table.hpp"
#include "runner/store.hpp"
#include "scenarios/diagnostics.hpp"
#include "scenarios/output_file.hpp"

namespace clustersim::cli {
namespace {

struct FitCommand {
  std::string data_file, base = "h100-sxm5-80gb-datasheet", name, out;
  std::vector<std::string> attention_files;  // one per kernel library (FlashAttention-2, cuDNN)
  // eager PyTorch kernels by access path (measure_eager_kernels.py); a path measured in an
  // earlier file is not read again from a later one
  std::vector<std::string> eager_files;
  std::string launch_file;   // launch figures from another microbenchmark file (--only launch)
  std::string host_file;     // host dispatch costs (measure_host.py)
  std::string dtensor_bias_file;  // DTensor GPT steps with and without biases (measure_parallel.py)
  std::vector<std::string> dtensor_optimizer_files;  // DTensor optimizer steps (measure_dtensor_params.py)
  std::vector<std::string> dtensor_loss_files;  // DTensor loss_parallel (measure_dtensor_params.py --loss-only)
  std::vector<std::string> inference_host_files;  // eager inference forward (measure_inference_host.py)
  std::string gemm_launches_file;                 // kernels per linear (measure_gemm_launches.py)
  std::string overlap_file;  // overlap interference (calibration/nccl's overlap benchmark)
  std::vector<std::string> nccl_files;
  std::string db, hardware;  // fit from samples stored by `calibrate import`
  int holdout = 5;
};

struct ImportCommand {
  std::string data_file, profile, db = runner::default_db_file;
  std::vector<std::string> attention_files;
};

int import(const ImportCommand& c) {
  const auto profile = find_gpu_profile(c.profile);
  if (!profile)
    throw InputError("<command line>", "--profile", fmt::format("no GPU profile \"{}\" (see clustersim gpus)", c.profile));
  Microbenchmarks data = read_microbenchmarks(c.data_file);
  for (const auto& f : c.attention_files) read_attention_benchmarks(f, data);
  const runner::ImportCount n = runner::import_calibration_samples(c.db, data, *profile);
  fmt::print("{}: stored {} calibration samples for {} ({} already there, skipped)\n", c.db, n.stored, profile->name,
             n.skipped);
  return 0;
}

std::string row(const char* what, const ErrorStats& e) {
  return fmt::format("  {:<34} n={:<4} median {:5.2f}%  p90 {:6.2f}%  max {:6.2f}%\n", what, e.count, 100 * e.median,
                     100 * e.p90, 100 * e.max);
}

std::string error_row(const std::string& what, const RelativeError& e) {
  return fmt::format("  {:<30} n={:<4} median {:6.2f}%  p90 {:6.2f}%  max {:6.2f}%\n", what, e.count, 100 * e.median,
                     100 * e.p90, 100 * e.max);
}

// Reads the NCCL files, fits them, prints the fit and its held-back error.
CollectiveFit fit_and_report_collectives(const std::vector<std::string>& files, int holdout) {
  std::vector<CollectiveBenchmarks> data;
  std::size_t samples = 0;
  for (const auto& f : files) {
    data.push_back(read_collective_benchmarks(f));
    samples += data.back().samples.size();
    if (!data.back().checks_passed) fmt::print("warning: the benchmark's correctness check failed in {}\n", f);
  }
  const CollectiveFit fit = fit_collectives(data, {holdout});
  fmt::print("collective fit from {} file(s), {} samples (NCCL {})\n", files.size(), samples,
             data.front().provenance.value("nccl_version", "?"));
  for (const auto& l : fit.links) {
    fmt::print("{}: {} training samples, {} held back; groups up to {} ranks\n", to_string(l.link), l.train, l.held_back,
               l.model.max_ranks);
    fmt::print("  {:<15} {:>9} {:>9} {:>10} {:>10} {:>8}\n", "operation", "latency", "per step", "bus bw", "buffer bw",
               "exponent");
    for (std::size_t i = 0; i < kNcclOpNames.size(); ++i) {
      const auto& o = l.model.ops[i];
      fmt::print("  {:<15} {:>9} {:>9} {:>10} {:>10} {:>8.2f}\n", kNcclOpNames[i], format_seconds(o.latency),
                 format_seconds(o.latency_per_step), format_bandwidth(o.bus_bandwidth),
                 o.buffer_bandwidth > 0 ? format_bandwidth(o.buffer_bandwidth) : std::string("-"), o.curve_exponent);
    }
    fmt::print("  efficiency by size:");
    for (const auto& pt : l.model.curve) fmt::print(" {}:{:.3f}", format_bytes(pt.bytes), pt.efficiency);
    fmt::print("\n");
    const char* what = l.held_back ? "held back" : "fitted samples";
    fmt::print("{}", error_row(fmt::format("{}, all sizes", what), l.error()));
    fmt::print("{}", error_row(fmt::format("{}, >= 64 KiB", what), l.error(65536)));
    fmt::print("{}", error_row(fmt::format("{}, < 64 KiB", what), l.error(0, 65536)));
    for (std::size_t i = 0; i < kNcclOpNames.size(); ++i)
      fmt::print("{}", error_row(fmt::format("  {} >= 64 KiB", kNcclOpNames[i]),
                                 l.error(65536, 1e300, static_cast<Collective>(i))));
  }
  return fit;
}

int fit(const FitCommand& c) {
  const auto base = find_gpu_profile(c.base);
  if (!base) throw InputError("<command line>", "--base", fmt::format("no GPU profile \"{}\" (see clustersim gpus)", c.base));
  Microbenchmarks data;
  if (!c.db.empty()) {
    if (c.hardware.empty()) throw InputError("<command line>", "--hardware", "--db needs --hardware NAME");
    data = runner::load_calibration_samples(c.db, c.hardware);
  } else {
    if (c.data_file.empty()) throw InputError("<command line>", "FILE", "give a microbenchmark file or --db and --hardware");
    data = read_microbenchmarks(c.data_file);
    for (const auto& f : c.attention_files) read_attention_benchmarks(f, data);
  }
  for (const auto& f : c.eager_files) read_eager_kernels(f, data);
  if (!c.launch_file.empty()) read_launch_section(c.launch_file, data);
  FitReport rep;
  GpuProfile fitted = fit_profile(*base, data, {c.holdout, c.name}, &rep);
  if (!c.launch_file.empty())
    fitted.sources.push_back(fmt::format(
        "kernel launches (kernel_overhead {:.2f} us: {}) measured by clustersim-microbench --only launch: {}",
        1e6 * fitted.efficiency.kernel_overhead,
        rep.kernel_overhead_queued ? "kernels queued behind a spin kernel, the host ahead" : "back-to-back launches",
        c.launch_file));
  for (const auto& f : c.eager_files)
    fitted.sources.push_back("eager PyTorch kernels by access path measured by "
                             "calibration/training/measure_eager_kernels.py: " + f);
  if (!c.host_file.empty()) {
    fitted.host = fit_host_dispatch(c.host_file);
    fitted.sources.push_back("host dispatch measured by calibration/training/measure_host.py: " + c.host_file);
  }
  if (!c.dtensor_bias_file.empty()) {
    if (c.host_file.empty())
      throw InputError("<command line>", "--dtensor-bias", "needs --host (the eager host rate the cost is carried to)");
    fitted.host.dtensor_bias = fit_dtensor_bias(c.dtensor_bias_file, fitted.host.eager_per_kernel);
    fitted.sources.push_back("DTensor bias host cost from host-bound GPT steps with and without biases "
                             "(calibration/training/measure_parallel.py --dtp-gpt-bias): " + c.dtensor_bias_file);
  }
  if (!c.dtensor_optimizer_files.empty()) {
    if (c.host_file.empty())
      throw InputError("<command line>", "--dtensor-optimizer", "needs --host (the eager host rate the cost is carried to)");
    fitted.host.dtensor_optimizer_param = fit_dtensor_optimizer(c.dtensor_optimizer_files, fitted.host.eager_per_kernel);
    std::string files;
    for (const auto& f : c.dtensor_optimizer_files) files += (files.empty() ? "" : ", ") + f;
    fitted.sources.push_back("DTensor parameter host cost of the fused AdamW step (calibration/training/"
                             "measure_dtensor_params.py): " + files);
  }
  if (!c.dtensor_loss_files.empty()) {
    if (c.host_file.empty())
      throw InputError("<command line>", "--dtensor-loss", "needs --host (the eager host rate the cost is carried to)");
    std::tie(fitted.host.dtensor_loss_forward, fitted.host.dtensor_loss_backward) =
        fit_dtensor_loss(c.dtensor_loss_files, fitted.host.eager_per_kernel);
    std::string files;
    for (const auto& f : c.dtensor_loss_files) files += (files.empty() ? "" : ", ") + f;
    fitted.sources.push_back("DTensor loss_parallel host cost (calibration/training/measure_dtensor_params.py "
                             "--loss-only): " + files);
  }
  if (!c.inference_host_files.empty()) {
    if (c.host_file.empty())
      throw InputError("<command line>", "--inference-host", "needs --host (the host dispatch section it joins)");
    const InferenceHost ih = fit_inference_host(c.inference_host_files);
    fitted.host.inference_per_kernel = ih.per_kernel;
    fitted.host.inference_forward = ih.forward;
    std::string files;
    for (const auto& f : c.inference_host_files) files += (files.empty() ? "" : ", ") + f;
    fitted.sources.push_back("eager inference forward host cost of transformers' Llama "
                             "(calibration/serving/measure_inference_host.py): " + files);
  }
  if (!c.gemm_launches_file.empty()) {
    fitted.calibration.gemm_launches = read_gemm_launches(c.gemm_launches_file);
    fitted.sources.push_back("kernels per 16-bit linear (cuBLAS's split-K reductions and memsets) measured by "
                             "calibration/serving/measure_gemm_launches.py: " + c.gemm_launches_file);
  }
  if (!c.overlap_file.empty()) {
    fitted.interference = fit_overlap_interference(c.overlap_file);
    fitted.sources.push_back("overlap interference measured by calibration/nccl (clustersim-overlap-bench): " +
                             c.overlap_file);
  }
  fmt::print("calibrated profile {} from {} ({} GEMM and {} memory-bound samples, every {}th held back)\n",
             fitted.name, data.file, data.gemm.size(), data.memory.size(), c.holdout);
  fmt::print("memory-bound: efficiency {:.3f} of {}, half-rate size {}, kernel overhead {}\n", rep.memory_efficiency,
             format_bandwidth(fitted.memory_bandwidth), format_bytes(rep.memory_half_size),
             format_seconds(rep.kernel_overhead));
  for (MemoryKind k : kMemoryKinds) {
    const auto i = static_cast<std::size_t>(k);
    if (fitted.efficiency.memory_by_kind[i] > 0)
      fmt::print("  {:<13} efficiency {:.3f}, half-rate size {}\n", to_string(k), fitted.efficiency.memory_by_kind[i],
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
  for (AttentionKernel kernel : {AttentionKernel::flash2, AttentionKernel::cudnn}) {
    const auto k = static_cast<std::size_t>(kernel);
    if (data.attention[k].empty()) continue;
    const auto& a = kernel == AttentionKernel::flash2 ? fitted.calibration.attention : fitted.calibration.attention_cudnn;
    fmt::print("{} attention: forward max {:.3f} s_half {:.0f}, backward max {:.3f} s_half {:.0f} ({} shapes)\n",
               kernel == AttentionKernel::flash2 ? "flash" : "cuDNN", a.forward_max, a.forward_s_half, a.backward_max,
               a.backward_s_half, data.attention[k].size());
    fmt::print("{}", row("  forward, held back", rep.attention_forward_held_back[k]));
    fmt::print("{}", row("  backward, held back", rep.attention_backward_held_back[k]));
  }
  fmt::print("{}", row("every held-back point", rep.all_held_back));
  if (fitted.interference.present())
    fmt::print("overlap interference: GEMMs x{:.3f} beside a collective, collectives x{:.3f} beside GEMMs\n",
               fitted.interference.compute, fitted.interference.comm);
  if (fitted.host.present()) {
    const auto& h = fitted.host;
    fmt::print("host dispatch: {} per kernel eager; a DTensor parallel-style module {} forward, {} backward, its bias {}, "
               "a DTensor parameter in the optimizer step {}, the loss_parallel cross entropy {} forward, {} backward; "
               "DDP {} per layer; FSDP per unit {} (fp32), {} (mixed precision), {} (FSDP2)\n",
               format_seconds(h.eager_per_kernel), format_seconds(h.dtensor_module_forward),
               format_seconds(h.dtensor_module_backward), format_seconds(h.dtensor_bias),
               format_seconds(h.dtensor_optimizer_param), format_seconds(h.dtensor_loss_forward),
               format_seconds(h.dtensor_loss_backward), format_seconds(h.ddp_per_layer),
               format_seconds(h.fsdp_per_unit), format_seconds(h.fsdp_mixed_per_unit), format_seconds(h.fsdp2_per_unit));
    if (h.inference_per_kernel > 0)
      fmt::print("eager inference (transformers' Llama, inference mode): {} per kernel, {} per forward outside "
                 "its kernels\n",
                 format_seconds(h.inference_per_kernel), format_seconds(h.inference_forward));
  }
  if (!c.nccl_files.empty()) {
    std::vector<std::string> notes;
    fitted = apply_collective_fit(fitted, fit_and_report_collectives(c.nccl_files, c.holdout), &notes);
    fmt::print("NVLink collectives: collective_nvlink {:.3f} of {}\n", fitted.efficiency.collective_nvlink,
               format_bandwidth(fitted.nvlink_bandwidth));
    for (const auto& n : notes) fmt::print("note: {}\n", n);
  }
  if (base->status == "transferred") {
    // What this fit did not measure stays as the transfer carried it from the reference GPU:
    // said in the profile, since its status now reads calibrated.
    std::string kept;
    const auto keep = [&](bool refitted, const char* what) {
      if (!refitted) kept += (kept.empty() ? "" : ", ") + std::string(what);
    };
    keep(!c.host_file.empty(), "host dispatch");
    keep(!c.nccl_files.empty(), "NCCL collectives");
    keep(!c.overlap_file.empty(), "overlap interference");
    if (!kept.empty()) {
      fitted.sources.push_back(fmt::format("not measured on this GPU, kept as transferred from {}: {}",
                                           base->transfer.from, kept));
      fmt::print("note: not refitted, kept as transferred from {}: {}\n", base->transfer.from, kept);
    }
  }
  if (!c.out.empty()) {
    write_text_file(c.out, to_json(fitted).dump(2) + '\n');
    fmt::print("wrote {}\n", c.out);
  }
  return 0;
}

struct FitCollectivesCommand {
  std::vector<std::string> data_files;
  std::string base = "h100-sxm5-80gb", name, out, fit_out;
  int holdout = 5;
};

int fit_collectives_command(const FitCollectivesCommand& c) {
  const auto base = find_gpu_profile(c.base);
  if (!base) throw InputError("<command line>", "--base", fmt::format("no GPU profile \"{}\" (see clustersim gpus)", c.base));
  const CollectiveFit fit = fit_and_report_collectives(c.data_files, c.holdout);
  std::vector<std::string> notes;
  GpuProfile fitted = apply_collective_fit(*base, fit, &notes);
  if (!c.name.empty()) fitted.name = c.name;
  fmt::print("profile {}: NVLink collectives from the fit, collective_nvlink {:.3f} of {}\n", fitted.name,
             fitted.efficiency.collective_nvlink, format_bandwidth(fitted.nvlink_bandwidth));
  for (const auto& n : notes) fmt::print("note: {}\n", n);
  if (!c.out.empty()) {
    write_text_file(c.out, to_json(fitted).dump(2) + '\n');
    fmt::print("wrote {}\n", c.out);
  }
  if (!c.fit_out.empty()) {
    write_text_file(c.fit_out, to_json(fit).dump(1) + '\n');
    fmt::print("wrote {}\n", c.fit_out);
  }
  return 0;
}

struct UncertaintyCommand {
  std::string root = ".", out;
  bool analytical_only = false;
};

int uncertainty(const UncertaintyCommand& c) {
  const runner::UncertaintyBuild b = runner::build_uncertainty_table(c.root, !c.analytical_only);
  for (const auto& [regime, r] : b.table.residuals) {
    UncertaintyTable alone;
    alone.residuals[regime] = r;
    const Interval i = prediction_interval(1.0, regime_of("calibrated", 1, 1, "analytical"), alone);
    const std::string interval = i.present() && r.size() >= std::size_t(kMinSamples)
                                     ? fmt::format("interval x[{:.3f}, {:.3f}] at {:.0f}%", i.low, i.high, 100 * i.confidence)
                                     : fmt::format("fewer than {}: borrows (see strategies/uncertainty.hpp)", kMinSamples);
    fmt::print("{:<36} n={:<3} residual median {:+6.1f}%  {}\n", regime, r.size(), 100 * r[r.size() / 2], interval);
  }
  const std::string text = runner::uncertainty_document(b);
  if (c.out.empty()) return 0;
  std::ofstream f(c.out, std::ios::binary);
  f << text;
  f.close();
  if (!f) throw InputError(c.out, "", "cannot write the uncertainty table here");
  fmt::print("wrote {} ({} predictions)\n", c.out, b.cases.size());
  return 0;
}

const Registration calibrate_command{
    "calibrate", "fit GPU profiles to calibration measurements", [](CLI::App& sub) -> Runner {
      sub.require_subcommand(1);
      auto c = std::make_shared<FitCommand>();
      auto* f = sub.add_subcommand("fit", "fit a profile to a clustersim-microbench JSON file");
      f->add_option("FILE", c->data_file, "microbenchmark results (calibration/data/...)");
      f->add_option("--db", c->db, "fit the samples stored in this database instead of a file");
      f->add_option("--hardware", c->hardware, "with --db: the profile name the samples were imported under");
      f->add_option("--attention", c->attention_files,
                    "fused-attention timings, one file per kernel library (clustersim-sdpa-flash or clustersim-sdpa JSON)");
      f->add_option("--eager", c->eager_files,
                    "eager PyTorch elementwise kernels by access path (clustersim-eager-kernels JSON); repeat for "
                    "files measuring other paths: a path an earlier file measured is not read from a later one");
      f->add_option("--launch", c->launch_file,
                    "launch figures from this clustersim-microbench file instead (its launch section: "
                    "clustersim-microbench --only launch on the same GPU model)");
      f->add_option("--host", c->host_file, "host dispatch costs (clustersim-host-dispatch JSON, measure_host.py)");
      f->add_option("--dtensor-bias", c->dtensor_bias_file,
                    "DTensor GPT steps with and without biases (clustersim-dtensor-bias JSON); needs --host");
      f->add_option("--dtensor-optimizer", c->dtensor_optimizer_files,
                    "fused AdamW steps over DTensor and plain Linear stacks (clustersim-host-dispatch JSON of "
                    "measure_dtensor_params.py; repeat for each run); needs --host");
      f->add_option("--dtensor-loss", c->dtensor_loss_files,
                    "the loss_parallel cross entropy against the plain one (clustersim-host-dispatch JSON of "
                    "measure_dtensor_params.py --loss-only; repeat for each run); needs --host");
      f->add_option("--gemm-launches", c->gemm_launches_file,
                    "kernels one bf16 linear launches over a grid of shapes (clustersim-gemm-launches JSON, "
                    "calibration/serving/measure_gemm_launches.py)");
      f->add_option("--inference-host", c->inference_host_files,
                    "eager inference forwards of transformers' Llama with 2 and 6 layers (clustersim-inference-host "
                    "JSON, measure_inference_host.py; repeat for each run); needs --host");
      f->add_option("--overlap", c->overlap_file, "overlap interference (calibration/nccl's clustersim-overlap-bench JSON)");
      f->add_option("--nccl", c->nccl_files,
                    "NCCL collective timings (clustersim-nccl-bench JSON; repeat for each GPU count), fitted into the "
                    "profile's nccl section");
      f->add_option("--base", c->base, "profile whose datasheet figures the fit starts from");
      f->add_option("--name", c->name, "name of the fitted profile (default: the base's)");
      f->add_option("--out", c->out, "write the fitted profile to this file");
      f->add_option("--holdout", c->holdout, "hold back every Nth sample for the error report (0: none)")
          ->check(CLI::Range(0, 1000));
      auto cc = std::make_shared<FitCollectivesCommand>();
      auto* fc = sub.add_subcommand("fit-collectives", "fit NCCL latency and bandwidth (clustersim-nccl-bench JSON)");
      fc->add_option("FILE", cc->data_files, "NCCL benchmark results (calibration/nccl output), fitted together")
          ->required();
      fc->add_option("--base", cc->base, "profile the NVLink fit is applied to");
      fc->add_option("--name", cc->name, "name of the fitted profile (default: the base's)");
      fc->add_option("--out", cc->out, "write the profile with the fit applied to this file");
      fc->add_option("--fit-out", cc->fit_out, "write the fit (with the efficiency-by-size curve) to this file");
      fc->add_option("--holdout", cc->holdout, "hold back every Nth sample for the error report (0: none)")
          ->check(CLI::Range(0, 1000));
      auto ic = std::make_shared<ImportCommand>();
      auto* im = sub.add_subcommand("import", "store a microbenchmark run's samples in the results database");
      im->add_option("FILE", ic->data_file, "microbenchmark results (clustersim-microbench JSON)")->required();
      im->add_option("--attention", ic->attention_files,
                     "fused-attention timings, one file per kernel library (clustersim-sdpa-flash or clustersim-sdpa JSON)");
      im->add_option("--profile", ic->profile, "GPU profile the samples belong to (and that predicts them)")->required();
      im->add_option("--db", ic->db, "results database")->capture_default_str();
      auto uc = std::make_shared<UncertaintyCommand>();
      auto* un = sub.add_subcommand("uncertainty",
                                    "predict every validation run and write the residuals per regime that the "
                                    "prediction intervals use (data/uncertainty.json)");
      un->add_option("--root", uc->root, "repository root holding calibration/ and data/")->capture_default_str();
      un->add_option("--out", uc->out, "write the table to this file");
      un->add_flag("--analytical-only", uc->analytical_only, "skip the simulated predictions");
      return [c, f, cc, fc, ic, im, uc, un] {
        if (un->parsed()) return uncertainty(*uc);
        if (im->parsed()) return import(*ic);
        return f->parsed() ? fit(*c) : fc->parsed() ? fit_collectives_command(*cc) : 2;
      };
    }};

}  // namespace
}  // namespace clustersim::cli
