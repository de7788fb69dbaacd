// SHA-256 (FIPS 180-4): the compile cache's key and checksum. Incremental:
// Update() any number of times, then Final() once.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

namespace tt::runtime {

using Digest = std::array<uint8_t, 32>;

class Sha256 {
 public:
  Sha256();
  void Update(const void* data, size_t n);
  void Update(const std::string& s) { Update(s.data(), s.size()); }
  Digest Final();

  static Digest Of(const void* data, size_t n) {
    Sha256 h;
    h.Update(data, n);
    return h.Final();
  }
  static Digest Of(const std::string& s) { return Of(s.data(), s.size()); }

 private:
  void Block(const uint8_t* p);  // one 64-byte block
  uint32_t h_[8];
  uint8_t buf_[64];
  size_t buf_len_ = 0;
  uint64_t total_ = 0;  // bytes
};

// Lower-case hexadecimal.
std::string ToHex(const Digest& d);

}  // namespace tt::runtime
