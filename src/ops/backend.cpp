#include "ops/backend.h"

#include "util/error.h"

namespace ingot {

namespace {
Backend* g_backends[2] = {nullptr, nullptr};
}

void register_backend(Device d, Backend* b) { g_backends[static_cast<int>(d)] = b; }

bool has_backend(Device d) { return g_backends[static_cast<int>(d)] != nullptr; }

Backend& backend(Device d) {
  Backend* b = g_backends[static_cast<int>(d)];
  if (!b) fail(ErrorKind::Unsupported, "device ", device_name(d), " is not available in this build");
  return *b;
}

}  // namespace ingot
