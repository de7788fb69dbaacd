#include "backend/device/pending_work.h"

#include <atomic>

namespace tt::backend::pending_work {
namespace {
std::atomic<FlushFn> g_flush{nullptr};
std::atomic<GenerationFn> g_generation{nullptr};
}  // namespace

void install(FlushFn flush, GenerationFn generation) {
  g_flush.store(flush);
  g_generation.store(generation);
}

void flush(const char* reason) {
  if (FlushFn f = g_flush.load()) f(reason);
}

uint64_t generation() {
  GenerationFn g = g_generation.load();
  return g ? g() : 0;
}

}  // namespace tt::backend::pending_work
