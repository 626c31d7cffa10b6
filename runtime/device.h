// Devices and streams. The CPU always exists; CUDA devices exist when the build
// has the CUDA backend and a driver and GPU are present. Asking for CUDA devices
// on a machine without them gives 0, never an error or a message.
#pragma once

#include <string>

namespace pf {

enum class DeviceKind { CPU, CUDA };

struct Device {
  DeviceKind kind = DeviceKind::CPU;
  int index = 0;

  static Device cpu() { return {DeviceKind::CPU, 0}; }
  static Device cuda(int i) { return {DeviceKind::CUDA, i}; }
  bool is_cpu() const { return kind == DeviceKind::CPU; }
  bool is_cuda() const { return kind == DeviceKind::CUDA; }
  bool operator==(const Device& o) const { return kind == o.kind && index == o.index; }
  bool operator!=(const Device& o) const { return !(*this == o); }
  std::string str() const;  // "cpu" or "cuda:N"
};

// True when this build contains the CUDA backend (nvcc was found at build time).
bool cuda_compiled();
// Number of usable CUDA devices: 0 without the backend, a driver, or a GPU.
int cuda_device_count();
// Why cuda_device_count() is 0, for one-line user messages ("" when GPUs exist).
std::string cuda_unavailable_reason();
// Compute capability as major * 10 + minor (70 for V100, 90 for H100); 0 for
// the CPU.
int compute_capability(Device device);
// Makes `device` current for this thread (no-op for the CPU).
void set_current_device(Device device);

// A stream of work on a device. On the CPU it is a no-op token: work runs
// synchronously. On CUDA it wraps a cudaStream_t (nullptr = default stream).
struct Stream {
  Device device = Device::cpu();
  void* handle = nullptr;
};

Stream create_stream(Device device);
void destroy_stream(Stream& stream);
void synchronize(const Stream& stream);

}  // namespace pf
