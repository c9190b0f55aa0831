// The replay. Actors block on simulated work: compute is a delay of the op time from
// costmodel; every collective and pipeline send is flows on the platform (see
// collective_algorithms.hpp), so concurrent traffic shares links. A collective that
// spans several actors (data-parallel gradient reduction, expert all-to-all, tied
// embeddings) meets at a barrier; the first member then runs the flows of every rank
// while the others wait at a second barrier.
//
// Overlap interference (rules.hpp overlap_slowdown) where compute and communication share a
// GPU: only the communication-stream actor's data-parallel collectives (gradient
// buckets, ZeRO-3 gathers) run beside compute; everything else blocks the compute actor.
// A compute segment started while such a collective is queued or in flight waits on a
// condition variable instead of sleeping, woken when the collective starts or ends, and
// progresses at the rate of each interval. A collective's flows run at the network's
// speed; the part of their flight during which a member GPU computed is then owed at
// the compute-beside rate and paid after the flows (again slowed while compute runs), so
// a lone collective overlapping one compute segment ends exactly where overlap_exposed
// says. Without measured factors, or without a communication stream, compute sleeps as
// before and nothing is tracked.
#include "sim/replay.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <set>
#include <stdexcept>
#include <simgrid/s4u.hpp>
#include <tuple>

#include "sim/collective_algorithms.hpp"

namespace sg4 = simgrid::s4u;

namespace clustersim::sim {
namespace {
using i64 = std::int64_t;
double now() { return sg4::Engine::get_clock(); }
}  // namespace

struct Replay::Impl {
  struct Group {
    i64 stage = 0, replica = 0;
    std::vector<i64> ranks;                    // its GPUs: cp x tp (context-parallel rank major)
    std::set<std::tuple<int, i64, i64>> arrived;  // (backward?, chunk, micro-batch) received
    // Blocking sends (rules.hpp PipelineSend::blocking): offered to this group and waiting
    // for its receive; this group's own sends its receiver has completed.
    std::set<std::tuple<int, i64, i64>> offered, delivered;
    sg4::MutexPtr mu = sg4::Mutex::create();
    sg4::ConditionVariablePtr cv = sg4::ConditionVariable::create();
    struct Job {
      bool gather = false;  // ZeRO-3 parameter all-gather (bytes), else a gradient bucket (params)
      Bytes bytes = 0;
      double params = 0;
    };
    std::deque<Job> jobs;  // for the communication stream, in issue order
    bool no_more_jobs = false, comm_done = false;
    double host_clock = 0;  // when the host has launched everything issued so far
    std::int64_t gathers_posted = 0, gathers_done = 0;
    // Overlap interference: data-parallel collectives of its GPUs in flight (flows started,
    // interference not yet paid), whether the communication stream holds a job, and the
    // compute actor's wake-up when the first changes.
    int dp_in_flight = 0;
    bool comm_busy = false;
    sg4::ConditionVariablePtr rate_cv = sg4::ConditionVariable::create();
    // DualPipe: the GPU, held by a compute segment, so that the two chunks of an overlapped
    // pair compute one at a time while either one's collectives run.
    sg4::MutexPtr gpu = sg4::Mutex::create();
    GroupStats st;
  };

  // The compute of a stage's groups, which are the members of its data-parallel
  // collectives: how many compute now and for how long at least one did, so a collective
  // knows how much of its flight ran beside compute; collectives paying their
  // interference wait on `cv`, notified when that changes.
  struct StageCompute {
    int computing = 0, paying = 0;
    double busy = 0, since = 0;  // time with at least one group computing, up to `since`
    sg4::MutexPtr mu = sg4::Mutex::create();
    sg4::ConditionVariablePtr cv = sg4::ConditionVariable::create();
    double busy_at(double t) const { return busy + (computing > 0 ? t - since : 0.0); }
    void change(int delta, double t) {
      busy = busy_at(t);
      since = t;
      computing += delta;
      if (paying > 0) cv->notify_all();
    }
  };

  const ReplayPlan& plan;
  Network& net;
  Trace* trace;
  std::vector<Group> groups;
  std::vector<sg4::BarrierPtr> dp_barrier, ep_barrier, tied_barrier;
  bool interfere = false;  // measured factors and a communication stream
  std::vector<StageCompute> stage_compute;
  // DualPipe: the expert all-to-alls of the second chunk of an overlapped pair (lane 1)
  // meet at barriers of their own, the first chunk's and unpaired ones at ep_barrier.
  std::vector<sg4::BarrierPtr> ep_barrier_pair;
  bool dual() const { return plan.schedule == Schedule::dualpipe; }
  // Replicas with actors per stage: all, or the representatives of replica symmetry
  // (sim/symmetry.hpp), whose collectives still name every replica's GPUs.
  i64 replicas = 1;

  Impl(const ReplayPlan& p, Network& n, Trace* t) : plan(p), net(n), trace(t) {}

  i64 rank(i64 s, i64 d, i64 c, i64 t) const { return plan_rank(plan.dp, plan.tp, plan.cp, s, d, c, t); }
  i64 gradient_ranks() const { return clustersim::gradient_ranks(plan.dp, plan.cp, plan.schedule); }
  // DualPipe: a rank holds stage s and stage p-1-s, and each stage's gradients are reduced
  // over the dp replicas of both ranks (gradient_ranks). Each of the two ranks' groups
  // reduces its own direction-0 stage, half of what it holds, over those 2 dp ranks, so
  // the pair of reductions moves what the estimator's one reduction of all its parameters
  // over 2 dp ranks moves.
  // `fp8_params` (of params, those TE casts) matters to the parameter gathers only.
  GradientSync sync(double params, double fp8_params = 0) const {
    const double copies = double(model_copies(plan.schedule));
    return gradient_sync(params / copies, fp8_params / copies, plan.precision, plan.zero, gradient_ranks(), plan.shard);
  }
  // The tensor-parallel groups of a (stage, replica): one per context-parallel rank.
  std::vector<std::vector<i64>> tp_groups(const Group& g) const {
    std::vector<std::vector<i64>> out;
    for (i64 c = 0; c < plan.cp; ++c)
      out.emplace_back(g.ranks.begin() + c * plan.tp, g.ranks.begin() + (c + 1) * plan.tp);
    return out;
  }
  Group& group(i64 s, i64 d) { return groups[static_cast<std::size_t>(s * replicas + d)]; }

  void slice(const Group& g, Stream stream, const std::string& name, double t0, double t1) {
    if (!trace || t1 <= t0) return;
    for (i64 r : g.ranks) trace->slice(r, stream, name, t0, t1);
  }

  // Marks a data-parallel collective of g's GPUs in flight (+1) or done (-1); a compute
  // segment of g running beside it changes rate.
  void set_in_flight(Group& g, int delta) {
    g.dp_in_flight += delta;
    g.rate_cv->notify_all();
  }

  // `work` seconds of compute (its time alone) on g's GPUs; returns how long it took,
  // slowed by overlap_slowdown while a data-parallel collective of g is in flight.
  Seconds compute(Group& g, Seconds work) {
    const double t0 = now();
    if (!interfere) {
      sg4::this_actor::sleep_for(work);
      return work;
    }
    StageCompute& sc = stage_compute[static_cast<std::size_t>(g.stage)];
    sc.change(+1, t0);
    Seconds took = work;
    if (g.dp_in_flight == 0 && !g.comm_busy && g.jobs.empty()) {
      // Only this actor posts jobs: no collective can start beside this segment.
      sg4::this_actor::sleep_for(work);
    } else {
      std::unique_lock lock(*g.mu);
      Seconds left = work;
      while (left > 0) {
        const double slow = overlap_slowdown(g.dp_in_flight > 0, true, plan.interference).compute;
        const double t = now();
        if (g.rate_cv->wait_for(lock, left * slow) == std::cv_status::timeout) break;
        left -= (now() - t) / slow;
      }
      took = now() - t0;
    }
    sc.change(-1, now());
    return took;
  }

  // After a data-parallel collective's flows (started at t0, when the stage had computed
  // `busy0`): what its flight beside compute should have lost, paid at the rate of the
  // moment.
  void pay_interference(Group& g, double busy0) {
    StageCompute& sc = stage_compute[static_cast<std::size_t>(g.stage)];
    Seconds owed = (sc.busy_at(now()) - busy0) * (1.0 - 1.0 / overlap_slowdown(true, true, plan.interference).comm);
    if (owed <= 0) return;
    std::unique_lock lock(*sc.mu);
    ++sc.paying;
    while (owed > 0) {
      const double slow = overlap_slowdown(true, sc.computing > 0, plan.interference).comm;
      const double t = now();
      if (sc.cv->wait_for(lock, owed * slow) == std::cv_status::timeout) break;
      owed -= (now() - t) / slow;
    }
    --sc.paying;
  }

  // A collective over the same tensor-parallel rank of several replicas of stage s.
  // `gradient`: over the gradient group (the replicas' context-parallel GPUs too), in
  // HSDP's shard groups, then, for `replica_bytes`, an all-reduce across them; it may run
  // beside compute on the communication stream. Else one group per context-parallel rank
  // (the expert all-to-all).
  void across_replicas(Group& g, const sg4::BarrierPtr& barrier, i64 first, i64 count, Collective kind, Bytes bytes,
                       const std::string& label, Seconds& account, Stream stream, bool gradient = false,
                       Bytes replica_bytes = 0) {
    barrier->wait();
    const double t0 = now();
    const bool track = interfere && gradient;
    if (track) set_in_flight(g, +1);
    if (g.replica == first) {
      CollectiveCall call{kind, bytes, {}, label};
      CollectiveCall across{Collective::all_reduce, replica_bytes, {}, label + " across shard groups"};
      for (i64 t = 0; t < plan.tp; ++t) {
        if (gradient) {
          std::vector<i64> members;  // dp x cp (x DualPipe's two stages of a rank), in rank order
          for (i64 d = first; d < first + count; ++d)
            for (i64 c = 0; c < plan.cp; ++c) {
              members.push_back(rank(g.stage, d, c, t));
              if (dual()) members.push_back(rank(plan.pp - 1 - g.stage, d, c, t));
            }
          std::sort(members.begin(), members.end());
          const i64 n = static_cast<i64>(members.size());
          const i64 shard = plan.shard > 0 && plan.shard < n ? plan.shard : n;
          for (i64 k = 0; k < n; k += shard) call.groups.emplace_back(members.begin() + k, members.begin() + k + shard);
          if (replica_bytes > 0)
            for (i64 j = 0; j < shard; ++j) {
              std::vector<i64> r;
              for (i64 k = j; k < n; k += shard) r.push_back(members[static_cast<std::size_t>(k)]);
              across.groups.push_back(std::move(r));
            }
        } else {
          for (i64 c = 0; c < plan.cp; ++c) {
            std::vector<i64> members;
            for (i64 d = first; d < first + count; ++d) members.push_back(rank(g.stage, d, c, t));
            call.groups.push_back(std::move(members));
          }
        }
      }
      const double busy0 = track ? stage_compute[static_cast<std::size_t>(g.stage)].busy_at(t0) : 0.0;
      run_collective(net, plan.collectives, call);
      if (!across.groups.empty()) run_collective(net, plan.collectives, across);
      if (track) pay_interference(g, busy0);
    }
    barrier->wait();
    if (track) set_in_flight(g, -1);
    account += now() - t0;
    ++g.st.collectives;
    slice(g, stream, label, t0, now());
  }

  void wait_for_host(Group& g, double until) {
    if (until <= now()) return;
    const double t0 = now();
    sg4::this_actor::sleep_until(until);
    g.st.host_wait += now() - t0;
    slice(g, Stream::compute, "waiting for the host", t0, now());
  }

  // Context parallelism's attention (Segment::context): the ring's sends, each beside
  // 1/cp of the attention, every GPU of the cp group sending to the next at once; or the
  // all-to-alls over the cp group, then the attention. The attention is compute() like
  // any segment's: slowed while a data-parallel collective of g's GPUs is in flight. The
  // ring's own sends do not slow it here (the estimator's ring_attention_exposed charges
  // overlap_slowdown for them): see tests/sim/test_context_parallel_sim.cpp.
  void run_context_segment(Group& g, const Segment& seg, i64 mb) {
    const ContextExchange& x = seg.context;
    const double t0 = now();
    Seconds computed = 0, took = 0;
    if (x.algorithm == CpAlgorithm::ring) {
      CollectiveCall call{Collective::send_recv, seg.context_bytes, {}, trace ? fmt::format("ring kv mb{}", mb) : std::string()};
      for (i64 t = 0; t < plan.tp; ++t)
        for (i64 c = 0; c < plan.cp; ++c)
          call.groups.push_back({g.ranks[static_cast<std::size_t>(c * plan.tp + t)],
                                 g.ranks[static_cast<std::size_t>((c + 1) % plan.cp * plan.tp + t)]});
      const Seconds step = seg.compute / double(plan.cp);
      for (i64 k = 0; k < x.steps; ++k) {
        // The send on an actor of its own, beside this step's attention.
        auto sender = sg4::Actor::create(fmt::format("cp-ring-s{}-r{}", g.stage, g.replica), sg4::this_actor::get_host(),
                                         [this, &call] { run_collective(net, plan.collectives, call); });
        took += compute(g, step);
        sender->join();
        computed += step;
        ++g.st.collectives;
      }
      took += compute(g, seg.compute - computed);
    } else {
      CollectiveCall call{Collective::all_to_all, seg.context_bytes / double(std::max(1, x.calls)), {},
                          trace ? fmt::format("ulysses all-to-all mb{}", mb) : std::string()};
      for (i64 t = 0; t < plan.tp; ++t) {
        std::vector<i64> members;
        for (i64 c = 0; c < plan.cp; ++c) members.push_back(g.ranks[static_cast<std::size_t>(c * plan.tp + t)]);
        call.groups.push_back(std::move(members));
      }
      for (int k = 0; k < x.calls; ++k) {
        run_collective(net, plan.collectives, call);
        ++g.st.collectives;
      }
      took = compute(g, seg.compute);
    }
    // The interference's share is data-parallel communication, as in run_segment; the
    // rest beyond the attention is the context exchange's exposed time.
    g.st.dp_comm += took - seg.compute;
    g.st.cp_comm += std::max(0.0, now() - t0 - took);
    (seg.work == Work::forward ? g.st.forward : seg.work == Work::backward ? g.st.backward : g.st.recompute) += seg.compute;
    ++g.st.compute_activities;
    if (trace && now() > t0) {
      const char* tag = seg.work == Work::forward ? "F" : seg.work == Work::backward ? "B" : "R";
      slice(g, Stream::compute, fmt::format("{} {} mb{} (context-parallel)", tag, seg.ops.empty() ? "attention" : seg.ops.front().name, mb),
            t0, now());
    }
  }

  void run_segment(Group& g, const Segment& seg, i64 mb, int lane = 0) {
    if (seg.context.active()) {
      const double host_start = g.host_clock;
      g.host_clock += seg.host;
      wait_for_host(g, host_start);
      run_context_segment(g, seg, mb);
      wait_for_host(g, g.host_clock);
      return;
    }
    // The host launches this segment's kernels in order after everything before them and
    // never waits for the GPU: the segment's first kernel cannot start before the host
    // reaches it, its last cannot finish before the host has launched it.
    const double host_start = g.host_clock;
    g.host_clock += seg.host;
    wait_for_host(g, host_start);
    if (seg.compute > 0) {
      if (dual()) g.gpu->lock();
      const double t0 = now();
      const Seconds took = compute(g, seg.compute);
      if (dual()) g.gpu->unlock();
      ++g.st.compute_activities;
      (seg.work == Work::forward ? g.st.forward : seg.work == Work::backward ? g.st.backward : g.st.recompute) +=
          seg.compute;
      // What the interference added is the overlap's exposed part, data-parallel
      // communication as in the estimator's breakdown.
      g.st.dp_comm += took - seg.compute;
      if (trace) {
        double t = t0;
        const double stretch = took / seg.compute;
        const char* tag = seg.work == Work::forward ? "F" : seg.work == Work::backward ? "B" : "R";
        for (const auto& op : seg.ops) {
          slice(g, Stream::compute, fmt::format("{} {} mb{}", tag, op.name, mb), t, t + op.duration * stretch);
          t += op.duration * stretch;
        }
      }
    }
    wait_for_host(g, g.host_clock);
    if (!seg.comm.active()) return;
    const std::string label = trace ? fmt::format("{} mb{}", to_string(seg.comm.kind), mb) : std::string();
    if (seg.comm.group == CommGroup::tp) {
      const double t0 = now();
      // Overlapped with its GEMM (op_timing.hpp overlap_tp_comm): what it still adds, on the
      // tp stream; the hidden part's copies run inside the node beside the GEMM.
      if (seg.comm.overlapped()) sg4::this_actor::sleep_for(seg.comm.exposed);
      else run_collective(net, plan.collectives, {seg.comm.kind, seg.comm.bytes, tp_groups(g), label});
      g.st.tp_comm += now() - t0;
      ++g.st.collectives;
      slice(g, Stream::tp_comm, label, t0, now());
    } else {
      const i64 first = g.replica / plan.ep * plan.ep;
      across_replicas(g, (lane == 0 ? ep_barrier : ep_barrier_pair)[static_cast<std::size_t>(g.stage * (plan.dp / plan.ep) + g.replica / plan.ep)],
                      first, plan.ep, seg.comm.kind, seg.comm.bytes, label, g.st.ep_comm, Stream::ep_comm);
    }
  }

  // Pipeline send of the activation (forward) or its gradient (backward) of model chunk
  // `chunk` to the neighbouring virtual stage (rules.hpp pipeline_send: each
  // tensor-parallel GPU sends its share; the receiver may all-gather on arrival).
  // Whether model chunk `chunk` of stage s has a previous (next) virtual stage to receive
  // from (send to) forward; DualPipe's chunk 1 runs from the last rank to the first.
  bool has_prev(i64 s, i64 chunk) const {
    if (dual()) return chunk == 0 ? s > 0 : s < plan.pp - 1;
    return chunk * plan.pp + s > 0;
  }
  bool has_next(i64 s, i64 chunk) const {
    if (dual()) return chunk == 0 ? s < plan.pp - 1 : s > 0;
    return chunk * plan.pp + s < plan.pp * plan.virtual_stages - 1;
  }

  void send(Group& g, bool forward, i64 chunk, i64 mb) {
    if (blocking(g)) return send_blocking(g, forward, mb);
    const i64 p = plan.pp;
    const i64 vs = chunk * p + g.stage + (forward ? 1 : -1);
    i64 to_stage = vs % p, to_chunk = vs / p;
    if (dual()) {
      to_stage = g.stage + ((chunk == 0) == forward ? 1 : -1);
      to_chunk = chunk;
    }
    const Bytes bytes = plan.stages[static_cast<std::size_t>(g.stage)].chunks[static_cast<std::size_t>(chunk)].send.per_rank;
    const double t0 = now();
    CollectiveCall call{Collective::send_recv, bytes, {}, 
                        trace ? fmt::format("{} mb{} to stage {}", forward ? "act" : "grad", mb, to_stage) : std::string()};
    for (i64 c = 0; c < plan.cp; ++c)
      for (i64 t = 0; t < plan.tp; ++t)
        call.groups.push_back({g.ranks[static_cast<std::size_t>(c * plan.tp + t)], rank(to_stage, g.replica, c, t)});
    run_collective(net, plan.collectives, call);
    g.st.pp_comm += now() - t0;
    slice(g, Stream::pp_comm, call.label, t0, now());
    Group& dst = group(to_stage, g.replica);
    std::unique_lock lock(*dst.mu);
    dst.arrived.insert({forward ? 0 : 1, to_chunk, mb});
    dst.cv->notify_all();
  }

  // DeepSpeed's blocking dist.send / dist.recv (pipe/p2p.py): the transfer starts when
  // both sides have reached it and holds both streams until it ends. The sender offers
  // and waits; the receiver, once offered, moves the bytes and releases it. (Only under
  // 1F1B without interleaving, DeepSpeed's TrainSchedule, whose order compute_stream
  // follows: no two neighbours offer to each other at once.)
  bool blocking(const Group& g) const {
    return plan.stages[static_cast<std::size_t>(g.stage)].chunks.front().send.blocking;
  }
  void send_blocking(Group& g, bool forward, i64 mb) {
    const i64 to_stage = g.stage + (forward ? 1 : -1);
    const std::tuple<int, i64, i64> key{forward ? 0 : 1, 0, mb};
    const double t0 = now();
    Group& dst = group(to_stage, g.replica);
    {
      std::unique_lock lock(*dst.mu);
      dst.offered.insert(key);
      dst.cv->notify_all();
    }
    {
      std::unique_lock lock(*g.mu);
      while (!g.delivered.count(key)) g.cv->wait(lock);
      g.delivered.erase(key);
    }
    g.st.pp_comm += now() - t0;
    if (trace) slice(g, Stream::pp_comm, fmt::format("{} mb{} to stage {}", forward ? "act" : "grad", mb, to_stage), t0, now());
  }
  void receive_blocking(Group& g, bool forward, i64 mb) {
    const std::tuple<int, i64, i64> key{forward ? 0 : 1, 0, mb};
    {
      std::unique_lock lock(*g.mu);
      while (!g.offered.count(key)) g.cv->wait(lock);
      g.offered.erase(key);
    }
    const i64 from_stage = g.stage + (forward ? -1 : 1);
    const double t0 = now();
    CollectiveCall call{Collective::send_recv, plan.stages[static_cast<std::size_t>(from_stage)].chunks.front().send.per_rank, {},
                        trace ? fmt::format("{} mb{} from stage {}", forward ? "act" : "grad", mb, from_stage) : std::string()};
    for (i64 c = 0; c < plan.cp; ++c)
      for (i64 t = 0; t < plan.tp; ++t)
        call.groups.push_back({rank(from_stage, g.replica, c, t), g.ranks[static_cast<std::size_t>(c * plan.tp + t)]});
    run_collective(net, plan.collectives, call);
    g.st.pp_comm += now() - t0;
    slice(g, Stream::pp_comm, call.label, t0, now());
    Group& src = group(from_stage, g.replica);
    std::unique_lock lock(*src.mu);
    src.delivered.insert(key);
    src.cv->notify_all();
  }

  void receive(Group& g, bool forward, i64 chunk, i64 mb) {
    if (blocking(g)) {
      receive_blocking(g, forward, mb);
    } else {
      std::unique_lock lock(*g.mu);
      const std::tuple<int, i64, i64> key{forward ? 0 : 1, chunk, mb};
      while (!g.arrived.count(key)) g.cv->wait(lock);
      g.arrived.erase(key);
    }
    const Bytes act = plan.stages[static_cast<std::size_t>(g.stage)].chunks[static_cast<std::size_t>(chunk)].send.gather_after;
    if (act > 0) {
      const double t0 = now();
      const std::string label = trace ? fmt::format("gather {} mb{}", forward ? "act" : "grad", mb) : std::string();
      run_collective(net, plan.collectives, {Collective::all_gather, act, tp_groups(g), label});
      g.st.pp_comm += now() - t0;
      slice(g, Stream::pp_comm, label, t0, now());
    }
  }

  void post_bucket(Group& g, double params, bool last) {
    std::unique_lock lock(*g.mu);
    if (params > 0) g.jobs.push_back({false, 0, params});
    if (last) g.no_more_jobs = true;
    g.cv->notify_all();
  }

  // ZeRO-3: queues the parameter gathers of a pass's blocks; returns the index of the first.
  std::int64_t post_gathers(Group& g, const std::vector<Segment>& pass) {
    std::unique_lock lock(*g.mu);
    const std::int64_t first = g.gathers_posted;
    for (const auto& seg : pass)
      if (seg.gather_params > 0) {
        g.jobs.push_back({true, sync(seg.gather_params, seg.gather_fp8_params).gather_per_pass});
        ++g.gathers_posted;
      }
    g.cv->notify_all();
    return first;
  }

  void wait_gather(Group& g, std::int64_t index) {
    const double t0 = now();
    std::unique_lock lock(*g.mu);
    while (g.gathers_done <= index) g.cv->wait(lock);
    g.st.dp_comm += now() - t0;
  }

  void run_pass(Group& g, const std::vector<Segment>& pass, std::int64_t mb, std::int64_t first_gather,
                const std::function<void(const Segment&)>& after, int lane = 0) {
    std::int64_t gather = first_gather;
    sg4::ActorPtr copy;  // activation offload: the host copy in flight on the copy engine
    for (const auto& seg : pass) {
      if (first_gather >= 0 && seg.gather_params > 0) wait_gather(g, gather++);
      const bool forward = seg.work == Work::forward;
      if (!forward) offload_markers(g, seg, mb, false, copy);
      run_segment(g, seg, mb, lane);
      if (forward) offload_markers(g, seg, mb, true, copy);
      if (after) after(seg);
    }
    if (copy) copy->join();
  }

  // Activation offload: wait for the copy in flight, then start the segment's copy (D2H in
  // forward, the prefetch H2D in backward) beside the compute that follows. A GPU's copy
  // engine serves one copy at a time and the rule waits for each before the next starts,
  // so a copy is a delay at the calibrated pinned rate rather than a flow: the PCIe link
  // to the host is the GPU's own.
  void offload_markers(Group& g, const Segment& seg, std::int64_t mb, bool forward, sg4::ActorPtr& copy) {
    if (seg.offload_wait && copy) {
      const double t0 = now();
      copy->join();
      copy = nullptr;
      (forward ? g.st.offload_forward : g.st.offload_backward) += now() - t0;
      slice(g, Stream::compute, fmt::format("waiting for offload {} mb{}", forward ? "D2H" : "H2D", mb), t0, now());
    }
    if (seg.offload_copy > 0) {
      const Seconds t = seg.offload_copy;
      copy = sg4::Actor::create(fmt::format("stage{}-replica{}-offload", g.stage, g.replica), sg4::this_actor::get_host(),
                                [t] { sg4::this_actor::sleep_for(t); });
    }
  }

  // The gradient reduction of `params` parameters (all of a stage's, or one bucket's).
  void reduce_gradients(Group& g, double params, Seconds& account) {
    const GradientSync s = sync(params);
    const Collective kind = s.reduce;
    across_replicas(g, dp_barrier[static_cast<std::size_t>(g.stage)], 0, plan.dp, kind, s.reduce_bytes,
                    fmt::format("gradient {}", to_string(kind)), account, Stream::dp_comm, true, s.replica_reduce_bytes);
  }

  void comm_stream(Group& g) {
    Seconds busy = 0;
    while (true) {
      Group::Job job;
      {
        std::unique_lock lock(*g.mu);
        while (g.jobs.empty() && !g.no_more_jobs) g.cv->wait(lock);
        if (g.jobs.empty()) break;
        job = g.jobs.front();
        g.jobs.pop_front();
        g.comm_busy = true;
      }
      if (job.gather) {
        across_replicas(g, dp_barrier[static_cast<std::size_t>(g.stage)], 0, plan.dp, Collective::all_gather, job.bytes,
                        "parameter all-gather (ZeRO-3)", busy, Stream::dp_comm, true);
        std::unique_lock lock(*g.mu);
        ++g.gathers_done;
        g.cv->notify_all();
      } else {
        reduce_gradients(g, job.params, busy);
      }
      g.comm_busy = false;
    }
    std::unique_lock lock(*g.mu);
    g.comm_done = true;
    g.cv->notify_all();
  }

  void compute_stream(Group& g) {
    const StageProgram& prog = plan.stages[static_cast<std::size_t>(g.stage)];
    const i64 p = plan.pp, v = plan.virtual_stages, m = plan.micro_batches;
    const bool overlap = plan.overlap_grad_reduce && gradient_ranks() > 1;
    const bool zero3 = sync(prog.params).gather_per_pass > 0;
    std::vector<i64> in_flight(static_cast<std::size_t>(v), 0);
    double pending_params = 0;
    // Gradients are complete after the last micro-batch's backward (ZB-H1: its weight pass);
    // buckets are handed to the communication stream as they fill.
    // (DualPipe: each chunk's last micro-batch is m/2 - 1 of its direction.)
    const i64 last_mb = dual() ? m / 2 - 1 : m - 1;
    const auto on_gradients = [&](const WorkItem& w) {
      return [&, last_pass = w.micro_batch == last_mb](const Segment& seg) {
        if (overlap && last_pass && seg.grad_params > 0) {
          pending_params += seg.grad_params;
          if (pending_params >= gradient_bucket_elements(plan.framework, plan.precision)) {
            post_bucket(g, pending_params, false);
            pending_params = 0;
          }
        }
      };
    };
    // An item: receive its input, compute, send its output. DualPipe's F&B pair receives
    // both inputs first and sends both outputs after both computed (DualPipe's
    // _forward_backward_chunk); in between, the backward runs on a second actor beside the
    // forward: they share the GPU (one compute segment at a time) but not the links.
    const auto receive_item = [&](const WorkItem& w) {
      if (w.weight) return;
      if (w.forward ? has_prev(g.stage, w.chunk) : has_next(g.stage, w.chunk)) receive(g, w.forward, w.chunk, w.micro_batch);
    };
    const auto send_item = [&](const WorkItem& w) {
      if (w.weight) return;
      if (w.forward ? has_next(g.stage, w.chunk) : has_prev(g.stage, w.chunk)) send(g, w.forward, w.chunk, w.micro_batch);
    };
    // ZeRO-3 posts a pass's parameter gathers before waiting for its input.
    const auto post_item_gathers = [&](const WorkItem& w) -> i64 {
      const ChunkProgram& chunk = prog.chunks[static_cast<std::size_t>(w.chunk)];
      return zero3 && !w.weight ? post_gathers(g, w.forward ? chunk.forward : chunk.backward) : -1;
    };
    const auto compute_item = [&](const WorkItem& w, int lane, i64 gathers) {
      const ChunkProgram& chunk = prog.chunks[static_cast<std::size_t>(w.chunk)];
      if (w.weight) {
        run_pass(g, chunk.weight_grad, w.micro_batch, -1, on_gradients(w), lane);
      } else if (w.forward) {
        run_pass(g, chunk.forward, w.micro_batch, gathers, nullptr, lane);
        ++in_flight[static_cast<std::size_t>(w.chunk)];
        Bytes alive = 0;
        for (i64 c = 0; c < v; ++c)
          alive += double(in_flight[static_cast<std::size_t>(c)]) * prog.chunks[static_cast<std::size_t>(c)].saved;
        g.st.peak_activations = std::max(g.st.peak_activations, alive);
      } else {
        // DeepSpeed kept only its slice of the output it sent: gathered again first.
        if (chunk.send.regather_output > 0 && has_next(g.stage, w.chunk)) {
          const double t0 = now();
          const std::string label = trace ? fmt::format("regather act mb{}", w.micro_batch) : std::string();
          run_collective(net, plan.collectives, {Collective::all_gather, chunk.send.regather_output, tp_groups(g), label});
          g.st.pp_comm += now() - t0;
          slice(g, Stream::pp_comm, label, t0, now());
        }
        run_pass(g, chunk.backward, w.micro_batch, gathers, on_gradients(w), lane);
        // DualPipe's backward chunks compute their weight gradients at once unless deferred.
        if (dual() && !w.defer_weight) run_pass(g, chunk.weight_grad, w.micro_batch, -1, on_gradients(w), lane);
        --in_flight[static_cast<std::size_t>(w.chunk)];
      }
    };
    const std::vector<WorkItem> order = schedule_order(plan.schedule, p, v, m, g.stage, plan.microbatch_group);
    bool received_ahead = false;  // blocking sends: the next item's input is in
    for (std::size_t i = 0; i < order.size(); ++i) {
      const WorkItem& w = order[i];
      if (w.overlap_next && i + 1 < order.size()) {
        const WorkItem& b = order[++i];
        receive_item(w);
        receive_item(b);
        sg4::ActorPtr pair = sg4::Actor::create(fmt::format("stage{}-replica{}-pair", g.stage, g.replica),
                                                sg4::this_actor::get_host(), [&compute_item, &b] { compute_item(b, 1, -1); });
        compute_item(w, 0, -1);  // (no ZeRO-3 under DualPipe)
        pair->join();
        send_item(w);
        send_item(b);
      } else if (blocking(g)) {
        // DeepSpeed's TrainSchedule: stage s runs forward j at step 2j + s and backward k
        // at step 2k + 2p - s - 1, each step's receive before the previous step's send; so
        // from j >= p - s - 1 on, forward j's activation leaves after the gradient of the
        // backward that follows (k = j + s + 1 - p) has come in (RecvGrad, SendActivation).
        const i64 gathers = post_item_gathers(w);
        if (!received_ahead) receive_item(w);
        received_ahead = false;
        compute_item(w, 0, gathers);
        if (w.forward && w.micro_batch >= p - g.stage - 1 && i + 1 < order.size() && !order[i + 1].forward &&
            !order[i + 1].weight) {
          receive_item(order[i + 1]);
          received_ahead = true;
        }
        send_item(w);
      } else {
        const i64 gathers = post_item_gathers(w);
        receive_item(w);
        compute_item(w, 0, gathers);
        send_item(w);
      }
    }
    // Gradient reduction, tied embeddings, optimizer step.
    if (gradient_ranks() > 1) {
      if (overlap || zero3) {
        post_bucket(g, overlap ? pending_params : 0.0, true);
        const double t0 = now();
        std::unique_lock lock(*g.mu);
        while (!g.comm_done) g.cv->wait(lock);
        g.st.dp_comm += now() - t0;
      }
      if (!overlap) reduce_gradients(g, prog.params, g.st.dp_comm);
    }
    if (plan.tied_sync_bytes > 0 && (g.stage == 0 || g.stage == p - 1)) {
      auto& barrier = tied_barrier[static_cast<std::size_t>(g.replica)];
      barrier->wait();
      const double t0 = now();
      if (g.stage == 0) {
        CollectiveCall call{Collective::all_reduce, plan.tied_sync_bytes, {}, "tied embedding all-reduce"};
        for (i64 c = 0; c < plan.cp; ++c)
          for (i64 t = 0; t < plan.tp; ++t) call.groups.push_back({rank(0, g.replica, c, t), rank(p - 1, g.replica, c, t)});
        run_collective(net, plan.collectives, call);
      }
      barrier->wait();
      g.st.dp_comm += now() - t0;
      slice(g, Stream::dp_comm, "tied embedding all-reduce", t0, now());
    }
    if (const GradientSync s = sync(prog.params, prog.fp8_params); s.gather_bytes > 0)
      across_replicas(g, dp_barrier[static_cast<std::size_t>(g.stage)], 0, plan.dp, Collective::all_gather, s.gather_bytes,
                      "parameter all-gather", g.st.dp_comm, Stream::dp_comm, true);
    if (prog.optimizer_host > 0) {  // the host prepares the step after its last launch
      g.host_clock += prog.optimizer_host;
      wait_for_host(g, g.host_clock);
    }
    if (prog.optimizer > 0) {
      const double t0 = now();
      sg4::this_actor::sleep_for(prog.optimizer);
      g.st.optimizer += prog.optimizer;
      ++g.st.compute_activities;
      slice(g, Stream::compute, "optimizer step", t0, now());
    }
    g.st.end = now();
    g.st.finished = true;
  }
};

Replay::Replay(const ReplayPlan& plan, Network& net, Trace* trace) : impl_(new Impl(plan, net, trace)) {}
Replay::~Replay() { delete impl_; }

void Replay::start() {
  Impl& I = *impl_;
  const ReplayPlan& plan = I.plan;
  const ReplicaSymmetry& sym = I.net.symmetry();
  I.replicas = sym.active() ? sym.classes : plan.dp;
  I.groups = std::vector<Impl::Group>(static_cast<std::size_t>(plan.pp * I.replicas));
  for (i64 s = 0; s < plan.pp; ++s)
    for (i64 d = 0; d < I.replicas; ++d) {
      auto& g = I.group(s, d);
      g.stage = g.st.stage = s;
      g.replica = g.st.replica = d;
      for (i64 c = 0; c < plan.cp; ++c)
        for (i64 t = 0; t < plan.tp; ++t) g.ranks.push_back(I.rank(s, d, c, t));
    }
  const bool comm_stream =
      I.gradient_ranks() > 1 && (plan.overlap_grad_reduce || I.sync(1).gather_per_pass > 0);
  const OverlapSlowdown both = overlap_slowdown(true, true, plan.interference);
  I.interfere = comm_stream && (both.compute != 1 || both.comm != 1);
  I.stage_compute = std::vector<Impl::StageCompute>(static_cast<std::size_t>(plan.pp));
  for (i64 s = 0; s < plan.pp; ++s) {
    I.dp_barrier.push_back(sg4::Barrier::create(static_cast<unsigned>(I.replicas)));
    // Indexed by stage and expert block of the cluster; with symmetry only block 0 has actors.
    for (i64 e = 0; e < plan.dp / plan.ep; ++e) I.ep_barrier.push_back(sg4::Barrier::create(static_cast<unsigned>(plan.ep)));
    if (plan.schedule == Schedule::dualpipe)
      for (i64 e = 0; e < plan.dp / plan.ep; ++e)
        I.ep_barrier_pair.push_back(sg4::Barrier::create(static_cast<unsigned>(plan.ep)));
  }
  for (i64 d = 0; d < I.replicas; ++d) I.tied_barrier.push_back(sg4::Barrier::create(2));
  for (auto& g : I.groups) {
    auto* host = I.net.host(g.ranks.front());
    Impl::Group* gp = &g;
    sg4::Actor::create(fmt::format("stage{}-replica{}", g.stage, g.replica), host, [&I, gp] { I.compute_stream(*gp); });
    if (comm_stream)
      sg4::Actor::create(fmt::format("stage{}-replica{}-comm", g.stage, g.replica), host, [&I, gp] { I.comm_stream(*gp); });
  }
}

ReplayResult Replay::finish() const {
  // Every replica: with symmetry, the copies of its class's representative.
  ReplayResult r;
  const Impl& I = *impl_;
  for (i64 s = 0; s < I.plan.pp; ++s)
    for (i64 d = 0; d < I.plan.dp; ++d) {
      GroupStats st = I.groups[static_cast<std::size_t>(s * I.replicas + d % I.replicas)].st;
      // SimGrid ends a run whose actors all wait on each other as if it were over: a schedule
      // that deadlocks must not pass for an iteration of st.end seconds.
      if (!st.finished)
        throw std::runtime_error(fmt::format("the replay did not finish: pipeline stage {} of replica {} waited forever "
                                             "(its actors deadlocked at {} s simulated; a bug of the replay's schedule)",
                                             s, d, st.end));
      st.replica = d;
      r.groups.push_back(st);
      r.iteration_time = std::max(r.iteration_time, st.end);
    }
  return r;
}

}  // namespace clustersim::sim
