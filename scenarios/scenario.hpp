// The scenario: model, training, cluster, plan and simulation settings as plain
// structs in SI units. Parsing validates types, ranges, units, unknown keys and the
// cross-field rules (the plan must tile the cluster, the batch must split evenly...)
// and reports every problem with file and JSON path. The schema is documented in
// scenarios/README.md.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "scenarios/diagnostics.hpp"
#include "scenarios/json_writer.hpp"
#include "scenarios/units.hpp"

namespace clustersim {

enum class ModelFamily { gpt, llama, moe, llama_moe, wresnet };
enum class AttentionImpl { standard, flash };
// Which convolutions of a Wide-ResNet bottleneck the width factor widens: torchvision's
// wide_resnet (the 1x1 reduction and the 3x3) or Alpa's benchmark model (only the 3x3's
// output; alpa/model/wide_resnet.py), whose suite sizes (250M ... 13B) assume it.
enum class BottleneckStyle { torchvision, alpa };
enum class Precision { fp32, amp_bf16, amp_fp16, mixed_bf16, mixed_fp16, mixed_fp8 };
enum class OptimizerKind { adam, sgd };
enum class Recompute { none, selective, full };
enum class Fabric { nvswitch, nvlink_mesh, pcie };
enum class Topology { fat_tree, leaf_spine, rail_optimized };
// zb_h1: zero-bubble ZB-H1 (Qi et al., ICLR 2024): 1F1B with each backward split into its
// input gradient (B, on the critical path) and its weight gradient (W, deferred to fill the
// bubbles), at 1F1B's activation memory.
// dualpipe: DeepSeek-V3's bidirectional schedule (arXiv 2412.19437 Sec. 3.2.1; the
// deepseek-ai/DualPipe code): micro-batches enter from both ends, each GPU holds two
// stages (one per direction) and overlaps a forward chunk of one direction with a
// backward chunk of the other, so that one's communication hides behind the other's
// compute; backward splits into input and weight gradients as in ZB-H1.
enum class Schedule { gpipe, one_f_one_b, interleaved, zb_h1, dualpipe };
// The training software: what it launches and how it syncs (see FrameworkSpec).
enum class Framework {
  megatron,
  pytorch,
  pytorch_ddp,
  pytorch_fsdp,
  pytorch_tp,
  // Historical and third-party Megatron stacks (FrameworkSpec): mixed-* precisions, as megatron.
  megatron_2019,
  megatron_deepspeed,
};
// Megatron-LM and the stacks built from it: they train with the mixed-* precisions.
bool megatron_family(Framework);
enum class ElementType { fp32, bf16, fp16 };
// Context parallelism's attention (plan.cp_algorithm): ring (Megatron-Core's p2p ring in
// TransformerEngine: K and V blocks travel round the cp GPUs, overlapped with attention)
// or all_to_all (DeepSpeed-Ulysses: heads and sequence swap places around attention).
enum class CpAlgorithm { ring, all_to_all };
// How pytorch-fsdp shards (training.framework.sharding): FULL_SHARD, SHARD_GRAD_OP, or
// HYBRID_SHARD (full sharding inside groups of shard_size GPUs, replicated across them).
enum class FsdpSharding { full, grad_op, hybrid };
// Megatron-Core's language-model loss (compute_language_model_loss): its own vocab-parallel
// cross entropy in fp32 ("native", also what cross_entropy_loss_fusion with the native impl
// keeps), or Transformer Engine's fused parallel_cross_entropy ("te":
// cross_entropy_loss_fusion with cross_entropy_fusion_impl "te"; costmodel/graph.hpp
// GraphStyle::te_cross_entropy).
enum class CrossEntropyImpl { native, te };

std::string_view to_string(ModelFamily);
std::string_view to_string(AttentionImpl);
std::string_view to_string(Precision);
std::string_view to_string(OptimizerKind);
std::string_view to_string(Recompute);
std::string_view to_string(Fabric);
std::string_view to_string(Topology);
std::string_view to_string(Schedule);
std::string_view to_string(Framework);
std::string_view to_string(ElementType);
std::string_view to_string(CpAlgorithm);
std::string_view to_string(FsdpSharding);
std::string_view to_string(CrossEntropyImpl);

struct ModelSpec {
  ModelFamily family = ModelFamily::gpt;
  // Transformers (gpt, llama, moe).
  std::int64_t hidden = 0, layers = 0, heads = 0, kv_heads = 0, seq_len = 0, vocab = 0, ffn_hidden = 0;
  AttentionImpl attention = AttentionImpl::flash;
  // ALiBi (BLOOM, bigscience Megatron-DeepSpeed --position-embedding-type alibi): the
  // attention scores start from a per-head linear bias, which standard attention adds by
  // torch.baddbmm(alibi, q, k^T, beta=1) (gpt and moe families only).
  bool alibi = false;
  double dropout = 0.0;
  bool tie_embeddings = true;
  // MoE: every `moe_every`-th layer (the 2nd, 4th... for 2) has `experts` experts, top-k routing.
  std::int64_t experts = 0, top_k = 0, moe_every = 2;
  double capacity_factor = 1.0;
  // llama-moe only (Mixtral, DeepSeek-V3): SwiGLU experts of width expert_ffn_hidden, that
  // many shared experts (always active, of the same width), the first `first_dense_layers`
  // layers dense (SwiGLU of ffn_hidden), and node-limited routing: a token's experts lie on
  // at most `max_nodes_per_token` nodes (0: no limit).
  std::int64_t expert_ffn_hidden = 0, shared_experts = 0, first_dense_layers = 0, max_nodes_per_token = 0;
  // Multi-head latent attention (DeepSeek-V2/V3): queries and keys/values pass through
  // low-rank latents; each head has a no-position part and a rotary part of its own for
  // queries, a rotary key shared by the heads, and values of v_head_dim.
  struct Mla {
    std::int64_t q_lora_rank = 0, kv_lora_rank = 0, qk_nope_head_dim = 0, qk_rope_head_dim = 0, v_head_dim = 0;
  };
  std::optional<Mla> mla;
  // Multi-token prediction modules (DeepSeek-V3): each adds a projection, one MoE layer and
  // a second pass through the shared output head on the last pipeline stage.
  std::int64_t mtp_modules = 0;
  // Wide-ResNet: bottleneck ResNet of `depth` layers, base channels, width factor.
  std::int64_t depth = 0, channels = 0, width = 0, image_size = 0, classes = 0;
  BottleneckStyle bottleneck = BottleneckStyle::torchvision;

  std::int64_t head_dim() const { return heads ? hidden / heads : 0; }
  bool has_experts() const { return family == ModelFamily::moe || family == ModelFamily::llama_moe; }
};

// The framework a user trains with (training.framework: a name, or an object with "name"
// and its knobs). It decides host-side dispatch cost per kernel, gradient buckets and
// their memory, and what FSDP gathers and reduces:
//  megatron      Megatron-LM (fused kernels with mixed-*; 40 M-element gradient buckets)
//  pytorch       eager PyTorch with hand-written parallelism (tensor or pipeline); no data parallelism
//  pytorch-ddp   DistributedDataParallel: bucket_cap (default 25 MB), gradient_as_bucket_view
//                (default false: the buckets are a second copy of the gradients)
//  pytorch-fsdp  FullyShardedDataParallel: version 1 or 2, param_dtype and reduce_dtype (default:
//                the parameters' storage type); plan.zero 3 is FULL_SHARD, 2 SHARD_GRAD_OP
//  pytorch-tp    DTensor tensor parallelism (parallelize_module): host dispatch per kernel grows
//  megatron-2019 Megatron-LM as released in 2019 (commit a0368ddf, PyTorch 1.1 in NGC 19.05): scores
//                scaled and masked by separate kernels, bias adds after the GEMMs, unfused dropout
//                and residual adds, all on PyTorch 1.1's unvectorized elementwise path, fp32 logits
//                into an unfused cross entropy, FP16_Optimizer's and its DDP's gradient passes
//                (GraphStyle, PrecisionRules::optimizer_extra_bytes, rules ddp_gradient_scaling)
//  megatron-deepspeed Megatron-DeepSpeed's pipeline engine: Megatron's fused layers, and under
//                mixed-bf16 DeepSpeed's BF16_Optimizer adds every micro-batch's bf16 weight
//                gradients into fp32 buffers (update_hp_grads); under mixed-fp16 autograd
//                accumulates the 16-bit gradients in place (GraphStyle::grad_accumulation_bytes)
// megatron's knob gradient_accumulation_fusion (default true, Megatron-LM's
// --gradient-accumulation-fusion since commit 83b1e42f, 2022-02-16): false is the code before
// it, as in the SC'21 paper, where each micro-batch's weight gradients leave the GEMM as 16-bit
// tensors and are added up outside it (GraphStyle::grad_accumulation_bytes)
// Default (not written): megatron for mixed-* precisions; otherwise pytorch-ddp, or
// pytorch-fsdp when plan.zero is 2 or 3. The rules between framework, precision and
// plan.zero are checked only for a framework written in the file.
struct FrameworkSpec {
  Framework name = Framework::megatron;
  bool given = false;                    // written in the file (else derived from the precision)
  double bucket_cap_bytes = 25.0 * (1 << 20);
  bool gradient_as_bucket_view = false;
  bool gradient_accumulation_fusion = true;  // megatron only
  int fsdp_version = 1;
  std::optional<ElementType> param_dtype, reduce_dtype;
  // pytorch-fsdp's sharding strategy ("sharding"; when not written, plan.zero decides:
  // 3 full, 2 grad-op) and, for hybrid, the GPUs of a shard group ("shard_size"; 0: the
  // data-parallel GPUs of one node, rules.hpp hybrid_shard_size).
  std::optional<FsdpSharding> sharding;
  std::int64_t shard_size = 0;
  CrossEntropyImpl cross_entropy = CrossEntropyImpl::native;  // megatron only ("cross_entropy")
  // CUDA_LAUNCH_BLOCKING=1 in the run's environment ("launch_blocking", any framework): every
  // kernel launch returns only when the kernel has finished, so the host's dispatch of the
  // next kernel never overlaps the GPU (strategies/rules.hpp launch_blocking_gap).
  bool launch_blocking = false;
  // Megatron's --tp-comm-overlap ("tp_comm_overlap", megatron only): Transformer Engine's
  // userbuffers run the sequence-parallel all-gathers and reduce-scatters beside their
  // GEMMs (strategies/op_timing.hpp overlap_tp_comm). NeMo's and Megatron-Bridge's
  // performance recipes set it; Megatron-LM's default is off.
  bool tp_comm_overlap = false;
  bool hybrid() const { return name == Framework::pytorch_fsdp && sharding == FsdpSharding::hybrid; }
};

// Which fused-attention kernels the run's attention reaches (training.attention_kernel):
// auto leaves it to the software (strategies/rules.hpp fused_attention_kernel), flash2 and
// cudnn state it (a run that forced PyTorch's SDPA backend, or an older stack).
enum class AttentionKernelChoice { automatic, flash2, cudnn };
std::string_view to_string(AttentionKernelChoice);

struct TrainingSpec {
  std::int64_t global_batch = 0;  // samples (sequences or images) per iteration
  std::int64_t micro_batch = 0;   // samples per micro-batch per data-parallel replica
  Precision precision = Precision::mixed_bf16;
  OptimizerKind optimizer = OptimizerKind::adam;
  Recompute recompute = Recompute::none;
  FrameworkSpec framework;
  // Activation offload (Megatron-Core's cpu_offloading_num_layers): the saved activations
  // of the first N layers of every model chunk go to pinned host memory during forward and
  // come back before their backward (strategies/rules.hpp activation_offload). 0: none.
  std::int64_t activation_offload_layers = 0;
  // Megatron's --fp8-param-gather (Megatron-Bridge / NeMo mixed-precision fp8_param_gather),
  // mixed-fp8 only: the weights Transformer Engine casts are built as fp8 tensors (no bf16
  // copy) and the distributed optimizer writes them from its fp32 master
  // (strategies/rules.hpp fp8_weights).
  bool fp8_param_gather = false;
  AttentionKernelChoice attention_kernel = AttentionKernelChoice::automatic;
};

struct IntraNodeSpec {
  Fabric fabric = Fabric::nvswitch;
  std::optional<BytesPerSecond> bandwidth;  // per GPU per direction; default: the GPU profile's NVLink
  std::optional<Seconds> latency;           // default: the GPU profile's
};

struct InterNodeSpec {
  Topology topology = Topology::fat_tree;
  std::int64_t nics_per_node = 0;
  BytesPerSecond nic_bandwidth = 0;  // per NIC per direction
  Seconds latency = 0;
  double oversubscription = 1.0;  // >= 1: core bandwidth = edge bandwidth / oversubscription
};

struct ClusterSpec {
  std::string gpu;
  std::int64_t nodes = 1, gpus_per_node = 1;
  IntraNodeSpec intra_node;
  std::optional<InterNodeSpec> inter_node;  // required when nodes > 1
  std::int64_t total_gpus() const { return nodes * gpus_per_node; }
};

// How a pipeline's layers split over its pp x virtual_stages virtual stages
// (plan.layers_per_stage; strategies/rules.hpp layers_per_virtual_stage applies it):
//  even          "even" (default): layers / (pp*v) each; without interleaving the
//                remainder goes to the first stages
//  lighten_ends  "lighten-ends": the embedding and the output layer with the loss count
//                as one layer each (Megatron-Core's account_for_embedding_in_pipeline_split
//                and account_for_loss_in_pipeline_split), so the first and the last virtual
//                stage hold one layer fewer: Llama 3 405B's 126 layers on 16 stages
//  listed        a list: the layers of each virtual stage, in model order
enum class StageSplit { even, lighten_ends, listed };
struct PipelineSplit {
  StageSplit kind = StageSplit::even;
  std::vector<std::int64_t> layers;  // listed: one entry per virtual stage
};

struct PlanSpec {
  std::int64_t dp = 1, tp = 1, pp = 1, ep = 1;
  // Context parallelism: every sequence split over cp GPUs (cp = 1: off), by cp_algorithm.
  // The plan uses dp x tp x pp x cp GPUs; gradients are reduced over dp x cp.
  std::int64_t cp = 1;
  CpAlgorithm cp_algorithm = CpAlgorithm::ring;
  Schedule schedule = Schedule::one_f_one_b;
  std::int64_t virtual_stages = 1;
  // Interleaved: micro-batches run each model chunk in groups of this many (Megatron-LM's
  // microbatch_group_size_per_vp_stage); 0 = pp. Any micro-batch count m >= pp works with a
  // group N in [pp, m] whose remainder m % N is 0 or >= pp.
  std::int64_t microbatch_group_size = 0;
  PipelineSplit layers_per_stage;
  int zero = 0;
  bool sequence_parallel = false;
  bool overlap_grad_reduce = true;  // bucketed gradient all-reduce during backward
  // {"search": "alpa" | "manual"}: `clustersim run` searches for the plan instead;
  // {"file": "x.plan.json"}: a plan file from `clustersim search` (relative to the
  // scenario file). Either leaves the manual knobs above at their defaults.
  std::string search;
  std::string file;
  bool searched() const { return !search.empty() || !file.empty(); }
  std::int64_t micro_batches(const TrainingSpec& t) const { return t.global_batch / (dp * t.micro_batch); }
};

struct SimulationSpec {
  std::string collectives = "auto";
  std::uint64_t seed = 1;
  // A SimGrid platform file to simulate on instead of the one built from the cluster
  // section; a relative path is taken from the scenario file's folder.
  std::string platform;
};

struct Scenario {
  std::string name;
  std::string description;
  std::string source;  // file it came from, or "<built-in default>"
  ModelSpec model;
  TrainingSpec training;
  ClusterSpec cluster;
  PlanSpec plan;
  SimulationSpec simulation;
};

// Parses and validates; problems go to `diag` (nothing throws for bad content).
Scenario parse_scenario(const nlohmann::json& doc, Diagnostics& diag);
// The section documents of a scenario that changed (nullptr: unchanged).
struct SectionDocs {
  const nlohmann::json* model = nullptr;
  const nlohmann::json* training = nullptr;
  const nlohmann::json* cluster = nullptr;
  const nlohmann::json* plan = nullptr;
  const nlohmann::json* simulation = nullptr;
};
// `base` (parsed without a problem) with the sections in `edited` parsed again by
// parse_scenario's own section parsers, then the same cross-field defaults and rules:
// the scenario and the problems parse_scenario gives for the base's document with those
// sections replaced, without parsing the others again (a sweep point, scenarios/sweep).
// The name, description and source stay the base's, but source becomes diag.file().
Scenario reparse_sections(const Scenario& base, const SectionDocs& edited, Diagnostics& diag);
// Reads, parses and validates a file; throws InputError listing every problem.
Scenario load_scenario(const std::string& file);
// The cross-field rules (plan tiles the cluster, batch splits evenly, layers split
// over stages, tp divides heads...). parse_scenario runs them; the plan enumerator
// reuses them so that "valid" means one thing.
void check_consistency(const Scenario& s, Diagnostics& diag);
// The blocks a pipeline splits into stages: a transformer's layers, a bottleneck
// ResNet's bottleneck blocks (depth = 3 x blocks + 2). The model graphs' `layers` are
// exactly these (tests/core/test_input_rules.cpp holds the two together).
std::int64_t pipeline_blocks(const ModelSpec& m);
// The scenario built into the binary (data/scenarios/default.json).
Scenario default_scenario();
std::string_view default_scenario_text();

// Canonical JSON: every default filled in, quantities in SI with their unit, keys
// sorted. Parsing it again gives the same scenario. write_json is its one serialiser
// (`sections`, when given, receives the top-level members' spans); to_json_text is its
// compact text, byte for byte nlohmann's dump() of to_json, which is parsed from it.
void write_json(JsonWriter& w, const Scenario& s, std::vector<JsonWriter::Member>* sections = nullptr);
std::string to_json_text(const Scenario& s);
nlohmann::json to_json(const Scenario& s);

}  // namespace clustersim
