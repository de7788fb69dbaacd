// What a plugin can say about a compiled program and about itself, for the
// profiler: XLA's cost analysis and the plugin's extensions.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "runtime/runtime.h"

namespace tt::runtime {

// XLA's cost analysis of `exe` (PJRT_Executable_GetCostAnalysis): its numeric
// properties, such as "flops" and "bytes accessed"; empty where the plugin
// gives none. Asks the plugin on every call (it may analyse the program
// anew): callers keep the answer.
std::vector<std::pair<std::string, double>> CostAnalysis(const Executable& exe);
// CostAnalysis(exe)'s "flops", or -1 where the plugin gives none.
double Flops(const Executable& exe);

// The PJRT_Extension_Type of each extension the loaded plugin offers
// (1: XLA's profiler, PJRT_Profiler_Extension).
std::vector<int> PluginExtensions();

}  // namespace tt::runtime
