#include "strategies/serving_batch.hpp"

#include <algorithm>
#include <cmath>

#include "costmodel/calibration.hpp"
#include "strategies/op_timing.hpp"
#include "strategies/rules.hpp"

namespace clustersim {
namespace {
using i64 = std::int64_t;
constexpr double kElement = 2;  // bf16 weights, activations and KV cache
// transformers' masked SDPA (a prefill chunk over a past cache), counted in
// serving-batch-profile-chunk-2026-11-28.json against the unmasked prefills: the boolean
// mask built once a forward (sdpa_mask: arange of the query and of the key positions, their
// offsets, the causal comparison), and its conversion to an additive mask in each SDPA call.
constexpr int kMaskBuildKernels = 7;
constexpr int kSdpaMaskKernels = 3;

// The model's forward graph at one token (one sequence of length 1): every token-wise
// op's shape and bytes are then per token and scale with the batch's token count. An engine
// running transformers' modeling code gets its kernels (GraphStyle::transformers_inference,
// eager PyTorch for the families it does not cover); a fused engine the fused graph.
ModelGraph unit_graph(const ModelSpec& m, EngineKernels kernels) {
  ModelSpec one = m;
  one.seq_len = 1;
  one.dropout = 0;  // inference
  GraphStyle style;
  style.activation_bytes = kElement;
  style.residual_bytes = kElement;
  style.eager = kernels == EngineKernels::transformers;
  style.transformers_inference = kernels == EngineKernels::transformers;
  return build_model_graph(one, 1, style);
}

// The op at `tokens` tokens: matmuls grow in M, memory-bound ops and collectives in bytes.
Op at_tokens(const Op& op, i64 tokens) {
  Op o = op;
  const double t = double(tokens);
  if (o.kind == OpKind::matmul) o.m = op.m * tokens;
  o.fwd_bytes = op.fwd_bytes * t;
  o.comm_bytes = op.comm_bytes * t;
  return o;
}

bool token_wise(const Op& op) { return op.kind != OpKind::attention && op.role != OpRole::saved_marker; }
// Of the head's ops, those an inference forward runs: not the training loss.
bool inference_head_op(const Op& op) { return token_wise(op) && op.memory_kind != MemoryKind::softmax; }

// Host time per kernel of an eager inference forward: the measured inference-mode rate (no
// autograd recording) where the profile has it, else the training blocks' eager rate.
Seconds eager_inference_per_kernel(const HostDispatch& h) {
  return h.inference_per_kernel > 0 ? h.inference_per_kernel : h.eager_per_kernel;
}

// The cluster the engine's kernels run on: transformers' model code calls PyTorch's SDPA,
// whose backend choice sets the attention curve (cuDNN's on Hopper); fused engines run
// FlashAttention, the profile's own curve.
ClusterModel engine_cluster(ClusterModel c, const EngineSpec& e) {
  if (e.kernels == EngineKernels::transformers) use_attention_kernel(c.gpu, pytorch_sdpa_kernel(c.gpu));
  return c;
}
}  // namespace

Seconds residual_at(const ResidualQuantiles& q, double u) {
  if (q.empty()) return 0;
  const auto& p = q.probability;
  u = std::clamp(u, p.front(), p.back());
  // The last probability <= u, and the next one (u = 1 gives the last segment's end).
  const std::size_t hi =
      std::min<std::size_t>(p.size() - 1, std::size_t(std::upper_bound(p.begin(), p.end(), u) - p.begin()));
  const std::size_t lo = hi - 1;
  const double w = (u - p[lo]) / (p[hi] - p[lo]);
  return q.value[lo] + w * (q.value[hi] - q.value[lo]);
}

namespace {
// splitmix64's finaliser (Steele, Lea and Flood, 2014): nearby seeds and replica indices
// give unrelated generator seeds.
std::uint64_t mix64(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}
}  // namespace

LaunchResidualDraw::LaunchResidualDraw(const ResidualQuantiles& q, std::uint64_t seed, std::uint64_t replica)
    : q_(q), g_(mix64(mix64(seed) ^ replica)) {}

EngineSdpaTable::EngineSdpaTable(const EngineAttentionPath& a)
    : heads_(std::max<i64>(1, a.heads)),
      rows_(std::max<i64>(1, a.query_rows_per_cta)),
      resident_(std::max<i64>(1, a.resident_ctas)) {
  for (const auto& p : a.sdpa) {
    auto it = std::find_if(columns_.begin(), columns_.end(), [&](const Column& c) { return c.kv == p.kv; });
    if (it == columns_.end()) {
      columns_.push_back({p.kv, {}});
      it = columns_.end() - 1;
    }
    it->q_time.push_back({p.q, p.time});
  }
  std::sort(columns_.begin(), columns_.end(), [](const Column& x, const Column& y) { return x.kv < y.kv; });
  for (auto& c : columns_) std::sort(c.q_time.begin(), c.q_time.end());
}

i64 EngineSdpaTable::waves(i64 heads, i64 q) const {
  const i64 units = (q + rows_ - 1) / rows_ * heads;
  return std::max<i64>(1, (units + resident_ - 1) / resident_);
}

Seconds EngineSdpaTable::at_column(const Column& c, i64 q) const {
  const i64 w = waves(heads_, q);
  // The measured points of q's wave count on either side of it (per-wave time).
  const std::pair<i64, Seconds>*lo = nullptr, *hi = nullptr;
  for (const auto& p : c.q_time) {
    if (waves(heads_, p.first) != w) continue;
    if (p.first <= q) lo = &p;
    if (p.first >= q && !hi) hi = &p;
  }
  const auto per_wave = [&](const std::pair<i64, Seconds>& p) { return p.second / double(waves(heads_, p.first)); };
  if (!lo && !hi) {
    // No point of this wave count: the nearest point's time per wave.
    const auto& n = *std::min_element(c.q_time.begin(), c.q_time.end(), [&](const auto& x, const auto& y) {
      return std::llabs(x.first - q) < std::llabs(y.first - q);
    });
    return per_wave(n) * double(w);
  }
  if (!lo || !hi || lo->first == hi->first) return per_wave(lo ? *lo : *hi) * double(w);
  const double f = double(q - lo->first) / double(hi->first - lo->first);
  return (per_wave(*lo) + f * (per_wave(*hi) - per_wave(*lo))) * double(w);
}

Seconds EngineSdpaTable::time(i64 heads, i64 q, double kv) const {
  if (columns_.empty() || q <= 0 || kv <= 0) return 0;
  // Another head count (tensor parallelism): the same query rows x heads at the table's.
  if (heads != heads_) q = std::max<i64>(1, static_cast<i64>(std::llround(double(q) * double(heads) / double(heads_))));
  if (kv <= columns_.front().kv) return at_column(columns_.front(), q) * kv / columns_.front().kv;
  if (kv >= columns_.back().kv) return at_column(columns_.back(), q) * kv / columns_.back().kv;
  std::size_t j = 1;
  while (columns_[j].kv < kv) ++j;
  const double f = (kv - columns_[j - 1].kv) / (columns_[j].kv - columns_[j - 1].kv);
  const Seconds a = at_column(columns_[j - 1], q), b = at_column(columns_[j], q);
  return a + f * (b - a);
}

i64 BatchShape::tokens() const {
  i64 t = decodes;
  for (const auto& p : prefills) t += p.tokens;
  return t;
}

BatchTimeModel::BatchTimeModel(const ModelSpec& model, const ClusterModel& cluster, const EngineSpec& engine, i64 tp,
                               i64 pp)
    : model_(model),
      cluster_(engine_cluster(cluster, engine)),
      engine_(engine),
      tp_(tp),
      pp_(pp),
      layers_per_stage_((model.layers + pp - 1) / pp),
      heads_gpu_(std::max<i64>(1, model.heads / tp)),
      // Fewer kv heads than tp ranks: each rank keeps a replica of one kv head.
      kv_heads_gpu_(std::max<i64>(1, model.kv_heads / tp)),
      unit_(unit_graph(model, engine.kernels)),
      km_(cluster_.gpu),
      tp_group_{tp, std::min(tp, cluster.gpus_per_node), 1} {
  if (engine.attention == AttentionMode::packed && engine.host.enabled && engine.host.attention.enabled)
    sdpa_table_.emplace(engine.host.attention);
  for (const Op& op : unit_.blocks[1].ops)
    if (token_wise(op)) kernels_per_layer_ += op_kernels(op).forward + (op.kind == OpKind::tp_exit && tp > 1 ? 1 : 0);
  for (const Op& op : unit_.blocks[0].ops)
    if (token_wise(op)) kernels_outside_ += op_kernels(op).forward;
  for (const Op& op : unit_.blocks[2].ops)
    if (inference_head_op(op)) kernels_outside_ += op_kernels(op).forward;
  // A median needs iterations to stand on: with fewer than kMinGpuBoundIterations the fit runs
  // do not show the stall (one process's probe had 1; the others 19-176) and the profiled
  // build stands in.
  constexpr std::size_t kMinGpuBoundIterations = 10;
  graph_stall_ = engine_.host.attention.graph_build;
  if (sdpa_table_ && engine_.host.gpu_bound.size() >= kMinGpuBoundIterations) graph_stall_ = measured_graph_stall();
}

// The GPU's idle time while the host builds a new shape's cuDNN graph, as the engine process's
// own fit runs show it: in a decode iteration at a new shape that the host waited on the GPU
// for, the launch + wait is the time before the GPU could run the layers after the build plus
// their GPU time, so launch + wait - the modelled GPU time is that idle time (the build, plus the
// launches before the first SDPA call, less the GPU work queued before it). The median over the
// process's such iterations (fit_engine_host.py's gpu_bound_probe); measured without a profiler,
// under load, unlike graph_build_s. The samples were taken on one GPU: they are timed by a
// one-GPU model of the same engine.
Seconds BatchTimeModel::measured_graph_stall() const {
  std::optional<BatchTimeModel> one;
  if (tp_ != 1 || pp_ != 1) {
    EngineSpec e = engine_;
    e.host.gpu_bound.clear();
    one.emplace(model_, cluster_, e, 1, 1);
  }
  const BatchTimeModel& m = one ? *one : *this;
  std::vector<double> idle;
  for (const auto& g : engine_.host.gpu_bound) {
    BatchShape b;
    b.decodes = g.decodes;
    b.decode_context = g.kv;
    b.sampled = g.decodes;
    idle.push_back(g.launch_and_wait - m.time(b).gpu);
  }
  return std::max(0.0, median_of(std::move(idle)));
}

BatchTimeModel::Dense BatchTimeModel::compute_layer_dense(i64 tokens) const {
  const ShardingContext ctx{tp_, 1, false, DType::bf16, DType::bf16};
  Dense d;
  for (const Op& op : unit_.blocks[1].ops) {
    if (!token_wise(op)) continue;
    const OpTiming t = time_op(at_tokens(op, tokens), ctx, km_);
    d.gpu += t.forward;
    if (t.forward_comm.active() && tp_ > 1)
      d.comm += collective_time(cluster_, t.forward_comm.kind, t.forward_comm.bytes, tp_group_, 1.0);
  }
  return d;
}

BatchTimeModel::Dense BatchTimeModel::layer_dense(i64 tokens) const {
  if (tokens <= 0) return {};
  const auto i = static_cast<std::size_t>(tokens);
  if (i >= dense_cache_.size()) {
    dense_cache_.resize(i + 1);
    dense_known_.resize(i + 1, false);
  }
  if (!dense_known_[i]) {
    dense_cache_[i] = compute_layer_dense(tokens);
    dense_known_[i] = true;
  }
  return dense_cache_[i];
}

// Whether this batch's attention expands K and V to every query head (GqaMode; repeat_kv
// returns its input when there is one query head per kv head).
bool BatchTimeModel::expands_kv(const BatchShape& b) const {
  if (heads_gpu_ <= kv_heads_gpu_) return false;
  if (engine_.gqa == GqaMode::repeat_kv) return true;
  return engine_.gqa == GqaMode::masked_repeat_kv && masked_chunk(b);
}

// Whether transformers' sdpa path hands SDPA an attention mask: its causal skip
// (is_causal=True, no mask) needs as many queries as keys or a single query, so a prefill
// chunk of several tokens over a past cache gets a materialized boolean mask.
bool BatchTimeModel::masked_chunk(const BatchShape& b) const {
  for (const auto& p : b.prefills)
    if (p.context > 0 && p.tokens > 1) return true;
  return false;
}

// The boolean mask is built once a forward (its kMaskBuildKernels small kernels write it);
// SDPA's cuDNN backend turns it into an additive bf16 one in every call
// (convert_boolean_attn_mask_cudnn: at::where over the mask with two device scalars): two
// fills and a broadcasting where, TensorIterator's unvectorized path
// (serving-batch-profile-chunk-2026-11-28.json: 3 kernels a layer, none in unmasked cells).
BatchTimeModel::MaskTime BatchTimeModel::sdpa_mask_time(const BatchShape& b) const {
  const Bytes mask = sdpa_mask_elements(b);
  if (mask <= 0) return {};
  return {km_.memory(mask, kMaskBuildKernels),
          km_.memory(mask * (1.0 + kElement), kSdpaMaskKernels, MemoryKind::noncontiguous)};
}

// Elements of the boolean masks [queries, keys] of the batch's masked chunks (zero where
// transformers' kernels do not run or no chunk is masked).
Bytes BatchTimeModel::sdpa_mask_elements(const BatchShape& b) const {
  if (engine_.kernels != EngineKernels::transformers || engine_.attention != AttentionMode::per_request ||
      !masked_chunk(b))
    return 0;
  double n = 0;
  for (const auto& p : b.prefills) n += double(p.tokens) * double(p.context + p.tokens);
  return n;
}

// Kernels a layer launches to store the new K and V: the write into their blocks (paged) or
// torch.cat of K and of V (a concatenated cache).
int BatchTimeModel::cache_kernels() const { return engine_.kv_layout == KvLayout::paged ? 1 : 2; }

// Attention and KV-cache traffic of one layer on one GPU (the SDPA mask aside: time() adds it).
Seconds BatchTimeModel::attention_layer(const BatchShape& b) const {
  const double hd = double(model_.head_dim());
  const double kv_token = 2.0 * double(kv_heads_gpu_) * hd * kElement;  // K and V of one token
  const double q_token = double(heads_gpu_) * hd * kElement;
  const bool expand = expands_kv(b);
  // K and V as attention reads them: expanded to every query head by repeat_kv.
  const double read_token = expand ? 2.0 * double(heads_gpu_) * hd * kElement : kv_token;
  if (engine_.attention == AttentionMode::packed) return packed_attention_layer(b, kv_token, q_token, read_token);
  Seconds t = 0;
  Bytes cache_traffic = 0;  // the cache write (paged) or the concatenation's copy
  double context_total = 0;  // tokens whose K and V are in the cache after this iteration
  if (b.decodes > 0) {
    // One query token per request against its whole context: memory-bound.
    const Bytes bytes = b.decode_context * read_token + 2.0 * double(b.decodes) * q_token;
    t += km_.memory(bytes, 1);
    context_total += b.decode_context;
  }
  // The prefills' attention is one call a layer (a padded batch, or varlen attention over the
  // requests): each request's work, one launch.
  if (b.prefills.size() > 1) t -= double(b.prefills.size() - 1) * cluster_.gpu.efficiency.kernel_overhead;
  for (const auto& p : b.prefills) {
    const i64 keys = p.context + p.tokens;
    // Causal chunk: each of the c queries sees the p cached keys and on average half of
    // the chunk: c (p + c/2) score entries.
    const double eff_keys = double(p.context) + double(p.tokens) / 2.0;
    const Bytes bytes = double(p.tokens) * 2 * q_token + double(keys) * read_token;
    const double work_keys = std::max(1.0, eff_keys);
    t += km_.attention_forward(heads_gpu_, p.tokens, static_cast<i64>(std::llround(work_keys)), model_.head_dim(),
                               false, bytes, DType::bf16);
    context_total += double(keys);
  }
  const double new_tokens = double(b.tokens());
  MemoryKind cache_kind = MemoryKind::elementwise;
  if (engine_.kv_layout == KvLayout::paged) {
    cache_traffic = 2.0 * new_tokens * kv_token;  // read the new K, V and write them into their blocks
  } else {
    // torch.cat of K and of V: read the old cache and the new tokens, write the whole. The new
    // K and V keep the projection's [b, s, h, d] layout: with more than one new token per
    // request (a prefill) they are not contiguous and torch.cat takes its generic path over
    // the whole cache, as it does when the cache itself is a crop() view; one decode token
    // per request is contiguous and the copy vectorized.
    cache_traffic = 2.0 * context_total * kv_token;
    if (!b.prefills.empty() || engine_.kv_layout == KvLayout::concat_view) cache_kind = MemoryKind::concat;
  }
  if (new_tokens > 0) t += km_.memory(cache_traffic, cache_kernels(), cache_kind);
  if (expand && new_tokens > 0) {
    // repeat_kv: read K and V once, write them once per query head; its expand + reshape
    // copies a stride-0 view, TensorIterator's unvectorized path (profiled at 1.1 TB/s:
    // serving-batch-profile-chunk-2026-11-28.json). The packed path prices the same copy at
    // the measured engine's own rate where its calibration file has one.
    t += km_.memory(context_total * (kv_token + read_token), 2, MemoryKind::noncontiguous);
  }
  return t;
}

// transformers' paged|sdpa (ENGINE.md section 6): the new K and V are written into their
// blocks, then every token any request attends to (KV_total = past + new of every request)
// is gathered by index_select into contiguous K and V, expanded to every query head by
// repeat_kv when GQA, and one SDPA runs over the Q packed queries x KV_total keys under a
// dense bf16 mask [Q, KV_total] that the host filled block-diagonally. The work is Q x
// KV_total, not the sum over requests of their own query x context.
Seconds BatchTimeModel::packed_attention_layer(const BatchShape& b, double kv_token, double q_token,
                                               double read_token) const {
  const double q = double(b.tokens());
  if (q <= 0) return 0;
  double kv_total = b.decode_context;
  for (const auto& p : b.prefills) kv_total += double(p.context + p.tokens);
  if (sdpa_table_) return measured_packed_attention_layer(q, kv_total, kv_token, q_token, read_token);
  const bool expand = read_token > kv_token;
  // Cache write of the new tokens; the gather reads KV_total tokens from the cache and
  // writes them; repeat_kv reads them again and writes one copy per query head.
  Bytes traffic = 2.0 * q * kv_token + 2.0 * kv_total * kv_token;
  int kernels = 3;
  if (expand) {
    traffic += kv_total * (kv_token + read_token);
    kernels += 2;
  }
  Seconds t = km_.memory(traffic, kernels);
  // One fused SDPA (no causal mask: the dense float mask carries the structure) over Q x
  // KV_total for every head; the kernel reads Q, K, V once, writes O, and reads the mask
  // rows of its query block for every head (the mask is broadcast over the heads).
  const Bytes bytes = q * 2 * q_token + kv_total * read_token + double(heads_gpu_) * q * kv_total * kElement;
  t += km_.attention_forward(heads_gpu_, static_cast<i64>(q), static_cast<i64>(std::max(1.0, kv_total)),
                             model_.head_dim(), false, bytes, DType::bf16);
  return t;
}

// The same path with the measured engine's kernels (serving-engine-profile-2026-11-26.json
// shows where its time goes): the cache write and the index_select gather of K and V are
// memory-bound passes on the memory curve (they run at it: 2.9 TB/s measured); repeat_kv's
// expand + reshape (or, without GQA, the transposed view's .contiguous()) is TensorIterator's
// strided copy, at its measured rate (0.9 TB/s, bytes read + written); the query and the
// output are made contiguous (small); the masked SDPA is the measured cuDNN kernel. At small
// query counts that kernel is neither compute- nor bandwidth-bound: its few CTAs each
// stream all the keys (1.4 ms per layer at 64 queries x 90k keys for the 1B model).
Seconds BatchTimeModel::measured_packed_attention_layer(double q, double kv_total, double kv_token, double q_token,
                                                        double read_token) const {
  const auto& a = engine_.host.attention;
  Seconds t = km_.memory(2.0 * q * kv_token, 2) + km_.memory(2.0 * kv_total * kv_token, 2);
  // repeat_kv reads the gathered K (V) once and writes one copy per query head; with one
  // query head per kv head only the transposition's copy (read + write).
  const double copy_bytes = read_token > kv_token ? kv_total * (kv_token + read_token) : 2.0 * kv_total * kv_token;
  t += copy_bytes / a.repeat_kv_copy_rate + 2 * cluster_.gpu.efficiency.kernel_overhead;
  t += km_.memory(4.0 * q * q_token, 2);
  return t + sdpa_table_->time(heads_gpu_, static_cast<i64>(q), kv_total);
}

namespace {
// The keys the engine's attention reads in one batch: every decode's context and every
// prefill chunk's past and new tokens (the engine's read indices, ENGINE.md section 1).
double kv_total(const BatchShape& b) {
  double kv = b.decode_context;
  for (const auto& p : b.prefills) kv += double(p.context + p.tokens);
  return kv;
}
}  // namespace

std::uint64_t BatchTimeModel::graph_key(const BatchShape& b) const {
  const i64 T = b.tokens();
  if (!engine_.host.enabled || !sdpa_table_ || T <= 0) return 0;
  const auto kv = static_cast<std::uint64_t>(std::llround(kv_total(b)));
  return (static_cast<std::uint64_t>(T) << 40) | (kv & ((std::uint64_t(1) << 40) - 1));
}

BatchTime BatchTimeModel::time(const BatchShape& b, bool graph_cached, Seconds launch_residual) const {
  BatchTime r;
  const i64 T = b.tokens();
  if (T <= 0) return r;
  const ShardingContext ctx{tp_, 1, false, DType::bf16, DType::bf16};
  const Dense d = layer_dense(T);
  const Seconds attn = attention_layer(b);
  const double L = double(model_.layers);
  r.linear = L * d.gpu;
  r.comm = L * d.comm;
  const MaskTime mask = sdpa_mask_time(b);
  r.mask = mask.build + L * mask.per_layer;
  r.attention = L * attn + r.mask;
  // Embedding over the T tokens (first stage), final norm over T and logits of the
  // sampled rows (last stage).
  for (const Op& op : unit_.blocks[0].ops) {
    if (!token_wise(op)) continue;
    const OpTiming t = time_op(at_tokens(op, T), ctx, km_);
    r.linear += t.forward;
    if (t.forward_comm.active() && tp_ > 1)
      r.comm += collective_time(cluster_, t.forward_comm.kind, t.forward_comm.bytes, tp_group_, 1.0);
  }
  const i64 rows = std::max<i64>(1, b.sampled);
  for (const Op& op : unit_.blocks[2].ops) {
    if (!inference_head_op(op)) continue;
    const bool logits = op.kind == OpKind::matmul;
    const OpTiming t = time_op(at_tokens(op, logits ? rows : T), ctx, km_);
    r.linear += t.forward;
  }
  if (tp_ > 1)  // the vocab-parallel logits gathered for sampling
    r.comm += collective_time(cluster_, Collective::all_gather, double(rows) * double(model_.vocab) * kElement, tp_group_, 1.0);
  r.tp_comm = r.comm;
  if (pp_ > 1) {
    const Group pair{2, cluster_.gpus_per_node >= 2 * tp_ ? 2 : 1, 0};
    r.pp_send_bytes = double(T) * double(model_.hidden) * kElement;
    r.pp_send = double(pp_ - 1) * collective_time(cluster_, Collective::send_recv, r.pp_send_bytes, pair, 1.0);
    r.comm += r.pp_send;
  }
  r.gpu = r.linear + r.attention + r.comm;
  Seconds host_forward = 0;
  if (engine_.launch == LaunchMode::eager) {
    // One attention call a layer over the batch's prefills and one over its decodes
    // (attention_layer), the cache's kernels, repeat_kv's two copies.
    const bool masked = r.mask > 0;
    const int attn_kernels = (b.decodes > 0 ? 1 : 0) + (b.prefills.empty() ? 0 : 1) + cache_kernels() +
                             (expands_kv(b) ? 2 : 0) + (masked ? kSdpaMaskKernels : 0);
    const double kernels = L * double(kernels_per_layer_ + attn_kernels + gemm_extra_launches(unit_.blocks[1], T)) +
                           kernels_outside_ + gemm_extra_launches(unit_.blocks[2], rows) +
                           (masked ? kMaskBuildKernels : 0);
    host_forward = kernels * eager_inference_per_kernel(cluster_.gpu.host);
    if (engine_.kernels == EngineKernels::transformers) host_forward += cluster_.gpu.host.inference_forward;
  }
  if (engine_.host.enabled) {
    // A measured engine's calibrated host cost: prepare the batch, launch the eager
    // forward (the GPU runs behind the launches), wait for the GPU, update the requests;
    // nothing overlaps with the next iteration (ENGINE.md section 1).
    double prefill_tokens = 0;
    for (const auto& p : b.prefills) prefill_tokens += double(p.tokens);
    const double kv_tokens = kv_total(b);
    const double requests = double(b.decodes) + double(b.prefills.size());
    const Seconds prep = engine_.host.prepare_update.at(requests, prefill_tokens, kv_tokens);
    Seconds launch = engine_.host.launch.at(requests, prefill_tokens, kv_tokens);
    Seconds stall = 0;
    if (sdpa_table_) {
      // The mask, filled on the GPU while the batch is prepared: -inf over [Q, Q + KV_total]
      // and three small kernels per request (ENGINE.md section 1).
      const double q = double(T);
      const Seconds mask = km_.memory(q * (q + kv_tokens) * kElement, 1 + 3 * int(requests));
      r.attention += mask;
      r.gpu += mask;
      // The first layer's SDPA call builds cuDNN's graph for this (Q, KV_total) shape on the
      // host (the calibrated launch time includes it: the fitted iterations all paid it)
      // while the GPU has only the first layer's projections queued: the GPU work cannot
      // overlap it (the GPU's idle time, measured_graph_stall).
      stall = graph_stall_;
      // A shape built before in this process is a lookup: the GPU does not wait for a
      // build, and the launch is shorter by what the engine's exact repeats of a lone
      // request measured (its fast-mode iterations: 12-15 ms of launch for the 1B against
      // 51-54 ms; calibration/serving/fit_engine_host.py), or by the build itself where
      // the file has no such figure.
      if (graph_cached) {
        const Seconds saving = engine_.host.built_graph_saving > 0 ? engine_.host.built_graph_saving : stall;
        launch = std::max(0.0, launch - saving);
        stall = 0;
      }
    }
    r.host = prep + launch;
    r.calibrated_host = true;
    r.prepare = prep;
    r.launch = launch;
    r.stall = stall;
    r.total = finish_with_gpu(r, r.gpu);
    return launch_residual != 0 ? with_launch_residual(r, launch_residual) : r;
  }
  r.host = host_forward + engine_.iteration_overhead;
  r.launch = host_forward;
  r.overhead = engine_.iteration_overhead;
  r.total = finish_with_gpu(r, r.gpu);
  return r;
}

double BatchTimeModel::gemm_extra_launches(const Block& block, i64 rows) const {
  // Each linear on this GPU's shard at the batch's rows, as cuBLAS runs it: its launches
  // beyond the GEMM itself (GemmLaunches: a split-K reduction, a memset), measured per shape.
  const GemmLaunches& g = cluster_.gpu.calibration.gemm_launches;
  if (g.points.empty()) return 0;
  const ShardingContext ctx{tp_, 1, false, DType::bf16, DType::bf16};
  double extra = 0;
  for (const Op& op : block.ops) {
    if (op.kind != OpKind::matmul || !op.weight || !token_wise(op)) continue;
    const OpShards sh = megatron_shards(op, ctx);
    extra += g.per_call(double(rows) * double(op.m), double(op.n) / double(sh.cols), double(op.k) / double(sh.contract)) - 1;
  }
  return extra;
}

std::vector<TpCollective> BatchTimeModel::tp_collectives(const BatchShape& b) const {
  std::vector<TpCollective> out;
  const i64 T = b.tokens();
  if (tp_ <= 1 || T <= 0) return out;
  const ShardingContext ctx{tp_, 1, false, DType::bf16, DType::bf16};
  // The same ops and bytes as time()'s comm (compute_layer_dense, the embedding, the logits).
  for (const auto& [block, place] : {std::pair{0, TpCollective::Place::first_stage},
                                     std::pair{1, TpCollective::Place::every_layer}})
    for (const Op& op : unit_.blocks[std::size_t(block)].ops) {
      if (!token_wise(op)) continue;
      const OpTiming t = time_op(at_tokens(op, T), ctx, km_);
      if (t.forward_comm.active()) out.push_back({t.forward_comm.kind, t.forward_comm.bytes, place});
    }
  const i64 rows = std::max<i64>(1, b.sampled);
  out.push_back({Collective::all_gather, double(rows) * double(model_.vocab) * kElement, TpCollective::Place::last_stage});
  return out;
}

BatchTime BatchTimeModel::with_launch_residual(BatchTime t, Seconds residual) const {
  if (!t.calibrated_host) return t;
  // The host's deviation from its fitted launch enters before the max: a slow launch delays
  // the iteration only where the GPU does not take longer (ENGINE.md section 6).
  t.launch = std::max(0.0, t.launch + residual);
  t.host = t.prepare + t.launch;
  t.total = finish_with_gpu(t, t.gpu);
  return t;
}

Seconds BatchTimeModel::finish_with_gpu(const BatchTime& t, Seconds gpu) const {
  if (t.calibrated_host) return t.prepare + std::max(t.launch, t.stall + gpu);
  // The host launches ahead of the GPU; the forward ends when both are done.
  return gpu + host_bound_time(gpu, 0, t.launch, 0, 1) + t.overhead;
}

BatchTime BatchTimeModel::prefill(i64 b, i64 prompt) const {
  BatchShape s;
  s.prefills.assign(static_cast<std::size_t>(b), PrefillChunk{prompt, 0});
  s.sampled = b;
  return time(s);
}

BatchTime BatchTimeModel::decode(i64 b, i64 context) const {
  BatchShape s;
  s.decodes = b;
  s.decode_context = double(b) * double(context);
  s.sampled = b;
  return time(s);
}

Bytes BatchTimeModel::kv_bytes_per_token() const {
  return 2.0 * double(kv_heads_gpu_) * double(model_.head_dim()) * kElement * double(layers_per_stage_);
}

Bytes BatchTimeModel::kv_bytes_of_request(i64 tokens) const {
  return 2.0 * double(model_.kv_heads) * double(model_.head_dim()) * kElement * double(model_.layers) * double(tokens);
}

KvCapacity BatchTimeModel::kv_capacity(i64 block_size, i64 max_batched_tokens, i64 max_batch_size) const {
  KvCapacity c;
  c.block_size = block_size;
  c.budget = cluster_.gpu.usable_memory() * engine_.memory_fraction;
  // Weights per GPU of the heaviest stage: its layers split over tp, plus the embedding
  // (first stage) and the untied head (last stage); pp = 1 holds both.
  const double layer = unit_.blocks[1].params() / double(tp_);
  const double emb = unit_.blocks[0].params() / double(tp_), head = unit_.blocks[2].params() / double(tp_);
  const double ends = pp_ == 1 ? emb + (model_.tie_embeddings ? 0.0 : head) : std::max(emb, head);
  c.weights = (double(layers_per_stage_) * layer + ends) * kElement;
  // Workspace: the live activations of the largest forward (residual stream, QKV, the
  // MLP's gate/up output and its product) and the fp32 logits of the sampled rows.
  const double T = double(max_batched_tokens);
  const double per_token = double(model_.hidden) * 2 + double(heads_gpu_ + 2 * kv_heads_gpu_) * model_.head_dim() +
                           3.0 * double(model_.ffn_hidden) / double(tp_);
  c.workspace = T * per_token * kElement + double(max_batch_size) * double(model_.vocab) / double(tp_) * 4.0;
  c.bytes_per_token = kv_bytes_per_token();
  const double free = c.budget - c.weights - c.workspace;
  c.blocks = free > 0 ? static_cast<i64>(std::floor(free / (c.bytes_per_token * double(block_size)))) : 0;
  return c;
}

}  // namespace clustersim
