#include "runner/serving_import.hpp"

#include <cmath>
#include <filesystem>
#include <fmt/format.h>

#include "scenarios/json_reader.hpp"
#include "sim/serve.hpp"

namespace clustersim::runner {

namespace fs = std::filesystem;
using nlohmann::json;

json engine_scenario(const json& model, const json& engine, const std::string& trace, const std::string& host_file,
                     const std::string& gpu) {
  json doc;
  doc["name"] = "transformers-engine-replay";
  doc["model"] = {{"family", "llama"},
                  {"hidden", model["hidden_size"]},
                  {"layers", model["num_hidden_layers"]},
                  {"heads", model["num_attention_heads"]},
                  {"kv_heads", model["num_key_value_heads"]},
                  {"ffn_hidden", model["intermediate_size"]},
                  {"vocab", model["vocab_size"]},
                  {"seq_len", 8192},
                  {"tie_embeddings", model["tie_word_embeddings"]}};
  doc["cluster"] = {{"gpu", gpu}, {"nodes", 1}, {"gpus_per_node", 1}};
  // The engine runs its model eagerly, repeats the KV heads for GQA and packs the batch's
  // attention into one SDPA call (ENGINE.md); its scheduler knobs are the resolved ones.
  json eng = {{"launch", "eager"}, {"gqa", "repeat-kv"}, {"attention", "packed"}};
  if (!host_file.empty()) eng["host_calibration"] = {{"file", host_file}, {"model", model["name"]}};
  doc["serving"] = {{"engine", eng},
                    {"replicas", 1},
                    {"scheduler",
                     {{"policy", "transformers-fifo"},
                      {"block_size", engine["block_size"]},
                      {"num_blocks", engine["num_blocks"]},
                      {"max_batched_tokens", engine["max_batch_tokens"]},
                      {"max_batch_size", engine["max_requests_per_batch"]},
                      {"safety_margin", engine["safety_margin"]}}}};
  doc["workload"] = {{"arrival", "trace"}, {"trace", trace}};
  return doc;
}

namespace {

// The keys of a served run's result that a measured run has too.
constexpr const char* kSummaryKeys[] = {"requests", "measured_requests", "makespan_s", "ttft_s", "tpot_s",
                                        "tbt_s",    "e2e_s",             "throughput_rps", "output_tokens_per_s"};

std::string absolute_normal(const fs::path& p) {
  std::error_code ec;
  const fs::path a = fs::absolute(p, ec);
  return (ec ? p : a).lexically_normal().string();
}

// The measured requests as the simulator's records, and their token gaps. Problems go to
// `diag` under `base` (/runs/i/requests).
std::vector<sim::ServeRecord> records_of(const json& requests, const std::string& base, Diagnostics& diag,
                                         std::vector<double>& gaps, std::int64_t& evictions) {
  std::vector<sim::ServeRecord> out;
  if (!requests.is_array() || requests.empty()) {
    diag.error(base, "expected a non-empty list of requests, got " + describe(requests));
    return out;
  }
  for (std::size_t i = 0; i < requests.size(); ++i) {
    const json& q = requests[i];
    const std::string at = json_path(base, i);
    if (!q.is_object()) {
      diag.error(at, "expected a request object, got " + describe(q));
      continue;
    }
    const std::size_t before = diag.count();
    if (q.contains("error") && !q["error"].is_null())
      diag.error(json_path(at, "error"), "the request failed (" + describe(q["error"]) + "): the run cannot be compared");
    const auto seconds = [&](const char* key) {
      if (!q.contains(key) || !q[key].is_number() || !std::isfinite(q[key].get<double>()) || q[key].get<double>() < 0) {
        diag.error(json_path(at, key), "expected a time in seconds >= 0, got " + (q.contains(key) ? describe(q[key]) : "nothing"));
        return 0.0;
      }
      return q[key].get<double>();
    };
    const auto tokens = [&](const char* key) -> std::int64_t {
      if (!q.contains(key) || !q[key].is_number_integer() || q[key].get<std::int64_t>() < 1) {
        diag.error(json_path(at, key), "expected a token count >= 1, got " + (q.contains(key) ? describe(q[key]) : "nothing"));
        return 1;
      }
      return q[key].get<std::int64_t>();
    };
    sim::ServeRecord r;
    r.id = std::int64_t(i);
    r.arrival = seconds("arrival_s");
    r.first_token = seconds("first_token_s");
    r.last_token = seconds("finish_s");
    r.prompt = tokens("prompt_tokens");
    r.output = tokens("output_tokens");
    r.tokens = q.contains("generated_tokens") && q["generated_tokens"].is_number_integer()
                   ? q["generated_tokens"].get<std::int64_t>()
                   : r.output;
    if (diag.count() == before) {
      if (r.first_token < r.arrival)
        diag.error(json_path(at, "first_token_s"),
                   fmt::format("the first token ({}) comes before the arrival ({})", r.first_token, r.arrival));
      else if (r.last_token < r.first_token)
        diag.error(json_path(at, "finish_s"),
                   fmt::format("the request finishes ({}) before its first token ({})", r.last_token, r.first_token));
    }
    if (q.contains("token_s")) {
      const json& ts = q["token_s"];
      if (!ts.is_array()) {
        diag.error(json_path(at, "token_s"), "expected a list of token times in seconds, got " + describe(ts));
      } else {
        for (std::size_t k = 0; k < ts.size(); ++k) {
          if (!ts[k].is_number() || !std::isfinite(ts[k].get<double>()) ||
              (k > 0 && ts[k - 1].is_number() && ts[k].get<double>() < ts[k - 1].get<double>())) {
            diag.error(json_path(json_path(at, "token_s"), k),
                       "expected a token time at or after the previous one, got " + describe(ts[k]));
            break;
          }
          if (k > 0) {
            const double gap = ts[k].get<double>() - ts[k - 1].get<double>();
            gaps.push_back(gap);
            r.max_tbt = std::max(r.max_tbt, gap);
          }
        }
      }
    }
    if (q.contains("evictions") && q["evictions"].is_number_integer()) evictions += q["evictions"].get<std::int64_t>();
    out.push_back(r);
  }
  return out;
}

// A string of `obj` or "" (provenance is kept as found; its absence is no error).
std::string text_of(const json& obj, const char* key) {
  if (!obj.is_object() || !obj.contains(key) || obj[key].is_null()) return "";
  return obj[key].is_string() ? obj[key].get<std::string>() : obj[key].dump();
}

}  // namespace

ServingImport read_serving_engine_runs(const std::string& file, const std::string& host_file, const std::string& gpu) {
  const json doc = read_json_file(file);
  Diagnostics diag(file);
  ServingImport out;
  const auto fail = [&](const std::string& path, const std::string& msg) {
    diag.error(path, msg);
    diag.throw_if_errors();
  };
  if (!doc.is_object()) fail("", "expected a clustersim-serving-engine/1 object, got " + describe(doc));
  if (doc.value("format", json()) != "clustersim-serving-engine/1")
    fail("/format", "expected \"clustersim-serving-engine/1\", got " +
                        (doc.contains("format") ? describe(doc["format"]) : std::string("nothing")));
  for (const char* key : {"models", "calls"})
    if (!doc.contains(key) || !(key == std::string("models") ? doc[key].is_object() : doc[key].is_array()))
      diag.error(json_path("", key), std::string("expected ") + (key == std::string("models") ? "an object" : "a list") +
                                         ", got " + (doc.contains(key) ? describe(doc[key]) : "nothing"));
  if (!doc.contains("engines") || !doc["engines"].is_array())
    diag.error("/engines", "expected a list, got " + (doc.contains("engines") ? describe(doc["engines"]) : "nothing"));
  if (!doc.contains("runs") || !doc["runs"].is_array() || doc["runs"].empty())
    diag.error("/runs", "expected a non-empty list, got " + (doc.contains("runs") ? describe(doc["runs"]) : "nothing"));
  diag.throw_if_errors();

  const fs::path traces = fs::path(file).parent_path() / "serving-traces";
  const json& runs = doc["runs"];
  for (std::size_t i = 0; i < runs.size(); ++i) {
    const json& run = runs[i];
    const std::string at = json_path("/runs", i);
    if (!run.is_object()) {
      diag.error(at, "expected a run object, got " + describe(run));
      continue;
    }
    const std::string model = text_of(run, "model"), label = text_of(run, "label"), kind = text_of(run, "kind");
    const std::string name = model + "/" + label;
    // Only a run that replayed a trace has a scenario `clustersim serve` can run (warm-up,
    // single, probe and skipped runs have none).
    if (!run.contains("trace") || !run["trace"].is_object()) {
      out.skipped.push_back(fmt::format("{} ({}): no trace to replay", name, kind.empty() ? "?" : kind));
      continue;
    }
    const std::size_t before = diag.count();
    if (!doc["models"].contains(model) || !doc["models"][model].is_object())
      diag.error(json_path(at, "model"), fmt::format("no model \"{}\" under /models", model));
    const json& eng = run.value("engine", json());
    if (!eng.is_number_integer() || eng.get<std::int64_t>() < 0 ||
        eng.get<std::size_t>() >= doc["engines"].size())
      diag.error(json_path(at, "engine"), fmt::format("expected an index into /engines ({} entries), got {}",
                                                      doc["engines"].size(), describe(eng)));
    const json& tf = run["trace"].value("file", json());
    fs::path trace;
    if (!tf.is_string() || tf.get<std::string>().empty()) {
      diag.error(json_path(json_path(at, "trace"), "file"), "expected a trace file name, got " + describe(tf));
    } else {
      trace = traces / tf.get<std::string>();
      std::error_code ec;
      if (!fs::is_regular_file(trace, ec))
        diag.error(json_path(json_path(at, "trace"), "file"),
                   fmt::format("no such trace file \"{}\" (looked for {})", tf.get<std::string>(), trace.string()));
    }
    std::vector<double> gaps;
    std::int64_t evictions = 0;
    const std::vector<sim::ServeRecord> recs =
        records_of(run.value("requests", json()), json_path(at, "requests"), diag, gaps, evictions);
    if (diag.count() != before) continue;

    MeasuredServingRun m;
    m.label = name;
    const json& engine = doc["engines"][eng.get<std::size_t>()];
    m.scenario_document = engine_scenario(doc["models"][model], engine, absolute_normal(trace),
                                          host_file.empty() ? "" : absolute_normal(host_file), gpu);
    m.scenario_document["name"] = "transformers-engine " + name;
    Diagnostics sd(file);
    m.scenario = parse_serving_scenario(m.scenario_document, sd);
    for (const auto& p : sd.problems())
      diag.error(at, "the engine's scenario is invalid: " + p.path + ": " + p.message);
    if (!sd.ok()) continue;
    if (m.scenario.engine.host.enabled) read_engine_host_cost(m.scenario.engine.host);

    // The same statistics as a served run's (no warm-up: the engine measured every request).
    sim::ServeSummary sm;
    sim::summarize_requests(recs, 0.0, SloSpec{}, sm);
    sm.tbt = sim::token_gap_percentiles(gaps);
    sm.preemptions = evictions;
    const json all = sim::to_json(sm);
    json summary = json::object();
    for (const char* k : kSummaryKeys) summary[k] = all[k];
    summary["preemptions"] = evictions;
    if (run.contains("summary")) summary["engine_summary"] = run["summary"];  // the producer's own figures

    const json& call = [&]() -> const json& {
      static const json none = json::object();
      const std::int64_t c = run.value("call", std::int64_t(-1));
      for (const auto& x : doc["calls"])
        if (x.is_object() && x.value("call", std::int64_t(-2)) == c) return x;
      return none;
    }();
    json env = json::object();
    env["gpu"] = text_of(call, "gpu_name");
    env["engine"] = "transformers continuous batching (" + text_of(engine, "scheduler_class") + ")";
    env["engine_version"] = text_of(call, "transformers");
    env["torch"] = text_of(call, "torch");
    env["cuda"] = text_of(call, "cuda_runtime");
    env["cudnn"] = text_of(call, "cudnn");
    env["python"] = text_of(call, "python");
    env["hostname"] = text_of(call, "host");
    env["date_utc"] = text_of(call, "date_utc");
    env["command_line"] = text_of(call, "command");
    env["trace"] = run["trace"];
    env["engine_settings"] = engine;

    m.record.name = name;
    m.record.source = text_of(call, "source").empty() ? "serving-engine" : text_of(call, "source");
    m.record.file = file;
    m.record.scenario = to_json(m.scenario);
    m.record.summary = std::move(summary);
    m.record.requests = run["requests"];
    m.record.environment = std::move(env);
    out.runs.push_back(std::move(m));
  }
  diag.throw_if_errors();
  if (out.runs.empty()) throw InputError(file, "/runs", "no run replays a trace: nothing to import");
  return out;
}

std::vector<ImportedRun> store_measured_serving_runs(const std::string& db_file,
                                                     const std::vector<MeasuredServingRun>& runs) {
  return store_in_one_transaction(db_file, runs.size(), [&](results::Database& db, std::size_t i) {
    const auto& m = runs[i];
    return ImportedRun{m.record.file, db.add_measured_serving(m.record), results::scenario_hash(m.record.scenario)};
  });
}

}  // namespace clustersim::runner
