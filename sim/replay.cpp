// The replay. Actors block on simulated work: compute is a delay of the op time from
// costmodel; every collective and pipeline send is flows on the platform (see
// collective_algorithms.hpp), so concurrent traffic shares links. A collective that
// spans several actors (data-parallel gradient reduction, expert all-to-all, tied
// embeddings) meets at a barrier; the first member then runs the flows of every rank
// while the others wait at a second barrier.
#include "sim/replay.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <deque>
#include <functional>
#include <mutex>
#include <set>
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
    std::vector<i64> ranks;                    // its tensor-parallel GPUs
    std::set<std::tuple<int, i64, i64>> arrived;  // (backward?, chunk, micro-batch) received
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
    GroupStats st;
  };

  const ReplayPlan& plan;
  Network& net;
  Trace* trace;
  std::vector<Group> groups;
  std::vector<sg4::BarrierPtr> dp_barrier, ep_barrier, tied_barrier;
  // Replicas with actors per stage: all, or the representatives of replica symmetry
  // (sim/symmetry.hpp), whose collectives still name every replica's GPUs.
  i64 replicas = 1;

  Impl(const ReplayPlan& p, Network& n, Trace* t) : plan(p), net(n), trace(t) {}

  i64 rank(i64 s, i64 d, i64 t) const { return plan_rank(plan.dp, plan.tp, s, d, t); }
  GradientSync sync(double params) const { return gradient_sync(params, plan.precision, plan.zero, plan.dp); }
  Group& group(i64 s, i64 d) { return groups[static_cast<std::size_t>(s * replicas + d)]; }

  void slice(const Group& g, Stream stream, const std::string& name, double t0, double t1) {
    if (!trace || t1 <= t0) return;
    for (i64 r : g.ranks) trace->slice(r, stream, name, t0, t1);
  }

  // A collective over the same tensor-parallel rank of several replicas of stage s.
  void across_replicas(Group& g, const sg4::BarrierPtr& barrier, i64 first, i64 count, Collective kind, Bytes bytes,
                       const std::string& label, Seconds& account, Stream stream) {
    barrier->wait();
    const double t0 = now();
    if (g.replica == first) {
      CollectiveCall call{kind, bytes, {}, label};
      for (i64 t = 0; t < plan.tp; ++t) {
        std::vector<i64> members;
        for (i64 d = first; d < first + count; ++d) members.push_back(rank(g.stage, d, t));
        call.groups.push_back(std::move(members));
      }
      run_collective(net, plan.collectives, call);
    }
    barrier->wait();
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

  void run_segment(Group& g, const Segment& seg, i64 mb) {
    // The host launches this segment's kernels in order after everything before them and
    // never waits for the GPU: the segment's first kernel cannot start before the host
    // reaches it, its last cannot finish before the host has launched it.
    const double host_start = g.host_clock;
    g.host_clock += seg.host;
    wait_for_host(g, host_start);
    if (seg.compute > 0) {
      const double t0 = now();
      sg4::this_actor::sleep_for(seg.compute);
      ++g.st.compute_activities;
      (seg.work == Work::forward ? g.st.forward : seg.work == Work::backward ? g.st.backward : g.st.recompute) +=
          seg.compute;
      if (trace) {
        double t = t0;
        const char* tag = seg.work == Work::forward ? "F" : seg.work == Work::backward ? "B" : "R";
        for (const auto& op : seg.ops) {
          slice(g, Stream::compute, fmt::format("{} {} mb{}", tag, op.name, mb), t, t + op.duration);
          t += op.duration;
        }
      }
    }
    wait_for_host(g, g.host_clock);
    if (!seg.comm.active()) return;
    const std::string label = trace ? fmt::format("{} mb{}", to_string(seg.comm.kind), mb) : std::string();
    if (seg.comm.group == CommGroup::tp) {
      const double t0 = now();
      run_collective(net, plan.collectives, {seg.comm.kind, seg.comm.bytes, {g.ranks}, label});
      g.st.tp_comm += now() - t0;
      ++g.st.collectives;
      slice(g, Stream::tp_comm, label, t0, now());
    } else {
      const i64 first = g.replica / plan.ep * plan.ep;
      across_replicas(g, ep_barrier[static_cast<std::size_t>(g.stage * (plan.dp / plan.ep) + g.replica / plan.ep)],
                      first, plan.ep, seg.comm.kind, seg.comm.bytes, label, g.st.ep_comm, Stream::ep_comm);
    }
  }

  // Pipeline send of the activation (forward) or its gradient (backward) of model chunk
  // `chunk` to the neighbouring virtual stage (rules.hpp pipeline_send: each
  // tensor-parallel GPU sends its share; the receiver may all-gather on arrival).
  void send(Group& g, bool forward, i64 chunk, i64 mb) {
    const i64 p = plan.pp;
    const i64 vs = chunk * p + g.stage + (forward ? 1 : -1);
    const i64 to_stage = vs % p, to_chunk = vs / p;
    const Bytes bytes = plan.stages[static_cast<std::size_t>(g.stage)].chunks[static_cast<std::size_t>(chunk)].send.per_rank;
    const double t0 = now();
    CollectiveCall call{Collective::send_recv, bytes, {}, 
                        trace ? fmt::format("{} mb{} to stage {}", forward ? "act" : "grad", mb, to_stage) : std::string()};
    for (i64 t = 0; t < plan.tp; ++t) call.groups.push_back({g.ranks[static_cast<std::size_t>(t)], rank(to_stage, g.replica, t)});
    run_collective(net, plan.collectives, call);
    g.st.pp_comm += now() - t0;
    slice(g, Stream::pp_comm, call.label, t0, now());
    Group& dst = group(to_stage, g.replica);
    std::unique_lock lock(*dst.mu);
    dst.arrived.insert({forward ? 0 : 1, to_chunk, mb});
    dst.cv->notify_all();
  }

  void receive(Group& g, bool forward, i64 chunk, i64 mb) {
    {
      std::unique_lock lock(*g.mu);
      const std::tuple<int, i64, i64> key{forward ? 0 : 1, chunk, mb};
      while (!g.arrived.count(key)) g.cv->wait(lock);
      g.arrived.erase(key);
    }
    const Bytes act = plan.stages[static_cast<std::size_t>(g.stage)].chunks[static_cast<std::size_t>(chunk)].send.gather_after;
    if (act > 0) {
      const double t0 = now();
      const std::string label = trace ? fmt::format("gather {} mb{}", forward ? "act" : "grad", mb) : std::string();
      run_collective(net, plan.collectives, {Collective::all_gather, act, {g.ranks}, label});
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
        g.jobs.push_back({true, sync(seg.gather_params).gather_per_pass});
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
                const std::function<void(const Segment&)>& after) {
    std::int64_t gather = first_gather;
    for (const auto& seg : pass) {
      if (first_gather >= 0 && seg.gather_params > 0) wait_gather(g, gather++);
      run_segment(g, seg, mb);
      if (after) after(seg);
    }
  }

  // The gradient reduction of `params` parameters (all of a stage's, or one bucket's).
  void reduce_gradients(Group& g, double params, Seconds& account) {
    const GradientSync s = sync(params);
    const Collective kind = s.reduce;
    across_replicas(g, dp_barrier[static_cast<std::size_t>(g.stage)], 0, plan.dp, kind, s.reduce_bytes,
                    fmt::format("gradient {}", to_string(kind)), account, Stream::dp_comm);
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
      }
      if (job.gather) {
        across_replicas(g, dp_barrier[static_cast<std::size_t>(g.stage)], 0, plan.dp, Collective::all_gather, job.bytes,
                        "parameter all-gather (ZeRO-3)", busy, Stream::dp_comm);
        std::unique_lock lock(*g.mu);
        ++g.gathers_done;
        g.cv->notify_all();
      } else {
        reduce_gradients(g, job.params, busy);
      }
    }
    std::unique_lock lock(*g.mu);
    g.comm_done = true;
    g.cv->notify_all();
  }

  void compute_stream(Group& g) {
    const StageProgram& prog = plan.stages[static_cast<std::size_t>(g.stage)];
    const i64 p = plan.pp, v = plan.virtual_stages, m = plan.micro_batches;
    const bool overlap = plan.overlap_grad_reduce && plan.dp > 1;
    const bool zero3 = sync(prog.params).gather_per_pass > 0;
    std::vector<i64> in_flight(static_cast<std::size_t>(v), 0);
    double pending_params = 0;
    // Gradients are complete after the last micro-batch's backward (ZB-H1: its weight pass);
    // buckets are handed to the communication stream as they fill.
    const auto on_gradients = [&](const WorkItem& w) {
      return [&, last_pass = w.micro_batch == m - 1](const Segment& seg) {
        if (overlap && last_pass && seg.grad_params > 0) {
          pending_params += seg.grad_params;
          if (pending_params >= gradient_bucket_elements(plan.framework, plan.precision)) {
            post_bucket(g, pending_params, false);
            pending_params = 0;
          }
        }
      };
    };
    for (const WorkItem& w : schedule_order(plan.schedule, p, v, m, g.stage, plan.microbatch_group)) {
      const ChunkProgram& chunk = prog.chunks[static_cast<std::size_t>(w.chunk)];
      const i64 vs = w.chunk * p + g.stage;
      if (w.weight) {
        run_pass(g, chunk.weight_grad, w.micro_batch, -1, on_gradients(w));
      } else if (w.forward) {
        const i64 gathers = zero3 ? post_gathers(g, chunk.forward) : -1;
        if (vs > 0) receive(g, true, w.chunk, w.micro_batch);
        run_pass(g, chunk.forward, w.micro_batch, gathers, nullptr);
        ++in_flight[static_cast<std::size_t>(w.chunk)];
        Bytes alive = 0;
        for (i64 c = 0; c < v; ++c)
          alive += double(in_flight[static_cast<std::size_t>(c)]) * prog.chunks[static_cast<std::size_t>(c)].saved;
        g.st.peak_activations = std::max(g.st.peak_activations, alive);
        if (vs < p * v - 1) send(g, true, w.chunk, w.micro_batch);
      } else {
        const i64 gathers = zero3 ? post_gathers(g, chunk.backward) : -1;
        if (vs < p * v - 1) receive(g, false, w.chunk, w.micro_batch);
        run_pass(g, chunk.backward, w.micro_batch, gathers, on_gradients(w));
        --in_flight[static_cast<std::size_t>(w.chunk)];
        if (vs > 0) send(g, false, w.chunk, w.micro_batch);
      }
    }
    // Gradient reduction, tied embeddings, optimizer step.
    if (plan.dp > 1) {
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
        for (i64 t = 0; t < plan.tp; ++t) call.groups.push_back({rank(0, g.replica, t), rank(p - 1, g.replica, t)});
        run_collective(net, plan.collectives, call);
      }
      barrier->wait();
      g.st.dp_comm += now() - t0;
      slice(g, Stream::dp_comm, "tied embedding all-reduce", t0, now());
    }
    if (const GradientSync s = sync(prog.params); s.gather_bytes > 0)
      across_replicas(g, dp_barrier[static_cast<std::size_t>(g.stage)], 0, plan.dp, Collective::all_gather, s.gather_bytes,
                      "parameter all-gather", g.st.dp_comm, Stream::dp_comm);
    if (prog.optimizer > 0) {
      const double t0 = now();
      sg4::this_actor::sleep_for(prog.optimizer);
      g.st.optimizer += prog.optimizer;
      ++g.st.compute_activities;
      slice(g, Stream::compute, "optimizer step", t0, now());
    }
    g.st.end = now();
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
      for (i64 t = 0; t < plan.tp; ++t) g.ranks.push_back(I.rank(s, d, t));
    }
  const bool comm_stream = plan.dp > 1 && (plan.overlap_grad_reduce || gradient_sync(1, plan.precision, plan.zero, plan.dp).gather_per_pass > 0);
  for (i64 s = 0; s < plan.pp; ++s) {
    I.dp_barrier.push_back(sg4::Barrier::create(static_cast<unsigned>(I.replicas)));
    // Indexed by stage and expert block of the cluster; with symmetry only block 0 has actors.
    for (i64 e = 0; e < plan.dp / plan.ep; ++e) I.ep_barrier.push_back(sg4::Barrier::create(static_cast<unsigned>(plan.ep)));
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
      st.replica = d;
      r.groups.push_back(st);
      r.iteration_time = std::max(r.iteration_time, st.end);
    }
  return r;
}

}  // namespace clustersim::sim
