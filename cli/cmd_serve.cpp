// clustersim serve FILE [--rate R] [--json] [--requests-csv PATH] [--trace PATH] [--db DB]: simulates LLM
// inference serving (replicas, scheduler, router, workload) and prints latency,
// throughput, SLO attainment and KV-cache figures (docs/serving.md).
#include <fmt/format.h>

#include <iostream>
#include <memory>

#include "cli/command.hpp"
#include "runner/provenance.hpp"
#include "runner/serve_capacity.hpp"
#include "runner/store.hpp"
#include "scenarios/output_file.hpp"
#include "scenarios/serving.hpp"
#include "sim/network_model.hpp"
#include "sim/serve.hpp"
#include "sim/simgrid_info.hpp"

namespace clustersim::cli {
namespace {

struct ServeOptions {
  std::string file;
  std::string requests_csv;
  std::string trace;
  std::string db;  // --db FILE: also store the run there
  double capacity = 0;  // --capacity RATE: size the fleet for this request rate
  double rate = 0;      // --rate RATE: the generated workload's arrival rate instead of the file's
  int jobs = 0;
  bool json = false;
};

std::string ms(double s) { return fmt::format("{:.1f} ms", s * 1e3); }

int capacity_command(const ServingScenario& s, const ClusterModel& cluster, const ServeOptions& o) {
  const runner::CapacityResult r = runner::serve_capacity(s, cluster, o.capacity, o.jobs);
  if (o.json) {
    nlohmann::json out = {{"rate_rps", o.capacity}, {"candidates", nlohmann::json::array()}};
    for (const auto& c : r.candidates) {
      nlohmann::json j = {{"replicas", c.replicas}, {"tp", c.tp},           {"pp", c.pp},
                          {"max_batched_tokens", c.max_batched_tokens}, {"gpus", c.gpus()}, {"fits", c.feasible},
                          {"meets_slo", c.meets}};
      if (c.feasible) j["summary"] = sim::to_json(c.summary);
      out["candidates"].push_back(j);
    }
    out["best"] = r.best >= 0 ? out["candidates"][std::size_t(r.best)] : nlohmann::json();
    std::cout << out.dump(2) << '\n';
    return 0;
  }
  std::cout << fmt::format("{:>8} {:>3} {:>3} {:>7} {:>5} {:>11} {:>11} {:>11} {:>10}\n", "replicas", "tp", "pp", "budget",
                           "GPUs", "TTFT p99", "TPOT p99", "attainment", "");
  for (std::size_t i = 0; i < r.candidates.size(); ++i) {
    const auto& c = r.candidates[i];
    if (!c.feasible) {
      std::cout << fmt::format("{:>8} {:>3} {:>3} {:>7} {:>5} {:>11}\n", c.replicas, c.tp, c.pp, c.max_batched_tokens,
                               c.gpus(), "does not fit");
      continue;
    }
    std::cout << fmt::format("{:>8} {:>3} {:>3} {:>7} {:>5} {:>11} {:>11} {:>10.1f}% {}\n", c.replicas, c.tp, c.pp,
                             c.max_batched_tokens, c.gpus(), ms(c.summary.ttft.p99), ms(c.summary.tpot.p99),
                             100 * c.summary.slo_attainment, int(i) == r.best ? "<- cheapest" : (c.meets ? "meets" : ""));
  }
  if (r.best < 0) {
    std::cout << fmt::format("no configuration on this cluster meets the SLOs at {} req/s\n", o.capacity);
    return 0;
  }
  const auto& b = r.candidates[std::size_t(r.best)];
  std::cout << fmt::format("cheapest at {} req/s: {} replicas x (tp {} x pp {}), budget {} tokens: {} GPUs\n", o.capacity,
                           b.replicas, b.tp, b.pp, b.max_batched_tokens, b.gpus());
  return 0;
}

int serve_command(const ServeOptions& o) {
  ServingScenario s = load_serving_scenario(o.file);
  if (o.rate > 0) {
    if (s.workload.arrival == ArrivalKind::trace)
      throw InputError("command line", "--rate",
                       fmt::format("{} replays a trace ({}); --rate applies to generated arrivals", s.source,
                                   s.workload.trace));
    s.workload.rate = o.rate;
  }
  Diagnostics diag(s.source);
  const ClusterModel cluster = resolve_cluster(s.cluster, diag);
  diag.throw_if_errors();
  if (o.capacity > 0) return capacity_command(s, cluster, o);
  if (!o.requests_csv.empty()) check_writable(o.requests_csv);
  if (!o.trace.empty()) check_writable(o.trace);
  sim::ServeOptions so;
  so.keep_iterations = !o.trace.empty();
  const sim::ServeResult r = sim::simulate_serving(s, cluster, so);
  if (!o.requests_csv.empty()) write_text_file(o.requests_csv, sim::requests_csv(r));
  if (!o.trace.empty()) write_text_file(o.trace, sim::perfetto_trace(r).dump());
  const auto& m = r.summary;
  nlohmann::json out = sim::to_json(m);
  out["tool"] = runner::tool_json("served");
  if (s.disaggregation.enabled) {
    // The KV transfers ran as SimGrid flows: the simulator's version and network model.
    out["tool"]["simgrid_version"] = sim::simgrid_version();
    out["tool"]["simgrid_config"] = sim::to_json(sim::NetworkModelConfig{});
  }
  const nlohmann::json canonical = to_json(s);
  // The replica layout and scheduler: what the results database calls the plan.
  out["plan"] = {{"pool", canonical["pool"]}, {"scheduler", canonical["scheduler"]}, {"router", canonical["router"]}};
  if (s.disaggregation.enabled) out["plan"]["prefill_pool"] = canonical["prefill_pool"];
  // Stored after printing: a database that fails loses the record, not the result.
  const auto store = [&] {
    if (o.db.empty()) return;
    std::cout.flush();
    const std::int64_t id = runner::store_serving_run(o.db, s, out);
    std::cerr << "stored run " << id << " in " << o.db << '\n';
  };
  if (o.json) {
    nlohmann::json printed = out;
    printed["scenario"] = canonical;
    std::cout << printed.dump(2) << '\n';
    store();
    return 0;
  }
  const auto line = [](const char* name, const sim::Percentiles& p) {
    std::cout << fmt::format("{:<15} p50 {:>10}  p90 {:>10}  p99 {:>10}  mean {:>10}\n", name, ms(p.p50), ms(p.p90),
                             ms(p.p99), ms(p.mean));
  };
  std::cout << fmt::format("scenario        {}\n", s.name);
  std::cout << fmt::format("replicas        {} x (tp {} x pp {}), {} scheduler, {} router{}\n", s.pool.replicas, s.pool.tp,
                           s.pool.pp, to_string(s.scheduler.kind), to_string(s.router),
                           s.disaggregation.enabled
                               ? fmt::format("; prefill pool {} x (tp {} x pp {})", s.disaggregation.prefill.replicas,
                                             s.disaggregation.prefill.tp, s.disaggregation.prefill.pp)
                               : "");
  std::cout << fmt::format("requests        {} ({} measured), last token at {:.2f} s\n", m.requests, m.measured,
                           m.makespan);
  line("TTFT", m.ttft);
  line("TPOT", m.tpot);
  line("TBT", m.tbt);
  line("E2E", m.e2e);
  std::cout << fmt::format("throughput      {:.2f} req/s, {:.0f} output tokens/s\n", m.throughput_rps,
                           m.output_tokens_per_s);
  if (s.slo.ttft > 0 || s.slo.tpot > 0 || s.slo.e2e > 0)
    std::cout << fmt::format("SLO attainment  {:.1f}% (target {:.0f}%), goodput {:.2f} req/s\n", 100 * m.slo_attainment,
                             100 * s.slo.attainment, m.goodput_rps);
  std::cout << fmt::format("KV cache        {} blocks of {} tokens per replica; peak use {:.1f}%, mean {:.1f}%; "
                           "{} preemptions\n",
                           m.kv_blocks, m.kv_block_size, 100 * m.kv_peak_use, 100 * m.kv_mean_use, m.preemptions);
  if (s.disaggregation.enabled)
    std::cout << fmt::format("KV transfer     mean {} per request\n", ms(m.kv_transfer_mean));
  std::cout << fmt::format("simulation      {} iterations (mean {:.0f} tokens) in {:.2f} s wall\n", m.iterations,
                           m.mean_batch_tokens, m.wall_s);
  if (!o.requests_csv.empty()) std::cout << fmt::format("requests CSV    {}\n", o.requests_csv);
  if (!o.trace.empty()) std::cout << fmt::format("trace           {}\n", o.trace);
  store();
  return 0;
}

const Registration serve_registration{
    "serve", "simulate LLM inference serving (continuous batching, paged KV, chunked prefill, disaggregation)",
    [](CLI::App& sub) -> Runner {
      auto o = std::make_shared<ServeOptions>();
      sub.add_option("FILE", o->file, "serving scenario file (JSON)")->required();
      sub.add_flag("--json", o->json, "print machine-readable JSON");
      sub.add_option("--requests-csv", o->requests_csv, "write one line per request (latencies) to this CSV file");
      sub.add_option("--trace", o->trace, "write a Chrome/Perfetto trace of the batches (JSON) to this file");
      sub.add_option("--db", o->db, "also store the run in this results database (method \"served\")");
      sub.add_option("--capacity", o->capacity,
                     "find the cheapest replicas x tp x pp x token budget meeting the scenario's SLOs at this "
                     "request rate (req/s), simulating every candidate on all cores")
          ->check(CLI::Range(1e-6, 1e7));
      sub.add_option("--rate", o->rate,
                     "arrival rate of the generated workload (req/s) instead of the file's: one point of a "
                     "latency-against-load curve (db plot serving-load)")
          ->check(CLI::Range(1e-6, 1e7));
      sub.add_option("--jobs", o->jobs, "threads for --capacity (default: all cores)")->check(CLI::Range(1, 1024));
      return [o] { return serve_command(*o); };
    }};

}  // namespace
}  // namespace clustersim::cli
