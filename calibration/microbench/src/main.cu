// clustersim-microbench: measures the GPU quantities the clustersim cost model is calibrated on
// (GEMM throughput, memcpy bandwidth, memory-bound kernel bandwidth, launch overhead) and
// writes them, with provenance, to one JSON file.
//
//   clustersim-microbench [--out FILE.json] [--quick] [--only gemm,memcpy,membound,launch]
//                         [--device N]
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <ctime>
#include <fstream>
#include <map>

#include "common.cuh"

namespace mb {
namespace {

const char* kVersion = "1";

void usage(const char* argv0) {
  std::printf(
      "usage: %s [--out FILE.json] [--quick] [--only LIST] [--device N]\n"
      "  --out FILE     output JSON path (default microbench.json)\n"
      "  --quick        fewer shapes/sizes/repeats (smoke test, ~20 s)\n"
      "  --only LIST    comma-separated subset of: gemm,memcpy,membound,launch\n"
      "  --device N     CUDA device ordinal (default 0)\n",
      argv0);
}

std::string read_first_line(const char* path) {
  std::ifstream f(path);
  std::string line;
  if (f && std::getline(f, line)) return line;
  return "";
}

std::string utc_now() {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[64];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string provenance_json(const Options& opt, const DeviceInfo& dev) {
  Json j(1);
  const cudaDeviceProp& p = dev.prop;
  int sm_clock_khz = 0, mem_clock_khz = 0, bus_width = 0, l2 = 0;
  CUDA_CHECK(cudaDeviceGetAttribute(&sm_clock_khz, cudaDevAttrClockRate, opt.device));
  CUDA_CHECK(cudaDeviceGetAttribute(&mem_clock_khz, cudaDevAttrMemoryClockRate, opt.device));
  CUDA_CHECK(cudaDeviceGetAttribute(&bus_width, cudaDevAttrGlobalMemoryBusWidth, opt.device));
  CUDA_CHECK(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, opt.device));
  int driver = 0, runtime = 0;
  CUDA_CHECK(cudaDriverGetVersion(&driver));
  CUDA_CHECK(cudaRuntimeGetVersion(&runtime));
  cublasHandle_t h;
  CUBLAS_CHECK(cublasCreate(&h));
  int cublas_ver = 0;
  CUBLAS_CHECK(cublasGetVersion(h, &cublas_ver));
  CUBLAS_CHECK(cublasDestroy(h));
  size_t lt_ver = cublasLtGetVersion();
  char host[256] = {0};
  if (gethostname(host, sizeof(host) - 1) != 0) std::strcpy(host, "unknown");

  j.begin_obj();
  j.kv_str("gpu_name", p.name);
  j.kv_int("sm_count", p.multiProcessorCount);
  j.kv_str("compute_capability", std::to_string(p.major) + "." + std::to_string(p.minor));
  j.kv_num("sm_clock_max_hz", 1e3 * sm_clock_khz);
  j.kv_num("memory_clock_max_hz", 1e3 * mem_clock_khz);
  j.kv_int("memory_bus_width_bits", bus_width);
  j.kv_num("memory_bandwidth_theoretical_Bps", 2.0 * 1e3 * mem_clock_khz * bus_width / 8.0);
  j.kv_str("memory_bandwidth_theoretical_note", "2 (DDR) * memory clock * bus width / 8");
  j.kv_int("total_memory_bytes", static_cast<long long>(p.totalGlobalMem));
  j.kv_int("l2_cache_bytes", l2);
  j.kv_int("shared_memory_per_sm_bytes", static_cast<long long>(p.sharedMemPerMultiprocessor));
  j.kv_int("cuda_driver_version", driver);
  j.kv_int("cuda_runtime_version", runtime);
  j.kv_str("nvidia_driver", read_first_line("/proc/driver/nvidia/version"));
  j.kv_int("cublas_version", cublas_ver);
  j.kv_int("cublaslt_version", static_cast<long long>(lt_ver));
  j.kv_str("nvcc_version", std::to_string(__CUDACC_VER_MAJOR__) + "." + std::to_string(__CUDACC_VER_MINOR__) +
                               "." + std::to_string(__CUDACC_VER_BUILD__));
  j.kv_str("hostname", host);
  j.kv_str("date_utc", utc_now());
  j.kv_str("command_line", opt.command_line);
  j.kv_bool("quick", opt.quick);
  j.kv_str("microbench_version", kVersion);
  j.end_obj();
  return j.text();
}

struct Output {
  std::string provenance;
  std::vector<std::pair<std::string, std::string>> sections;
  Summary summary;
};

void write_output(const Options& opt, const Output& o, bool complete, double wall_s) {
  Json j(1);
  j.begin_obj();
  j.kv_str("format", "clustersim-microbench/1");
  j.kv_str("source", "calibration/microbench (clustersim-microbench)");
  j.kv_str("units", "SI: seconds, bytes, bytes/s, FLOP; tflops fields are 1e12 FLOP/s");
  j.kv_bool("complete", complete);
  j.kv_num("wall_time_s", wall_s);
  j.kv_raw("provenance", o.provenance);
  for (const auto& s : o.sections) j.kv_raw(s.first, s.second);
  j.key("summary").begin_arr();
  for (const auto& l : o.summary.lines) j.str(l);
  j.end_arr();
  j.end_obj();
  std::string tmp = opt.out_path + ".tmp";
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    if (!f) {
      std::fprintf(stderr, "cannot write %s\n", tmp.c_str());
      std::exit(5);
    }
    f << j.text() << "\n";
  }
  if (std::rename(tmp.c_str(), opt.out_path.c_str()) != 0) {
    std::fprintf(stderr, "cannot rename %s to %s\n", tmp.c_str(), opt.out_path.c_str());
    std::exit(5);
  }
}

}  // namespace
}  // namespace mb

int main(int argc, char** argv) {
  using namespace mb;
  Options opt;
  for (int i = 0; i < argc; ++i) {
    if (i) opt.command_line += ' ';
    opt.command_line += argv[i];
  }
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--out" && i + 1 < argc) {
      opt.out_path = argv[++i];
    } else if (a == "--quick") {
      opt.quick = true;
    } else if (a == "--device" && i + 1 < argc) {
      opt.device = std::atoi(argv[++i]);
    } else if (a == "--only" && i + 1 < argc) {
      std::string list = std::string(",") + argv[++i] + ",";
      opt.run_gemm = list.find(",gemm,") != std::string::npos;
      opt.run_copy = list.find(",memcpy,") != std::string::npos;
      opt.run_membound = list.find(",membound,") != std::string::npos;
      opt.run_launch = list.find(",launch,") != std::string::npos;
    } else if (a == "-h" || a == "--help") {
      usage(argv[0]);
      return 0;
    } else {
      std::fprintf(stderr, "unknown argument: %s\n", a.c_str());
      usage(argv[0]);
      return 1;
    }
  }

  auto t_start = std::chrono::steady_clock::now();
  auto elapsed = [&]() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t_start).count();
  };

  CUDA_CHECK(cudaSetDevice(opt.device));
  DeviceInfo dev;
  CUDA_CHECK(cudaGetDeviceProperties(&dev.prop, opt.device));
  dev.cc = dev.prop.major * 10 + dev.prop.minor;
  dev.sm_count = dev.prop.multiProcessorCount;
  dev.total_mem = dev.prop.totalGlobalMem;
  std::fprintf(stderr, "[microbench] %s, %d SMs, cc %d.%d, %.1f GiB\n", dev.prop.name, dev.sm_count,
               dev.prop.major, dev.prop.minor, dev.total_mem / double(1ull << 30));

  cudaStream_t stream;
  CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));

  Output out;
  out.provenance = provenance_json(opt, dev);
  write_output(opt, out, false, elapsed());

  struct Section {
    const char* name;
    bool enabled;
    void (*fn)(const Options&, const DeviceInfo&, cudaStream_t, Json&, Summary&);
  };
  Section sections[] = {
      {"launch", opt.run_launch, run_launch_section},
      {"memcpy", opt.run_copy, run_copy_section},
      {"membound", opt.run_membound, run_membound_section},
      {"gemm", opt.run_gemm, run_gemm_section},
  };
  for (const auto& s : sections) {
    if (!s.enabled) continue;
    double t0 = elapsed();
    std::fprintf(stderr, "[microbench] section %s ...\n", s.name);
    Json j(2);
    s.fn(opt, dev, stream, j, out.summary);
    CUDA_CHECK(cudaDeviceSynchronize());
    out.sections.push_back({s.name, j.text()});
    write_output(opt, out, false, elapsed());
    std::fprintf(stderr, "[microbench] section %s done in %.1f s\n", s.name, elapsed() - t0);
  }
  write_output(opt, out, true, elapsed());

  std::printf("==== clustersim-microbench summary: %s (%d SMs, cc %d.%d) ====\n", dev.prop.name,
              dev.sm_count, dev.prop.major, dev.prop.minor);
  for (const auto& l : out.summary.lines) std::printf("%s\n", l.c_str());
  std::printf("wrote %s (%.1f s)\n", opt.out_path.c_str(), elapsed());
  CUDA_CHECK(cudaStreamDestroy(stream));
  return 0;
}
