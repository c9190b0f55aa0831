// DESIGN.md's layering, checked on the sources: only sim/ includes SimGrid, only
// results/ includes SQLite, only runner/sweep_mpi.cpp includes MPI, no layer includes
// one above it (runner/ sits above the models and results, cli/ above everything), and
// the libraries print nothing.
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>

namespace fs = std::filesystem;

TEST_CASE("layers include only what DESIGN.md allows", "[layering]") {
  const fs::path root = CLUSTERSIM_SOURCE_DIR;
  // Which project folders each layer may include.
  const std::map<std::string, std::set<std::string>> allowed{
      {"scenarios", {"scenarios"}},
      {"costmodel", {"scenarios", "costmodel"}},
      {"strategies", {"scenarios", "costmodel", "strategies"}},
      {"sim", {"scenarios", "costmodel", "strategies", "sim"}},
      {"results", {"scenarios", "results"}},
      {"runner", {"scenarios", "costmodel", "strategies", "sim", "results", "runner"}},
  };
  const std::regex include_re(R"(^\s*#\s*include\s*[<"]([^>"]+)[>"])");
  int files = 0;
  for (const auto& [layer, ok] : allowed) {
    for (const auto& entry : fs::recursive_directory_iterator(root / layer)) {
      const auto ext = entry.path().extension();
      if (ext != ".cpp" && ext != ".hpp") continue;
      ++files;
      std::ifstream in(entry.path());
      std::string line;
      while (std::getline(in, line)) {
        std::smatch m;
        if (!std::regex_search(line, m, include_re)) continue;
        const std::string inc = m[1];
        INFO(entry.path().string() << ": " << line);
        if (inc.rfind("simgrid/", 0) == 0 || inc.rfind("xbt/", 0) == 0) CHECK(layer == "sim");
        if (inc == "sqlite3.h") CHECK(layer == "results");
        if (inc == "mpi.h") CHECK(entry.path().filename() == "sweep_mpi.cpp");
        const auto slash = inc.find('/');
        if (slash == std::string::npos) continue;
        const std::string top = inc.substr(0, slash);
        if (allowed.count(top) || top == "cli") CHECK(ok.count(top) == 1);
      }
    }
  }
  CHECK(files > 10);
}

TEST_CASE("libraries print nothing: results and progress go back to cli/", "[layering]") {
  const fs::path root = CLUSTERSIM_SOURCE_DIR;
  const std::regex print_re(R"(\bstd::(cout|cerr|clog)\b|\b(f?printf|f?puts|fmt::print|std::print|std::println)\s*\()");
  int files = 0;
  for (const char* layer : {"scenarios", "costmodel", "strategies", "sim", "results", "runner"}) {
    for (const auto& entry : fs::recursive_directory_iterator(root / layer)) {
      const auto ext = entry.path().extension();
      if (ext != ".cpp" && ext != ".hpp") continue;
      ++files;
      std::ifstream in(entry.path());
      std::string line;
      while (std::getline(in, line)) {
        const std::string code = line.substr(0, line.find("//"));
        INFO(entry.path().string() << ": " << line);
        CHECK_FALSE(std::regex_search(code, print_re));
      }
    }
  }
  CHECK(files > 10);
}
