// TORCH_TPU_DUMP_DIR: the StableHLO and XLA's compiled form of every program. No PyTorch.
#pragma once

#include <string>

namespace tt::runtime {

// The folder named by TORCH_TPU_DUMP_DIR (read once), or "" when unset.
const std::string& DumpDir();

// Writes `mlir_text` to <DumpDir()>/<name>.stablehlo.mlir and returns the
// serialized CompileOptionsProto override that makes XLA dump its compiled
// form of the program (HLO before and after optimization) under
// <DumpDir()>/<name>/ (xla_dump_to). `name` identifies the program (the hex
// of its text's hash). A write error is reported once on stderr and never
// fails the compile.
std::string DumpProgram(const std::string& name, const std::string& mlir_text);

}  // namespace tt::runtime
