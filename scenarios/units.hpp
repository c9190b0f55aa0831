// Quantities with units, parsed in one place. Inside the code everything is SI:
// seconds, bytes, bytes per second, FLOP per second. Files always spell the unit.
#pragma once
#include <optional>
#include <string>
#include <string_view>

namespace clustersim {

using Seconds = double;         // s
using Bytes = double;           // B (double: sizes reach 1e15 and feed float math)
using BytesPerSecond = double;  // B/s
using FlopPerSecond = double;   // FLOP/s
using Flops = double;           // FLOP

enum class Dimension { time, bytes, bandwidth, flop_rate };

// Parses "450GBps", "400Gbps", "2us", "80GiB", "312TFLOPs" into SI. On failure returns
// nullopt and sets `error` to a message naming the value and the units allowed; a bare
// number gets a message that says which unit to append.
std::optional<double> parse_quantity(std::string_view text, Dimension dim, std::string* error);

// What a field accepts, in SI: scenario fields declare one, so that "1e300s" of latency
// is refused instead of printed as 300 digits. (Profile fields written by the fitters
// keep only the finite, non-negative check: a fit may say "no limit" with 1e25 B/s.)
struct QuantityRange {
  double min = 0;
  double max = 0;
};

// Human-readable forms for tables ("1.23 ms", "45.6 GiB", "312 TFLOP/s").
std::string format_seconds(Seconds s);
std::string format_bytes(Bytes b);
std::string format_bandwidth(BytesPerSecond b);
std::string format_flop_rate(FlopPerSecond f);
std::string format_quantity(double si, Dimension dim);

std::string_view dimension_name(Dimension dim);
std::string_view unit_examples(Dimension dim);

}  // namespace clustersim
