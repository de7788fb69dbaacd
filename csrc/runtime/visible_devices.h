// TPU_VISIBLE_DEVICES: which of the plugin's devices this process uses. No PyTorch.
#pragma once

#include <string>
#include <vector>

namespace tt::runtime {

// `spec` is TPU_VISIBLE_DEVICES: comma-separated indices into the plugin's
// addressable devices; the process sees those, renumbered from 0 in the
// order listed (as CUDA_VISIBLE_DEVICES does). Empty: all devices. When the
// plugin already reports exactly as many devices as listed, it applied the
// list itself (libtpu reads the TPU variables) and its devices are kept as
// they are. Throws Error (invalid argument) naming the variable for a
// malformed list, an index out of range or an index given twice.
std::vector<void*> SelectVisibleDevices(const std::vector<void*>& devices, const std::string& spec);

}  // namespace tt::runtime
