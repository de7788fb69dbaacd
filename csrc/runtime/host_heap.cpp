#include "runtime/host_heap.h"

#include "settings/settings.h"

#include <atomic>
#include <climits>
#include <cstdlib>
#include <cstring>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace tt::runtime {
namespace {
std::atomic<bool> g_kept{false};
}  // namespace

bool KeepHostHeap() {
#if defined(__GLIBC__)
  if (settings::Enum(settings::Id::TORCH_TPU_HOST_HEAP) == "release") return false;
  // No block goes to mmap (a request the heap cannot grow for still falls
  // back to it), and the heap top is never trimmed after a free. Threads
  // that have no arena yet (XLA's) share the main one: another thread's
  // arena grows in heaps of at most 64 MiB, so a larger block would be
  // mmapped whatever the settings.
  bool ok = mallopt(M_MMAP_MAX, 0) == 1;
  ok = mallopt(M_ARENA_MAX, 1) == 1 && ok;
  ok = mallopt(M_TRIM_THRESHOLD, INT_MAX) == 1 && ok;
  g_kept.store(ok);
  return ok;
#else
  return false;
#endif
}

void ReleaseHostHeap() {
#if defined(__GLIBC__)
  malloc_trim(0);
#endif
}

bool HostHeapKept() { return g_kept.load(); }

}  // namespace tt::runtime
