#include "runtime/cuda_module.h"

#include <dlfcn.h>

#include <filesystem>
#include <system_error>

namespace ingot::runtime {

namespace {

constexpr const char* kModuleName = "libingot_cuda.so";
constexpr int kAbi = 3;  // src/runtime/cuda_module_entry.cpp

void* open_module(std::string& error) {
  std::error_code ec;
  const auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    const auto beside = exe.parent_path() / kModuleName;
    if (std::filesystem::exists(beside, ec)) {
      if (void* h = dlopen(beside.c_str(), RTLD_NOW | RTLD_LOCAL)) return h;
      const char* e = dlerror();
      error = e ? e : "dlopen failed";
      return nullptr;
    }
  }
  if (void* h = dlopen(kModuleName, RTLD_NOW | RTLD_LOCAL)) return h;
  const char* e = dlerror();
  error = e ? e : "dlopen failed";
  return nullptr;
}

template <typename F>
bool bind(void* h, const char* name, F& out, std::string& error) {
  out = reinterpret_cast<F>(dlsym(h, name));
  if (!out) error = std::string("missing entry point ") + name;
  return out != nullptr;
}

CudaModule load() {
  CudaModule m;
  void* h = open_module(m.error);
  if (!h) return m;
  int (*abi)() = nullptr;
  if (!bind(h, "ingot_cuda_module_abi", abi, m.error)) return m;
  if (abi() != kAbi) {
    m.error = std::string(kModuleName) + " is from another ingot build";
    return m;
  }
  if (!bind(h, "ingot_cuda_module_available", m.available, m.error) ||
      !bind(h, "ingot_cuda_module_plugin", m.plugin, m.error) ||
      !bind(h, "ingot_cuda_module_total_memory", m.total_memory, m.error))
    return m;
  m.loaded = true;
  return m;
}

}  // namespace

const CudaModule& cuda_module() {
  static const CudaModule m = load();
  return m;
}

}  // namespace ingot::runtime
