// safetensors header: arbitrary bytes as a whole file (8-byte length, JSON
// header, data). Anything but a clean ingot::Error is a finding.
#include <cstddef>
#include <cstdint>
#include <map>

#include "io/safetensors.h"
#include "util/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::map<std::string, std::string> meta;
  size_t data_start = 0;
  try {
    auto infos = ingot::SafetensorsFile::parse_header(data, size, &meta, &data_start);
    // Accepted headers must describe ranges inside the file.
    for (const auto& t : infos)
      if (t.begin > t.end || data_start + t.end > size) __builtin_trap();
  } catch (const ingot::Error&) {
  }
  return 0;
}
