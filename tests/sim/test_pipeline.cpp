// Pipeline schedules replayed on uniform stages with free communication: the bubble
// is (p-1)/(m+p-1) of the schedule for GPipe and 1F1B, (p-1)/(vm+p-1) interleaved.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>
#include <tuple>

#include "sim/simulate.hpp"

using namespace clustersim;
using sim::ReplayPlan;

namespace {

ClusterModel one_node(std::int64_t gpus) {
  ClusterSpec spec;
  spec.gpu = "a100-sxm4-80gb";
  spec.gpus_per_node = gpus;
  Diagnostics diag("<test>");
  ClusterModel c = resolve_cluster(spec, diag);
  REQUIRE(diag.ok());
  return c;
}

// p uniform stages of v chunks; a micro-batch costs f forward and b backward per stage
// (ZB-H1: of which w in a weight pass of its own).
ReplayPlan uniform(Schedule schedule, std::int64_t p, std::int64_t v, std::int64_t m, double f, double b, double w = 0,
                   std::int64_t group = 0) {
  ReplayPlan plan;
  plan.pp = p;
  plan.virtual_stages = v;
  plan.micro_batches = m;
  plan.schedule = schedule;
  plan.microbatch_group = group;
  for (std::int64_t s = 0; s < p; ++s) {
    sim::StageProgram st;
    for (std::int64_t c = 0; c < v; ++c) {
      sim::ChunkProgram chunk;
      chunk.forward.push_back({sim::Work::forward, f / double(v), {}, 0, 0, {{"layer", f / double(v)}}});
      chunk.backward.push_back({sim::Work::backward, (b - w) / double(v), {}, 0, 0, {{"layer", (b - w) / double(v)}}});
      if (w > 0) chunk.weight_grad.push_back({sim::Work::backward, w, {}, 0, 0, {{"wgrad", w}}});
      chunk.saved = 1e9;
      st.chunks.push_back(chunk);
    }
    plan.stages.push_back(st);
  }
  return plan;
}

// DualPipe on p ranks: two chunks each (one per direction), a chunk costing f forward and
// b backward, of which w its weight gradients.
ReplayPlan dual_uniform(std::int64_t p, std::int64_t m, double f, double b, double w) {
  ReplayPlan plan = uniform(Schedule::dualpipe, p, 2, m, 2 * f, 2 * b, 0);
  for (auto& st : plan.stages)
    for (auto& chunk : st.chunks) {
      chunk.backward.front().compute = b - w;
      chunk.backward.front().ops = {{"layer", b - w}};
      chunk.weight_grad = {{sim::Work::backward, w, {}, 0, 0, {{"wgrad", w}}}};
    }
  return plan;
}

}  // namespace

TEST_CASE("pipeline bubble of uniform stages is (p-1)/(m+p-1) of the schedule", "[sim][pipeline]") {
  const double f = 1e-3, b = 2e-3;
  const std::int64_t p = 4;
  for (auto schedule : {Schedule::gpipe, Schedule::one_f_one_b})
    for (std::int64_t m : {1, 4, 8, 32}) {
      const auto r = sim::simulate_plan(uniform(schedule, p, 1, m, f, b), one_node(p));
      const double T = r["iteration_time_s"].get<double>();
      const double bubble = (T - double(m) * (f + b)) / T;
      const double expected = double(p - 1) / double(m + p - 1);
      std::printf("%-5s p=%lld m=%-3lld bubble: expected %.4f, simulated %.4f (iteration %.4f s)\n",
                  std::string(to_string(schedule)).c_str(), static_cast<long long>(p), static_cast<long long>(m),
                  expected, bubble, T);
      CHECK(bubble == Approx(expected).epsilon(1e-6));
      // Peak activations: GPipe keeps every micro-batch, 1F1B at most p on stage 0.
      const double peak0 = r["groups"][0]["peak_activations_bytes"].get<double>();
      CHECK(peak0 == Approx(1e9 * double(schedule == Schedule::gpipe ? m : std::min(m, p))));
    }
}

TEST_CASE("interleaved schedule shrinks the bubble to (p-1)/(vm+p-1)", "[sim][pipeline]") {
  const double f = 1e-3, b = 2e-3;
  const std::int64_t p = 4;
  for (std::int64_t v : {2, 3})
    for (std::int64_t m : {4, 8, 16}) {
      const auto r = sim::simulate_plan(uniform(Schedule::interleaved, p, v, m, f, b), one_node(p));
      const double T = r["iteration_time_s"].get<double>();
      const double bubble = (T - double(m) * (f + b)) / T;
      const double expected = double(p - 1) / double(v * m + p - 1);
      std::printf("interleaved p=%lld v=%lld m=%-3lld bubble: expected %.4f, simulated %.4f\n",
                  static_cast<long long>(p), static_cast<long long>(v), static_cast<long long>(m), expected, bubble);
      CHECK(bubble == Approx(expected).epsilon(1e-6));
    }
}

TEST_CASE("interleaved with any micro-batch count: groups of N in [p, m] keep the bubble (p-1)/(vm+p-1)", "[sim][pipeline]") {
  const double f = 1e-3, b = 2e-3;
  const std::int64_t p = 4, v = 2;
  // m = 6 and 10 are not multiples of p; N = m (one group), or N = 5 for m = 10.
  for (auto [m, n] : std::vector<std::pair<std::int64_t, std::int64_t>>{{6, 6}, {10, 10}, {10, 5}, {8, 4}}) {
    const auto r = sim::simulate_plan(uniform(Schedule::interleaved, p, v, m, f, b, 0, n), one_node(p));
    const double T = r["iteration_time_s"].get<double>();
    const double bubble = (T - double(m) * (f + b)) / T;
    const double expected = double(p - 1) / double(v * m + p - 1);
    std::printf("interleaved p=%lld v=%lld m=%-3lld N=%-3lld bubble: expected %.4f, simulated %.4f\n", static_cast<long long>(p),
                static_cast<long long>(v), static_cast<long long>(m), static_cast<long long>(n), expected, bubble);
    CHECK(bubble == Approx(expected).epsilon(1e-6));
    // Stage 0 keeps min(m v, 2(p-1) + (v-1)N + 1) chunk forwards (rules.hpp).
    const double peak0 = r["groups"][0]["peak_activations_bytes"].get<double>();
    CHECK(peak0 == Approx(1e9 * double(std::min(m * v, 2 * (p - 1) + (v - 1) * n + 1))));
  }
}

TEST_CASE("ZB-H1 shrinks the bubble to (p-1)(F + B - 2W), at 1F1B's activation memory", "[sim][pipeline]") {
  const std::int64_t p = 4;
  // (f, b, w): equal passes (the paper's 1/3 of 1F1B's bubble), a light W, a W heavier than F + B_input.
  for (auto [f, b, w] : std::vector<std::tuple<double, double, double>>{{1e-3, 2e-3, 1e-3}, {1e-3, 2e-3, 0.5e-3}, {1e-3, 2e-3, 1.5e-3}})
    for (std::int64_t m : {4, 8, 16}) {
      const auto r = sim::simulate_plan(uniform(Schedule::zb_h1, p, 1, m, f, b, w), one_node(p));
      const double T = r["iteration_time_s"].get<double>();
      const double expected = double(m) * (f + b) + double(p - 1) * std::max(f, f + b - 2 * w);
      std::printf("zb-h1 p=%lld m=%-3lld F %.1f B %.1f W %.1f ms: expected %.4f ms, simulated %.4f ms (1F1B %.4f ms)\n",
                  static_cast<long long>(p), static_cast<long long>(m), f * 1e3, b * 1e3, w * 1e3, expected * 1e3, T * 1e3,
                  (double(m + p - 1) * (f + b)) * 1e3);
      CHECK(T == Approx(expected).epsilon(1e-6));
      const double peak0 = r["groups"][0]["peak_activations_bytes"].get<double>();
      CHECK(peak0 == Approx(1e9 * double(std::min(m, p))));
    }
}

TEST_CASE("DualPipe replays to the rules' makespan, DeepSeek-V3's (p/2-1)(F&B + B - 3W) bubble where F = B - W", "[sim][pipeline][dualpipe]") {
  // (f, b, w) per chunk: F = B - W (the report's formula exact), a light W, a heavy forward.
  for (auto [f, b, w] : std::vector<std::tuple<double, double, double>>{{1e-3, 2e-3, 1e-3}, {1e-3, 2e-3, 0.4e-3}, {2e-3, 2.5e-3, 1e-3}})
    for (std::int64_t p : {4, 8})
      for (std::int64_t m : {2 * p, 2 * p + 6}) {
        const auto r = sim::simulate_plan(dual_uniform(p, m, f, b, w), one_node(p));
        const double T = r["iteration_time_s"].get<double>();
        const DualPipeChunk c{f, 0, b, 0, w};
        const double rule = dualpipe_makespan(std::vector<DualPipeChunk>(static_cast<std::size_t>(p), c), m);
        const double report = double(m - p - 1) * (f + b) + double(p + 1) * (f + b) + (double(p) / 2 - 1) * (f + b + b - 3 * w);
        const double one_f_one_b = double(m + p - 1) * (f + b);
        std::printf("dualpipe p=%lld m=%-3lld F %.1f B %.1f W %.1f ms: rules %.4f ms, simulated %.4f ms, report's formula %.4f ms%s "
                    "(1F1B %.4f ms)\n",
                    static_cast<long long>(p), static_cast<long long>(m), f * 1e3, b * 1e3, w * 1e3, rule * 1e3, T * 1e3,
                    report * 1e3, std::fabs(f - (b - w)) < 1e-12 ? " (F = B - W)" : "", one_f_one_b * 1e3);
        CHECK(T == Approx(rule).epsilon(1e-6));
        if (std::fabs(f - (b - w)) < 1e-12) CHECK(T == Approx(report).epsilon(1e-6));
        // p + 1 chunk forwards alive on every rank (DeepSeek-V3's Table 2).
        for (const auto& g : r["groups"]) CHECK(g["peak_activations_bytes"].get<double>() == Approx(1e9 * double(p + 1)));
      }
}

TEST_CASE("schedules run every forward before its backward, each once", "[sim][pipeline]") {
  for (auto schedule : {Schedule::gpipe, Schedule::one_f_one_b, Schedule::interleaved, Schedule::zb_h1})
    for (std::int64_t s = 0; s < 4; ++s)
      for (std::int64_t m : {8, 6}) {
        if (m % 4 != 0 && schedule == Schedule::interleaved) continue;  // N = 6 below
        const std::int64_t v = schedule == Schedule::interleaved ? 2 : 1;
        std::set<std::tuple<int, std::int64_t, std::int64_t>> seen;  // (F 1, B 0, W 2), chunk, micro-batch
        for (const auto& w : sim::schedule_order(schedule, 4, v, m, s)) {
          INFO(to_string(schedule) << " stage " << s << " chunk " << w.chunk << " mb " << w.micro_batch);
          const int kind = w.weight ? 2 : w.forward ? 1 : 0;
          CHECK(seen.insert({kind, w.chunk, w.micro_batch}).second);
          if (kind == 0) CHECK(seen.count({1, w.chunk, w.micro_batch}) == 1);
          if (kind == 2) CHECK(seen.count({0, w.chunk, w.micro_batch}) == 1);
        }
        CHECK(seen.size() == static_cast<std::size_t>((schedule == Schedule::zb_h1 ? 3 : 2) * v * m));
      }
  for (std::int64_t s = 0; s < 4; ++s) {
    std::set<std::tuple<bool, std::int64_t, std::int64_t>> seen;
    for (const auto& w : sim::schedule_order(Schedule::interleaved, 4, 2, 6, s, 6)) {
      CHECK(seen.insert({w.forward, w.chunk, w.micro_batch}).second);
      if (!w.forward) CHECK(seen.count({true, w.chunk, w.micro_batch}) == 1);
    }
    CHECK(seen.size() == 24u);
  }
}

TEST_CASE("DeepSpeed's blocking sends: TrainSchedule's order keeps 1F1B's bubble, and each of four transfers holds the stream", "[sim][pipeline]") {
  const double f = 1e-3, b = 2e-3;
  for (std::int64_t p : {2, 4, 5})
    for (std::int64_t m : {1, 3, 8}) {
      // Sends of a few bytes: the rendezvous order alone must neither deadlock nor add bubble.
      ReplayPlan plan = uniform(Schedule::one_f_one_b, p, 1, m, f, b);
      for (auto& st : plan.stages) st.chunks.front().send = pipeline_send(8, 1, false, Framework::megatron_deepspeed);
      const ClusterModel c = one_node(p);
      const double T = sim::simulate_plan(plan, c)["iteration_time_s"].get<double>();
      const double expected = double(m + p - 1) * (f + b);
      // What the few bytes' latency may add: four transfers per step pair at most.
      const double latency = double(m + p - 1) * 4 * collective_time(c, Collective::send_recv, 8, Group{2, 2}, 1.0);
      std::printf("deepspeed p=%lld m=%-3lld tiny sends: expected %.4f ms (+ up to %.4f ms of latency), simulated %.4f ms\n",
                  static_cast<long long>(p), static_cast<long long>(m), expected * 1e3, latency * 1e3, T * 1e3);
      CHECK(T >= expected * (1 - 1e-9));
      CHECK(T <= expected + latency);
    }
  // 64 MB sends between neighbours on one node: Megatron's eager sends expose one transfer
  // c per item (2 per micro-batch); DeepSpeed's rendezvous hold both sides, each stage
  // taking part in 4 per micro-batch, coupled to its neighbours: between m (2c) and
  // (m + p - 1)(4c) beyond the compute.
  const std::int64_t p = 4, m = 8;
  const ClusterModel c = one_node(p);
  const double bytes = 64e6, transfer = collective_time(c, Collective::send_recv, bytes, Group{2, 2}, 1.0);
  ReplayPlan megatron = uniform(Schedule::one_f_one_b, p, 1, m, f, b), ds = megatron;
  for (auto& st : megatron.stages) st.chunks.front().send = pipeline_send(bytes, 1, false);
  for (auto& st : ds.stages) st.chunks.front().send = pipeline_send(bytes, 1, false, Framework::megatron_deepspeed);
  const double t_megatron = sim::simulate_plan(megatron, c)["iteration_time_s"].get<double>();
  const double t_ds = sim::simulate_plan(ds, c)["iteration_time_s"].get<double>();
  const double compute = double(m + p - 1) * (f + b);
  std::printf("p=4 m=8, transfer %.3f ms: Megatron %.3f ms, DeepSpeed %.3f ms; DeepSpeed expected in [%.3f, %.3f] ms\n",
              transfer * 1e3, t_megatron * 1e3, t_ds * 1e3, (compute + double(m) * 2 * transfer) * 1e3,
              (compute + double(m + p - 1) * 4 * transfer) * 1e3);
  CHECK(t_ds > t_megatron);
  CHECK(t_ds >= compute + double(m) * 2 * transfer);
  CHECK(t_ds <= (compute + double(m + p - 1) * 4 * transfer) * (1 + 1e-6));
}

TEST_CASE("a replay whose stages wait on each other forever is an error, not an iteration", "[sim][pipeline]") {
  // Plans that scenario validation refuses, built by hand: interleaved micro-batch groups
  // smaller than the pipeline (2 < p = 4), DualPipe with fewer than 2p micro-batches. Their
  // stages each wait for a send the other has not reached; SimGrid ends such a run as if it
  // were over (it returned 0 s), and the replay must say it did not finish.
  CHECK_THROWS_WITH(sim::simulate_plan(uniform(Schedule::interleaved, 4, 2, 6, 1.0, 2.0, 0, 2), one_node(4)),
                    Catch::Contains("did not finish") && Catch::Contains("stage 0"));
  CHECK_THROWS_WITH(sim::simulate_plan(dual_uniform(4, 2, 1.0, 2.0, 0.5), one_node(4)), Catch::Contains("did not finish"));
  // The same schedules with valid counts finish.
  CHECK(sim::simulate_plan(uniform(Schedule::interleaved, 4, 2, 8, 1.0, 2.0, 0, 4), one_node(4))["iteration_time_s"]
            .get<double>() > 0);
}
