#include "lowering/ops/kernel_choice.h"

#include <atomic>
#include <mutex>

namespace tt::lowering {
namespace {

std::mutex g_mu;
KernelLoader g_loader;
bool g_asked = false, g_for_plugin = false;
std::atomic<int> g_grouped_mm{static_cast<int>(KernelChoice::Auto)};

}  // namespace

void set_kernel_loader(KernelLoader loader) {
  std::lock_guard<std::mutex> lock(g_mu);
  g_loader = std::move(loader);
  g_asked = false;
  g_for_plugin = false;
}

// The loader runs Python (it takes the GIL): never call it under g_mu, or a
// thread holding the GIL and waiting for g_mu would deadlock with it. Two
// threads may both run it; registering twice is harmless.
bool kernels_for_plugin() {
  KernelLoader loader;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    if (g_asked || !g_loader) return g_for_plugin;
    loader = g_loader;
  }
  bool yes = loader();
  std::lock_guard<std::mutex> lock(g_mu);
  g_asked = true;
  g_for_plugin = yes;
  return yes;
}

KernelChoice grouped_mm_choice() { return static_cast<KernelChoice>(g_grouped_mm.load()); }
void set_grouped_mm_choice(KernelChoice choice) { g_grouped_mm = static_cast<int>(choice); }

}  // namespace tt::lowering
