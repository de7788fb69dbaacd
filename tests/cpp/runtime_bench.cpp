// Micro-benchmarks of the runtime layer on whichever plugin is chosen
// (TORCH_TPU_PJRT_PLUGIN=/path to pick one):
//   client creation (Runtime::Get), compile of a tiny add, median
//   Execute+await of it, median FromHost of a 4-float buffer.
//   ./tt_runtime_bench [iterations]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "runtime/runtime.h"
#include "settings/settings.h"
#include "test_support.h"

using namespace tt::runtime;
using Clock = std::chrono::steady_clock;

static double Us(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::micro>(b - a).count();
}
static double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}
static double Pct(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[std::min(v.size() - 1, static_cast<size_t>(p * v.size()))];
}


int main(int argc, char** argv) {
  const int iters = argc > 1 ? std::atoi(argv[1]) : 1000;
  if (!tt::settings::Raw(tt::settings::Id::TORCH_TPU_PLUGIN_SEARCH_PATH) && std::strlen(TT_TEST_SITE_PACKAGES) > 0)
    setenv("TORCH_TPU_PLUGIN_SEARCH_PATH", TT_TEST_SITE_PACKAGES, 0);
  try {
    auto t0 = Clock::now();
    Runtime& rt = Runtime::Get();
    auto t1 = Clock::now();
    const PluginInfo& info = rt.info();
    std::printf("plugin: %s\n  API %d.%d, %s %s, %d device(s)\n", info.path.c_str(), info.api_major,
                info.api_minor, info.platform_name.c_str(), info.platform_version.c_str(), rt.device_count());
    for (const auto& a : info.attributes) std::printf("  attribute %s = %s\n", a.first.c_str(), a.second.c_str());
    std::printf("load+init+client: %.1f ms\n", Us(t0, t1) / 1000);

    auto c0 = Clock::now();
    ExecutablePtr add = rt.Compile(kAdd);
    auto c1 = Clock::now();
    std::printf("compile (first): %.2f ms\n", Us(c0, c1) / 1000);
    c0 = Clock::now();
    ExecutablePtr add2 = rt.Compile(kAdd);
    c1 = Clock::now();
    std::printf("compile (second): %.2f ms\n", Us(c0, c1) / 1000);

    const float a[4] = {1, 2, 3, 4};
    std::vector<double> h2d;
    h2d.reserve(iters);
    for (int i = 0; i < iters; ++i) {
      auto s = Clock::now();
      BufferPtr b = rt.FromHost(a, ElementType::F32, {4}, 0);
      h2d.push_back(Us(s, Clock::now()));
    }
    BufferPtr ba = rt.FromHost(a, ElementType::F32, {4}, 0);
    BufferPtr bb = rt.FromHost(a, ElementType::F32, {4}, 0);
    for (int i = 0; i < 20; ++i) add->Execute({ba.get(), bb.get()}, 0)[0]->BlockUntilReady();  // warm-up
    std::vector<double> ex, d2h;
    ex.reserve(iters);
    for (int i = 0; i < iters; ++i) {
      auto s = Clock::now();
      auto out = add->Execute({ba.get(), bb.get()}, 0);
      out[0]->BlockUntilReady();
      ex.push_back(Us(s, Clock::now()));
    }
    auto out = add->Execute({ba.get(), bb.get()}, 0);
    float host[4];
    for (int i = 0; i < iters; ++i) {
      auto s = Clock::now();
      out[0]->ToHost(host, sizeof(host));
      d2h.push_back(Us(s, Clock::now()));
    }
    std::printf("execute+await: median %.1f us (p90 %.1f) over %d\n", Median(ex), Pct(ex, 0.9), iters);
    std::printf("FromHost 4xf32: median %.1f us (p90 %.1f)\n", Median(h2d), Pct(h2d, 0.9));
    std::printf("ToHost 4xf32: median %.1f us (p90 %.1f)\n", Median(d2h), Pct(d2h, 0.9));
    std::printf("result %g %g %g %g\n", host[0], host[1], host[2], host[3]);
  } catch (const Error& e) {
    std::fprintf(stderr, "error [%d]: %s\n", e.code(), e.what());
    return 1;
  }
  return 0;
}
