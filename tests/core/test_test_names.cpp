// CTest learns the test cases from catch_discover_tests, which splits names at ';': a
// test case named "a; b" became two CTest entries that each ran no test at all (and
// passed). This keeps every name free of ';' so every test case really runs in CI.
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <regex>

namespace fs = std::filesystem;

TEST_CASE("no test case name holds a semicolon (CTest would run nothing for it)", "[layering]") {
  const std::regex name_re(R"re(TEST_CASE\s*\(\s*"([^"]*)")re");
  int cases = 0;
  for (const auto& entry : fs::recursive_directory_iterator(fs::path(CLUSTERSIM_SOURCE_DIR) / "tests")) {
    if (entry.path().extension() != ".cpp") continue;
    std::ifstream in(entry.path());
    const std::string text((std::istreambuf_iterator<char>(in)), {});
    for (std::sregex_iterator it(text.begin(), text.end(), name_re), end; it != end; ++it) {
      ++cases;
      INFO(entry.path().string() << ": \"" << (*it)[1] << "\"");
      CHECK((*it)[1].str().find(';') == std::string::npos);
    }
  }
  CHECK(cases > 100);
}
