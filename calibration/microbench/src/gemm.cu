// GEMM throughput through cuBLASLt over transformer-shaped problems.
//
// Convention (row-major, as a framework sees it):
//   out[m, n] = A[m, k] . B[k, n]     (per batch entry), FLOP = 2*m*n*k*batch
//   layout "fwd"  : Y = X . W^T   (A = X [m,k], B stored as W [n,k])   -> cuBLAS TN
//   layout "dgrad": dX = dY . W   (A = dY [m,k], B = W [k,n])          -> cuBLAS NN
//   layout "wgrad": dW = dY^T . X (A stored as dY [k,m], B = X [k,n])  -> cuBLAS NT
// cuBLAS is column-major, so the call computes out^T[n, m] = op(B^T) . op(A^T):
//   cuBLAS M = n, N = m, K = k; "transa"/"transb" below are the values given to cuBLAS.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <algorithm>
#include <cstring>
#include <map>

#include "common.cuh"

namespace mb {
namespace {

struct GemmType {
  std::string name;
  cudaDataType_t ab;
  cudaDataType_t cd;
  cublasComputeType_t compute;
  cudaDataType_t scale;
  DType ab_fill;
  DType cd_fill;
  bool fp8;
  std::string ab_name, cd_name, compute_name;
};

struct GemmShape {
  long long m, n, k;
  int batch;
  std::string layout;  // fwd | dgrad | wgrad
  std::string tag;
  int fast_accum;      // fp8 only: 0/1
};

GemmType make_type(const std::string& name) {
  if (name == "bf16")
    return {name, CUDA_R_16BF, CUDA_R_16BF, CUBLAS_COMPUTE_32F, CUDA_R_32F, DType::BF16,
            DType::BF16, false, "bf16", "bf16", "fp32"};
  if (name == "fp16")
    return {name, CUDA_R_16F, CUDA_R_16F, CUBLAS_COMPUTE_32F, CUDA_R_32F, DType::F16,
            DType::F16, false, "fp16", "fp16", "fp32"};
  if (name == "tf32")
    return {name, CUDA_R_32F, CUDA_R_32F, CUBLAS_COMPUTE_32F_FAST_TF32, CUDA_R_32F, DType::F32,
            DType::F32, false, "fp32", "fp32", "fp32 (tf32 tensor cores)"};
  if (name == "fp32")
    return {name, CUDA_R_32F, CUDA_R_32F, CUBLAS_COMPUTE_32F, CUDA_R_32F, DType::F32,
            DType::F32, false, "fp32", "fp32", "fp32"};
  // fp8: e4m3 inputs, bf16 output, fp32 accumulation.
  return {"fp8", CUDA_R_8F_E4M3, CUDA_R_16BF, CUBLAS_COMPUTE_32F, CUDA_R_32F, DType::FP8E4M3,
          DType::BF16, true, "fp8_e4m3", "bf16", "fp32"};
}

void add_transformer(std::vector<GemmShape>& v, const std::vector<long long>& tokens,
                     const std::vector<long long>& hiddens) {
  for (long long t : tokens)
    for (long long h : hiddens) {
      v.push_back({t, 3 * h, h, 1, "fwd", "qkv", 0});
      v.push_back({t, h, h, 1, "fwd", "proj", 0});
      v.push_back({t, 4 * h, h, 1, "fwd", "fc1", 0});
      v.push_back({t, h, 4 * h, 1, "fwd", "fc2", 0});
    }
}

void add_squares(std::vector<GemmShape>& v, const std::vector<long long>& sizes) {
  for (long long s : sizes) v.push_back({s, s, s, 1, "fwd", "square", 0});
}

void add_attention(std::vector<GemmShape>& v, const std::vector<long long>& seqs,
                   const std::vector<long long>& head_dims, int batch) {
  for (long long s : seqs)
    for (long long d : head_dims) {
      v.push_back({s, s, d, batch, "fwd", "attn_qk", 0});    // S = Q K^T
      v.push_back({s, d, s, batch, "dgrad", "attn_pv", 0});  // O = P V
    }
}

std::vector<GemmShape> shapes_for(const std::string& dt, bool quick) {
  std::vector<GemmShape> v;
  if (quick) {
    if (dt == "bf16") {
      add_squares(v, {1024, 4096, 8192});
      add_transformer(v, {4096}, {2048, 4096});
      add_attention(v, {2048}, {128}, 32);
      v.push_back({4096, 4096, 16384, 1, "dgrad", "fc1_dgrad", 0});
      v.push_back({16384, 4096, 4096, 1, "wgrad", "fc1_wgrad", 0});
    } else {
      add_squares(v, {4096, 8192});
    }
    return v;
  }
  if (dt == "bf16") {
    add_squares(v, {256, 512, 768, 1024, 1536, 2048, 3072, 4096, 5120, 6144, 8192, 12288, 16384});
    add_transformer(v, {256, 1024, 4096, 16384}, {768, 1024, 1536, 2048, 2560, 4096, 5120, 8192});
    // Llama-style (GQA fused QKV, SwiGLU widths)
    for (long long t : {4096LL, 16384LL}) {
      v.push_back({t, 2560, 2048, 1, "fwd", "qkv_gqa", 0});   // h2048 a32 kv4
      v.push_back({t, 5632, 2048, 1, "fwd", "mlp_up", 0});    // TinyLlama ffn 5632
      v.push_back({t, 2048, 5632, 1, "fwd", "mlp_down", 0});
      v.push_back({t, 6144, 4096, 1, "fwd", "qkv_gqa", 0});   // h4096 a32 kv8
      v.push_back({t, 11008, 4096, 1, "fwd", "mlp_up", 0});   // Llama-7B ffn 11008
      v.push_back({t, 4096, 11008, 1, "fwd", "mlp_down", 0});
    }
    // Output logits (vocab GEMM)
    for (long long t : {1024LL, 4096LL, 16384LL}) {
      v.push_back({t, 50304, 768, 1, "fwd", "logits", 0});
      v.push_back({t, 50304, 2048, 1, "fwd", "logits", 0});
      v.push_back({t, 50304, 4096, 1, "fwd", "logits", 0});
      v.push_back({t, 32000, 2048, 1, "fwd", "logits", 0});
      v.push_back({t, 32000, 4096, 1, "fwd", "logits", 0});
    }
    // Backward GEMMs of fc1 (dgrad: dX = dY W, wgrad: dW = dY^T X)
    for (long long t : {4096LL, 16384LL})
      for (long long h : {1024LL, 2048LL, 4096LL, 8192LL}) {
        v.push_back({t, h, 4 * h, 1, "dgrad", "fc1_dgrad", 0});
        v.push_back({4 * h, h, t, 1, "wgrad", "fc1_wgrad", 0});
      }
    // Skinny (few tokens)
    for (long long m : {1LL, 8LL, 16LL, 32LL, 64LL, 128LL}) {
      v.push_back({m, 4096, 4096, 1, "fwd", "skinny", 0});
      v.push_back({m, 12288, 4096, 1, "fwd", "skinny", 0});
    }
    // Long reductions (weight gradients of small layers)
    v.push_back({768, 768, 16384, 1, "wgrad", "k_heavy", 0});
    v.push_back({1024, 4096, 65536, 1, "wgrad", "k_heavy", 0});
    v.push_back({256, 256, 65536, 1, "wgrad", "k_heavy", 0});
    // Batched attention GEMMs (batch = micro_batch * heads)
    add_attention(v, {512, 1024, 2048, 4096}, {64, 128}, 64);
    for (int b : {8, 16, 32, 128, 256}) v.push_back({1024, 1024, 128, b, "fwd", "attn_qk", 0});
    return v;
  }
  if (dt == "fp16") {
    add_squares(v, {256, 512, 768, 1024, 1536, 2048, 3072, 4096, 5120, 6144, 8192, 12288, 16384});
    add_transformer(v, {1024, 16384}, {1024, 2048, 4096, 8192});
    add_attention(v, {1024, 2048}, {128}, 64);
    return v;
  }
  if (dt == "tf32" || dt == "fp32") {
    add_squares(v, {256, 512, 768, 1024, 1536, 2048, 3072, 4096, 5120, 6144, 8192});
    add_transformer(v, {4096}, {1024, 2048, 4096});
    return v;
  }
  // fp8: all dimensions multiples of 16, cuBLAS TN layout only.
  add_squares(v, {512, 768, 1024, 1536, 2048, 3072, 4096, 5120, 6144, 8192, 12288, 16384});
  add_transformer(v, {1024, 4096, 16384}, {1024, 2048, 4096, 8192});
  v.push_back({16384, 50304, 4096, 1, "fwd", "logits", 0});
  v.push_back({16384, 32000, 4096, 1, "fwd", "logits", 0});
  for (long long s : {2048LL, 4096LL, 8192LL, 16384LL}) v.push_back({s, s, s, 1, "fwd", "square", 1});
  add_transformer(v, {16384}, {4096});
  for (size_t i = v.size() - 4; i < v.size(); ++i) v[i].fast_accum = 1;
  return v;
}

struct Buffers {
  void* a = nullptr;  // cuBLAS "A" = our B operand
  void* b = nullptr;  // cuBLAS "B" = our A operand
  void* c = nullptr;
  size_t a_bytes = 0, b_bytes = 0, c_bytes = 0;
};

const char* op_name(cublasOperation_t o) { return o == CUBLAS_OP_N ? "N" : "T"; }

// Datasheet dense peaks (TFLOP/s) for reference only; empty when unknown.
std::map<std::string, double> datasheet_peaks(const std::string& gpu_name) {
  std::map<std::string, double> p;
  bool h100_sxm = gpu_name.find("H100") != std::string::npos &&
                  (gpu_name.find("HBM3") != std::string::npos ||
                   gpu_name.find("SXM") != std::string::npos);
  bool h200 = gpu_name.find("H200") != std::string::npos;
  if (h100_sxm || h200) {
    p["bf16"] = 989.4;
    p["fp16"] = 989.4;
    p["tf32"] = 494.7;
    p["fp32"] = 66.9;
    p["fp8"] = 1978.9;
  }
  return p;
}

}  // namespace

void run_gemm_section(const Options& opt, const DeviceInfo& dev, cudaStream_t stream, Json& j,
                      Summary& sum) {
  std::vector<std::string> dtypes = {"bf16", "fp16", "tf32", "fp32", "fp8"};
  const size_t workspace_bytes = 32ull << 20;

  cublasLtHandle_t lt;
  CUBLAS_CHECK(cublasLtCreate(&lt));
  void* workspace = nullptr;
  CUDA_CHECK(cudaMalloc(&workspace, workspace_bytes));

  // Size the buffers for the largest problem of any dtype.
  std::map<std::string, std::vector<GemmShape>> all_shapes;
  Buffers buf;
  for (const auto& dt : dtypes) {
    GemmType ty = make_type(dt);
    all_shapes[dt] = shapes_for(dt, opt.quick);
    for (const auto& s : all_shapes[dt]) {
      size_t ab = dtype_size(ty.ab_fill), cd = dtype_size(ty.cd_fill);
      buf.a_bytes = std::max(buf.a_bytes, static_cast<size_t>(s.n * s.k * s.batch) * ab);
      buf.b_bytes = std::max(buf.b_bytes, static_cast<size_t>(s.k * s.m * s.batch) * ab);
      buf.c_bytes = std::max(buf.c_bytes, static_cast<size_t>(s.m * s.n * s.batch) * cd);
    }
  }
  CUDA_CHECK(cudaMalloc(&buf.a, buf.a_bytes));
  CUDA_CHECK(cudaMalloc(&buf.b, buf.b_bytes));
  CUDA_CHECK(cudaMalloc(&buf.c, buf.c_bytes));

  auto peaks = datasheet_peaks(dev.prop.name);

  j.begin_obj();
  j.kv_str("library", "cublasLt");
  j.kv_str("algorithm_selection", "cublasLtMatmulAlgoGetHeuristic, top-1 result");
  j.kv_int("workspace_bytes", static_cast<long long>(workspace_bytes));
  j.kv_str("inputs", "uniform random in [-1, 1] (hash-based init), alpha = 1, beta = 0");
  j.kv_str("convention",
           "row-major out[m,n] = A[m,k] . B[k,n]; fwd = X.W^T (cuBLAS TN), dgrad = dY.W (NN), "
           "wgrad = dY^T.X (NT); cuBLAS M=n, N=m, K=k; flop = 2*m*n*k*batch");
  j.kv_str("timing_method",
           "CUDA events; 2 warm-up calls; median over samples; a sample is `inner` back-to-back "
           "calls (captured in a CUDA graph when inner > 1), time per call = sample / inner");
  j.key("datasheet_dense_peak_tflops").begin_obj();
  for (const auto& kv : peaks) j.kv_num(kv.first, kv.second);
  j.end_obj();
  j.key("results").begin_arr();

  std::vector<std::string> skipped;
  std::map<std::string, std::vector<double>> tflops_by_dtype;
  std::map<std::string, std::pair<double, std::string>> best_by_dtype;

  TimingConfig tc;
  tc.target_sample_s = 1.0e-3;
  tc.budget_s = opt.quick ? 0.015 : 0.1;
  tc.min_samples = opt.quick ? 3 : 10;
  tc.max_samples = 50;
  tc.max_inner = 1000;

  for (const auto& dt : dtypes) {
    GemmType ty = make_type(dt);
    if (ty.fp8 && dev.cc < 89) {
      skipped.push_back("fp8: needs compute capability >= 8.9 (device has " +
                        std::to_string(dev.cc) + ")");
      continue;
    }
    const auto& shapes = all_shapes[dt];
    // Fill operands for this dtype.
    size_t na = 0, nb = 0, nc = 0;
    for (const auto& s : shapes) {
      na = std::max(na, static_cast<size_t>(s.n * s.k * s.batch));
      nb = std::max(nb, static_cast<size_t>(s.k * s.m * s.batch));
      nc = std::max(nc, static_cast<size_t>(s.m * s.n * s.batch));
    }
    fill_uniform(buf.a, ty.ab_fill, na, 0x1234ULL + dt.size(), -1.f, 1.f, stream);
    fill_uniform(buf.b, ty.ab_fill, nb, 0x5678ULL + dt.size(), -1.f, 1.f, stream);
    fill_uniform(buf.c, ty.cd_fill, nc, 0x9abcULL + dt.size(), -1.f, 1.f, stream);
    CUDA_CHECK(cudaStreamSynchronize(stream));

    int n_ok = 0, n_skip = 0;
    for (const auto& s : shapes) {
      bool a_trans = (s.layout == "wgrad");
      bool b_trans = (s.layout == "fwd");
      cublasOperation_t ta = b_trans ? CUBLAS_OP_T : CUBLAS_OP_N;
      cublasOperation_t tb = a_trans ? CUBLAS_OP_T : CUBLAS_OP_N;
      uint64_t M = static_cast<uint64_t>(s.n), N = static_cast<uint64_t>(s.m),
               K = static_cast<uint64_t>(s.k);
      uint64_t rowsA = (ta == CUBLAS_OP_N) ? M : K, colsA = (ta == CUBLAS_OP_N) ? K : M;
      uint64_t rowsB = (tb == CUBLAS_OP_N) ? K : N, colsB = (tb == CUBLAS_OP_N) ? N : K;

      cublasLtMatmulDesc_t op;
      CUBLAS_CHECK(cublasLtMatmulDescCreate(&op, ty.compute, ty.scale));
      CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)));
      CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)));
      if (ty.fp8) {
        int8_t fa = static_cast<int8_t>(s.fast_accum);
        CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_FAST_ACCUM, &fa, sizeof(fa)));
      }
      cublasLtMatrixLayout_t la, lb, lc;
      CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&la, ty.ab, rowsA, colsA, static_cast<int64_t>(rowsA)));
      CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&lb, ty.ab, rowsB, colsB, static_cast<int64_t>(rowsB)));
      CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&lc, ty.cd, M, N, static_cast<int64_t>(M)));
      if (s.batch > 1) {
        int32_t bc = s.batch;
        int64_t sa = static_cast<int64_t>(rowsA * colsA), sb = static_cast<int64_t>(rowsB * colsB),
                sc = static_cast<int64_t>(M * N);
        CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(la, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &bc, sizeof(bc)));
        CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(lb, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &bc, sizeof(bc)));
        CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(lc, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &bc, sizeof(bc)));
        CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(la, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &sa, sizeof(sa)));
        CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(lb, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &sb, sizeof(sb)));
        CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(lc, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &sc, sizeof(sc)));
      }
      cublasLtMatmulPreference_t pref;
      CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
      uint64_t ws = workspace_bytes;
      CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws)));

      cublasLtMatmulHeuristicResult_t heur;
      std::memset(&heur, 0, sizeof(heur));
      int returned = 0;
      cublasStatus_t hst = cublasLtMatmulAlgoGetHeuristic(lt, op, la, lb, lc, lc, pref, 1, &heur, &returned);

      const float alpha = 1.0f, beta = 0.0f;
      std::string note;
      bool ok = (hst == CUBLAS_STATUS_SUCCESS && returned > 0);
      if (!ok) {
        note = std::string("no cuBLASLt algorithm: ") + cublasGetStatusName(hst);
      }
      LaunchFn fn = [&](cudaStream_t st) -> int {
        cublasStatus_t r = cublasLtMatmul(lt, op, &alpha, buf.a, la, buf.b, lb, &beta, buf.c, lc,
                                          buf.c, lc, &heur.algo, workspace, workspace_bytes, st);
        return r == CUBLAS_STATUS_SUCCESS ? 0 : static_cast<int>(r);
      };
      if (ok) {
        int rc = fn(stream);  // soft trial call: an unsupported combination is skipped, not fatal
        if (rc != 0) {
          ok = false;
          note = std::string("cublasLtMatmul failed: ") +
                 cublasGetStatusName(static_cast<cublasStatus_t>(rc));
        }
        CUDA_CHECK(cudaStreamSynchronize(stream));
      }

      double flop = 2.0 * static_cast<double>(s.m) * s.n * s.k * s.batch;
      j.begin_obj();
      j.kv_str("dtype", dt);
      j.kv_int("m", s.m).kv_int("n", s.n).kv_int("k", s.k).kv_int("batch", s.batch);
      j.kv_str("layout", s.layout).kv_str("transa", op_name(ta)).kv_str("transb", op_name(tb));
      j.kv_str("tag", s.tag);
      if (ty.fp8) j.kv_int("fast_accum", s.fast_accum);
      j.kv_num("flop", flop);
      if (ok) {
        Timing t = time_op(stream, fn, tc);
        write_timing(j, t);
        double tf = flop / t.median_s / 1e12;
        j.kv_num("tflops", tf);
        j.kv_num("tflops_best", flop / t.min_s / 1e12);
        j.kv_int("algo_workspace_bytes", static_cast<long long>(heur.workspaceSize));
        if (s.fast_accum == 0) {
          tflops_by_dtype[dt].push_back(tf);
          auto& best = best_by_dtype[dt];
          if (tf > best.first)
            best = {tf, fmt("m=%lld n=%lld k=%lld b=%d %s", s.m, s.n, s.k, s.batch, s.layout.c_str())};
        } else {
          auto& best = best_by_dtype[dt + "_fast_accum"];
          if (tf > best.first)
            best = {tf, fmt("m=%lld n=%lld k=%lld b=%d %s", s.m, s.n, s.k, s.batch, s.layout.c_str())};
        }
        ++n_ok;
      } else {
        j.kv_bool("skipped", true);
        j.kv_str("note", note);
        ++n_skip;
      }
      j.end_obj();

      CUBLAS_CHECK(cublasLtMatmulPreferenceDestroy(pref));
      CUBLAS_CHECK(cublasLtMatrixLayoutDestroy(la));
      CUBLAS_CHECK(cublasLtMatrixLayoutDestroy(lb));
      CUBLAS_CHECK(cublasLtMatrixLayoutDestroy(lc));
      CUBLAS_CHECK(cublasLtMatmulDescDestroy(op));
    }
    std::fprintf(stderr, "[gemm] %s: %d shapes measured, %d skipped\n", dt.c_str(), n_ok, n_skip);
    if (n_skip > 0) skipped.push_back(dt + ": " + std::to_string(n_skip) + " shape(s) skipped");
  }
  j.end_arr();

  j.key("skipped").begin_arr();
  for (const auto& s : skipped) j.str(s);
  j.end_arr();

  // Per-dtype summary.
  j.key("summary").begin_obj();
  for (const auto& kv : best_by_dtype) {
    const std::string& dt = kv.first;
    j.key(dt).begin_obj();
    j.kv_num("peak_tflops", kv.second.first);
    j.kv_str("peak_shape", kv.second.second);
    auto it = tflops_by_dtype.find(dt);
    if (it != tflops_by_dtype.end()) {
      j.kv_num("median_tflops", median_of(it->second));
      j.kv_int("shapes", static_cast<long long>(it->second.size()));
    }
    auto p = peaks.find(dt);
    if (p != peaks.end()) {
      j.kv_num("peak_fraction_of_datasheet", kv.second.first / p->second);
      if (it != tflops_by_dtype.end())
        j.kv_num("median_fraction_of_datasheet", median_of(it->second) / p->second);
    }
    j.end_obj();
    std::string line = fmt("GEMM %-15s peak %7.1f TFLOP/s (%s)", dt.c_str(), kv.second.first,
                           kv.second.second.c_str());
    if (it != tflops_by_dtype.end())
      line += fmt(", median over %zu shapes %6.1f", it->second.size(), median_of(it->second));
    if (p != peaks.end()) line += fmt(", peak = %.0f%% of datasheet", 100.0 * kv.second.first / p->second);
    sum.add(line);
  }
  j.end_obj();
  j.end_obj();
  for (const auto& s : skipped) sum.add("GEMM skipped: " + s);

  CUDA_CHECK(cudaFree(buf.a));
  CUDA_CHECK(cudaFree(buf.b));
  CUDA_CHECK(cudaFree(buf.c));
  CUDA_CHECK(cudaFree(workspace));
  CUBLAS_CHECK(cublasLtDestroy(lt));
}

}  // namespace mb
