// Megatron's fp8_param_gather (training.fp8_param_gather; rules.hpp fp8_weights): the
// scenario errors naming the JSON path, and the estimator's memory with and without it
// against the closed form (the weights Transformer Engine casts lose their bf16 copy, 1
// byte per parameter of them, under ZeRO-1 and, gathered, under ZeRO-3).
#include <catch2/catch.hpp>
#include <cstdio>

#include "costmodel/precision.hpp"
#include "scenario_doc.hpp"
#include "scenarios/json_reader.hpp"
#include "strategies/estimator.hpp"

using namespace clustersim;
using nlohmann::json;
using clustersim::test::problems_of;
using clustersim::test::scenario_from;

namespace {
// Llama 3 8B's layers (two) on 8 H100s, data parallel, mixed-fp8; a 32000 vocabulary so that
// a layer is the largest gathered block under ZeRO-3.
json llama_doc(bool fp8_param_gather, int zero) {
  json doc = parse_json_text(default_scenario_text(), "<test>");
  doc["model"] = {{"family", "llama"},      {"hidden", 4096},  {"layers", 2},    {"heads", 32},
                  {"kv_heads", 8},          {"ffn_hidden", 14336}, {"seq_len", 4096}, {"vocab", 32000}};
  doc["training"] = {{"global_batch", 8}, {"micro_batch", 1}, {"precision", "mixed-fp8"}, {"recompute", "none"}};
  if (fp8_param_gather) doc["training"]["fp8_param_gather"] = true;
  doc["cluster"] = {{"gpu", "h100-sxm5-80gb"}, {"nodes", 1}, {"gpus_per_node", 8}, {"intra_node", {{"fabric", "nvswitch"}}}};
  doc["plan"] = {{"dp", 8}, {"tp", 1}, {"pp", 1}, {"zero", zero}, {"schedule", "1f1b"}};
  return doc;
}
}  // namespace

TEST_CASE("fp8_param_gather: errors name the field and the bad value", "[scenario][fp8]") {
  json d = llama_doc(true, 1);
  CHECK(problems_of(d).empty());
  d["training"]["fp8_param_gather"] = "yes";
  std::string p = problems_of(d);
  INFO(p);
  CHECK(p.find("/training/fp8_param_gather") != std::string::npos);
  d = llama_doc(true, 1);
  d["training"]["precision"] = "mixed-bf16";
  p = problems_of(d);
  INFO(p);
  CHECK(p.find("/training/fp8_param_gather") != std::string::npos);
  CHECK(p.find("mixed-bf16") != std::string::npos);
  d = llama_doc(true, 0);  // Megatron: distributed optimizer or FSDP only
  p = problems_of(d);
  INFO(p);
  CHECK(p.find("/training/fp8_param_gather") != std::string::npos);
  CHECK(p.find("got 0") != std::string::npos);
  d = llama_doc(true, 1);
  d["training"]["framework"] = "pytorch-ddp";
  p = problems_of(d);
  INFO(p);
  CHECK(p.find("/training/fp8_param_gather") != std::string::npos);
  CHECK(p.find("pytorch-ddp") != std::string::npos);
  d = llama_doc(false, 1);
  d["training"]["fp8_param_gathr"] = true;  // misspelt: the nearest key is suggested
  p = problems_of(d);
  CHECK(p.find("fp8_param_gather") != std::string::npos);
}

TEST_CASE("fp8_param_gather: the cast weights lose their bf16 copy, 1 byte per parameter of them", "[estimator][fp8]") {
  const Scenario base = scenario_from(llama_doc(false, 1));
  const Scenario fp8p = scenario_from(llama_doc(true, 1));
  CHECK(precision_rules(fp8p.training).fp8_param_gather);
  CHECK_FALSE(precision_rules(base.training).fp8_param_gather);
  const double h = 4096, kv = 1024, f = 14336;
  const double cast = 2 * (h * (h + 2 * kv) + h * h + 2 * h * f + f * h);  // two layers' TE linears
  for (int zero : {1, 3}) {
    const Scenario a = scenario_from(llama_doc(false, zero)), b = scenario_from(llama_doc(true, zero));
    const Prediction pa = make_estimator(a).estimate(a.plan), pb = make_estimator(b).estimate(b.plan);
    const double saved = pa.memory.total() - pb.memory.total();
    // ZeRO-1: each GPU holds every cast weight, now 1 + 1 bytes (fp8 and transpose)
    // instead of 2 + 2. ZeRO-3: its 1/8 shard is 1 byte instead of 2, and each of the two
    // gathered layers is 1 + 1 instead of 2 + 2.
    const double expected = zero == 1 ? cast * 2 : cast / 8 * 1 + 2 * (cast / 2) * 2;
    std::printf("ZeRO-%d: memory saved by fp8_param_gather expected %.9g, computed %.9g\n", zero, expected, saved);
    CHECK(saved == Approx(expected).epsilon(1e-9));
  }
}
