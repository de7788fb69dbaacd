#include "runtime/shared_cache.h"

#include "settings/settings.h"

#include <cstdint>
#include <cstdlib>
#include <limits>
#include <memory>

namespace tt::runtime {

CompileCache* SharedCompileCache() {
  static const std::unique_ptr<CompileCache> shared = []() -> std::unique_ptr<CompileCache> {
    const std::string dir = settings::Path(settings::Id::TORCH_TPU_SHARED_CACHE_DIR);
    if (dir.empty()) return nullptr;
    CompileCacheConfig c;
    c.enabled = true;
    c.dir = dir;
    while (c.dir.size() > 1 && c.dir.back() == '/') c.dir.pop_back();
    c.max_bytes = std::numeric_limits<int64_t>::max();
    c.source = "TORCH_TPU_SHARED_CACHE_DIR";
    auto cache = std::make_unique<CompileCache>(c);
    if (!cache->enabled()) return nullptr;  // the constructor warned
    return cache;
  }();
  return shared.get();
}

}  // namespace tt::runtime
