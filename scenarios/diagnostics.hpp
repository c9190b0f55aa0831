// Input problems: every one carries the file and the JSON path of the bad value, and
// all of them are collected before anything is reported, so a user fixes a file in one
// pass. Only main() catches InputError and turns it into an exit code.
#pragma once
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace clustersim {

struct Problem {
  std::string file;     // "data/scenarios/x.json", or "<built-in>"
  std::string path;     // JSON pointer, "/cluster/nodes"
  std::string message;  // "expected an integer >= 1, got -2"
  std::string to_string() const;
};

class InputError : public std::runtime_error {
 public:
  explicit InputError(std::vector<Problem> problems);
  InputError(std::string file, std::string path, std::string message);
  const std::vector<Problem>& problems() const { return problems_; }

 private:
  std::vector<Problem> problems_;
};

class Diagnostics {
 public:
  explicit Diagnostics(std::string file) : file_(std::move(file)) {}
  void error(std::string path, std::string message);
  bool ok() const { return problems_.empty(); }
  std::size_t count() const { return problems_.size(); }
  const std::string& file() const { return file_; }
  const std::vector<Problem>& problems() const { return problems_; }
  void throw_if_errors() const;

 private:
  std::string file_;
  std::vector<Problem> problems_;
};

// The candidate closest to `word` by edit distance when it is close enough to be a
// plausible typo, else an empty string.
std::string nearest(std::string_view word, std::span<const std::string_view> candidates);

// JSON pointer of `key` below `parent` ("/cluster" + "nodes" -> "/cluster/nodes").
std::string json_path(std::string_view parent, std::string_view key);
std::string json_path(std::string_view parent, std::size_t index);

}  // namespace clustersim
