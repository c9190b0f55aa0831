// Diagnostics collection and the typo suggestion (Levenshtein distance).
#include "scenarios/diagnostics.hpp"

#include <algorithm>
#include <fmt/format.h>

namespace clustersim {
namespace {
std::string join(const std::vector<Problem>& problems) {
  std::string out;
  for (std::size_t i = 0; i < problems.size(); ++i) {
    if (i) out += '\n';
    out += problems[i].to_string();
  }
  return out;
}

std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diag = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t up = row[j];
      const std::size_t cost = (a[i - 1] == b[j - 1]) ? 0 : 1;
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + cost});
      diag = up;
    }
  }
  return row[b.size()];
}
}  // namespace

std::string Problem::to_string() const {
  return fmt::format("{}: {}: {}", file, path.empty() ? "/" : path, message);
}

InputError::InputError(std::vector<Problem> problems)
    : std::runtime_error(join(problems)), problems_(std::move(problems)) {}

InputError::InputError(std::string file, std::string path, std::string message)
    : InputError(std::vector<Problem>{{std::move(file), std::move(path), std::move(message)}}) {}

void Diagnostics::error(std::string path, std::string message) {
  problems_.push_back({file_, std::move(path), std::move(message)});
}

void Diagnostics::throw_if_errors() const {
  if (!problems_.empty()) throw InputError(problems_);
}

std::string nearest(std::string_view word, std::span<const std::string_view> candidates) {
  std::string best;
  std::size_t best_distance = std::max<std::size_t>(2, word.size() / 3) + 1;
  for (auto c : candidates) {
    const std::size_t d = edit_distance(word, c);
    if (d < best_distance) {
      best_distance = d;
      best = std::string(c);
    }
  }
  return best;
}

std::string json_path(std::string_view parent, std::string_view key) {
  std::string escaped;
  for (char ch : key) {
    if (ch == '~') escaped += "~0";
    else if (ch == '/') escaped += "~1";
    else escaped += ch;
  }
  return fmt::format("{}/{}", parent, escaped);
}

std::string json_path(std::string_view parent, std::size_t index) {
  return fmt::format("{}/{}", parent, index);
}

}  // namespace clustersim
