#include "cli/report.hpp"

#include <fmt/format.h>

namespace clustersim {
namespace {
std::string pct(double part, double whole) { return whole > 0 ? fmt::format("{:5.1f}%", 100 * part / whole) : "  -"; }
}  // namespace

std::string format_report(const Scenario& s, const Estimator& est, const Prediction& e) {
  const auto& c = est.cluster();
  const auto& m = s.model;
  const auto& p = s.plan;
  std::string out;
  auto line = [&]<typename... T>(fmt::format_string<T...> f, T&&... args) {
    out += fmt::format(f, std::forward<T>(args)...);
    out += '\n';
  };
  line("scenario   {}", s.name);
  if (m.family == ModelFamily::wresnet)
    line("model      wresnet-{} channels {} width x{}, image {}, {:.3g} B parameters", m.depth, m.channels, m.width,
         m.image_size, e.parameters / 1e9);
  else
    line("model      {}, {:.3g} B parameters, {} layers, hidden {}, {} heads, seq {}", to_string(m.family),
         e.parameters / 1e9, m.layers, m.hidden, m.heads, m.seq_len);
  std::string net;
  if (c.nodes > 1)
    net = fmt::format(", {} x {} NICs per node ({})", c.nics_per_node, format_bandwidth(c.nic_bandwidth), to_string(c.topology));
  line("cluster    {} node(s) x {} {} = {} GPUs, {} {} per GPU{}", c.nodes, c.gpus_per_node, c.gpu.name,
       c.total_gpus(), to_string(c.fabric), format_bandwidth(c.intra_bandwidth), net);
  std::string sched = p.pp > 1 ? fmt::format(", {}", to_string(p.schedule)) : "";
  if (p.schedule == Schedule::interleaved && p.pp > 1) sched += fmt::format(" (v={})", p.virtual_stages);
  if (p.schedule == Schedule::interleaved && p.microbatch_group_size > 0)
    sched += fmt::format(" in groups of {}", p.microbatch_group_size);
  if (p.pp > 1 && p.layers_per_stage.kind != StageSplit::even) {
    std::string split;
    for (const StagePrediction& st : e.stages) split += fmt::format("{}{}", split.empty() ? "" : "-", st.layers);
    sched += fmt::format(", layers per stage {}", split);
  }
  line("plan       dp {} x tp {} x pp {}{}{}{}{}, zero {}, micro-batch {} x {}, {} precision, recompute {}", p.dp, p.tp,
       p.pp, p.cp > 1 ? fmt::format(" x cp {} ({})", p.cp, to_string(p.cp_algorithm)) : "",
       p.ep > 1 ? fmt::format(" (ep {})", p.ep) : "", sched, p.sequence_parallel ? ", sequence parallel" : "",
       p.zero, s.training.micro_batch, e.micro_batches, to_string(s.training.precision),
       to_string(s.training.recompute));
  line("");
  line("iteration time     {}", format_seconds(e.iteration_time));
  line("  likely range     {}", format_interval(e.interval));
  if (m.family == ModelFamily::wresnet)
    line("throughput         {:.1f} images/s", e.samples_per_s);
  else
    line("throughput         {:.0f} tokens/s", e.tokens_per_s);
  line("per GPU            {:.1f} TFLOP/s hardware, {:.1f} TFLOP/s model, MFU {:.1f}%", e.tflops_per_gpu,
       e.model_tflops_per_gpu, 100 * e.mfu);
  if (e.fits)
    line("memory per GPU     {} of {} usable: fits", format_bytes(e.memory_per_gpu), format_bytes(e.memory_capacity));
  else
    line("memory per GPU     {} of {} usable: DOES NOT FIT, {} over", format_bytes(e.memory_per_gpu),
         format_bytes(e.memory_capacity), format_bytes(e.overflow));
  line("");
  const auto& b = e.breakdown;
  const double T = e.iteration_time;
  line("time breakdown (slowest stage)   time        share");
  auto row = [&](const char* name, double v) { line("  {:<30} {:>11} {}", name, format_seconds(v), pct(v, T)); };
  row("compute forward", b.compute_forward);
  row("compute backward", b.compute_backward);
  row("compute recompute", b.compute_recompute);
  row("tensor-parallel comm (exposed)", b.tp_comm_exposed);
  if (b.ep_comm_exposed > 0) row("expert all-to-all (exposed)", b.ep_comm_exposed);
  if (b.cp_comm_exposed > 0) row("context-parallel (exposed)", b.cp_comm_exposed);
  if (b.offload_exposed > 0) row("activation offload (exposed)", b.offload_exposed);
  row("pipeline sends (exposed)", b.pp_comm_exposed);
  row("pipeline bubble", b.bubble);
  row("data-parallel comm (exposed)", b.dp_comm_exposed);
  row("optimizer step", b.optimizer);
  if (b.host_bound > 0) row("waiting for the host", b.host_bound);
  line("");
  const auto& mm = e.memory;
  line("memory breakdown (most loaded stage)");
  auto mrow = [&](const char* name, double v) { line("  {:<30} {:>11} {}", name, format_bytes(v), pct(v, e.memory_per_gpu)); };
  mrow("weights", mm.weights);
  mrow("gradients", mm.gradients);
  mrow("optimizer states", mm.optimizer_states);
  mrow("activations", mm.activations);
  mrow("temporary", mm.temporary);
  return out;
}

std::string format_interval(const Interval& i) {
  if (!i.present()) return fmt::format("none: no validation residuals for {}", i.regime);
  const std::string basis = i.basis == i.regime ? i.regime : fmt::format("{}, borrowed for {}", i.basis, i.regime);
  return fmt::format("{} to {} ({:.0f}% interval, {} validation runs of {})", format_seconds(i.low),
                     format_seconds(i.high), 100 * i.confidence, i.samples, basis);
}

}  // namespace clustersim
