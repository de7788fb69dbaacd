// What the runtime-layer C++ tests share: a CHECK that counts instead of
// stopping (each binary prints "N passed, M failed" and exits non-zero on a
// failure), and the smallest StableHLO program they compile and run.
#pragma once

#include <cstdio>
#include <string>

static int g_pass = 0, g_fail = 0;
#define CHECK(cond)                                                         \
  do {                                                                      \
    if (cond) {                                                             \
      ++g_pass;                                                             \
    } else {                                                                \
      ++g_fail;                                                             \
      std::fprintf(stderr, "FAIL %s:%d: %s\n", __FILE__, __LINE__, #cond); \
    }                                                                       \
  } while (0)

static inline bool Contains(const std::string& s, const std::string& sub) { return s.find(sub) != std::string::npos; }

// main(%a, %b) = %a + %b over tensor<4xf32>.
static const char* kAdd =
    "module {\n"
    "  func.func public @main(%a: tensor<4xf32>, %b: tensor<4xf32>) -> tensor<4xf32> {\n"
    "    %0 = stablehlo.add %a, %b : tensor<4xf32>\n"
    "    return %0 : tensor<4xf32>\n"
    "  }\n"
    "}\n";
