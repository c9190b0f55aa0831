// Pipeline schedules replayed on uniform stages with free communication: the bubble
// is (p-1)/(m+p-1) of the schedule for GPipe and 1F1B, (p-1)/(vm+p-1) interleaved.
#include <catch2/catch.hpp>
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

// p uniform stages of v chunks; a micro-batch costs f forward and b backward per stage.
ReplayPlan uniform(Schedule schedule, std::int64_t p, std::int64_t v, std::int64_t m, double f, double b) {
  ReplayPlan plan;
  plan.pp = p;
  plan.virtual_stages = v;
  plan.micro_batches = m;
  plan.schedule = schedule;
  for (std::int64_t s = 0; s < p; ++s) {
    sim::StageProgram st;
    for (std::int64_t c = 0; c < v; ++c) {
      sim::ChunkProgram chunk;
      chunk.forward.push_back({sim::Work::forward, f / double(v), {}, 0, 0, {{"layer", f / double(v)}}});
      chunk.backward.push_back({sim::Work::backward, b / double(v), {}, 0, 0, {{"layer", b / double(v)}}});
      chunk.saved = 1e9;
      st.chunks.push_back(chunk);
    }
    plan.stages.push_back(st);
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

TEST_CASE("schedules run every forward before its backward, each once", "[sim][pipeline]") {
  for (auto schedule : {Schedule::gpipe, Schedule::one_f_one_b, Schedule::interleaved})
    for (std::int64_t s = 0; s < 4; ++s) {
      const std::int64_t v = schedule == Schedule::interleaved ? 2 : 1, m = 8;
      std::set<std::tuple<bool, std::int64_t, std::int64_t>> seen;
      for (const auto& w : sim::schedule_order(schedule, 4, v, m, s)) {
        INFO("stage " << s << " chunk " << w.chunk << " mb " << w.micro_batch);
        CHECK(seen.insert({w.forward, w.chunk, w.micro_batch}).second);
        if (!w.forward) CHECK(seen.count({true, w.chunk, w.micro_batch}) == 1);
      }
      CHECK(seen.size() == static_cast<std::size_t>(2 * v * m));
    }
}
