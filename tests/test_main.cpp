#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>

#include "test_temp.hpp"

#include <string>
#include <system_error>
#include <unistd.h>

namespace clustersim::test {
namespace {

struct OwnTempDir {
  std::filesystem::path path;
  pid_t owner = ::getpid();
  OwnTempDir()
      : path(std::filesystem::temp_directory_path() / ("clustersim-tests-" + std::to_string(::getpid()))) {
    std::filesystem::create_directories(path);
  }
  // A forked child that exits normally must not remove its parent's files.
  ~OwnTempDir() {
    std::error_code ec;
    if (::getpid() == owner) std::filesystem::remove_all(path, ec);
  }
};

}  // namespace

std::filesystem::path temp_dir() {
  static const OwnTempDir dir;
  return dir.path;
}

}  // namespace clustersim::test
