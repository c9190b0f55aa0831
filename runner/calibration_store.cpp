#include "runner/calibration_store.hpp"

#include <fmt/format.h>
#include <set>

#include "costmodel/kernels.hpp"
#include "results/store.hpp"

namespace clustersim::runner {
namespace {

std::string source_of(const std::string& file, const nlohmann::json& provenance) {
  return fmt::format("{} @ {}", file, provenance.value("date_utc", std::string("undated")));
}

std::optional<DType> dtype_named(const std::string& s) {
  for (DType t : {DType::fp32, DType::tf32, DType::fp16, DType::bf16, DType::fp8})
    if (to_string(t) == s) return t;
  return std::nullopt;
}

}  // namespace

ImportCount import_calibration_samples(const std::string& db_file, const Microbenchmarks& data,
                                       const GpuProfile& profile) {
  results::Database db(db_file, results::Database::Mode::read_write);
  std::set<std::string> present;
  for (const auto& row : db.calibration_samples(profile.name)) present.insert(row.value("source", ""));
  const results::HardwareRecord hw{profile.name, profile.status, {{"gpu_name", data.gpu_name}}};
  const KernelModel km(profile);
  ImportCount count;
  const std::string bench = source_of(data.file, data.provenance);
  db.begin();
  try {
    if (present.count(bench)) {
      count.skipped += data.gemm.size() + data.memory.size() + 1;
    } else {
      db.add_calibration_sample(hw, "launch",
                                {{"gpu_name", data.gpu_name}, {"sms", data.sms}, {"l2_bytes", data.l2},
                                 {"provenance", data.provenance}, {"pinned_h2d_Bps", data.pinned_h2d},
                                 {"pinned_d2h_Bps", data.pinned_d2h}, {"sync_launch_s", data.sync_launch},
                                 {"launch_submit_s", data.launch_submit}, {"queued_gpu_s", data.queued_gap}},
                                data.launch_gap,
                                // The profile's kernel overhead is the back-to-back gap only where no
                                // queued gap was measured; otherwise nothing to compare this sample with.
                                data.queued_gap > 0 ? std::nullopt : std::optional<double>(profile.efficiency.kernel_overhead),
                                bench);
      for (const auto& g : data.gemm)
        db.add_calibration_sample(hw, "gemm",
                                  {{"dtype", to_string(g.dtype)}, {"batch", g.batch}, {"m", g.m}, {"n", g.n}, {"k", g.k}},
                                  g.time, km.gemm_kernel(g.batch, g.m, g.n, g.k, g.dtype), bench);
      for (const auto& m : data.memory)
        db.add_calibration_sample(hw, "memory", {{"kernel", m.kernel}, {"bytes", m.bytes}}, m.time, std::nullopt, bench);
      count.stored += data.gemm.size() + data.memory.size() + 1;
    }
    for (AttentionKernel kernel : {AttentionKernel::flash2, AttentionKernel::cudnn}) {
      const auto& samples = data.attention[static_cast<std::size_t>(kernel)];
      if (samples.empty()) continue;
      const std::string att = source_of(data.attention_files[static_cast<std::size_t>(kernel)], data.provenance);
      if (present.count(att)) {
        count.skipped += samples.size();
        continue;
      }
      for (const auto& a : samples) {
        nlohmann::json shape{{"batch_heads", a.batch_heads}, {"seq", a.seq}, {"head_dim", a.head_dim}, {"backward_s", a.backward}};
        // FlashAttention-2's rows keep the form they had before cuDNN's were stored.
        if (kernel != AttentionKernel::flash2) shape["kernel"] = std::string(to_string(kernel));
        db.add_calibration_sample(hw, "attention", shape, a.forward, std::nullopt, att);
      }
      count.stored += samples.size();
    }
    db.commit();
  } catch (...) {
    db.rollback();
    throw;
  }
  return count;
}

Microbenchmarks load_calibration_samples(const std::string& db_file, const std::string& hardware) {
  results::Database db(db_file, results::Database::Mode::read_only);
  Microbenchmarks data;
  for (const auto& row : db.calibration_samples(hardware)) {
    const auto shape = nlohmann::json::parse(row.value("shape_json", std::string("{}")));
    const std::string kind = row.value("kind", "");
    const double t = row.value("measured_s", 0.0);
    const std::string source = row.value("source", "");
    const std::string file = source.substr(0, source.rfind(" @ "));
    if (kind == "launch") {
      data.file = file;
      data.gpu_name = shape.value("gpu_name", "");
      data.sms = shape.value("sms", 0);
      data.l2 = shape.value("l2_bytes", 0.0);
      data.provenance = shape.value("provenance", nlohmann::json::object());
      data.launch_gap = t;
      // The pinned host copies ride with the launch sample (one per file, as they are).
      data.pinned_h2d = shape.value("pinned_h2d_Bps", 0.0);
      data.pinned_d2h = shape.value("pinned_d2h_Bps", 0.0);
      // So do the synchronous launch and the host's submit of an asynchronous one.
      data.sync_launch = shape.value("sync_launch_s", 0.0);
      data.launch_submit = shape.value("launch_submit_s", 0.0);
      // And the gap between queued kernels, where the file measured it (the kernel overhead).
      data.queued_gap = shape.value("queued_gpu_s", 0.0);
    } else if (kind == "gemm") {
      if (const auto dt = dtype_named(shape.value("dtype", "")))
        data.gemm.push_back({*dt, shape.value("batch", 1), shape.value("m", 0), shape.value("n", 0), shape.value("k", 0), t});
    } else if (kind == "memory") {
      data.memory.push_back({shape.value("kernel", ""), shape.value("bytes", 0.0), t});
    } else if (kind == "attention") {
      const auto k = static_cast<std::size_t>(shape.value("kernel", std::string("flash2")) == "cudnn" ? AttentionKernel::cudnn
                                                                                                     : AttentionKernel::flash2);
      data.attention_files[k] = file;
      data.attention[k].push_back(
          {shape.value("batch_heads", 0), shape.value("seq", 0), shape.value("head_dim", 0), t, shape.value("backward_s", 0.0)});
    }
  }
  if (data.gemm.empty() || data.launch_gap <= 0)
    throw InputError(db_file, "/calibration_samples",
                     fmt::format("no complete microbenchmark samples for hardware \"{}\" (run clustersim calibrate import)",
                                 hardware));
  return data;
}

}  // namespace clustersim::runner
