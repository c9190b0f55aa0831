// A data file compiled into the binary (profiles, the default scenario), so the tool
// runs from any directory without an install step.
#pragma once
#include <span>
#include <string_view>

namespace clustersim {
struct EmbeddedFile {
  std::string_view name;  // file name, e.g. "a100-sxm4-80gb.json"
  std::string_view text;
};
}  // namespace clustersim
