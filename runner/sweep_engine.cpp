#include "runner/sweep_engine.hpp"

#include <cstring>
#include <fmt/format.h>
#include <stdexcept>

#include "results/json_text.hpp"
#include "runner/provenance.hpp"
#include "runner/store.hpp"
#include "sim/simgrid_info.hpp"
#include "sim/simulate.hpp"
#include "strategies/estimator.hpp"
#include "strategies/resolved_plan.hpp"

namespace clustersim::runner::detail {
namespace {

std::string join_problems(const std::vector<Problem>& ps) {
  std::string out;
  for (const auto& p : ps) {
    if (!out.empty()) out += '\n';
    out += p.to_string();
  }
  return out;
}

// The key of a point that failed: its document's hash (it may have no scenario). The
// document is built only here: valid points are parsed without it (sweep_scenario).
std::string failure_key(const SweepSpec& spec, std::size_t index) {
  return results::fnv1a64_hex(results::dump(sweep_point(spec, index).doc));
}

// Whether the stored point `d` still derives to its stored key.
bool rederives(const SweepSpec& spec, const results::Database::DonePoint& d) {
  if (d.index < 0 || static_cast<std::size_t>(d.index) >= spec.point_count()) return false;
  const auto index = static_cast<std::size_t>(d.index);
  if (d.failed) return failure_key(spec, index) == d.key;
  Diagnostics diag(spec.file);
  nlohmann::json axes;
  const Scenario s = sweep_scenario(spec, index, axes, diag);
  return diag.ok() && results::scenario_text(s).hash == d.key;
}

}  // namespace

Resume load_resume(results::Database& db, const SweepSpec& spec, std::int64_t sweep_id) {
  Resume r;
  const auto list = db.done_point_list(sweep_id, spec.method);
  for (const auto& d : list) r.keys.insert(d.key);
  if (list.empty()) return r;
  // The first, middle and last stored points: a change of the model's defaults since
  // they were stored (another canonical scenario, so another key) shows on each. Then
  // the keys alone decide, point by point, as before.
  for (const std::size_t k : {std::size_t{0}, list.size() / 2, list.size() - 1})
    if (!rederives(spec, list[k])) return r;
  r.by_index.assign(spec.point_count(), 0);
  for (const auto& d : list) {
    if (d.index < 0 || static_cast<std::size_t>(d.index) >= r.by_index.size()) continue;
    auto& flag = r.by_index[static_cast<std::size_t>(d.index)];
    if (!flag) ++r.count;
    flag = 1;
  }
  return r;
}

EstimatorCache::EstimatorCache() = default;
EstimatorCache::~EstimatorCache() = default;

const Estimator& EstimatorCache::get(const Scenario& s, const results::ScenarioText& text) {
  std::string key;
  for (const char* section : {"model", "training", "cluster"}) key.append(text.section(section)).push_back('\n');
  if (auto it = cache_.find(key); it != cache_.end()) return *it->second;
  if (cache_.size() >= 64) cache_.clear();  // bounded: sweeps over models would grow it forever
  return *cache_.emplace(std::move(key), std::make_unique<Estimator>(make_estimator(s))).first->second;
}

const std::string& EstimatorCache::provenance_json(const results::HardwareRecord& h) {
  auto& [provenance, text] = provenance_[h.name + '\n' + h.status];
  if (text.empty() || provenance != h.provenance) {
    provenance = h.provenance;
    text = results::dump(h.provenance);
  }
  return text;
}

const std::string& EstimatorCache::tool_json(const std::string& method, const Estimator& est) {
  const auto& gpu = est.cluster().gpu;
  auto& text = tool_[method + '\n' + gpu.name + '\n' + gpu.status];
  if (text.empty()) {
    nlohmann::json tool = runner::tool_json(method);
    tool["gpu_profile"] = gpu.name;
    tool["gpu_profile_status"] = gpu.status;
    text = results::dump(tool);
  }
  return text;
}

Outcome evaluate(const SweepSpec& spec, std::size_t index, const DoneKeys& done, Worker& worker) {
  EstimatorCache& cache = worker.estimators;
  Outcome o;
  o.index = index;
  Diagnostics diag(fmt::format("{} (point {})", spec.file, index));
  nlohmann::json axes;
  const Scenario s = worker.points.parse(index, axes, diag);
  auto failed = [&](std::string error, Outcome::Kind kind) {
    o.key = failure_key(spec, index);
    o.axes_json = results::dump(axes);
    o.error = std::move(error);
    o.kind = done.count(o.key) ? Outcome::Kind::already_done : kind;
    return std::move(o);
  };
  auto invalid = [&](std::string error) {
    if (spec.skip_invalid) {
      o.kind = Outcome::Kind::invalid_skipped;
      return std::move(o);
    }
    return failed(std::move(error), Outcome::Kind::failed);
  };
  if (!diag.ok()) return invalid(join_problems(diag.problems()));
  // Both documents are written straight to text: trees built only to be dumped were
  // about 40% of a point (results/README.md, benchmark).
  results::ScenarioText text = results::scenario_text(s);
  o.key = text.hash;
  if (done.count(o.key)) {
    o.kind = Outcome::Kind::already_done;
    return o;
  }
  try {
    // A point whose plan is {"search": ...} or {"file": ...} is resolved first (the
    // estimator alone would evaluate the default knobs).
    nlohmann::json result;  // simulated: the result as a tree
    results::JsonText result_text;
    if (spec.method == "simulated") {
      // What `simulate --db` stores (cli/cmd_simulate.cpp); the replay runs in a forked
      // child, so a crash of one point is recorded as its failure.
      const sim::SimulationResult r = sim::simulate(s);
      result = sim::to_json(r);
      result["tool"] = tool_json("simgrid");
      result["tool"]["simgrid_version"] = sim::simgrid_version();
      result["tool"]["network_model"] = r.simulator["network_model"];
      result["tool"]["simgrid_config"] = r.simulator["network_model"];
      result_text = results::json_text(result);
    } else {
      const Estimator& est = cache.get(s, text);
      const Prediction prediction = s.plan.searched() ? predict_scenario(s) : est.estimate(s.plan);
      std::string json;
      std::vector<JsonWriter::Member> members;
      JsonWriter w(json);
      w.begin_object();
      write_members(w, prediction);
      w.key("tool");
      w.raw(cache.tool_json(spec.method, est));
      w.end_object(&members);
      result_text = results::json_text(std::move(json), members);
    }
    // The record carries what the row takes besides the documents (hardware, provenance
    // read from the result tree's "tool" when simulated, the point).
    results::RunRecord record = make_run_record(s, nlohmann::json(), std::move(result), spec.method);
    record.point_index = static_cast<std::int64_t>(index);
    record.axes = std::move(axes);
    o.row = results::run_row(record, results::run_documents(s, std::move(text), std::move(result_text)),
                             &cache.provenance_json(record.hardware));
    o.kind = Outcome::Kind::stored;
  } catch (const InputError& e) {
    return invalid(e.what());
  } catch (const std::exception& e) {
    // An internal failure of one point is recorded with the point; the sweep goes on.
    return failed(std::string("internal error: ") + e.what(), Outcome::Kind::failed);
  }
  return o;
}

SweepWriter::SweepWriter(results::Database& db, std::int64_t sweep_id, std::string method, SweepSummary& sum)
    : db_(db), sweep_id_(sweep_id), method_(std::move(method)), sum_(sum) {}

void SweepWriter::add(Outcome&& x) {
  ++sum_.handled;
  switch (x.kind) {
    case Outcome::Kind::already_done: ++sum_.already_done; return;
    case Outcome::Kind::invalid_skipped: ++sum_.skipped; return;
    default: break;
  }
  if (!in_tx_) {
    db_.begin();
    in_tx_ = true;
  }
  if (x.kind == Outcome::Kind::failed) {
    db_.add_failed_point(sweep_id_, static_cast<std::int64_t>(x.index), x.key, method_,
                         nlohmann::json::parse(x.axes_json), x.error);
    ++sum_.failed;
  } else if (!stored_now_.insert(std::move(x.key)).second) {
    ++sum_.duplicates;
  } else {
    x.row->sweep_id = sweep_id_;
    // 0: the same sweep, run at the same time by another process, stored it first.
    if (db_.add_run(*x.row) == 0) ++sum_.already_done;
    else ++sum_.stored;
  }
  ++since_commit_;
}

void SweepWriter::maybe_commit() {
  if (since_commit_ >= 2000 ||
      std::chrono::duration<double>(std::chrono::steady_clock::now() - last_commit_).count() > 0.5)
    commit();
}

void SweepWriter::commit() {
  if (in_tx_) db_.commit();
  in_tx_ = false;
  since_commit_ = 0;
  last_commit_ = std::chrono::steady_clock::now();
}

void SweepWriter::finish() {
  commit();
  db_.checkpoint();
}

void SweepWriter::rollback() noexcept {
  if (!in_tx_) return;
  in_tx_ = false;
  try {
    db_.rollback();
  } catch (...) {
    // The connection is closed next; SQLite rolls back an open transaction then.
  }
}

void tune_for_sweep(results::Database& db) {
  // 16 MiB: a batch of 2,000 benchmark points is about 9 MB of new pages plus the
  // indexes, so a batch is written once at commit, not spilled page by page. Not more:
  // the cache kept every page the sweep wrote (64 MiB held the benchmark's whole 43 MB
  // database), each a fresh allocation that the kernel zeroes on first touch; a smaller
  // cache reuses the buffers of pages already committed (the writer thread's page
  // faults were about a tenth of its samples).
  db.query("PRAGMA cache_size = -16384");
  // A checkpoint every 64 MiB of WAL instead of SQLite's 1,000 pages (4-16 MiB): each
  // checkpoint syncs and rewrites the pages the recent commits touched, the indexes'
  // pages again and again, so fewer of them write fewer bytes. The WAL of a killed
  // sweep is at most this (plus a batch) and the next connection checkpoints it;
  // journal_size_limit truncates a WAL left larger when it is reused.
  constexpr std::int64_t wal_bytes = 64 << 20;
  const auto page = db.query("PRAGMA page_size");
  const std::int64_t page_size = page.empty() ? 4096 : page.front().begin()->get<std::int64_t>();
  db.query("PRAGMA wal_autocheckpoint = " + std::to_string(wal_bytes / page_size));
  db.query("PRAGMA journal_size_limit = " + std::to_string(wal_bytes));
}

namespace {

class Writer {
 public:
  explicit Writer(std::string& out) : out_(out) {}
  template <class T>
  void raw(const T& v) {
    out_.append(reinterpret_cast<const char*>(&v), sizeof v);
  }
  void str(std::string_view s) {
    raw(static_cast<std::uint64_t>(s.size()));
    out_.append(s);
  }
  template <class T>
  void opt(const std::optional<T>& v) {
    raw(static_cast<std::uint8_t>(v.has_value()));
    if (!v) return;
    if constexpr (std::is_same_v<T, std::string>) str(*v);
    else raw(*v);
  }

 private:
  std::string& out_;
};

class Reader {
 public:
  explicit Reader(std::string_view in) : in_(in) {}
  bool done() const { return pos_ == in_.size(); }
  template <class T>
  T raw() {
    T v;
    need(sizeof v);
    std::memcpy(&v, in_.data() + pos_, sizeof v);
    pos_ += sizeof v;
    return v;
  }
  std::string str() {
    const auto n = raw<std::uint64_t>();
    need(n);
    std::string s(in_.substr(pos_, n));
    pos_ += n;
    return s;
  }
  template <class T>
  std::optional<T> opt() {
    if (!raw<std::uint8_t>()) return std::nullopt;
    if constexpr (std::is_same_v<T, std::string>) return str();
    else return raw<T>();
  }

 private:
  void need(std::size_t n) const {
    if (in_.size() - pos_ < n) throw std::runtime_error("sweep message truncated");
  }
  std::string_view in_;
  std::size_t pos_ = 0;
};

}  // namespace

void encode(const Outcome& o, std::string& out) {
  Writer w(out);
  w.raw(static_cast<std::uint8_t>(o.kind));
  w.raw(static_cast<std::uint64_t>(o.index));
  w.str(o.key);
  w.str(o.axes_json);
  w.str(o.error);
  w.raw(static_cast<std::uint8_t>(o.row.has_value()));
  if (!o.row) return;
  const auto& r = *o.row;
  for (const std::string* s : {&r.method, &r.scenario_hash, &r.scenario_name, &r.model_family, &r.gpu,
                               &r.scenario_json, &r.plan_json, &r.hardware_name, &r.hardware_status,
                               &r.hardware_provenance_json, &r.result_json, &r.tool_version, &r.git_revision})
    w.str(*s);
  w.raw(r.gpus);
  w.opt(r.sweep_id);
  w.raw(r.point_index);
  w.opt(r.axes_json);
  for (const auto& f : r.figures) w.opt(f);
  w.opt(r.fits);
  w.opt(r.simgrid_version);
  w.opt(r.simgrid_config_json);
}

void decode(std::string_view bytes, std::vector<Outcome>& out) {
  Reader in(bytes);
  while (!in.done()) {
    Outcome o;
    const auto kind = in.raw<std::uint8_t>();
    if (kind > static_cast<std::uint8_t>(Outcome::Kind::already_done))
      throw std::runtime_error("sweep message: unknown outcome kind");
    o.kind = static_cast<Outcome::Kind>(kind);
    o.index = static_cast<std::size_t>(in.raw<std::uint64_t>());
    o.key = in.str();
    o.axes_json = in.str();
    o.error = in.str();
    if (in.raw<std::uint8_t>()) {
      auto& r = o.row.emplace();
      for (std::string* s : {&r.method, &r.scenario_hash, &r.scenario_name, &r.model_family, &r.gpu,
                             &r.scenario_json, &r.plan_json, &r.hardware_name, &r.hardware_status,
                             &r.hardware_provenance_json, &r.result_json, &r.tool_version, &r.git_revision})
        *s = in.str();
      r.gpus = in.raw<std::int64_t>();
      r.sweep_id = in.opt<std::int64_t>();
      r.point_index = in.raw<std::int64_t>();
      r.axes_json = in.opt<std::string>();
      for (auto& f : r.figures) f = in.opt<double>();
      r.fits = in.opt<std::int64_t>();
      r.simgrid_version = in.opt<std::string>();
      r.simgrid_config_json = in.opt<std::string>();
    }
    out.push_back(std::move(o));
  }
}

std::string pack_keys(const DoneKeys& keys) {
  std::string out;
  for (const auto& k : keys) out.append(k).push_back('\n');
  return out;
}

DoneKeys unpack_keys(std::string_view packed) {
  DoneKeys keys;
  while (!packed.empty()) {
    const auto nl = packed.find('\n');
    keys.emplace_hint(keys.end(), packed.substr(0, nl));
    packed.remove_prefix(nl == std::string_view::npos ? packed.size() : nl + 1);
  }
  return keys;
}

}  // namespace clustersim::runner::detail
