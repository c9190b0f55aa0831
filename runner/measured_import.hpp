// Importing measured runs (clustersim-measured-run/1 files, or the
// clustersim-measured-runs/1 lists that calibration/training/run_all.sh writes; the
// format is in results/README.md): each file is validated like a scenario file, with
// every problem reported, and the runs are stored in one transaction.
#pragma once
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "results/store.hpp"

namespace clustersim::runner {

// One measured-run document of `file`. Throws InputError listing every problem.
results::MeasuredRecord parse_measured_run(const nlohmann::json& doc, const std::string& file);

// Every run of every file, in order. Throws InputError with the problems of all files,
// so that one bad file imports nothing.
std::vector<results::MeasuredRecord> read_measured_runs(const std::vector<std::string>& files);

struct ImportedRun {
  std::string file;           // the file it came from
  std::int64_t id = 0;        // its measured-run id (existing id when imported before)
  std::string scenario_hash;  // the scenario it is compared by
};

// Calls add(db, i) for i = 0 .. n-1 inside one transaction of `db_file` (created when
// missing): every item is stored or, on any error, none.
std::vector<ImportedRun> store_in_one_transaction(const std::string& db_file, std::size_t n,
                                                  const std::function<ImportedRun(results::Database&, std::size_t)>& add);

// Stores `records` in `db_file` (created when missing) in one transaction.
std::vector<ImportedRun> store_measured_runs(const std::string& db_file,
                                             const std::vector<results::MeasuredRecord>& records);

}  // namespace clustersim::runner
