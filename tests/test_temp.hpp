// A temporary folder of this test process's own. CTest runs test cases in parallel, and
// two suites (two build trees, or CI beside a developer) may run at once: fixed names
// under /tmp let one test delete or overwrite another's files. Every test writes under
// this folder, which is made on first use and removed when the process that made it ends.
#pragma once
#include <filesystem>

namespace clustersim::test {

std::filesystem::path temp_dir();

}  // namespace clustersim::test
