#include "strategies/serving_scheduler.hpp"

#include <algorithm>
#include <cmath>

namespace clustersim {
namespace {
using i64 = std::int64_t;
}

ReplicaScheduler::ReplicaScheduler(const SchedulerSpec& spec, i64 total_blocks, bool prefill_only)
    : spec_(spec),
      total_blocks_(total_blocks),
      free_blocks_(total_blocks),
      // vLLM: watermark_blocks = watermark x num_gpu_blocks (kept free at admission only).
      watermark_blocks_(static_cast<i64>(spec.watermark * double(total_blocks))),
      prefill_only_(prefill_only) {}

i64 ReplicaScheduler::blocks_for(i64 tokens) const { return (tokens + spec_.block_size - 1) / spec_.block_size; }

bool ReplicaScheduler::admit_blocks(i64 need) const { return free_blocks_ - need >= watermark_blocks_; }

void ReplicaScheduler::add(const ServeRequest& r, bool prefilled) {
  Seq s;
  s.req = r;
  s.prefill_target = r.prompt;
  if (prefilled) {
    s.prefilled = r.prompt;  // the KV cache came with it
    s.generated = 1;
  }
  outstanding_ += (s.prefill_target - s.prefilled) + (r.output - s.generated);
  waiting_.push_back(s);
}

void ReplicaScheduler::release(Seq& s) {
  free_blocks_ += s.blocks;
  s.blocks = 0;
}

// Static and orca reserve the request's whole length; vllm and sarathi its prompt (the
// cache grows block by block during decode).
bool ReplicaScheduler::try_admit(Seq& s, i64& budget) {
  const bool reserve_all = spec_.kind == SchedulerKind::static_batching || spec_.kind == SchedulerKind::orca;
  const i64 tokens = reserve_all ? s.req.prompt + s.req.output : std::max(s.prefill_target, s.prefilled);
  const i64 need = blocks_for(tokens);
  const i64 prefill = s.prefill_target - s.prefilled;
  const bool chunked = spec_.kind == SchedulerKind::sarathi;
  if (!admit_blocks(need)) return false;
  // A whole prompt must fit the budget left, except as an iteration's first prefill: a
  // request preempted by recompute re-prefills prompt + generated tokens, which may exceed
  // the budget, and would otherwise wait forever (vLLM ignores such a request instead).
  if (prefill > 0 && !chunked && prefill > budget && budget < spec_.max_batched_tokens) return false;
  if (prefill > 0 && budget <= 0) return false;
  free_blocks_ -= need;
  s.blocks = need;
  s.chunk = prefill > 0 ? std::min(prefill, budget) : 0;
  budget -= s.chunk;
  return true;
}

void ReplicaScheduler::preempt_last(i64& swap_blocks) {
  Seq victim = std::move(running_.back());
  running_.pop_back();
  ++stats_.preemptions;
  outstanding_ -= (victim.prefill_target - victim.prefilled) + (victim.req.output - victim.generated);
  victim.chunk = 0;
  victim.decode = false;
  if (spec_.preemption == Preemption::swap && victim.prefilled == victim.prefill_target) {
    stats_.swapped_out_blocks += victim.blocks;
    swap_blocks += victim.blocks;
    free_blocks_ += victim.blocks;  // the blocks count stays with the seq: what swap-in needs back
    outstanding_ += victim.req.output - victim.generated;
    swapped_.push_front(std::move(victim));
    return;
  }
  // Recompute: drop the cache; the prompt and the tokens generated so far are prefilled
  // again, which produces the next token.
  release(victim);
  victim.prefill_target = victim.req.prompt + victim.generated;
  victim.prefilled = 0;
  outstanding_ += victim.prefill_target + (victim.req.output - victim.generated);
  waiting_.push_front(std::move(victim));
}

// Every running request past its prefill gets a slot for its next token, preempting the
// most recently admitted requests while blocks run out (vLLM's _schedule_running).
bool ReplicaScheduler::ensure_decode_blocks(i64& swap_blocks) {
  for (std::size_t i = 0; i < running_.size(); ++i) {
    Seq& s = running_[i];
    if (s.prefilled < s.prefill_target || s.done) continue;
    const i64 need = blocks_for(s.prefilled + 1) - s.blocks;
    if (need <= 0) continue;
    while (free_blocks_ < need && running_.size() > i + 1) preempt_last(swap_blocks);
    if (free_blocks_ < need) {  // nothing left to preempt but itself
      preempt_last(swap_blocks);
      return true;
    }
    free_blocks_ -= need;
    running_[i].blocks += need;
  }
  return true;
}

bool ReplicaScheduler::schedule_static(BatchShape& shape) {
  if (running_.empty()) {
    i64 budget = spec_.max_batched_tokens;
    while (!waiting_.empty() && i64(running_.size()) < spec_.max_batch_size) {
      Seq& s = waiting_.front();
      if (!try_admit(s, budget)) break;
      running_.push_back(std::move(s));
      waiting_.pop_front();
    }
  }
  for (auto& s : running_) {
    if (s.chunk > 0) {
      shape.prefills.push_back({s.chunk, s.prefilled});
      if (s.prefilled + s.chunk == s.prefill_target) ++shape.sampled;
    } else {
      // Decode, or padding for a request that already ended: the batch computes it anyway.
      s.decode = true;
      ++shape.decodes;
      shape.decode_context += double(s.prefilled + 1);
      if (!s.done) ++shape.sampled;
    }
  }
  return !running_.empty();
}

bool ReplicaScheduler::schedule_iteration_level(BatchShape& shape, i64& swap_blocks) {
  const bool paged = spec_.kind == SchedulerKind::vllm || spec_.kind == SchedulerKind::sarathi;
  i64 budget = spec_.max_batched_tokens;
  if (paged) {
    // Swapped-out requests come back first, in order, while their blocks fit.
    while (!swapped_.empty() && free_blocks_ >= swapped_.front().blocks &&
           i64(running_.size()) < spec_.max_batch_size) {
      Seq s = std::move(swapped_.front());
      swapped_.pop_front();
      free_blocks_ -= s.blocks;
      stats_.swapped_in_blocks += s.blocks;
      swap_blocks += s.blocks;
      running_.push_back(std::move(s));
    }
  }
  // vLLM v0 (no chunking): an iteration of new prefills if any can be admitted.
  if (spec_.kind == SchedulerKind::vllm && swapped_.empty()) {
    const std::size_t before = running_.size();
    while (!waiting_.empty() && i64(running_.size()) < spec_.max_batch_size) {
      Seq& s = waiting_.front();
      if (!try_admit(s, budget)) break;
      running_.push_back(std::move(s));
      waiting_.pop_front();
    }
    // (A request whose KV cache came from a prefill instance has nothing to prefill:
    // it joins the decodes below.)
    for (std::size_t i = before; i < running_.size(); ++i) {
      const Seq& s = running_[i];
      if (s.chunk == 0) continue;
      shape.prefills.push_back({s.chunk, s.prefilled});
      if (s.prefilled + s.chunk == s.prefill_target) ++shape.sampled;
    }
    if (!shape.prefills.empty()) return true;
  }
  if (paged) ensure_decode_blocks(swap_blocks);
  // Decodes first (one token each), then partial prefills (sarathi), then new requests.
  for (auto& s : running_) {
    if (s.prefilled < s.prefill_target) continue;
    s.decode = true;
    ++shape.decodes;
    ++shape.sampled;
    shape.decode_context += double(s.prefilled + 1);
    --budget;
  }
  if (spec_.kind == SchedulerKind::vllm) return shape.decodes > 0;
  for (auto& s : running_) {
    if (s.prefilled >= s.prefill_target || budget <= 0) continue;
    s.chunk = std::min(s.prefill_target - s.prefilled, budget);
    budget -= s.chunk;
  }
  if (swapped_.empty()) {
    while (!waiting_.empty() && i64(running_.size()) < spec_.max_batch_size && budget > 0) {
      Seq& s = waiting_.front();
      if (!try_admit(s, budget)) break;
      running_.push_back(std::move(s));
      waiting_.pop_front();
    }
  }
  for (const auto& s : running_) {
    if (s.chunk == 0) continue;
    shape.prefills.push_back({s.chunk, s.prefilled});
    if (s.prefilled + s.chunk == s.prefill_target) ++shape.sampled;
  }
  return shape.tokens() > 0;
}

// One pass of transformers' _process_candidates over decodes, partly prefilled requests
// and (unless blocked) waiting ones. Sets each scheduled request's chunk / decode flag;
// a waiting request that gets blocks becomes active (appended to running_). `starved`:
// running_ indices of active requests whose block allocation failed.
bool ReplicaScheduler::transformers_pass(std::vector<std::size_t>& starved, bool& alloc_failed) {
  const i64 bs = spec_.block_size;
  const i64 max_requests = std::min({spec_.max_batch_size, spec_.max_batched_tokens, total_blocks_});
  const double margin = spec_.safety_margin * double(total_blocks_);
  i64 token_budget = spec_.max_batched_tokens;
  i64 cache_budget = total_blocks_ * bs;
  i64 scheduled = 0;
  starved.clear();
  alloc_failed = false;
  // One candidate; false: stop the loop.
  const auto consider = [&](Seq& s, bool decoding, bool active, bool& took) {
    took = false;
    if (double(free_blocks_) < margin && scheduled > 0 && !decoding) return false;
    const i64 tokens = decoding ? 1 : s.prefill_target - s.prefilled;
    const i64 request_len = std::min(tokens, token_budget);
    const i64 current_len = s.prefilled;
    if (cache_budget < current_len) return true;
    const i64 room = s.blocks * bs - current_len;
    if (s.blocks == 0 || room < request_len) {
      // transformers' formula: one block more than ceil when request_len - room + 1 is a
      // multiple of the block size (ENGINE.md section 2, step 4).
      const i64 need = (request_len - room + 1) / bs + 1;
      if (need > free_blocks_) {
        alloc_failed = true;
        if (active) return true;  // recorded as starved by the caller
        if (free_blocks_ == 0) return false;
        return true;
      }
      free_blocks_ -= need;
      s.blocks += need;
    }
    if (decoding) s.decode = true;
    else s.chunk = request_len;
    token_budget -= request_len;
    cache_budget -= current_len;
    ++scheduled;
    took = true;
    return !(token_budget == 0 || cache_budget <= 0 || scheduled >= max_requests);
  };
  bool go = true;
  for (int phase = 0; phase < 2 && go; ++phase) {
    for (std::size_t i = 0; i < running_.size() && go; ++i) {
      Seq& s = running_[i];
      const bool decoding = s.prefilled >= s.prefill_target;
      if (decoding != (phase == 0)) continue;
      bool took = false;
      const bool failed_before = alloc_failed;
      alloc_failed = false;
      go = consider(s, decoding, true, took);
      if (!took && alloc_failed) starved.push_back(i);
      alloc_failed = alloc_failed || failed_before;
    }
  }
  // Waiting requests in arrival order; one that finds too few free blocks is passed over
  // (the engine continues with the next candidate) unless none is free.
  std::vector<bool> taken(waiting_.size(), false);
  bool any_taken = false;
  for (std::size_t i = 0; go && !block_new_requests_ && i < waiting_.size(); ++i) {
    bool took = false;
    go = consider(waiting_[i], false, false, took);
    taken[i] = took;
    any_taken = any_taken || took;
  }
  if (any_taken) {
    std::deque<Seq> rest;
    for (std::size_t i = 0; i < waiting_.size(); ++i) {
      if (taken[i]) running_.push_back(std::move(waiting_[i]));
      else rest.push_back(std::move(waiting_[i]));
    }
    waiting_.swap(rest);
  }
  return scheduled > 0;
}

// Eviction by recompute: the request's blocks are freed and it goes to the back of the
// waiting queue with the tokens it generated appended to its prompt.
void ReplicaScheduler::soft_reset(std::size_t i) {
  Seq victim = std::move(running_[i]);
  running_.erase(running_.begin() + std::ptrdiff_t(i));
  ++stats_.preemptions;
  outstanding_ -= (victim.prefill_target - victim.prefilled) + (victim.req.output - victim.generated);
  victim.chunk = 0;
  victim.decode = false;
  release(victim);
  victim.prefill_target = victim.req.prompt + victim.generated;
  victim.prefilled = 0;
  outstanding_ += victim.prefill_target + (victim.req.output - victim.generated);
  waiting_.push_back(std::move(victim));
  block_new_requests_ = true;
}

bool ReplicaScheduler::schedule_transformers(BatchShape& shape) {
  std::vector<std::size_t> starved;
  bool alloc_failed = false;
  bool any = transformers_pass(starved, alloc_failed);
  const auto evict = [&] {
    // Victims among the starved, newest first, until the rest's demand fits the free
    // blocks; the last active request is never evicted.
    const auto demand = [&](std::size_t i) {
      const Seq& s = running_[i];
      const bool decoding = s.prefilled >= s.prefill_target;
      const i64 len = decoding ? 1 : std::min(s.prefill_target - s.prefilled, spec_.max_batched_tokens);
      const i64 room = s.blocks * spec_.block_size - s.prefilled;
      return (len - room + 1) / spec_.block_size + 1;
    };
    while (!starved.empty() && running_.size() > 1) {
      i64 need = 0;
      for (std::size_t i : starved) need += demand(i);
      if (need <= free_blocks_) break;
      const std::size_t victim = starved.back();
      starved.pop_back();
      // Undo this pass's choices of the victim (it was not scheduled: it starved).
      soft_reset(victim);
      for (auto& i : starved)
        if (i > victim) --i;
    }
  };
  if (!any && alloc_failed) {
    evict();
    // Undo nothing: an empty pass scheduled nothing. Schedule again.
    any = transformers_pass(starved, alloc_failed);
  } else if (any && !starved.empty()) {
    evict();
  }
  if (!any) return false;
  for (auto& s : running_) {
    if (s.decode) {
      ++shape.decodes;
      ++shape.sampled;
      shape.decode_context += double(s.prefilled + 1);
    } else if (s.chunk > 0) {
      shape.prefills.push_back({s.chunk, s.prefilled});
      if (s.prefilled + s.chunk == s.prefill_target) ++shape.sampled;
    }
  }
  return true;
}

bool ReplicaScheduler::schedule(BatchShape& shape, i64& swap_blocks) {
  shape.clear();
  swap_blocks = 0;
  const bool any = spec_.kind == SchedulerKind::static_batching      ? schedule_static(shape)
                   : spec_.kind == SchedulerKind::transformers_fifo ? schedule_transformers(shape)
                                                                    : schedule_iteration_level(shape, swap_blocks);
  stats_.peak_blocks = std::max(stats_.peak_blocks, used_blocks());
  in_flight_ = any;
  return any;
}

void ReplicaScheduler::complete(std::vector<TokenEvent>& out) {
  out.clear();
  if (!in_flight_) return;
  in_flight_ = false;
  for (auto& s : running_) {
    bool token = false;
    if (s.chunk > 0) {
      s.prefilled += s.chunk;
      outstanding_ -= s.chunk;
      s.chunk = 0;
      token = s.prefilled == s.prefill_target;
    } else if (s.decode) {
      s.decode = false;
      if (s.done) continue;  // static padding
      ++s.prefilled;
      ++s.prefill_target;
      token = true;
    }
    if (!token) continue;
    ++s.generated;
    --outstanding_;
    const bool finished = s.generated >= s.req.output || prefill_only_;
    if (prefill_only_) outstanding_ -= s.req.output - s.generated;
    out.push_back({s.req.id, s.generated, finished});
    if (finished) {
      s.done = true;
      block_new_requests_ = false;  // transformers-fifo: a finish lets waiting requests in again
    }
  }
  if (spec_.kind == SchedulerKind::static_batching) {
    // The batch ends when its longest request ends.
    if (std::all_of(running_.begin(), running_.end(), [](const Seq& s) { return s.done; })) {
      for (auto& s : running_) release(s);
      running_.clear();
    }
    return;
  }
  std::vector<Seq> kept;
  kept.reserve(running_.size());
  for (auto& s : running_) {
    if (s.done) release(s);
    else kept.push_back(std::move(s));
  }
  running_.swap(kept);
}

}  // namespace clustersim
