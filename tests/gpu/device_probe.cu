// The GPU script's device probe (tests/gpu/run.sh, step preflight): proves,
// before the build, that this machine's driver runs a kernel that this CUDA
// toolkit compiled. It prints the CUDA version the driver supports beside the
// runtime's (the toolkit the build will use), then runs one kernel that
// writes out[i] = 3 i + 1 for i < 2^20 (uint32, [2^20]), reads the buffer
// back and checks every element, so each value is known without a reference.
// Exit status 0 when all of that worked, 1 with the reason otherwise: no
// driver, a driver older than the toolkit, no device, no kernel image for the
// device, or values other than the ones written.
//   nvcc -O2 -arch=native -o device_probe tests/gpu/device_probe.cu
// It is built by nvcc alone, not by the project's CMake build, because it must
// answer before that build is tried. Its runtime is linked statically (nvcc's
// default), so it needs no library path.
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <vector>

namespace {

constexpr int64_t kElements = int64_t{1} << 20;

__global__ void fill_affine(int64_t n, uint32_t* out) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) out[i] = 3u * static_cast<uint32_t>(i) + 1u;
}

// CUDA versions are 1000 * major + 10 * minor.
void print_version(const char* what, int version) {
  if (version == 0) {
    std::printf("device probe: %s: none\n", what);
  } else {
    std::printf("device probe: %s: CUDA %d.%d\n", what, version / 1000, version % 1000 / 10);
  }
}

// Prints the failed call and, when the driver is older than the runtime, the
// likely cause; true when err is an error.
bool failed(cudaError_t err, const char* call, int driver, int runtime) {
  if (err == cudaSuccess) return false;
  std::printf("device probe: FAILED: %s: %s (%s)\n", call, cudaGetErrorName(err), cudaGetErrorString(err));
  if (driver < runtime) {
    std::printf(
        "device probe: the driver supports CUDA %d.%d, older than this toolkit's %d.%d: update the "
        "driver or build with a toolkit no newer than the driver\n",
        driver / 1000, driver % 1000 / 10, runtime / 1000, runtime % 1000 / 10);
  }
  if (err == cudaErrorNoKernelImageForDevice) {
    std::printf("device probe: the probe was compiled for another architecture than this device's\n");
  }
  return true;
}

}  // namespace

int main() {
  int driver = 0, runtime = 0;
  // Without a driver, cudaDriverGetVersion reports 0; the probe says so below.
  (void)cudaDriverGetVersion(&driver);
  (void)cudaRuntimeGetVersion(&runtime);
  print_version("driver supports", driver);
  print_version("runtime (toolkit)", runtime);
  if (driver == 0) {
    std::printf("device probe: FAILED: no NVIDIA driver (libcuda) was found\n");
    return 1;
  }
  int count = 0;
  if (failed(cudaGetDeviceCount(&count), "cudaGetDeviceCount", driver, runtime)) return 1;
  cudaDeviceProp prop{};
  if (failed(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties", driver, runtime)) return 1;
  std::printf("device probe: %d device(s); device 0: %s, compute capability %d.%d, %.1f GiB\n", count, prop.name,
              prop.major, prop.minor, static_cast<double>(prop.totalGlobalMem) / (1 << 30));

  const size_t bytes = kElements * sizeof(uint32_t);
  uint32_t* out = nullptr;
  if (failed(cudaMalloc(&out, bytes), "cudaMalloc", driver, runtime)) return 1;
  const int threads = 256;
  fill_affine<<<static_cast<unsigned>((kElements + threads - 1) / threads), threads>>>(kElements, out);
  if (failed(cudaGetLastError(), "kernel launch", driver, runtime)) return 1;
  std::vector<uint32_t> host(kElements, 0);
  if (failed(cudaMemcpy(host.data(), out, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy to the host", driver, runtime)) {
    return 1;
  }
  (void)cudaFree(out);

  int64_t wrong = 0, first_wrong = -1;
  for (int64_t i = 0; i < kElements; ++i) {
    if (host[i] != 3u * static_cast<uint32_t>(i) + 1u) {
      if (wrong++ == 0) first_wrong = i;
    }
  }
  if (wrong > 0) {
    std::printf("device probe: FAILED: %lld of %lld values differ from 3 i + 1; the first at i = %lld holds %u\n",
                static_cast<long long>(wrong), static_cast<long long>(kElements), static_cast<long long>(first_wrong),
                host[first_wrong]);
    return 1;
  }
  std::printf("device probe: ok: a kernel wrote %lld values on device 0 and every one was read back as written\n",
              static_cast<long long>(kElements));
  return 0;
}
