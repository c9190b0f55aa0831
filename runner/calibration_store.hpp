// Calibration samples in the results database: `calibrate import` stores every sample of
// a microbenchmark run (GEMMs, memory-bound kernels, attention, launch gap) with the time
// the current profile predicts for it; `calibrate fit --db` reads them back, in import
// order, as the fit's input (so a fit from the database equals a fit from the files).
#pragma once
#include <string>

#include "costmodel/calibration.hpp"

namespace clustersim::runner {

struct ImportCount {
  std::size_t stored = 0;   // samples written
  std::size_t skipped = 0;  // samples of a source already in the database
};

// Stores `data`'s samples under hardware profile `profile.name`; predicted times come
// from `profile`. A source (file and measurement date) already imported is skipped.
ImportCount import_calibration_samples(const std::string& db_file, const Microbenchmarks& data,
                                       const GpuProfile& profile);

// Everything stored for `hardware`, as read_microbenchmarks/read_attention_benchmarks
// would return it. Throws InputError when there is nothing.
Microbenchmarks load_calibration_samples(const std::string& db_file, const std::string& hardware);

}  // namespace clustersim::runner
