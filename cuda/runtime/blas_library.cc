#include "cuda/runtime/blas_library.h"

#include <dlfcn.h>

#include <cuda_runtime_api.h>

#include <future>
#include <mutex>
#include <string>

#include "core/error.h"

namespace seqtrans::cuda {
namespace {

#define SEQTRANS_STRINGIFY_EXPANDED(x) SEQTRANS_STRINGIFY(x)
#define SEQTRANS_STRINGIFY(x) #x

// The directory of the CUDA runtime this process loaded: the toolkit's libraries sit beside it when
// neither the loader's cache nor the library path knows them.
std::string cudart_directory() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<const void*>(&cudaGetDeviceCount), &info) == 0 || info.dli_fname == nullptr) return {};
  const std::string path = info.dli_fname;
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? std::string() : path.substr(0, slash + 1);
}

void* open_library(const std::string& stem) {
  const std::string name = stem + ".so." + std::to_string(CUBLAS_VER_MAJOR);
  for (const std::string& candidate : {name, cudart_directory() + name, stem + ".so"}) {
    if (void* handle = dlopen(candidate.c_str(), RTLD_NOW | RTLD_LOCAL)) return handle;
  }
  const char* reason = dlerror();
  throw Error(fmt::format("cannot open {} (cuBLAS, CUDA {}): {}", name, CUBLAS_VER_MAJOR,
                          reason != nullptr ? reason : "not found"));
}

template <typename Function>
void resolve(void* handle, const char* library, const char* symbol, Function& function) {
  function = reinterpret_cast<Function>(dlsym(handle, symbol));
  SEQTRANS_CHECK(function != nullptr, "{} has no {}: a cuBLAS older than CUDA {}?", library, symbol, CUBLAS_VER_MAJOR);
}

BlasLibrary open_blas() {
  BlasLibrary library;
  void* cublas = open_library("libcublas");
  void* lt = open_library("libcublasLt");
#define SEQTRANS_BLAS_RESOLVE(handle, name) \
  resolve(handle, #handle, SEQTRANS_STRINGIFY_EXPANDED(name), library.name);
  SEQTRANS_BLAS_FUNCTIONS(SEQTRANS_BLAS_RESOLVE)
#undef SEQTRANS_BLAS_RESOLVE
  resolve(cublas, "cublas", "cublasGemmEx", library.cublasGemmEx);
  return library;  // the handles stay open for the process's life
}

std::mutex& preload_mutex() {
  static std::mutex mutex;
  return mutex;
}

std::future<void>& preload() {
  static std::future<void> started;
  return started;
}

}  // namespace

const BlasLibrary& blas_library() {
  static const BlasLibrary library = open_blas();  // a failed open throws and is tried again next time
  return library;
}

void preload_blas_library() {
  std::lock_guard<std::mutex> lock(preload_mutex());
  if (preload().valid()) return;
  // What it throws stays in the future: the first real use opens again and reports it.
  preload() = std::async(std::launch::async, [] { blas_library(); });
}

}  // namespace seqtrans::cuda
