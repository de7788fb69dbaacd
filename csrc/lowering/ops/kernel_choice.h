// Kernels written outside the lowering rules (torch_tpu/kernels: JAX's Pallas
// TPU kernels, registered as external ops) that a rule may take in place of
// its XLA lowering, and whether they are for the plugin in use.
#pragma once

#include <functional>

namespace tt::lowering {

// Called once, at the first automatic choice: registers the kernels if they
// are for this plugin (a TPU's) and returns whether it did. Without a loader
// no automatic choice takes a kernel.
using KernelLoader = std::function<bool()>;
void set_kernel_loader(KernelLoader loader);
bool kernels_for_plugin();

// A rule's choice between its XLA lowering and its kernel: Auto takes the
// kernel where kernels_for_plugin() and the call fits it; Kernel takes it
// wherever the call fits (tests and benchmarks: the kernel through Pallas'
// interpret lowering off TPU).
enum class KernelChoice { Auto = 0, Xla = 1, Kernel = 2 };
KernelChoice grouped_mm_choice();
void set_grouped_mm_choice(KernelChoice choice);

}  // namespace tt::lowering
