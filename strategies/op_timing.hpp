// One op of the logical graph as it runs on one GPU: its compute time forward and
// backward, the activations it keeps and the parameters it holds, under a general
// sharding (how many ways its rows, columns, contraction and batch are split), and,
// for a Megatron-style manual plan (tensor, sequence and expert parallelism), the
// collectives it triggers. The analytical estimator sums these, the simulator replays
// them as activities, and the search costs every sharding strategy it enumerates with
// op_work(). Plan-level rules (what a plan does with these per-op costs) are in rules.hpp.
#pragma once
#include <cstdint>
#include <functional>
#include <vector>

#include "costmodel/cluster.hpp"
#include "costmodel/collectives.hpp"
#include "costmodel/graph.hpp"
#include "costmodel/kernels.hpp"
#include "scenarios/scenario.hpp"

namespace clustersim {

// How many ways each dimension of an op is split over the GPUs that run it (1: whole).
//  matmul C[batch,m,n] = A[batch,m,k] B[batch,k,n]: rows split m, cols n, contract k,
//    batch the batch (samples x heads of attention scores, or experts);
//  attention and memory-bound ops: the op's work and bytes are split rows x cols x
//    contract x batch ways (samples, heads or features: which dimension does not matter);
//  embedding: rows, cols and batch split the lookup's traffic; contract splits the
//    vocabulary, which shards the table but not the traffic (a vocab-parallel lookup
//    writes the whole output on every rank, zeros where the row lives elsewhere).
struct OpShards {
  std::int64_t rows = 1, cols = 1, contract = 1, batch = 1;
  // Expert ops under expert parallelism: each GPU holds experts / expert_parallel of the
  // experts and runs them on the tokens of expert_parallel ranks (batch / ep, m x ep).
  std::int64_t expert_parallel = 1;
  // Context parallelism: every op runs on 1/context of the sequence's tokens. Attention
  // keeps its keys whole: with the ring (context_heads false) each GPU's queries meet the
  // whole sequence's keys block by block, `context` kernels of (seq/context)^2 causal work
  // (the load-balanced chunks make every block half-masked); with all-to-all
  // (context_heads true) it runs whole sequences of 1/context of the heads.
  std::int64_t context = 1;
  bool context_heads = false;
  std::int64_t ways() const { return rows * cols * contract * batch * context; }
};

// The work of one op on one GPU.
struct OpWork {
  Seconds forward = 0, backward = 0;  // compute
  // The part of backward that computes weight gradients (a weight GEMM's wgrad): what a
  // zero-bubble schedule defers (rules.hpp pipeline_fill).
  Seconds weight_grad = 0;
  double forward_flops = 0;           // backward is 2x
  // Activations kept for backward: split as the op's work is (for a matmul, its input:
  // rows x contract x batch, and the columns too for a column-parallel op, whose saved
  // tensor Megatron shards like its output).
  Bytes saved = 0;
  double params = 0;  // parameters held: a matmul's weight is split by cols x contract
                      // (x the batch and expert parallelism of an expert op)
};
// `dtype` is the compute type of every kernel; `weight_gemm` that of the GEMMs against
// weights (fp8 under mixed-fp8, with fp8_casts' traffic added).
OpWork op_work(const Op& op, const OpShards& s, const KernelModel& km, DType dtype, DType weight_gemm);

// Transformer Engine's fp8 GEMM against a weight, C[b,m,n] = A[b,m,k] W[k,n], moves
// memory besides the GEMMs: in forward the 16-bit input is cast to fp8 (read 2 bytes,
// write 1 per element; the amax is fused), and in backward the output gradient is cast
// (3 bytes per element) and transposed (2), and the saved fp8 input transposed (2), since
// Hopper's fp8 GEMMs take K-major operands. The fp8 weight and its transpose are cast
// once per step (cached across micro-batches) and not counted per micro-batch.
struct Fp8CastTraffic {
  Bytes forward = 0, backward = 0;
  int forward_kernels = 1, backward_kernels = 3;
};
Fp8CastTraffic fp8_casts(std::int64_t b, std::int64_t m, std::int64_t n, std::int64_t k);

// ---------------------------------------------------------------------------------------
// Megatron-style manual plans.
// ---------------------------------------------------------------------------------------
enum class CommGroup { none, tp, ep };

struct CommStep {
  Collective kind = Collective::all_reduce;
  Bytes bytes = 0;  // per-rank buffer, as collective_time() takes it
  CommGroup group = CommGroup::none;
  // >= 0: the collective runs beside its GEMM (overlap_tp_comm) and this is the time it still
  // adds; < 0: it runs alone, exposed in full.
  Seconds exposed = -1;
  bool active() const { return group != CommGroup::none; }
  bool overlapped() const { return exposed >= 0; }
};

struct ShardingContext {
  std::int64_t tp = 1, ep = 1;
  bool sequence_parallel = false;  // only meaningful with tp > 1
  DType dtype = DType::bf16;
  DType weight_gemm = DType::bf16;  // PrecisionRules::weight_gemm
  double all_to_all_share = 1;      // expert_all_to_all_share of the plan's expert-parallel group
  std::int64_t cp = 1;              // context parallelism (plan.cp)
  CpAlgorithm cp_algorithm = CpAlgorithm::ring;
};

// What context parallelism sends around one attention op on one GPU, per micro-batch.
//  ring        (Megatron-Core / TransformerEngine p2p): `steps` = cp - 1 sends each way,
//              each of the K and V block in hand to the next GPU of the cp group (forward
//              `forward_bytes`), in backward the K, V block and the partial dK, dV
//              (`backward_bytes` = 2x); each send beside one block's attention
//              (rules.hpp ring_attention_exposed).
//  all-to-all  (DeepSpeed-Ulysses): forward the all-to-alls of q, k and v before attention
//              and of the output after it (`calls` = 4, `forward_bytes` the four tensors a
//              GPU holds, split evenly over the calls); backward those of dO before and dq,
//              dk, dv after (the same bytes). Not overlapped with compute.
// Bytes per rank as collective_time takes them.
struct ContextExchange {
  CpAlgorithm algorithm = CpAlgorithm::ring;
  std::int64_t steps = 0;
  int calls = 0;
  Bytes forward_bytes = 0, backward_bytes = 0;
  bool active() const { return steps > 0 || calls > 0; }
};
ContextExchange context_exchange(const Op& op, const OpShards& s, CpAlgorithm algorithm);
// Communication kernels the exchange launches each way (host dispatch): one per ring step
// or per all-to-all.
int context_kernels(const ContextExchange& x);

// Node-limited routing (DeepSeek-V3, arXiv 2412.19437 Sec. 2.1.2 and 3.2.2): a token's
// top_k experts lie on at most M = max_nodes_per_token nodes, and the dispatch sends it
// across the network once per destination node (the receiving GPU forwards it to that
// node's experts over NVLink; the combine reduces per node before sending back). A plain
// all-to-all sends all top_k copies. Of an expert-parallel group spanning N nodes, a token
// routed uniformly reaches N (1 - (1 - 1/N)^top_k) distinct nodes, at most M: the
// all-to-all's bytes are that over top_k of the plain exchange's. 1 without a limit or
// inside one node. The share scales the whole exchange, its NVLink part too: across nodes
// the network part is the slower by the NVLink-to-NIC ratio (3.2x on DeepSeek's H800s),
// and the collective's time is the larger of the two.
double expert_all_to_all_share(std::int64_t top_k, std::int64_t max_nodes_per_token, std::int64_t ep_nodes);

// The shards of an op under Megatron's split (graph.hpp Split) at tensor-parallel degree
// tp: column -> cols (an embedding's vocabulary -> contract), row -> contract, heads ->
// batch, seq -> rows under sequence parallelism; expert ops over ep.
OpShards megatron_shards(const Op& op, const ShardingContext& ctx);

struct OpTiming : OpWork {
  CommStep forward_comm, backward_comm;  // at most one collective each way
  ContextExchange context;               // attention under context parallelism
};

OpTiming time_op(const Op& op, const ShardingContext& ctx, const KernelModel& km);

// Transformer Engine's userbuffers overlap (training.framework.tp_comm_overlap) on one
// block's op timings `t` (time_op of `ops`, in order), with sequence parallelism: each
// tensor-parallel collective paired with the GEMM it overlaps, as TE's defaults pair them:
//  - the all-gather entering a column-parallel GEMM (the next matmul after the tp_enter):
//    forward by ring exchange beside that GEMM (rules.hpp ring_exchange_exposed); in the
//    backward, "bulk" on SM kernels (overlap_exposed with the GPU's measured interference),
//    the input gathered again for the weight gradient beside the input gradient's GEMM and
//    the input gradient's reduce-scatter beside the weight gradient (both in the
//    backward step's `exposed`: without the overlap the re-gather is not priced);
//  - the reduce-scatter leaving a row-parallel GEMM (the last matmul before the tp_exit):
//    forward by ring exchange under fp8 GEMMs, pipelined under bf16 (TpOverlapSettings;
//    pipelined_reduce_scatter: 4 splits, `rs_sms` SMs for the communication, the GEMM slowed
//    on the rest); its backward all-gather of the output gradient by ring exchange beside the
//    GEMM's input gradient.
// A GEMM beside a ring exchange or a pipelined reduce-scatter runs as tp (splits) GEMMs of
// 1/tp (1/splits) of its rows, each timed by the kernel model (smaller GEMMs fill fewer of
// the GPU's SMs). Sets each paired CommStep's `exposed` and adds the chunked GEMM's extra
// time, and the pipelined one's slowdown on fewer SMs, to its op's forward or backward.
// `collective(step)`: the step's time alone over the plan's tp group. A collective without a
// GEMM of the expected split next to it stays exposed in full.
struct TpOverlapSettings {
  // The forward reduce-scatters by ring exchange (the fp8 recipes: proj_fprop and fc2_fprop
  // RingExchangeOverlapCfg) rather than pipelined (the bf16 ones: PipelineOverlapCfg).
  bool reduce_scatter_ring = false;
  int splits = 4;   // pipelined reduce-scatter chunks (TE's num_splits)
  int rs_sms = 16;  // SMs the pipelined reduce-scatter takes (TE's num_sm)
  int sms = 0;      // the GPU's SMs (0: no slowdown from the margin)
};
// Whether a plan's tensor-parallel collectives run overlapped: framework megatron with
// tp_comm_overlap, tp > 1 and sequence parallelism (userbuffers overlap needs it).
bool tp_comm_overlapped(const FrameworkSpec& f, const PlanSpec& plan);
// The recipes' methods for this GPU and GEMM precision (NeMo / Megatron-Bridge
// tp_overlap_configs: every fp8 configuration reduce-scatters forward by ring exchange, every
// bf16 one pipelined on 8-32 SMs; TE's default num_sm, 16, stands for those).
TpOverlapSettings tp_overlap_settings(const GpuProfile& gpu, DType gemm);
// A tensor-parallel step's collective alone over the plan's tp group (`tp`: plan_groups' tp).
Seconds tp_collective_time(const ClusterModel& cluster, const Group& tp, const CommStep& step);
void overlap_tp_comm(const std::vector<Op>& ops, std::vector<OpTiming>& t, const ShardingContext& ctx, const KernelModel& km,
                     const std::function<Seconds(const CommStep&)>& collective, const TpOverlapSettings& settings,
                     const OverlapInterference& interference);

}  // namespace clustersim
