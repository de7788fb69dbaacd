// XLA options a program is compiled with beyond the plugin's defaults. No PyTorch.
#pragma once

#include <string>

namespace tt::runtime {

// Set per compile: they reach XLA as CompileOptionsProto.env_option_overrides
// (field 7, a map of DebugOptions field name to value), which PJRT applies
// over the plugin's default DebugOptions (the route jax.jit's
// compiler_options take). A value left at XLA's default is not sent, so the
// options bytes, and the persistent cache keys, of a default compile stay as
// they were.
struct CompileOverrides {
  bool allow_excess_precision = true;  // xla_allow_excess_precision (XLA's default: true)
  int optimization_level = -1;         // xla_backend_optimization_level; -1: the plugin's default

  bool is_default() const { return allow_excess_precision && optimization_level < 0; }
  // A short tag for in-memory program cache keys: "" for the defaults.
  std::string key() const {
    std::string k = allow_excess_precision ? "" : "|strict-rounding";
    if (optimization_level >= 0) k += "|O" + std::to_string(optimization_level);
    return k;
  }
  // The serialized env_option_overrides entries ("" for the defaults), to be
  // appended to a serialized CompileOptionsProto.
  std::string serialized() const;
};

// The process-wide overrides new programs compile with (torch.backends.tpu).
CompileOverrides CurrentCompileOverrides();
void SetAllowExcessPrecision(bool allow);
// -1 (the plugin's default) or 0..3; Error (invalid argument) otherwise.
void SetOptimizationLevel(int level);

}  // namespace tt::runtime
