// The batching policies of one serving replica, as plain code: which requests run in
// the next engine iteration, how many tokens of each, and what happens to the KV cache
// (docs/serving.md has each policy's rules and their sources):
//  static   request-level batching: a batch starts together, runs until its longest
//           request ends (finished ones stay in as padding); KV reserved for prompt +
//           output at admission.
//  orca     iteration-level batching: requests join and leave every iteration, whole
//           prompts in one iteration (within the token budget); KV reserved for the
//           request's maximum length at admission (no preemption).
//  vllm     paged KV: a request is admitted when free blocks minus the watermark cover
//           its prompt; an iteration is either all admitted prefills or one decode token
//           of every running request (prefill first, vLLM v0); when a decode needs a
//           block and none is free, the most recently admitted request is preempted
//           (recompute: its blocks are freed and it re-prefills prompt + generated tokens
//           later; swap: its blocks go to host memory and come back before it runs again).
//  sarathi  chunked prefill with a token budget: every running decode first, then the
//           partly prefilled requests, then new ones, each prefill cut to the budget left;
//           paged KV and preemption as vllm.
//  transformers-fifo  transformers 5.17's continuous-batching FIFOScheduler
//           (calibration/serving/ENGINE.md section 2 and 4): decodes first, then partly
//           prefilled prompts, then waiting ones, the last prompt chunked to the budget
//           left; no new prefill once free blocks fall below safety_margin; blocks
//           allocated all-or-nothing per iteration; starved requests evicted newest
//           first by soft reset (recompute), re-queued at the back, and no waiting
//           request admitted until some request finishes.
// First come, first served everywhere: admission follows arrival order and never
// skips the head of the queue.
#pragma once
#include <cstdint>
#include <deque>
#include <vector>

#include "scenarios/serving.hpp"
#include "strategies/serving_batch.hpp"

namespace clustersim {

struct ServeRequest {
  std::int64_t id = 0;
  Seconds arrival = 0;
  std::int64_t prompt = 0, output = 0;
};

// What one iteration produced for one request.
struct TokenEvent {
  std::int64_t id = 0;
  std::int64_t index = 0;  // 1-based index of the output token
  bool finished = false;
};

struct SchedulerStats {
  std::int64_t preemptions = 0;
  std::int64_t swapped_out_blocks = 0, swapped_in_blocks = 0;
  std::int64_t peak_blocks = 0;
};

class ReplicaScheduler {
 public:
  // `total_blocks`: the replica's KV capacity. `prefill_only`: a disaggregated prefill
  // instance (a request finishes with its first token; its blocks are then released).
  ReplicaScheduler(const SchedulerSpec& spec, std::int64_t total_blocks, bool prefill_only = false);

  // A new request (FIFO). `prefilled`: its prompt's KV cache arrives from a prefill
  // instance and its first token was produced there.
  void add(const ServeRequest& r, bool prefilled = false);
  // Forms the next iteration; false when there is nothing to run. `swap_blocks` is the
  // number of blocks moved between host and GPU before it runs (swap preemption).
  bool schedule(BatchShape& shape, std::int64_t& swap_blocks);
  // The running iteration ended: its tokens, in batch order.
  void complete(std::vector<TokenEvent>& out);

  std::int64_t used_blocks() const { return total_blocks_ - free_blocks_; }
  std::int64_t total_blocks() const { return total_blocks_; }
  std::int64_t running() const { return static_cast<std::int64_t>(running_.size()); }
  std::int64_t waiting() const { return static_cast<std::int64_t>(waiting_.size() + swapped_.size()); }
  // Tokens still to process (prompt still to prefill + outputs still to generate).
  std::int64_t outstanding_tokens() const { return outstanding_; }
  bool idle() const { return running_.empty() && waiting_.empty() && swapped_.empty(); }
  const SchedulerStats& stats() const { return stats_; }

 private:
  struct Seq {
    ServeRequest req;
    std::int64_t generated = 0;  // output tokens produced
    std::int64_t prefill_target = 0, prefilled = 0;  // tokens to (re)compute into the cache
    std::int64_t blocks = 0;
    std::int64_t chunk = 0;  // tokens of this seq in the running iteration (0: not in it)
    bool decode = false;     // in the running iteration as a decode
    bool done = false;       // static batching: finished, kept as padding
  };
  std::int64_t blocks_for(std::int64_t tokens) const;
  bool admit_blocks(std::int64_t need) const;  // free minus watermark covers `need`
  bool try_admit(Seq& s, std::int64_t& budget);
  void preempt_last(std::int64_t& swap_blocks);
  bool ensure_decode_blocks(std::int64_t& swap_blocks);
  bool schedule_static(BatchShape& shape);
  bool schedule_iteration_level(BatchShape& shape, std::int64_t& swap_blocks);
  bool schedule_transformers(BatchShape& shape);
  bool transformers_pass(std::vector<std::size_t>& starved, bool& alloc_failed);
  void soft_reset(std::size_t running_index);
  void release(Seq& s);

  SchedulerSpec spec_;
  std::int64_t total_blocks_, free_blocks_;
  std::int64_t watermark_blocks_;
  bool prefill_only_;
  std::deque<Seq> waiting_;   // arrival order (preempted requests go back to the front)
  std::deque<Seq> swapped_;   // swap preemption: on the host, resumed before new admissions
  std::vector<Seq> running_;  // admission order
  std::int64_t outstanding_ = 0;
  bool in_flight_ = false;
  bool block_new_requests_ = false;  // transformers-fifo: set by an eviction, cleared by a finish
  SchedulerStats stats_;
};

}  // namespace clustersim
