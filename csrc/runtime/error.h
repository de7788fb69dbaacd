// The one exception type of the runtime layer.
#pragma once

#include <stdexcept>
#include <string>

namespace tt::runtime {

// A PJRT error (or a loader refusal). `code` is PJRT_Error_Code (absl status
// numbering: 3 invalid argument, 8 resource exhausted, 12 unimplemented, ...);
// loader problems use code 5 (not found) or 9 (failed precondition).
class Error : public std::runtime_error {
 public:
  Error(int code, const std::string& message)
      : std::runtime_error(message), code_(code) {}
  int code() const { return code_; }
  bool out_of_memory() const { return code_ == 8; }
 private:
  int code_;
};

}  // namespace tt::runtime
