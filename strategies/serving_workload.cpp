#include "strategies/serving_workload.hpp"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>

#include "scenarios/diagnostics.hpp"

namespace clustersim {
namespace {
using i64 = std::int64_t;

class Rng {
 public:
  explicit Rng(std::uint64_t seed) : g_(seed) {}
  // Uniform in (0, 1): 53 random bits, never 0.
  double uniform() { return (double(g_() >> 11) + 0.5) * 0x1.0p-53; }
  double exponential(double rate) { return -std::log(uniform()) / rate; }
  double normal() {  // Box-Muller, one value per call
    const double u = uniform(), v = uniform();
    return std::sqrt(-2 * std::log(u)) * std::cos(2 * M_PI * v);
  }
  // Marsaglia and Tsang (2000); shape < 1 through Gamma(shape + 1) x U^(1/shape).
  double gamma(double shape) {
    if (shape < 1) return gamma(shape + 1) * std::pow(uniform(), 1 / shape);
    const double d = shape - 1.0 / 3, c = 1 / std::sqrt(9 * d);
    for (;;) {
      double x, v;
      do {
        x = normal();
        v = 1 + c * x;
      } while (v <= 0);
      v = v * v * v;
      const double u = uniform();
      if (std::log(u) < 0.5 * x * x + d - d * v + d * std::log(v)) return d * v;
    }
  }

 private:
  std::mt19937_64 g_;
};

class LengthSampler {
 public:
  explicit LengthSampler(const LengthSpec& l) : l_(l) {
    if (l.kind != LengthKind::zipf) return;
    const i64 n = l.max - l.min + 1;
    cdf_.resize(static_cast<std::size_t>(n));
    double sum = 0;
    for (i64 k = 1; k <= n; ++k) cdf_[std::size_t(k - 1)] = sum += std::pow(double(k), -l.exponent);
    for (auto& c : cdf_) c /= sum;
  }
  i64 draw(Rng& rng) const {
    switch (l_.kind) {
      case LengthKind::fixed: return l_.value;
      case LengthKind::uniform:
        return l_.min + std::min<i64>(l_.max - l_.min, static_cast<i64>(rng.uniform() * double(l_.max - l_.min + 1)));
      case LengthKind::zipf: {
        const double u = rng.uniform();
        const auto it = std::lower_bound(cdf_.begin(), cdf_.end(), u);
        return l_.min + std::min<i64>(i64(cdf_.size()) - 1, it - cdf_.begin());
      }
    }
    return l_.value;
  }

 private:
  LengthSpec l_;
  std::vector<double> cdf_;
};

i64 parse_count(const std::string& text, const std::string& file, const std::string& where, const char* what) {
  std::size_t pos = 0;
  long long v = 0;
  try {
    v = std::stoll(text, &pos);
  } catch (...) {
    pos = 0;
  }
  if (pos == 0 || pos != text.size() || v < 1 || v > (1LL << 24))
    throw InputError(file, where, fmt::format("{}: expected an integer in [1, 16777216], got \"{}\"", what, text));
  return v;
}

double parse_time(const std::string& text, const std::string& file, const std::string& where) {
  std::size_t pos = 0;
  double v = 0;
  try {
    v = std::stod(text, &pos);
  } catch (...) {
    pos = 0;
  }
  if (pos == 0 || pos != text.size() || !std::isfinite(v) || v < 0 || v > 1e7)
    throw InputError(file, where, fmt::format("arrival_time: expected seconds in [0, 1e7], got \"{}\"", text));
  return v;
}
}  // namespace

std::vector<ServeRequest> read_trace(const std::string& file) {
  std::ifstream in(file);
  if (!in) throw InputError(file, "", "cannot open the trace file");
  std::vector<ServeRequest> out;
  std::string line;
  const bool jsonl = file.size() >= 6 && file.substr(file.size() - 6) == ".jsonl";
  i64 n = 0;
  bool header = !jsonl;
  while (std::getline(in, line)) {
    ++n;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.find_first_not_of(" \t") == std::string::npos) continue;
    const std::string where = fmt::format("line {}", n);
    ServeRequest r;
    if (jsonl) {
      nlohmann::json j;
      try {
        j = nlohmann::json::parse(line);
      } catch (const std::exception&) {
        throw InputError(file, where, "not a JSON object");
      }
      for (const char* key : {"arrival_time", "prompt_tokens", "output_tokens"})
        if (!j.is_object() || !j.contains(key))
          throw InputError(file, where + "/" + key, "required key is missing");
      const auto& a = j["arrival_time"];
      if (!a.is_number()) throw InputError(file, where + "/arrival_time", "expected seconds as a number");
      r.arrival = parse_time(fmt::format("{}", a.get<double>()), file, where + "/arrival_time");
      for (const char* key : {"prompt_tokens", "output_tokens"}) {
        const auto& v = j[key];
        if (!v.is_number_integer())
          throw InputError(file, where + "/" + key, fmt::format("expected an integer, got {}", v.dump()));
        const i64 x = parse_count(std::to_string(v.get<long long>()), file, where + "/" + key, key);
        (std::string(key) == "prompt_tokens" ? r.prompt : r.output) = x;
      }
    } else {
      std::vector<std::string> f;
      std::stringstream ss(line);
      std::string cell;
      while (std::getline(ss, cell, ',')) {
        cell.erase(0, cell.find_first_not_of(" \t"));
        cell.erase(cell.find_last_not_of(" \t") + 1);
        f.push_back(cell);
      }
      if (header) {
        header = false;
        // arrival_s: the header of the measured engine's traces (calibration/data/*/serving-traces).
        if (f.size() != 3 || (f[0] != "arrival_time" && f[0] != "arrival_s") || f[1] != "prompt_tokens" ||
            f[2] != "output_tokens")
          throw InputError(file, where, "expected the header arrival_time,prompt_tokens,output_tokens (or arrival_s,...)");
        continue;
      }
      if (f.size() != 3) throw InputError(file, where, fmt::format("expected 3 columns, got {}", f.size()));
      r.arrival = parse_time(f[0], file, where + "/arrival_time");
      r.prompt = parse_count(f[1], file, where + "/prompt_tokens", "prompt_tokens");
      r.output = parse_count(f[2], file, where + "/output_tokens", "output_tokens");
    }
    out.push_back(r);
  }
  if (out.empty()) throw InputError(file, "", "the trace has no requests");
  std::stable_sort(out.begin(), out.end(), [](const ServeRequest& a, const ServeRequest& b) { return a.arrival < b.arrival; });
  for (std::size_t i = 0; i < out.size(); ++i) out[i].id = i64(i);
  return out;
}

std::vector<ServeRequest> make_workload(const WorkloadSpec& w) {
  if (w.arrival == ArrivalKind::trace) return read_trace(w.trace);
  Rng rng(w.seed);
  const LengthSampler prompt(w.prompt), output(w.output);
  std::vector<ServeRequest> out;
  const double shape = 1 / (w.cv * w.cv);  // gamma gaps: mean 1/rate, cv as given
  double t = 0;
  for (i64 i = 0;; ++i) {
    if (w.requests > 0 && i >= w.requests) break;
    double gap = 1 / w.rate;
    if (w.arrival == ArrivalKind::poisson) gap = rng.exponential(w.rate);
    else if (w.arrival == ArrivalKind::gamma) gap = rng.gamma(shape) / (shape * w.rate);
    t += i == 0 && w.arrival == ArrivalKind::fixed_rate ? 0 : gap;
    if (w.requests == 0 && t > w.duration) break;
    if (w.requests > 0 && w.duration > 0 && t > w.duration) break;
    ServeRequest r;
    r.id = i;
    r.arrival = t;
    r.prompt = prompt.draw(rng);
    r.output = output.draw(rng);
    out.push_back(r);
  }
  return out;
}

}  // namespace clustersim
