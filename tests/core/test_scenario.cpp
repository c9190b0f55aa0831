// Scenario validation: every problem reported at once, each with file, JSON path, the
// bad value and what is allowed; unknown keys get the nearest valid key.
#include "test_temp.hpp"
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>

#include "scenarios/json_reader.hpp"
#include "scenarios/scenario.hpp"
#include "strategies/estimator.hpp"

using namespace clustersim;
using nlohmann::json;

namespace {

json base_doc() { return parse_json_text(default_scenario_text(), "<test>"); }

std::vector<Problem> problems_of(const json& doc) {
  Diagnostics diag("x.json");
  parse_scenario(doc, diag);
  return diag.problems();
}

bool has_problem(const std::vector<Problem>& ps, const std::string& path, const std::string& fragment) {
  for (const auto& p : ps)
    if (p.path == path && p.message.find(fragment) != std::string::npos) return true;
  return false;
}

std::string dump(const std::vector<Problem>& ps) {
  std::string s;
  for (const auto& p : ps) s += p.to_string() + "\n";
  return s;
}

}  // namespace

TEST_CASE("the built-in default scenario is valid", "[scenario]") {
  const Scenario s = default_scenario();
  CHECK(s.model.family == ModelFamily::gpt);
  CHECK(s.model.ffn_hidden == 4 * s.model.hidden);  // gpt default
  CHECK(s.plan.dp * s.plan.tp * s.plan.pp == s.cluster.total_gpus());
  REQUIRE(s.cluster.intra_node.bandwidth);
  CHECK(*s.cluster.intra_node.bandwidth == Approx(300e9));
  REQUIRE(s.cluster.inter_node);
  CHECK(s.cluster.inter_node->nic_bandwidth == Approx(25e9));  // 200 Gb/s
}

TEST_CASE("bad values name file, path, value and what is allowed", "[scenario]") {
  json doc = base_doc();
  doc["cluster"]["nodes"] = -2;
  doc["cluster"]["intra_node"]["bandwidth"] = 450;
  doc["training"]["precision"] = "bf16";
  doc["plan"]["schedule"] = "1f1bb";
  const auto ps = problems_of(doc);
  INFO(dump(ps));
  CHECK(has_problem(ps, "/cluster/nodes", "expected an integer in [1, 1048576], got -2"));
  CHECK(has_problem(ps, "/cluster/intra_node/bandwidth", "no unit"));
  CHECK(has_problem(ps, "/training/precision", "got \"bf16\""));
  CHECK(has_problem(ps, "/plan/schedule", "did you mean \"1f1b\""));
  CHECK(ps.size() == 4);
  CHECK(ps[0].to_string().rfind("x.json: /", 0) == 0);
}

TEST_CASE("unknown keys suggest the nearest valid key", "[scenario]") {
  json doc = base_doc();
  doc["model"]["hiden"] = 1024;
  doc["cluster"]["gpus_per_nod"] = 8;
  doc["plan"]["frobnicate"] = true;
  const auto ps = problems_of(doc);
  INFO(dump(ps));
  CHECK(has_problem(ps, "/model/hiden", "did you mean \"hidden\""));
  CHECK(has_problem(ps, "/cluster/gpus_per_nod", "did you mean \"gpus_per_node\""));
  CHECK(has_problem(ps, "/plan/frobnicate", "valid keys here"));
}

TEST_CASE("cross-field rules: the plan must tile the cluster and the batch must split", "[scenario]") {
  json doc = base_doc();
  doc["plan"]["dp"] = 3;
  auto ps = problems_of(doc);
  INFO(dump(ps));
  CHECK(has_problem(ps, "/plan", "must equal the cluster's GPUs"));

  doc = base_doc();
  doc["plan"]["tp"] = 4;  // 16 heads fine, dp*tp = 32 != 16
  doc["plan"]["dp"] = 4;
  doc["training"]["global_batch"] = 520;  // divisible by micro_batch 4, not by 4*4
  ps = problems_of(doc);
  CHECK(has_problem(ps, "/training/global_batch", "divisible by dp*micro_batch"));

  doc = base_doc();
  doc["plan"]["schedule"] = "interleaved";
  doc["plan"]["virtual_stages"] = 1;
  ps = problems_of(doc);
  CHECK(has_problem(ps, "/plan/virtual_stages", "needs virtual_stages >= 2"));
  CHECK(has_problem(ps, "/plan/schedule", "needs pp >= 2"));

  doc = base_doc();
  doc["plan"]["tp"] = 3;
  doc["plan"]["dp"] = 1;
  doc["cluster"]["nodes"] = 1;
  doc["cluster"]["gpus_per_node"] = 3;
  ps = problems_of(doc);
  CHECK(has_problem(ps, "/plan/tp", "heads (16) must be divisible by tp (3)"));
}

TEST_CASE("uneven pipeline stages: layers_per_stage is a rule name or a list that covers the layers", "[scenario]") {
  // The default: 24 layers, 16 GPUs as dp 8 x tp 2; as dp 2 x tp 2 x pp 4 instead.
  json doc = base_doc();
  doc["plan"]["dp"] = 2;
  doc["plan"]["pp"] = 4;
  doc["training"]["global_batch"] = 64;
  doc["plan"]["layers_per_stage"] = json::array({5, 7, 7, 5});
  auto ps = problems_of(doc);
  INFO(dump(ps));
  CHECK(ps.empty());

  doc["plan"]["layers_per_stage"] = json::array({5, 7, 7});
  ps = problems_of(doc);
  CHECK(has_problem(ps, "/plan/layers_per_stage", "has 3 entries; give one per virtual stage, pp*virtual_stages = 4*1 = 4"));
  doc["plan"]["layers_per_stage"] = json::array({5, 7, 7, 6});
  ps = problems_of(doc);
  CHECK(has_problem(ps, "/plan/layers_per_stage", "add up to 25; the model has 24 layers"));
  doc["plan"]["layers_per_stage"] = json::array({12, 0, 7, 5});
  ps = problems_of(doc);
  CHECK(has_problem(ps, "/plan/layers_per_stage/1", "needs at least one layer, got 0"));
  doc["plan"]["layers_per_stage"] = json::array({5, -7, 7, 5});
  ps = problems_of(doc);
  CHECK(has_problem(ps, "/plan/layers_per_stage/1", "expected an integer in [0, 1048576], got -7"));
  doc["plan"]["layers_per_stage"] = "balanced";
  ps = problems_of(doc);
  CHECK(has_problem(ps, "/plan/layers_per_stage", "expected \"even\", \"lighten-ends\" or a list"));

  // 24 + 2 = 26 does not split over 4 stages; it does over 2 (13 each: 12, 12).
  doc["plan"]["layers_per_stage"] = "lighten-ends";
  ps = problems_of(doc);
  CHECK(has_problem(ps, "/plan/layers_per_stage", "layers + 2 = 24 + 2 = 26 must be divisible by pp*virtual_stages = 4*1 = 4"));
  doc["plan"]["pp"] = 2;
  doc["plan"]["dp"] = 4;
  ps = problems_of(doc);
  INFO(dump(ps));
  CHECK(ps.empty());
  // 26 layers (not divisible by 4) on 4 stages, listed: accepted; even: refused as before.
  doc["model"]["layers"] = 26;
  doc["plan"]["pp"] = 4;
  doc["plan"]["dp"] = 2;
  doc["plan"]["layers_per_stage"] = "even";
  ps = problems_of(doc);
  CHECK(has_problem(ps, "/plan/pp", "layers (26) must be divisible by pp*virtual_stages = 4*1 = 4"));
  doc["plan"]["layers_per_stage"] = "lighten-ends";
  ps = problems_of(doc);
  CHECK(ps.empty());

  // The canonical form keeps the split (and leaves it out when even).
  Diagnostics diag("canon");
  const Scenario s = parse_scenario(doc, diag);
  REQUIRE(diag.ok());
  CHECK(to_json(s)["plan"]["layers_per_stage"] == "lighten-ends");
  CHECK_FALSE(to_json(default_scenario())["plan"].contains("layers_per_stage"));
}

TEST_CASE("interleaving with any micro-batch count: microbatch_group_size as Megatron-LM checks it", "[scenario]") {
  // 16 GPUs as dp 2 x tp 2 x pp 4; global batch 48 = 6 micro-batches of 4 per replica.
  json doc = base_doc();
  doc["plan"]["dp"] = 2;
  doc["plan"]["pp"] = 4;
  doc["plan"]["schedule"] = "interleaved";
  doc["training"]["global_batch"] = 48;
  auto ps = problems_of(doc);
  CHECK(has_problem(ps, "/training/global_batch", "6 micro-batches leave a last group of 2, fewer than pp (4)"));
  CHECK(has_problem(ps, "/training/global_batch", "Set plan.microbatch_group_size to 6"));
  doc["plan"]["microbatch_group_size"] = 6;
  ps = problems_of(doc);
  INFO(dump(ps));
  CHECK(ps.empty());
  doc["plan"]["microbatch_group_size"] = 3;
  ps = problems_of(doc);
  CHECK(has_problem(ps, "/plan/microbatch_group_size", "microbatch_group_size (3) must be in [pp, micro-batches] = [4, 6]"));
  doc["plan"]["microbatch_group_size"] = 5;
  ps = problems_of(doc);
  CHECK(has_problem(ps, "/plan/microbatch_group_size", "leave a last group of 1"));
  doc["plan"]["schedule"] = "1f1b";
  ps = problems_of(doc);
  CHECK(has_problem(ps, "/plan/microbatch_group_size", "only the interleaved schedule groups micro-batches"));

  // ZB-H1: m >= pp, ZeRO 0-2.
  doc["plan"].erase("microbatch_group_size");
  doc["plan"]["schedule"] = "zb-h1";
  ps = problems_of(doc);
  INFO(dump(ps));
  CHECK(ps.empty());
  doc["plan"]["zero"] = 3;
  doc["training"]["global_batch"] = 16;
  ps = problems_of(doc);
  CHECK(has_problem(ps, "/plan/schedule", "zb-h1 with ZeRO-3 is not modelled"));
  CHECK(has_problem(ps, "/training/global_batch", "zb-h1 needs at least pp (4) micro-batches"));

  // DualPipe: pp even, an even m >= 2 pp, ZeRO 0-2.
  doc["plan"]["schedule"] = "dualpipe";
  doc["plan"]["zero"] = 1;
  doc["training"]["global_batch"] = 64;
  ps = problems_of(doc);
  INFO(dump(ps));
  CHECK(ps.empty());
  doc["plan"]["zero"] = 3;
  doc["training"]["global_batch"] = 16;
  ps = problems_of(doc);
  CHECK(has_problem(ps, "/plan/zero", "dualpipe with ZeRO-3 is not modelled"));
  CHECK(has_problem(ps, "/training/global_batch", "dualpipe needs an even number of micro-batches, at least 2 pp = 8"));
}

TEST_CASE("dualpipe needs an even pp", "[scenario]") {
  json doc = parse_json_text(default_scenario_text(), "<test>");
  doc["model"]["layers"] = 24;
  doc["plan"] = {{"dp", 4}, {"tp", 1}, {"pp", 3}, {"schedule", "dualpipe"}};
  doc["cluster"]["nodes"] = 3;
  doc["cluster"]["gpus_per_node"] = 4;
  doc["training"]["global_batch"] = 96;
  doc["training"]["micro_batch"] = 1;
  const auto ps = problems_of(doc);
  INFO(dump(ps));
  CHECK(has_problem(ps, "/plan/pp", "dualpipe needs an even pp >= 2"));
}

TEST_CASE("multi-node clusters need an inter_node section", "[scenario]") {
  json doc = base_doc();
  doc["cluster"].erase("inter_node");
  const auto ps = problems_of(doc);
  CHECK(has_problem(ps, "/cluster/inter_node", "required when nodes > 1"));
}

TEST_CASE("invalid JSON reports line and column", "[scenario]") {
  try {
    parse_json_text("{\n  \"name\": 1,\n  oops\n}", "broken.json");
    FAIL("no error");
  } catch (const InputError& e) {
    CHECK_THAT(std::string(e.what()), Catch::StartsWith("broken.json: /: invalid JSON at line 3"));
  }
}

TEST_CASE("canonical JSON parses back to the same scenario", "[scenario]") {
  const Scenario s = default_scenario();
  const json canon = to_json(s);
  Diagnostics diag("canon");
  const Scenario again = parse_scenario(canon, diag);
  INFO(dump(diag.problems()));
  REQUIRE(diag.ok());
  CHECK(to_json(again).dump() == canon.dump());
}

TEST_CASE("family-specific defaults and keys", "[scenario]") {
  json doc = base_doc();
  doc["model"] = {{"family", "llama"}, {"hidden", 4096}, {"layers", 32}, {"heads", 32}, {"seq_len", 4096}, {"vocab", 32000}};
  Diagnostics diag("llama");
  const Scenario s = parse_scenario(doc, diag);
  INFO(dump(diag.problems()));
  REQUIRE(diag.ok());
  CHECK(s.model.ffn_hidden == 11008);  // Llama: 2/3 * 4h rounded up to 256
  CHECK_FALSE(s.model.tie_embeddings);

  doc["model"]["experts"] = 8;
  const auto ps = problems_of(doc);
  CHECK(has_problem(ps, "/model/experts", "only the moe and llama-moe families"));
}

TEST_CASE("llama-moe keys: defaults, canonical form and errors naming the field", "[scenario]") {
  json doc = base_doc();
  doc["model"] = {{"family", "llama-moe"}, {"hidden", 4096}, {"layers", 32}, {"heads", 32}, {"kv_heads", 8},
                  {"seq_len", 4096}, {"vocab", 32000}, {"ffn_hidden", 14336}, {"experts", 8}};
  {
    Diagnostics diag("mixtral");
    const Scenario s = parse_scenario(doc, diag);
    INFO(dump(diag.problems()));
    REQUIRE(diag.ok());
    CHECK(s.model.expert_ffn_hidden == 14336);  // the dense width unless given
    CHECK(s.model.moe_every == 1);
    CHECK(s.model.top_k == 2);
    CHECK_FALSE(s.model.tie_embeddings);
    CHECK_FALSE(s.model.mla);
    Diagnostics again("canon");
    CHECK(to_json(parse_scenario(to_json(s), again)).dump() == to_json(s).dump());
  }
  json mla = doc;
  mla["model"]["kv_heads"] = 8;
  mla["model"]["mla"] = {{"q_lora_rank", 1536}, {"kv_lora_rank", 512}, {"qk_nope_head_dim", 128}, {"qk_rope_head_dim", 63}};
  mla["model"]["first_dense_layers"] = 32;
  mla["model"]["mtp_modules"] = 1;
  mla["model"]["tie_embeddings"] = true;
  const auto ps = problems_of(mla);
  CHECK(has_problem(ps, "/model/mla/v_head_dim", "required"));
  CHECK(has_problem(ps, "/model/mla/qk_rope_head_dim", "even"));
  CHECK(has_problem(ps, "/model/kv_heads", "multi-head latent attention"));
  CHECK(has_problem(ps, "/model/first_dense_layers", "must be below layers (32)"));
  CHECK(has_problem(ps, "/model/mtp_modules", "tie_embeddings"));

  json tp = doc;
  tp["model"]["expert_ffn_hidden"] = 1001;
  tp["plan"]["tp"] = 2;
  tp["plan"]["dp"] = 1;
  CHECK(has_problem(problems_of(tp), "/plan/tp", "expert_ffn_hidden (1001) must be divisible by tp (2)"));

  json llama = doc;
  llama["model"]["family"] = "llama";
  llama["model"].erase("experts");
  llama["model"]["shared_experts"] = 1;
  CHECK(has_problem(problems_of(llama), "/model/shared_experts", "only the llama-moe family"));
}

TEST_CASE("a platform file in the scenario is found next to it", "[scenario]") {
  namespace fs = std::filesystem;
  const fs::path dir = clustersim::test::temp_dir() / "clustersim-platform-path";
  fs::create_directories(dir);
  json doc = base_doc();
  doc["simulation"]["platform"] = "cluster.xml";
  std::ofstream(dir / "s.json") << doc.dump();
  try {
    load_scenario((dir / "s.json").string());
    FAIL("a missing platform file was accepted");
  } catch (const InputError& e) {
    CHECK_THAT(std::string(e.what()), Catch::Contains("/simulation/platform: no such platform file \"cluster.xml\""));
  }
  std::ofstream(dir / "cluster.xml") << "<platform/>";
  const Scenario s = load_scenario((dir / "s.json").string());
  CHECK(s.simulation.platform == (dir / "cluster.xml").string());
  fs::remove_all(dir);
}

TEST_CASE("mixed-fp8 on a GPU without fp8 units is refused, naming the field", "[scenario][fp8]") {
  nlohmann::json doc = parse_json_text(default_scenario_text(), "<default>");
  doc["training"]["precision"] = "mixed-fp8";  // the default cluster is A100: no fp8
  Diagnostics diag("fp8.json");
  const Scenario s = parse_scenario(doc, diag);
  REQUIRE(diag.ok());
  try {
    (void)make_estimator(s);
    FAIL("expected an InputError");
  } catch (const InputError& e) {
    const std::string what = e.problems().at(0).to_string();
    INFO(what);
    CHECK_THAT(what, Catch::Contains("/training/precision") && Catch::Contains("fp8"));
  }
  doc["cluster"]["gpu"] = "h100-sxm5-80gb";
  Diagnostics ok("fp8.json");
  const Scenario h = parse_scenario(doc, ok);
  REQUIRE(ok.ok());
  CHECK(make_estimator(h).estimate(h.plan).iteration_time > 0);
}

TEST_CASE("historical Megatron frameworks: what their code could run, and Megatron's reduce_dtype", "[scenario]") {
  json doc = base_doc();  // mixed-bf16, pp 2, ZeRO-1
  doc["training"]["framework"] = "megatron-2019";
  auto ps = problems_of(doc);
  INFO(dump(ps));
  CHECK(has_problem(ps, "/plan", "megatron-2019 has tensor and data parallelism only"));
  doc["training"]["precision"] = "amp-bf16";
  ps = problems_of(doc);
  CHECK(has_problem(ps, "/training/precision", "megatron-2019 trains with mixed-fp16 or mixed-bf16, got amp-bf16"));

  doc = base_doc();
  doc["training"]["framework"] = json{{"name", "megatron-deepspeed"}, {"reduce_dtype", "bf16"}};
  ps = problems_of(doc);
  CHECK(ps.empty());
  Diagnostics diag("x.json");
  const Scenario s = parse_scenario(doc, diag);
  CHECK(s.training.framework.name == Framework::megatron_deepspeed);
  REQUIRE(s.training.framework.reduce_dtype);
  CHECK(*s.training.framework.reduce_dtype == ElementType::bf16);
  // The canonical form keeps both and parses back to itself.
  Diagnostics again("canon");
  CHECK(to_json(parse_scenario(to_json(s), again)).dump() == to_json(s).dump());
  CHECK(again.ok());
  // Megatron's gradient_accumulation_fusion: false only where written, and only for megatron.
  {
    json g = base_doc();
    g["training"]["framework"] = json{{"name", "megatron"}, {"gradient_accumulation_fusion", false}};
    CHECK(problems_of(g).empty());
    Diagnostics d1("x.json");
    const Scenario sg = parse_scenario(g, d1);
    CHECK_FALSE(sg.training.framework.gradient_accumulation_fusion);
    CHECK(to_json(sg)["training"]["framework"]["gradient_accumulation_fusion"] == false);
    Diagnostics d2("canon");
    CHECK(to_json(parse_scenario(to_json(sg), d2)).dump() == to_json(sg).dump());
    g["training"]["framework"]["name"] = "megatron-deepspeed";
    CHECK(has_problem(problems_of(g), "/training/framework/gradient_accumulation_fusion",
                      "\"gradient_accumulation_fusion\" is a knob of megatron, not of megatron-deepspeed"));
    g["training"]["framework"] = json{{"name", "megatron"}, {"gradient_accumulation_fusion", 0}};
    CHECK_FALSE(problems_of(g).empty());
  }
  // CUDA_LAUNCH_BLOCKING=1 (launch_blocking): false unless written, on any framework; the
  // canonical form keeps it only when true.
  {
    json g = base_doc();
    g["training"]["framework"] = json{{"name", "megatron-deepspeed"}, {"launch_blocking", true}};
    CHECK(problems_of(g).empty());
    Diagnostics d1("x.json");
    const Scenario sg = parse_scenario(g, d1);
    CHECK(sg.training.framework.launch_blocking);
    CHECK(to_json(sg)["training"]["framework"]["launch_blocking"] == true);
    Diagnostics d2("canon");
    CHECK(to_json(parse_scenario(to_json(sg), d2)).dump() == to_json(sg).dump());
    g["training"]["framework"]["launch_blocking"] = false;
    Diagnostics d3("x.json");
    CHECK_FALSE(to_json(parse_scenario(g, d3))["training"]["framework"].contains("launch_blocking"));
    g["training"]["framework"]["launch_blocking"] = "yes";
    CHECK_FALSE(problems_of(g).empty());
  }
  // Megatron's cross entropy: "native" by default, "te" where written; megatron only.
  {
    json g = base_doc();
    g["training"]["framework"] = json{{"name", "megatron"}, {"cross_entropy", "te"}};
    CHECK(problems_of(g).empty());
    Diagnostics d1("x.json");
    const Scenario sg = parse_scenario(g, d1);
    CHECK(sg.training.framework.cross_entropy == CrossEntropyImpl::te);
    CHECK(to_json(sg)["training"]["framework"]["cross_entropy"] == "te");
    Diagnostics d2("canon");
    CHECK(to_json(parse_scenario(to_json(sg), d2)).dump() == to_json(sg).dump());
    g["training"]["framework"]["cross_entropy"] = "fused";
    CHECK_FALSE(problems_of(g).empty());
    g["training"]["framework"] = json{{"name", "pytorch-ddp"}, {"cross_entropy", "te"}};
    CHECK(has_problem(problems_of(g), "/training/framework/cross_entropy",
                      "\"cross_entropy\" is a knob of megatron, not of pytorch-ddp"));
    g["training"]["framework"] = json{{"name", "megatron"}};
    Diagnostics d3("x.json");
    const Scenario native = parse_scenario(g, d3);
    CHECK(native.training.framework.cross_entropy == CrossEntropyImpl::native);
    CHECK_FALSE(to_json(native)["training"]["framework"].contains("cross_entropy"));
  }
  // ALiBi: a gpt/moe option, written in the canonical form only when set.
  {
    json a = base_doc();
    a["model"]["alibi"] = true;
    CHECK(problems_of(a).empty());
    Diagnostics d1("x.json");
    const Scenario sa = parse_scenario(a, d1);
    CHECK(sa.model.alibi);
    CHECK(to_json(sa)["model"]["alibi"] == true);
    Diagnostics d2("x.json");
    CHECK_FALSE(to_json(parse_scenario(base_doc(), d2))["model"].contains("alibi"));
    a["model"]["family"] = "llama";
    CHECK(has_problem(problems_of(a), "/model/alibi", "the llama family uses rotary position embeddings"));
  }
  // DeepSpeed's pipeline engine has one schedule, TrainSchedule: 1F1B over whole stages.
  doc["plan"]["dp"] = 4;
  doc["plan"]["pp"] = 2;
  doc["plan"]["sequence_parallel"] = false;
  CHECK(problems_of(doc).empty());
  doc["plan"]["virtual_stages"] = 2;
  ps = problems_of(doc);
  CHECK(has_problem(ps, "/plan/schedule", "megatron-deepspeed pipelines run DeepSpeed's TrainSchedule: schedule 1f1b with virtual_stages 1 (got 1f1b, virtual_stages 2)"));
  doc["plan"]["virtual_stages"] = 1;
  doc["plan"]["schedule"] = "gpipe";
  ps = problems_of(doc);
  CHECK(has_problem(ps, "/plan/schedule", "(got gpipe, virtual_stages 1)"));

  doc = base_doc();
  doc["training"]["precision"] = "amp-bf16";
  doc["plan"]["zero"] = 0;
  doc["training"]["framework"] = json{{"name", "pytorch-ddp"}, {"reduce_dtype", "bf16"}};
  ps = problems_of(doc);
  CHECK(has_problem(ps, "/training/framework/reduce_dtype", "a knob of pytorch-fsdp and the megatron frameworks"));
}
