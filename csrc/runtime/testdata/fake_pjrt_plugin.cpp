// Test-only fake PJRT plugin: GetPjrtApi returns a table with no functions and
// the version given by TT_FAKE_PJRT_VERSION ("major.minor", default 0.50), so
// tests can exercise the loader's refusals without an old real plugin.
#include <cstdio>
#include <cstdlib>

#include "runtime/pjrt_abi.h"

extern "C" __attribute__((visibility("default"))) const PJRT_Api* GetPjrtApi() {
  static PJRT_Api api;
  int major = 0, minor = 50;
  if (const char* v = std::getenv("TT_FAKE_PJRT_VERSION")) std::sscanf(v, "%d.%d", &major, &minor);
  api.struct_size = sizeof(PJRT_Api);  // header only: no function slots
  api.extension_start = nullptr;
  api.pjrt_api_version.struct_size = PJRT_Api_Version_STRUCT_SIZE;
  api.pjrt_api_version.major_version = major;
  api.pjrt_api_version.minor_version = minor;
  return &api;
}
