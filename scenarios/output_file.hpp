// Files written for the user (plans, traces, exports, charts). A write that fails (a
// missing or read-only folder, a full device) is a problem the user fixes, so it is an
// InputError naming the file and the system's reason (exit 1), never a silent
// "written" over a lost result.
#pragma once
#include <cstdio>
#include <string>
#include <string_view>

namespace clustersim {

// Fails early, before long work whose result would go to `file`: opens it for writing
// without truncating (and removes it again when it did not exist before).
void check_writable(const std::string& file);

// Writes `text` to `file` (replacing it); checks every step, the close included, where
// a full device shows up for buffered writes.
void write_text_file(const std::string& file, std::string_view text);

// A file written piece by piece. The first failing write's errno is kept (a buffered
// stream would lose it), and close() throws the InputError; the destructor of a file
// not closed (an exception on the way) closes it quietly.
class OutputFile {
 public:
  explicit OutputFile(std::string file);
  ~OutputFile();
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;

  OutputFile& operator<<(std::string_view text);
  void close();

 private:
  std::string file_;
  std::FILE* f_ = nullptr;
  int error_ = 0;
};

}  // namespace clustersim
