#!/bin/bash
# Digest of what a sweep stored, to compare two builds' databases of the same sweep:
# every run joined with its scenario, plan, hardware profile and sweep, by point index,
# with row ids, created time and the git_revision column left out (they differ between
# two runs of the same sweep by design; the result's own "tool" object is kept), then
# the row counts of the tables.
# Needs the sqlite3 command (Debian package sqlite3).
#   scripts/sweep-rows-digest.sh A.db; scripts/sweep-rows-digest.sh B.db   (same output = same rows)
set -euo pipefail
db=${1:?usage: sweep-rows-digest.sh DB}
sqlite3 -readonly "$db" "SELECT r.point_index, r.axes_json, r.method, r.iteration_time_s, r.tokens_per_s,
  r.samples_per_s, r.tflops_per_gpu, r.model_tflops_per_gpu, r.mfu, r.memory_per_gpu_bytes, r.fits, r.result_json,
  r.tool_version, r.simgrid_version, r.simgrid_config_json, s.hash, s.name, s.model_family, s.gpu, s.gpus,
  s.canonical_json, p.hash, p.plan_json, h.name, h.status, h.provenance_json, w.name, w.spec_json, w.points
  FROM simulated_runs r JOIN scenarios s ON s.id = r.scenario_id JOIN plans p ON p.id = r.plan_id
  JOIN hardware_profiles h ON h.id = r.hardware_id LEFT JOIN sweeps w ON w.id = r.sweep_id
  ORDER BY r.point_index, s.hash" | sha256sum | cut -d' ' -f1
sqlite3 -readonly "$db" "SELECT 'scenarios ' || (SELECT count(*) FROM scenarios) || ', plans ' ||
  (SELECT count(*) FROM plans) || ', hardware_profiles ' || (SELECT count(*) FROM hardware_profiles) ||
  ', simulated_runs ' || (SELECT count(*) FROM simulated_runs) || ', failed_points ' ||
  (SELECT count(*) FROM failed_points)"
