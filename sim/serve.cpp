#include "sim/serve.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fmt/format.h>
#include <exception>
#include <limits>
#include <memory>
#include <numeric>
#include <queue>
#include <unordered_set>
#include <simgrid/s4u.hpp>

#include "sim/child.hpp"
#include "sim/collective_algorithms.hpp"
#include "sim/network.hpp"
#include "sim/network_model.hpp"
#include "sim/platform.hpp"
#include "strategies/rules.hpp"
#include "strategies/serving_batch.hpp"
#include "strategies/serving_workload.hpp"

namespace clustersim::sim {
namespace {
using i64 = std::int64_t;

struct Replica {
  const BatchTimeModel* model = nullptr;
  std::unique_ptr<ReplicaScheduler> sched;
  bool prefill_only = false;
  bool busy = false;
  i64 first_gpu = 0;  // where its GPUs start (replicas are packed in order)
  i64 pending_tokens = 0;  // routed here, still in a KV transfer
  double used_block_seconds = 0;
  // Pipeline stages on different nodes: its iterations run on the platform, their sends as
  // flows (PlatformWork); the iteration under way started at iter_start holding iter_blocks
  // blocks, ends at iter_end (set by its actor), is out.iterations[iter_record] (or -1).
  bool flows = false;
  bool tp_flows = false;  // a tp group of it straddles two nodes: its tp collectives run as flows too
  Seconds iter_start = 0, iter_end = 0;
  double iter_blocks = 0;
  i64 iter_record = -1;
  // The attention shapes whose cuDNN graphs this replica's engine process has built
  // (BatchTimeModel::graph_key): a shape met again skips the build.
  std::unordered_set<std::uint64_t> graphs;
  // Its engine process's host launch about the fitted mean, one draw per iteration.
  LaunchResidualDraw host_draw;
};

struct Event {
  Seconds t = 0;
  int kind = 0;  // 0: an iteration ends (arrivals come from their own list: 1; KV transfers are SimGrid flows)
  i64 seq = 0;
  i64 a = 0, b = 0;
  bool operator>(const Event& o) const {
    if (t != o.t) return t > o.t;
    if (kind != o.kind) return kind > o.kind;
    return seq > o.seq;
  }
};

// Token gaps in 1% logarithmic bins from 1 us: percentiles without keeping every gap.
class GapHistogram {
 public:
  void add(double gap) {
    const double x = std::max(gap, kMin);
    const auto i = static_cast<std::size_t>(std::floor(std::log(x / kMin) / std::log(kStep)));
    if (i >= bins_.size()) bins_.resize(i + 1, 0);
    ++bins_[i];
    ++n_;
    sum_ += gap;
  }
  Percentiles percentiles() const {
    Percentiles p;
    if (n_ == 0) return p;
    p.mean = sum_ / double(n_);
    const auto at = [&](double q) {
      const auto rank = static_cast<i64>(std::ceil(q * double(n_)));
      i64 c = 0;
      for (std::size_t i = 0; i < bins_.size(); ++i) {
        c += bins_[i];
        if (c >= rank) return kMin * std::pow(kStep, double(i) + 0.5);
      }
      return kMin * std::pow(kStep, double(bins_.size()));
    };
    p.p50 = at(0.5);
    p.p90 = at(0.9);
    p.p99 = at(0.99);
    return p;
  }

 private:
  static constexpr double kMin = 1e-6, kStep = 1.01;
  std::vector<i64> bins_;
  i64 n_ = 0;
  double sum_ = 0;
};

Percentiles percentiles(std::vector<double> v) {
  Percentiles p;
  if (v.empty()) return p;
  std::sort(v.begin(), v.end());
  double sum = 0;
  for (double x : v) sum += x;
  p.mean = sum / double(v.size());
  const auto at = [&](double q) {
    const auto rank = static_cast<std::size_t>(std::ceil(q * double(v.size())));
    return v[std::max<std::size_t>(rank, 1) - 1];
  };
  p.p50 = at(0.5);
  p.p90 = at(0.9);
  p.p99 = at(0.99);
  p.quantiles.reserve(101);
  for (int k = 0; k <= 100; ++k) p.quantiles.push_back(at(k / 100.0));
  return p;
}

namespace sg4 = simgrid::s4u;

// What runs on the SimGrid platform of the cluster (the one the training replay uses)
// beside the controller's event loop:
//  - disaggregation's KV transfers: one communication per pair of a prefill GPU and a
//    decode GPU holding the same layers and kv heads (KvRoute), started when the prefill
//    ends; done when the last of them is;
//  - the iterations of replicas whose pipeline stages sit on different nodes or whose tp
//    group straddles two: an actor per iteration runs the stages one after the other,
//    each stage's share of the GPU time as a sleep, each stage-to-stage activation send
//    as the training replay's point-to-point collective (run_collective: one flow per tp
//    rank to its peer of the next stage), and with a straddling group each layer's share
//    and its tp collectives (run_collective over the stage's group) instead of one sleep;
//    then the host's part (BatchTimeModel::finish_with_gpu on the GPU time the flows
//    gave), and it reports its end through a mailbox.
// Flows that share a link (a NIC, a PCIe link) share its bandwidth, so concurrent
// transfers and sends slow each other down.
class PlatformWork {
 public:
  explicit PlatformWork(const Platform& p, std::size_t replicas)
      : platform_(p), net_(p, nullptr), done_box_(sg4::Mailbox::by_name("serve-iteration-done")) {
    for (std::size_t i = 0; i < replicas; ++i) ids_.push_back(i64(i));
  }
  struct Done {
    bool iteration = false;  // else a KV transfer
    i64 request = 0, decode = 0, replica = 0;
    Seconds start = 0, end = 0;
  };
  bool pending() const { return !comms_.empty() || running_ > 0; }
  // Where a request's KV cache goes: a share num/den of it from the prefill instance's GPU
  // `from` to the decode instance's GPU `to` (offsets from each instance's first GPU).
  struct KvRoute {
    i64 from = 0, to = 0, num = 1, den = 1;
  };
  // Starts a transfer at the controller's time `now` (the SimGrid clock catches up first):
  // one communication per route, from the instances' GPUs at from_gpu and to_gpu.
  void start_transfer(Seconds now, i64 request, i64 decode, Bytes bytes, const std::vector<KvRoute>& routes,
                      i64 from_gpu, i64 to_gpu) {
    catch_up(now);
    const std::size_t t = transfers_.size();
    transfers_.push_back({request, decode, now, i64(routes.size())});
    for (const KvRoute& r : routes) {
      const auto share = static_cast<std::uint64_t>(std::ceil(bytes * double(r.num) / double(r.den)));
      comms_.push_back(sg4::Comm::sendto_async(platform_.gpus[std::size_t(from_gpu + r.from)],
                                               platform_.gpus[std::size_t(to_gpu + r.to)], share));
      owner_.push_back(t);
    }
  }
  // Starts an iteration of `replica` (GPUs from `first_gpu`, tp x pp) at `now`: `swap`
  // seconds of PCIe copies first, then the forward `bt`; `end` receives when it ends. With
  // `tp` collectives (a tp group that straddles nodes) every layer runs its share of the
  // compute, then its collectives as flows over its stage's tp group (`layers` per stage).
  void start_iteration(Seconds now, i64 replica, const BatchTimeModel& m, const BatchTime& bt, Seconds swap,
                       i64 first_gpu, std::vector<TpCollective> tpc, const std::vector<i64>* layers, Seconds* end) {
    catch_up(now);
    ++running_;
    const i64 tp = m.tp(), pp = m.pp();
    const Seconds tp_closed = tpc.empty() ? 0.0 : bt.tp_comm;
    const Seconds compute = std::max(0.0, bt.gpu - bt.pp_send - tp_closed);
    sg4::Actor::create("serve-iteration", sg4::this_actor::get_host(), [this, &m, bt, swap, first_gpu, tp, pp, compute,
                                                                        tpc = std::move(tpc), layers, now, end, replica] {
      if (swap > 0) sg4::this_actor::sleep_for(swap);
      const Seconds t0 = sg4::Engine::get_clock();
      i64 total_layers = 0;
      if (layers)
        for (i64 n : *layers) total_layers += n;
      for (i64 s = 0; s < pp; ++s) {
        if (tpc.empty()) {
          sg4::this_actor::sleep_for(compute / double(pp));
        } else {
          const auto run = [&](TpCollective::Place place) {
            for (const TpCollective& c : tpc) {
              if (c.place != place) continue;
              CollectiveCall call{c.kind, c.bytes, {{}}, {}};
              for (i64 k = 0; k < tp; ++k) call.groups[0].push_back(first_gpu + s * tp + k);
              run_collective(net_, "auto", call);
            }
          };
          if (s == 0) run(TpCollective::Place::first_stage);
          for (i64 l = 0; l < (*layers)[std::size_t(s)]; ++l) {
            sg4::this_actor::sleep_for(compute / double(total_layers));
            run(TpCollective::Place::every_layer);
          }
          if (s + 1 == pp) run(TpCollective::Place::last_stage);
        }
        if (s + 1 == pp) break;
        CollectiveCall call{Collective::send_recv, bt.pp_send_bytes, {}, {}};
        for (i64 k = 0; k < tp; ++k) call.groups.push_back({first_gpu + s * tp + k, first_gpu + (s + 1) * tp + k});
        run_collective(net_, "auto", call);
      }
      const Seconds gpu = sg4::Engine::get_clock() - t0;
      *end = now + swap + m.finish_with_gpu(bt, gpu);
      if (*end > sg4::Engine::get_clock()) sg4::this_actor::sleep_until(*end);
      done_box_->put(&ids_[std::size_t(replica)], 0);
    });
  }
  // Waits until the SimGrid clock reaches `until` (infinite: no limit), a transfer
  // completes or an iteration ends, whichever comes first; true with what ended.
  bool wait(Seconds until, Done& done) {
    for (;;) {
      const double clock = sg4::Engine::get_clock();
      if (!pending() || until <= clock) return false;
      if (running_ > 0 && !listening_) {
        comms_.push_back(done_box_->get_async<i64>(&received_));
        owner_.push_back(kIteration);
        listening_ = true;
      }
      const double timeout = std::isfinite(until) ? until - clock : -1.0;
      const ssize_t i = sg4::Comm::wait_any_for(comms_, timeout);
      if (i < 0) return false;
      const std::size_t t = owner_[std::size_t(i)];
      comms_.erase(comms_.begin() + i);
      owner_.erase(owner_.begin() + i);
      if (t == kIteration) {
        listening_ = false;
        --running_;
        done = {true, 0, 0, *received_, 0, sg4::Engine::get_clock()};
        return true;
      }
      if (--transfers_[t].left > 0) continue;
      done = {false, transfers_[t].request, transfers_[t].decode, 0, transfers_[t].start, sg4::Engine::get_clock()};
      return true;
    }
  }

 private:
  static constexpr std::size_t kIteration = std::numeric_limits<std::size_t>::max();
  static void catch_up(Seconds now) {
    if (now > sg4::Engine::get_clock()) sg4::this_actor::sleep_until(now);
  }
  struct Transfer {
    i64 request = 0, decode = 0;
    Seconds start = 0;
    i64 left = 0;  // communications still running
  };
  const Platform& platform_;
  Network net_;
  sg4::Mailbox* done_box_;
  std::vector<i64> ids_;  // replica indices, the payloads of the done messages
  i64* received_ = nullptr;
  bool listening_ = false;
  i64 running_ = 0;                  // iteration actors not yet reported
  std::vector<sg4::CommPtr> comms_;  // in start order: ties end by it
  std::vector<std::size_t> owner_;   // transfer of each communication (kIteration: the done message)
  std::vector<Transfer> transfers_;
};

// A serving result through the pipe of the child that ran it (sim/child.hpp): doubles
// as nlohmann dumps them (shortest round-trip text), so the parent's copy is exact.
nlohmann::json percentiles_json(const Percentiles& p) {
  return {{"mean", p.mean}, {"p50", p.p50}, {"p90", p.p90}, {"p99", p.p99}, {"quantiles", p.quantiles}};
}
Percentiles percentiles_of(const nlohmann::json& j) {
  Percentiles p;
  p.mean = j["mean"], p.p50 = j["p50"], p.p90 = j["p90"], p.p99 = j["p99"];
  p.quantiles = j["quantiles"].get<std::vector<double>>();
  return p;
}
nlohmann::json result_json(const ServeResult& r) {
  const ServeSummary& s = r.summary;
  nlohmann::json sum = {{"requests", s.requests},       {"measured", s.measured},
                        {"makespan", s.makespan},       {"ttft", percentiles_json(s.ttft)},
                        {"tpot", percentiles_json(s.tpot)}, {"e2e", percentiles_json(s.e2e)},
                        {"tbt", percentiles_json(s.tbt)}, {"throughput_rps", s.throughput_rps},
                        {"output_tokens_per_s", s.output_tokens_per_s}, {"slo_attainment", s.slo_attainment},
                        {"goodput_rps", s.goodput_rps}, {"preemptions", s.preemptions},
                        {"swapped_blocks", s.swapped_blocks}, {"iterations", s.iterations},
                        {"mean_batch_tokens", s.mean_batch_tokens}, {"kv_blocks", s.kv_blocks},
                        {"kv_block_size", s.kv_block_size}, {"kv_peak_use", s.kv_peak_use},
                        {"kv_mean_use", s.kv_mean_use}, {"prefill_kv_blocks", s.prefill_kv_blocks},
                        {"kv_transfer_mean", s.kv_transfer_mean}};
  nlohmann::json recs = nlohmann::json::array();
  for (const auto& x : r.records)
    recs.push_back({x.id, x.arrival, x.first_token, x.last_token, x.prompt, x.output, x.max_tbt, x.replica,
                    x.prefill_replica, x.kv_transfer, x.tokens});
  nlohmann::json its = nlohmann::json::array();
  for (const auto& x : r.iterations)
    its.push_back({x.replica, x.start, x.duration, x.decodes, x.prefills, x.prefill_tokens, x.kv_used});
  return {{"summary", sum}, {"records", recs}, {"iterations", its}};
}
ServeResult result_of(const nlohmann::json& j) {
  ServeResult r;
  const auto& s = j["summary"];
  ServeSummary& m = r.summary;
  m.requests = s["requests"], m.measured = s["measured"], m.makespan = s["makespan"];
  m.ttft = percentiles_of(s["ttft"]), m.tpot = percentiles_of(s["tpot"]), m.e2e = percentiles_of(s["e2e"]);
  m.tbt = percentiles_of(s["tbt"]);
  m.throughput_rps = s["throughput_rps"], m.output_tokens_per_s = s["output_tokens_per_s"];
  m.slo_attainment = s["slo_attainment"], m.goodput_rps = s["goodput_rps"];
  m.preemptions = s["preemptions"], m.swapped_blocks = s["swapped_blocks"], m.iterations = s["iterations"];
  m.mean_batch_tokens = s["mean_batch_tokens"], m.kv_blocks = s["kv_blocks"], m.kv_block_size = s["kv_block_size"];
  m.kv_peak_use = s["kv_peak_use"], m.kv_mean_use = s["kv_mean_use"], m.prefill_kv_blocks = s["prefill_kv_blocks"];
  m.kv_transfer_mean = s["kv_transfer_mean"];
  for (const auto& x : j["records"]) {
    ServeRecord q;
    q.id = x[0], q.arrival = x[1], q.first_token = x[2], q.last_token = x[3], q.prompt = x[4], q.output = x[5];
    q.max_tbt = x[6], q.replica = x[7], q.prefill_replica = x[8], q.kv_transfer = x[9], q.tokens = x[10];
    r.records.push_back(q);
  }
  for (const auto& x : j["iterations"]) {
    ServeIteration it;
    it.replica = x[0], it.start = x[1], it.duration = x[2], it.decodes = x[3], it.prefills = x[4];
    it.prefill_tokens = x[5], it.kv_used = x[6];
    r.iterations.push_back(it);
  }
  return r;
}
}  // namespace

ServeResult simulate_serving(const ServingScenario& s, const ClusterModel& cluster, const ServeOptions& opt) {
  const auto wall0 = std::chrono::steady_clock::now();
  const std::vector<ServeRequest> reqs = make_workload(s.workload);
  const bool disagg = s.disaggregation.enabled;
  const PoolSpec& dpool = s.pool;
  const BatchTimeModel decode_model(s.model, cluster, s.engine, dpool.tp, dpool.pp);
  std::unique_ptr<BatchTimeModel> prefill_model;
  if (disagg)
    prefill_model = std::make_unique<BatchTimeModel>(s.model, cluster, s.engine, s.disaggregation.prefill.tp,
                                                     s.disaggregation.prefill.pp);
  const auto& sc = s.scheduler;
  KvCapacity dcap = decode_model.kv_capacity(sc.block_size, sc.max_batched_tokens, sc.max_batch_size);
  KvCapacity pcap;
  if (disagg) pcap = prefill_model->kv_capacity(sc.block_size, sc.max_batched_tokens, sc.max_batch_size);
  // The engine's own count, as it resolved it from its memory polynomial (recorded with a
  // measured run), replaces the memory model's.
  if (sc.num_blocks > 0) {
    dcap.blocks = sc.num_blocks;
    if (disagg) pcap.blocks = sc.num_blocks;
  }

  // Inputs the replicas can never serve are errors, not hangs.
  const auto fit_error = [&](const KvCapacity& k, const char* path) {
    if (!k.fits())
      throw InputError(s.source, path,
                       fmt::format("the model does not fit: {:.2f} GiB of weights and {:.2f} GiB of workspace per GPU "
                                   "leave no KV cache in {:.2f} GiB (raise tp or pp, or memory_fraction)",
                                   k.weights / (1 << 30), k.workspace / (1 << 30), k.budget / (1 << 30)));
  };
  fit_error(dcap, "/serving/tp");
  if (disagg) fit_error(pcap, "/serving/disaggregation/tp");
  const std::string wpath = s.workload.arrival == ArrivalKind::trace ? "/workload/trace" : "/workload";
  for (const auto& r : reqs) {
    const auto check = [&](const KvCapacity& k, i64 tokens) {
      // transformers-fifo has no watermark: a lone request may take every block.
      const i64 usable = sc.kind == SchedulerKind::transformers_fifo
                             ? k.blocks
                             : k.blocks - static_cast<i64>(sc.watermark * double(k.blocks));
      if ((tokens + sc.block_size - 1) / sc.block_size > usable)
        throw InputError(s.source, wpath,
                         fmt::format("request {} needs the KV cache of {} tokens, a replica holds {} ({} blocks of {})",
                                     r.id, tokens, usable * sc.block_size, usable, sc.block_size));
    };
    check(dcap, r.prompt + r.output);
    if (disagg) check(pcap, r.prompt + 1);
    if (sc.kind != SchedulerKind::sarathi && sc.kind != SchedulerKind::transformers_fifo && r.prompt > sc.max_batched_tokens)
      throw InputError(s.source, wpath,
                       fmt::format("request {} has a {}-token prompt, above max_batched_tokens ({}) of a scheduler "
                                   "without chunked prefill",
                                   r.id, r.prompt, sc.max_batched_tokens));
  }

  std::vector<Replica> reps;
  i64 gpu = 0;
  if (disagg) {
    for (i64 i = 0; i < s.disaggregation.prefill.replicas; ++i) {
      Replica r;
      r.model = prefill_model.get();
      r.sched = std::make_unique<ReplicaScheduler>(sc, pcap.blocks, true);
      r.prefill_only = true;
      r.first_gpu = gpu;
      r.host_draw = LaunchResidualDraw(s.engine.host.launch_residual, s.workload.seed, reps.size());
      gpu += s.disaggregation.prefill.tp * s.disaggregation.prefill.pp;
      reps.push_back(std::move(r));
    }
  }
  const i64 first_decode = i64(reps.size());
  for (i64 i = 0; i < dpool.replicas; ++i) {
    Replica r;
    r.model = &decode_model;
    r.sched = std::make_unique<ReplicaScheduler>(sc, dcap.blocks, false);
    r.first_gpu = gpu;
    r.host_draw = LaunchResidualDraw(s.engine.host.launch_residual, s.workload.seed, reps.size());
    gpu += dpool.tp * dpool.pp;
    reps.push_back(std::move(r));
  }
  // A replica whose activations cross nodes between two stages sends them through PCIe,
  // NICs and switches that other replicas' sends and KV transfers may share: those sends
  // run as flows. Stages inside one node use only their own GPUs' switch ports or links,
  // which no other replica's traffic crosses in the same direction, so the closed form
  // (BatchTimeModel) is what the flows would give there and stays.
  // A tp group lies inside one node unless tp does not divide gpus_per_node or the GPUs
  // before its replica are not a multiple of tp; then its collectives cross the NICs, which
  // the closed form (a group inside one node) does not price: they run as flows too.
  bool any_flows = false;
  const auto node = [&](i64 gpu) { return gpu / cluster.gpus_per_node; };
  for (Replica& r : reps) {
    const i64 tp = r.model->tp(), pp = r.model->pp();
    for (i64 st = 0; st + 1 < pp && !r.flows; ++st)
      for (i64 k = 0; k < tp; ++k)
        if (node(r.first_gpu + st * tp + k) != node(r.first_gpu + (st + 1) * tp + k)) r.flows = true;
    for (i64 st = 0; st < pp; ++st)
      if (node(r.first_gpu + st * tp) != node(r.first_gpu + st * tp + tp - 1)) r.tp_flows = true;
    r.flows = r.flows || r.tp_flows;
    any_flows = any_flows || r.flows;
  }
  std::vector<i64> stage_layers_p, stage_layers_d;  // layers per stage (rules' pipeline split)
  stage_layers_d = layers_per_virtual_stage(s.model.layers, dpool.pp, 1);
  if (disagg) stage_layers_p = layers_per_virtual_stage(s.model.layers, s.disaggregation.prefill.pp, 1);
  // Disaggregation: each layer's KV cache lives on the pipeline stage that holds the layer
  // (rules' pipeline split) and its kv heads are split over the tp ranks in order, on the
  // prefill instance as on the decode instance; every (prefill GPU, decode GPU) pair that
  // holds the same layers and heads moves their share: layers in common / layers x heads in
  // common (in units of 1 / (tp_p tp_d)) / (tp_p tp_d). Equal layouts pair rank k of stage s
  // with rank k of stage s, 1 / (tp pp) of the cache each.
  std::vector<PlatformWork::KvRoute> kv_routes;
  if (disagg) {
    const PoolSpec& pf = s.disaggregation.prefill;
    const auto bounds = [&](i64 pp) {
      std::vector<i64> b{0};
      for (i64 n : layers_per_virtual_stage(s.model.layers, pp, 1)) b.push_back(b.back() + n);
      return b;
    };
    const std::vector<i64> lp = bounds(pf.pp), ld = bounds(dpool.pp);
    const i64 den = s.model.layers * pf.tp * dpool.tp;
    for (i64 sp = 0; sp < pf.pp; ++sp)
      for (i64 kp = 0; kp < pf.tp; ++kp)
        for (i64 sd = 0; sd < dpool.pp; ++sd)
          for (i64 kd = 0; kd < dpool.tp; ++kd) {
            const i64 layers = std::min(lp[sp + 1], ld[sd + 1]) - std::max(lp[sp], ld[sd]);
            const i64 heads = std::min((kp + 1) * dpool.tp, (kd + 1) * pf.tp) - std::max(kp * dpool.tp, kd * pf.tp);
            if (layers <= 0 || heads <= 0) continue;
            const i64 num = layers * heads, g = std::gcd(num, den);
            kv_routes.push_back({sp * pf.tp + kp, sd * dpool.tp + kd, num / g, den / g});
          }
  }

  ServeResult out;
  out.records.resize(reqs.size());
  for (const auto& r : reqs) {
    auto& rec = out.records[std::size_t(r.id)];
    rec.id = r.id;
    rec.arrival = r.arrival;
    rec.prompt = r.prompt;
    rec.output = r.output;
  }
  std::priority_queue<Event, std::vector<Event>, std::greater<>> events;
  i64 seq = 0;
  std::vector<i64> rr(2, 0);  // round-robin cursors: entry pool, decode pool (disaggregation)
  const auto route = [&](i64 lo, i64 hi, int cursor) {
    if (s.router == RouterKind::round_robin) {
      const i64 r = lo + rr[cursor] % (hi - lo);
      ++rr[cursor];
      return r;
    }
    i64 best = lo;
    for (i64 i = lo + 1; i < hi; ++i) {
      const auto load = [&](i64 k) { return reps[k].sched->outstanding_tokens() + reps[k].pending_tokens; };
      if (load(i) < load(best)) best = i;
    }
    return best;
  };

  BatchShape shape;
  std::vector<TokenEvent> tokens;
  GapHistogram gaps;
  i64 iterations = 0;
  double batch_tokens = 0;
  const double block_bytes = decode_model.kv_bytes_per_token() * double(sc.block_size);
  PlatformWork* work = nullptr;  // set when the loop runs in a SimGrid actor (disaggregation, flows)
  const auto start = [&](i64 ri, Seconds now) {
    Replica& r = reps[std::size_t(ri)];
    i64 swap_blocks = 0;
    if (!r.sched->schedule(shape, swap_blocks)) {
      r.busy = false;
      return;
    }
    const std::uint64_t key = r.model->graph_key(shape);
    const BatchTime bt = r.model->time(shape, key != 0 && !r.graphs.insert(key).second, r.host_draw.next());
    // Swapping moves blocks over PCIe before the forward runs.
    const Seconds swap = swap_blocks > 0 ? double(swap_blocks) * block_bytes / cluster.gpu.pcie_bandwidth : 0.0;
    const Seconds dur = bt.total + swap;
    r.busy = true;
    ++iterations;
    batch_tokens += double(shape.tokens());
    if (r.flows) {
      // Its length is known when its flows are done (iteration_ended).
      r.iter_start = now;
      r.iter_blocks = double(r.sched->used_blocks());
      r.iter_record = -1;
      if (opt.keep_iterations) {
        ServeIteration it;
        it.replica = std::int32_t(ri);
        it.start = now;
        it.decodes = std::int32_t(shape.decodes);
        it.prefills = std::int32_t(shape.prefills.size());
        it.prefill_tokens = shape.tokens() - shape.decodes;
        it.kv_used = r.sched->total_blocks() ? double(r.sched->used_blocks()) / double(r.sched->total_blocks()) : 0;
        r.iter_record = i64(out.iterations.size());
        out.iterations.push_back(it);
      }
      work->start_iteration(now, ri, *r.model, bt, swap, r.first_gpu,
                            r.tp_flows ? r.model->tp_collectives(shape) : std::vector<TpCollective>{},
                            r.prefill_only ? &stage_layers_p : &stage_layers_d, &r.iter_end);
      return;
    }
    r.used_block_seconds += double(r.sched->used_blocks()) * dur;
    if (opt.keep_iterations) {
      ServeIteration it;
      it.replica = std::int32_t(ri);
      it.start = now;
      it.duration = dur;
      it.decodes = std::int32_t(shape.decodes);
      it.prefills = std::int32_t(shape.prefills.size());
      it.prefill_tokens = shape.tokens() - shape.decodes;
      it.kv_used = r.sched->total_blocks() ? double(r.sched->used_blocks()) / double(r.sched->total_blocks()) : 0;
      out.iterations.push_back(it);
    }
    events.push({now + dur, 0, seq++, ri, 0});
  };

  std::size_t next = 0;
  Seconds now = 0;
  const i64 entry_hi = disagg ? first_decode : i64(reps.size());
  // A request's KV cache has reached its decode instance: it joins that scheduler.
  const auto arrived = [&](i64 id, i64 decode) {
    Replica& d = reps[std::size_t(decode)];
    const auto& rec = out.records[std::size_t(id)];
    d.pending_tokens -= rec.output - 1;
    d.sched->add(ServeRequest{rec.id, rec.arrival, rec.prompt, rec.output}, true);
    if (!d.busy) start(decode, now);
  };
  // An iteration of replica `ri` has ended at `now`: its tokens, then its next iteration.
  const auto iteration_ended = [&](i64 ri) {
    Replica& r = reps[std::size_t(ri)];
    r.sched->complete(tokens);
    for (const TokenEvent& t : tokens) {
      auto& rec = out.records[std::size_t(t.id)];
      ++rec.tokens;
      if (t.index == 1) {
        rec.first_token = now;
      } else {
        const Seconds gap = now - rec.last_token;
        rec.max_tbt = std::max(rec.max_tbt, gap);
        if (rec.arrival >= s.workload.warmup) gaps.add(gap);
      }
      rec.last_token = now;
      if (r.prefill_only && t.finished && rec.output > 1) {
        const i64 d = route(first_decode, i64(reps.size()), 1);
        rec.replica = d;
        reps[std::size_t(d)].pending_tokens += rec.output - 1;
        const Bytes kv = r.model->kv_bytes_of_request(rec.prompt);
        work->start_transfer(now, t.id, d, kv, kv_routes, r.first_gpu, reps[std::size_t(d)].first_gpu);
      }
    }
    start(ri, now);
  };
  const auto loop = [&] {
  while (next < reqs.size() || !events.empty() || (work && work->pending())) {
    if (work && work->pending()) {
      // The next local event, unless a transfer or an iteration on the platform ends first.
      Seconds until = std::numeric_limits<double>::infinity();
      if (next < reqs.size()) until = reqs[next].arrival;
      if (!events.empty()) until = std::min(until, events.top().t);
      PlatformWork::Done d;
      if (work->wait(until, d)) {
        if (d.iteration) {
          Replica& r = reps[std::size_t(d.replica)];
          now = std::max(now, r.iter_end);
          r.used_block_seconds += r.iter_blocks * (r.iter_end - r.iter_start);
          if (r.iter_record >= 0) out.iterations[std::size_t(r.iter_record)].duration = r.iter_end - r.iter_start;
          iteration_ended(d.replica);
          continue;
        }
        now = std::max(now, d.end);
        out.records[std::size_t(d.request)].kv_transfer = d.end - d.start;
        arrived(d.request, d.decode);
        continue;
      }
    }
    const bool take_arrival =
        next < reqs.size() && (events.empty() || reqs[next].arrival < events.top().t ||
                               (reqs[next].arrival == events.top().t && events.top().kind > 1));
    if (take_arrival) {
      const ServeRequest& r = reqs[next++];
      now = r.arrival;
      const i64 ri = route(0, entry_hi, 0);
      out.records[std::size_t(r.id)].replica = ri;
      if (disagg) out.records[std::size_t(r.id)].prefill_replica = ri;
      reps[std::size_t(ri)].sched->add(r);
      if (!reps[std::size_t(ri)].busy) start(ri, now);
      continue;
    }
    const Event e = events.top();
    events.pop();
    now = e.t;
    iteration_ended(e.a);
  }
  };

  const auto summarize = [&] {
  // Summary over the measured requests (arrived after the warm-up).
  ServeSummary& sm = out.summary;
  summarize_requests(out.records, s.workload.warmup, s.slo, sm);
  sm.tbt = gaps.percentiles();
  sm.iterations = iterations;
  sm.mean_batch_tokens = iterations ? batch_tokens / double(iterations) : 0;
  sm.kv_blocks = dcap.blocks;
  sm.kv_block_size = sc.block_size;
  sm.prefill_kv_blocks = disagg ? pcap.blocks : 0;
  double used = 0, capacity = 0;
  for (std::size_t i = std::size_t(first_decode); i < reps.size(); ++i) {
    const auto& st = reps[i].sched->stats();
    sm.kv_peak_use = std::max(sm.kv_peak_use, double(st.peak_blocks) / double(reps[i].sched->total_blocks()));
    used += reps[i].used_block_seconds;
    capacity += double(reps[i].sched->total_blocks()) * sm.makespan;
  }
  for (const auto& r : reps) {
    sm.preemptions += r.sched->stats().preemptions;
    sm.swapped_blocks += r.sched->stats().swapped_out_blocks;
  }
  sm.kv_mean_use = capacity > 0 ? used / capacity : 0;
  };

  if (!disagg && !any_flows) {
    // Nothing moves between replicas or nodes: the plain event loop, no SimGrid.
    loop();
    summarize();
  } else {
    // The loop runs as one actor on the cluster's platform, the KV transfers and the
    // cross-node pipeline sends as flows, in a child process (one SimGrid engine per
    // process).
    out = result_of(in_child([&] {
      auto args = engine_arguments(NetworkModelConfig{});
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      int argc = static_cast<int>(args.size());
      sg4::Engine engine(&argc, argv.data());
      const Platform platform = build_platform(cluster);
      PlatformWork w(platform, reps.size());
      work = &w;
      std::exception_ptr failed;
      sg4::Actor::create("serve-controller", platform.gpus.front(), [&] {
        try {
          loop();
        } catch (...) {
          failed = std::current_exception();
        }
      });
      engine.run();
      if (failed) std::rethrow_exception(failed);
      summarize();
      return result_json(out);
    }));
  }
  out.summary.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();
  return out;
}

void summarize_requests(const std::vector<ServeRecord>& records, Seconds warmup, const SloSpec& slo, ServeSummary& sm) {
  sm.requests = i64(records.size());
  sm.measured = 0;
  sm.makespan = 0;
  std::vector<double> ttft, tpot, e2e;
  Seconds window_start = -1, window_end = 0;
  i64 good = 0;
  double out_tokens = 0, transfer = 0;
  for (const auto& rec : records) {
    sm.makespan = std::max(sm.makespan, rec.last_token);
    if (rec.arrival < warmup) continue;
    ++sm.measured;
    ttft.push_back(rec.ttft());
    e2e.push_back(rec.e2e());
    if (rec.output > 1) tpot.push_back(rec.tpot());
    if (window_start < 0) window_start = rec.arrival;
    window_end = std::max(window_end, rec.last_token);
    out_tokens += double(rec.output);
    transfer += rec.kv_transfer;
    const bool ok = (slo.ttft <= 0 || rec.ttft() <= slo.ttft) && (slo.tpot <= 0 || rec.tpot() <= slo.tpot) &&
                    (slo.e2e <= 0 || rec.e2e() <= slo.e2e);
    good += ok ? 1 : 0;
  }
  sm.ttft = percentiles(ttft);
  sm.tpot = percentiles(tpot);
  sm.e2e = percentiles(e2e);
  const double window = window_end - std::max(0.0, window_start);
  if (window > 0) {
    sm.throughput_rps = double(sm.measured) / window;
    sm.output_tokens_per_s = out_tokens / window;
    sm.goodput_rps = double(good) / window;
  }
  sm.slo_attainment = sm.measured ? double(good) / double(sm.measured) : 0;
  sm.kv_transfer_mean = sm.measured ? transfer / double(sm.measured) : 0;
}

Percentiles token_gap_percentiles(const std::vector<double>& gaps) {
  GapHistogram h;
  for (double g : gaps) h.add(g);
  return h.percentiles();
}

nlohmann::json to_json(const ServeSummary& s) {
  const auto pct = [](const Percentiles& p) {
    nlohmann::json j{{"mean", p.mean}, {"p50", p.p50}, {"p90", p.p90}, {"p99", p.p99}};
    if (!p.quantiles.empty()) j["quantiles"] = p.quantiles;
    return j;
  };
  return {{"requests", s.requests},
          {"measured_requests", s.measured},
          {"makespan_s", s.makespan},
          {"ttft_s", pct(s.ttft)},
          {"tpot_s", pct(s.tpot)},
          {"tbt_s", pct(s.tbt)},
          {"e2e_s", pct(s.e2e)},
          {"throughput_rps", s.throughput_rps},
          {"output_tokens_per_s", s.output_tokens_per_s},
          {"slo_attainment", s.slo_attainment},
          {"goodput_rps", s.goodput_rps},
          {"preemptions", s.preemptions},
          {"swapped_blocks", s.swapped_blocks},
          {"iterations", s.iterations},
          {"mean_batch_tokens", s.mean_batch_tokens},
          {"kv_blocks_per_replica", s.kv_blocks},
          {"kv_block_size", s.kv_block_size},
          {"kv_peak_use", s.kv_peak_use},
          {"kv_mean_use", s.kv_mean_use},
          {"prefill_kv_blocks_per_replica", s.prefill_kv_blocks},
          {"kv_transfer_mean_s", s.kv_transfer_mean}};
}

std::string requests_csv(const ServeResult& r) {
  std::string out = "id,arrival_s,prompt_tokens,output_tokens,replica,prefill_replica,ttft_s,tpot_s,e2e_s,max_tbt_s,kv_transfer_s\n";
  for (const auto& x : r.records)
    out += fmt::format("{},{:.9g},{},{},{},{},{:.9g},{:.9g},{:.9g},{:.9g},{:.9g}\n", x.id, x.arrival, x.prompt, x.output,
                       x.replica, x.prefill_replica, x.ttft(), x.tpot(), x.e2e(), x.max_tbt, x.kv_transfer);
  return out;
}

nlohmann::json perfetto_trace(const ServeResult& r) {
  nlohmann::json ev = nlohmann::json::array();
  for (const auto& it : r.iterations) {
    const double ts = it.start * 1e6;
    ev.push_back({{"name", it.prefills ? (it.decodes ? "mixed" : "prefill") : "decode"},
                  {"ph", "X"},
                  {"pid", 0},
                  {"tid", it.replica},
                  {"ts", ts},
                  {"dur", it.duration * 1e6},
                  {"args", {{"decodes", it.decodes}, {"prefills", it.prefills}, {"prefill_tokens", it.prefill_tokens}}}});
    ev.push_back({{"name", fmt::format("kv use replica {}", it.replica)},
                  {"ph", "C"},
                  {"pid", 0},
                  {"ts", ts},
                  {"args", {{"used", it.kv_used}}}});
  }
  return {{"traceEvents", ev}, {"displayTimeUnit", "ms"}};
}

}  // namespace clustersim::sim
