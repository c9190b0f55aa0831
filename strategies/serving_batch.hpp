// One engine iteration of an LLM serving replica (tp x pp GPUs): the time of a forward
// pass over a batch that mixes prefill chunks and decode tokens, and the KV-cache
// capacity the replica's memory leaves. The one cost oracle of serving: the schedulers,
// the serving simulator and any capacity estimate ask it, none re-derives a cost.
//
// Per layer and GPU, for T tokens in the batch (Orca's selective batching):
//  - token-wise ops (norms, QKV/output projections, MLP, rotary, residuals) on the T
//    flattened tokens: the training graph's forward ops (costmodel/graph) at M = T, timed
//    by strategies/op_timing under Megatron's tensor-parallel split, with the row-
//    parallel outputs all-reduced over the tp group (costmodel/collectives);
//  - attention per request: a prefill chunk of c tokens after p cached ones is fused
//    (flash) attention with c x (p + c/2) score work; decode reads each request's whole
//    KV cache (memory-bound, KernelModel::memory) for one query token;
//  - the cache write of the new tokens (paged), or, for a concatenated cache, the copy of
//    the whole cache that torch.cat makes every step; repeat_kv's expansion when the
//    engine does GQA that way;
//  - embedding on the first stage, the final norm, the logits of the sequences that
//    sample a token (and their tp all-gather) on the last one; pp stages run the batch one
//    after the other with a point-to-point send of the activations between them.
// Host: an eager engine launches every kernel from Python (the profile's measured
// per-kernel host time, rules' host_bound_time: the GPU waits for the host when the host
// is slower); every engine adds its per-iteration overhead (scheduling, sampling).
#pragma once
#include <cstdint>
#include <optional>
#include <random>
#include <utility>
#include <vector>

#include "costmodel/cluster.hpp"
#include "costmodel/collectives.hpp"
#include "costmodel/graph.hpp"
#include "costmodel/kernels.hpp"
#include "scenarios/serving.hpp"

namespace clustersim {

struct PrefillChunk {
  std::int64_t tokens = 0;   // prompt tokens processed in this iteration
  std::int64_t context = 0;  // tokens of the request already in the KV cache before them
};

struct BatchShape {
  std::int64_t decodes = 0;          // requests decoding one token each
  double decode_context = 0;         // sum over them of the tokens their attention reads
  std::vector<PrefillChunk> prefills;
  std::int64_t sampled = 0;          // sequences that produce a token (decodes + finished prefills)
  std::int64_t tokens() const;
  void clear() {
    decodes = 0;
    decode_context = 0;
    prefills.clear();
    sampled = 0;
  }
};

struct BatchTime {
  Seconds total = 0;      // what the iteration takes, host included
  Seconds gpu = 0;        // GPU time of all stages, sends and collectives included
  Seconds linear = 0;     // token-wise ops (GEMMs, norms, rotary...) over all stages
  Seconds attention = 0;  // attention and KV-cache traffic
  Seconds mask = 0;       // of attention: transformers' SDPA mask, built and converted (sdpa_mask_time)
  Seconds comm = 0;       // tp collectives and pp sends
  Seconds host = 0;       // host time of the forward (launches) and the iteration's overhead
  // The pipeline sends inside `comm` (pp > 1): their closed-form time over the pp - 1 stage
  // boundaries, and the bytes each tp rank sends to its peer of the next stage at each.
  // The serving simulator replaces the closed form by flows where a boundary crosses nodes.
  Seconds pp_send = 0;
  Bytes pp_send_bytes = 0;
  // The tensor-parallel collectives inside `comm` (tp > 1), closed form over the tp group
  // inside one node; the simulator runs them as flows where a replica's group straddles two.
  Seconds tp_comm = 0;
  // How the host combines with the GPU time (finish_with_gpu): a calibrated engine's
  // prepare/update, launch and graph-build stall, or the eager launches and the overhead.
  bool calibrated_host = false;
  Seconds prepare = 0, launch = 0, stall = 0, overhead = 0;
};

// One tensor-parallel collective of an iteration's forward, per rank: once on the first
// stage (the vocab-parallel embedding), once per layer (the row-parallel outputs), or once
// on the last stage (the logits gathered for sampling).
struct TpCollective {
  enum class Place { first_stage, every_layer, last_stage };
  Collective kind = Collective::all_reduce;
  Bytes bytes = 0;
  Place place = Place::every_layer;
};

struct KvCapacity {
  Bytes budget = 0;             // per GPU: usable memory x memory_fraction
  Bytes weights = 0;            // per GPU, the heaviest stage
  Bytes workspace = 0;          // activations of the largest forward
  Bytes bytes_per_token = 0;    // KV cache per token per GPU (the heaviest stage)
  std::int64_t blocks = 0;      // blocks of block_size tokens the replica holds
  std::int64_t block_size = 0;
  bool fits() const { return blocks > 0; }
};

// The measured masked SDPA of transformers' paged|sdpa: cuDNN's sm90 flash fprop, a
// persistent kernel (one CTA per SM) whose unit of work is query_rows_per_cta queries of one
// head streaming every key; the units run in waves of resident_ctas, so the time steps with
// waves = ceil(ceil(q / rows) x heads / resident) (calibration/serving/engine_attention_path.py).
// Between measured points, at each measured key count, the time per wave is interpolated
// linearly in q among the points of the same wave count (the partial last tile and the units
// of a partial wave change it smoothly; a new wave adds a whole wave's time); across key counts
// linearly, and proportionally beyond the measured range (every unit streams all the keys).
class EngineSdpaTable {
 public:
  explicit EngineSdpaTable(const EngineAttentionPath& a);
  Seconds time(std::int64_t heads, std::int64_t q, double kv) const;
  std::int64_t waves(std::int64_t heads, std::int64_t q) const;

 private:
  struct Column {
    double kv = 0;
    std::vector<std::pair<std::int64_t, Seconds>> q_time;  // sorted by q
  };
  Seconds at_column(const Column& c, std::int64_t q) const;
  std::int64_t heads_ = 32, rows_ = 128, resident_ = 132;
  std::vector<Column> columns_;  // sorted by kv
};

// The inverse CDF of a measured residual distribution at u in [0, 1]: linear between the
// quantiles around u (the file's probabilities), so the draw keeps the measured tail.
Seconds residual_at(const ResidualQuantiles& q, double u);

// The engine process's host variability, one draw per iteration (ENGINE.md section 6): each
// replica runs its own engine process and draws from its own stream, seeded by the
// scenario's seed and the replica's index, so the draws do not depend on the other replicas
// or on the standard library's distributions (the uniform comes from std::mt19937_64's
// bits, whose sequence the standard fixes). Without a distribution every draw is 0.
class LaunchResidualDraw {
 public:
  LaunchResidualDraw() = default;  // no distribution: every draw 0
  LaunchResidualDraw(const ResidualQuantiles& q, std::uint64_t seed, std::uint64_t replica);
  bool enabled() const { return !q_.empty(); }
  Seconds next() { return q_.empty() ? 0.0 : residual_at(q_, uniform()); }
  // Uniform in [0, 1): the generator's top 53 bits.
  double uniform() { return double(g_() >> 11) * 0x1.0p-53; }

 private:
  ResidualQuantiles q_;
  std::mt19937_64 g_;
};

class BatchTimeModel {
 public:
  BatchTimeModel(const ModelSpec& model, const ClusterModel& cluster, const EngineSpec& engine, std::int64_t tp,
                 std::int64_t pp);
  // The kernel model refers to the member cluster's profile: not copyable.
  BatchTimeModel(const BatchTimeModel&) = delete;
  BatchTimeModel& operator=(const BatchTimeModel&) = delete;

  // `graph_cached`: cuDNN already built the SDPA graph of this batch's attention shape in
  // this engine process (graph_key), so the iteration pays no graph build (the measured
  // engine's calibrated host path only; elsewhere it changes nothing). `launch_residual`:
  // this iteration's draw of the host launch's deviation from its fitted mean
  // (LaunchResidualDraw), added to the launch before the max with the GPU (the calibrated
  // host path only; the launch stays >= 0).
  BatchTime time(const BatchShape& batch, bool graph_cached = false, Seconds launch_residual = 0) const;
  // The attention shape whose cuDNN SDPA graph the measured engine builds on the first
  // call for it (ENGINE.md; PyTorch keeps the built graphs per process, keyed by shape):
  // the batch's query and key counts (Q, KV_total) packed into one key, or 0 when the
  // model charges no graph build (no measured attention path).
  std::uint64_t graph_key(const BatchShape& batch) const;
  // The iteration `t` (from time(), no residual) with its host launch off its fitted mean by
  // `residual` (a draw of LaunchResidualDraw): the launch + residual (>= 0) before the max
  // with the GPU. What time() applies to its `launch_residual`; unchanged where the host is
  // not a calibrated engine's.
  BatchTime with_launch_residual(BatchTime t, Seconds residual) const;
  // What the iteration `t` (from time()) takes when its GPU part takes `gpu` instead of
  // t.gpu (the simulator's flows for the pipeline sends): the host rule time() applies.
  Seconds finish_with_gpu(const BatchTime& t, Seconds gpu) const;
  // The tp collectives behind time()'s tp_comm, in the forward's order (empty for tp 1).
  std::vector<TpCollective> tp_collectives(const BatchShape& batch) const;
  // Time of a batch of `b` requests prefilling `prompt` tokens each (static batching's
  // and a single request's first iteration); a shortcut for time() on that shape.
  BatchTime prefill(std::int64_t b, std::int64_t prompt) const;
  // Time of one decode step of `b` requests at context `context` (tokens read each).
  BatchTime decode(std::int64_t b, std::int64_t context) const;

  // KV blocks left in the replica's memory for a scheduler that runs at most
  // `max_batched_tokens` tokens and `max_batch_size` sequences per iteration.
  KvCapacity kv_capacity(std::int64_t block_size, std::int64_t max_batched_tokens, std::int64_t max_batch_size) const;
  // KV cache per token of one request on one GPU (the stage with the most layers).
  Bytes kv_bytes_per_token() const;
  // Bytes of one request's whole KV cache over the replica (all layers, all kv heads):
  // what disaggregation moves from a prefill to a decode instance.
  Bytes kv_bytes_of_request(std::int64_t tokens) const;

  std::int64_t tp() const { return tp_; }
  std::int64_t pp() const { return pp_; }

 private:
  struct Dense {
    Seconds gpu = 0, comm = 0;
  };
  Dense layer_dense(std::int64_t tokens) const;  // memoised by token count
  Dense compute_layer_dense(std::int64_t tokens) const;
  Seconds attention_layer(const BatchShape& b) const;
  bool expands_kv(const BatchShape& b) const;
  bool masked_chunk(const BatchShape& b) const;
  Bytes sdpa_mask_elements(const BatchShape& b) const;

 public:
  // transformers' SDPA mask for a batch with a masked chunk (zero otherwise): built once a
  // forward, turned into an additive mask in each layer's SDPA call.
  struct MaskTime {
    Seconds build = 0, per_layer = 0;
  };
  MaskTime sdpa_mask_time(const BatchShape& b) const;

 private:
  int cache_kernels() const;
  // cuBLAS's launches beyond one per linear (GemmLaunches) over a block's linears at `rows`
  // tokens: the host launches them too.
  double gemm_extra_launches(const Block& block, std::int64_t rows) const;
  Seconds packed_attention_layer(const BatchShape& b, double kv_token, double q_token, double read_token) const;
  Seconds measured_packed_attention_layer(double q, double kv_total, double kv_token, double q_token,
                                          double read_token) const;
  Seconds measured_graph_stall() const;

  ModelSpec model_;
  ClusterModel cluster_;
  EngineSpec engine_;
  std::int64_t tp_, pp_;
  std::int64_t layers_per_stage_;  // the heaviest stage (ceil)
  std::int64_t heads_gpu_, kv_heads_gpu_;
  ModelGraph unit_;  // the forward graph at one token: ops scale with T
  KernelModel km_;
  Group tp_group_;
  int kernels_per_layer_ = 0, kernels_outside_ = 0;  // forward launches, attention excluded
  std::optional<EngineSdpaTable> sdpa_table_;  // the measured engine's attention path
  // How long the GPU waits while cuDNN builds a new shape's SDPA graph (measured_graph_stall).
  Seconds graph_stall_ = 0;
  mutable std::vector<Dense> dense_cache_;
  mutable std::vector<bool> dense_known_;
};

}  // namespace clustersim
