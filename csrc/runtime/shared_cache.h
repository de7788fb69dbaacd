// The second tier of the persistent compile cache: a folder several hosts
// share. No PyTorch, no PJRT (opaque bytes under a key, as compile_cache.h).
//
// TORCH_TPU_SHARED_CACHE_DIR names it (a network file system or a bucket
// mount that every host of a job sees); unset, there is none. Read-through:
// a program missing from the local cache is looked up there, and an entry
// found and loaded is copied into the local cache. Write-back: a program
// compiled here is stored in both tiers. Entries have the local cache's
// format (a header holding the key, the payload size and its SHA-256), so a
// corrupt, truncated or mismatched shared entry is rejected, counted, and
// replaced by the next compile. No size cap is applied there: the folder's
// owner prunes it. Used only while the local cache is on.
#pragma once

#include "runtime/compile_cache.h"

namespace tt::runtime {

// The shared tier of this process (created on first use), or null when
// TORCH_TPU_SHARED_CACHE_DIR is unset or its folder cannot be used (a
// warning says so).
CompileCache* SharedCompileCache();

}  // namespace tt::runtime
