// StableHLO builder tests: each builds a small module, compiles it through the
// PJRT plugin and checks the numbers. Prints "N passed, N failed".
#include <cmath>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "hlo/builder.h"
#include "runtime/runtime.h"

using namespace tt;
using hlo::Builder;
using hlo::DType;
using hlo::Type;
using hlo::Value;
using hlo::Values;

static int g_passed = 0, g_failed = 0;

#define CHECK(...)                                                       \
  do {                                                                   \
    if (!(__VA_ARGS__)) {                                                \
      std::printf("  CHECK failed at line %d: %s\n", __LINE__, #__VA_ARGS__); \
      throw std::runtime_error("check failed");                         \
    }                                                                    \
  } while (0)

static void run_test(const char* name, const std::function<void()>& f) {
  try {
    f();
    ++g_passed;
    std::printf("PASS %s\n", name);
  } catch (const std::exception& e) {
    ++g_failed;
    std::printf("FAIL %s: %s\n", name, e.what());
  }
}

// Compiles `b`, runs it on float inputs, returns the first output as floats.
static std::vector<float> run_f32(Builder& b, const std::vector<std::vector<float>>& inputs,
                                  const std::vector<std::vector<int64_t>>& dims) {
  auto& rt = runtime::Runtime::Get();
  auto exe = rt.Compile(b.module_text());
  std::vector<runtime::BufferPtr> bufs;
  std::vector<runtime::Buffer*> raw;
  for (size_t i = 0; i < inputs.size(); ++i) {
    bufs.push_back(rt.FromHost(inputs[i].data(), runtime::ElementType::F32, dims[i], 0));
    raw.push_back(bufs.back().get());
  }
  auto outs = exe->Execute(raw, 0);
  std::vector<float> r(outs.at(0)->numel());
  outs[0]->ToHost(r.data(), r.size() * sizeof(float));
  return r;
}

static bool near(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (std::fabs(a[i] - b[i]) > 1e-5f * (1 + std::fabs(b[i]))) return false;
  return true;
}

int main() {
  run_test("add_function and func.call (an external module's functions)", [] {
    Builder b;
    Value x = b.param(Type{DType::F32, {3}});
    // Pretty-form text, as JAX prints it; added twice, emitted once.
    const std::string fn =
        "func.func private @ext_main(%arg0: tensor<3xf32>) -> tensor<3xf32> {\n"
        "  %0 = call @ext_twice(%arg0) : (tensor<3xf32>) -> tensor<3xf32>\n"
        "  %1 = stablehlo.add %0, %arg0 : tensor<3xf32>\n"
        "  return %1 : tensor<3xf32>\n}\n"
        "func.func private @ext_twice(%arg0: tensor<3xf32>) -> tensor<3xf32> {\n"
        "  %0 = stablehlo.add %arg0, %arg0 : tensor<3xf32>\n"
        "  return %0 : tensor<3xf32>\n}";
    b.add_function("ext_main", fn);
    Value y = b.call("ext_main", {x}, {Type{DType::F32, {3}}}).at(0);
    b.add_function("ext_main", fn);
    Value z = b.call("ext_main", {y}, {Type{DType::F32, {3}}}).at(0);
    b.set_results({z});
    CHECK(near(run_f32(b, {{1, 2, 3}}, {{3}}), {9, 18, 27}));
    bool refused = false;
    try {
      b.call("not_added", {x}, {Type{DType::F32, {3}}});
    } catch (const hlo::BuildError&) {
      refused = true;
    }
    CHECK(refused);
  });
  run_test("elementwise and constants", [] {
    Builder b;
    Value x = b.param(Type{DType::F32, {3}});
    Value y = b.add(b.mul(x, b.constant(2.0, DType::F32, {3})), b.constant(0.5, DType::F32, {3}));
    b.set_results({y});
    CHECK(near(run_f32(b, {{1, 2, 3}}, {{3}}), {2.5f, 4.5f, 6.5f}));
  });
  run_test("broadcast, transpose and reshape", [] {
    Builder b;
    Value x = b.param(Type{DType::F32, {2, 3}});
    Value row = b.param(Type{DType::F32, {3}});
    Value s = b.add(x, b.broadcast_to(row, {2, 3}));
    Value t = b.reshape(b.transpose(s, {1, 0}), {6});
    b.set_results({t});
    CHECK(near(run_f32(b, {{1, 2, 3, 4, 5, 6}, {10, 20, 30}}, {{2, 3}, {3}}),
               {11, 14, 22, 25, 33, 36}));
  });
  run_test("reduce sum and max", [] {
    Builder b;
    Value x = b.param(Type{DType::F32, {2, 3}});
    Value s = b.reduce(x, b.constant(0, DType::F32), {1}, "stablehlo.add");
    Value m = b.reduce(x, b.constant(-INFINITY, DType::F32), {0}, "stablehlo.maximum");
    b.set_results({b.concatenate({s, m}, 0)});
    CHECK(near(run_f32(b, {{1, 5, 3, 4, 2, 6}}, {{2, 3}}), {9, 12, 4, 5, 6}));
  });
  run_test("compare and select", [] {
    Builder b;
    Value x = b.param(Type{DType::F32, {4}});
    Value zero = b.constant(0, DType::F32, {4});
    b.set_results({b.select(b.compare(x, zero, hlo::Cmp::GT), x, zero)});
    CHECK(near(run_f32(b, {{-1, 2, -3, 4}}, {{4}}), {0, 2, 0, 4}));
  });
  run_test("dot_general (matmul)", [] {
    Builder b;
    Value x = b.param(Type{DType::F32, {2, 2}});
    Value y = b.param(Type{DType::F32, {2, 2}});
    b.set_results({b.dot_general(x, y, {}, {}, {1}, {0}, DType::F32)});
    CHECK(near(run_f32(b, {{1, 2, 3, 4}, {5, 6, 7, 8}}, {{2, 2}, {2, 2}}), {19, 22, 43, 50}));
  });
  run_test("slice, pad, iota, convert", [] {
    Builder b;
    Value x = b.param(Type{DType::F32, {5}});
    Value s = b.slice(x, {1}, {5}, {2});  // elements 1, 3
    Value p = b.pad(s, b.constant(9, DType::F32), {1}, {0}, {1});  // 9, x1, 9, x3
    Value i = b.convert(b.iota(Type{DType::S32, {4}}, 0), DType::F32);
    b.set_results({b.add(p, i)});
    CHECK(near(run_f32(b, {{0, 1, 2, 3, 4}}, {{5}}), {9, 2, 11, 6}));
  });
  run_test("gather and scatter", [] {
    Builder b;
    Value x = b.param(Type{DType::F32, {4}});
    Value idx = b.convert(b.constant_int(0, DType::S64, {2}), DType::S64);
    // indices [3, 1]
    Value three = b.constant_int(3, DType::S64, {1}), one = b.constant_int(1, DType::S64, {1});
    idx = b.concatenate({three, one}, 0);
    hlo::Builder::GatherDims g;
    g.collapsed_slice_dims = {0};
    g.start_index_map = {0};
    g.index_vector_dim = 1;
    Value got = b.gather(x, idx, g, {1}, {2});  // x[3], x[1]
    hlo::Builder::ScatterDims s;
    s.inserted_window_dims = {0};
    s.scatter_dims_to_operand_dims = {0};
    s.index_vector_dim = 1;
    Value upd = b.scatter(x, idx, got, s, [](Builder& bb, const Values& a) { return Values{bb.add(a[0], a[1])}; });
    b.set_results({upd});
    CHECK(near(run_f32(b, {{1, 2, 3, 4}}, {{4}}), {1, 4, 3, 8}));
  });
  run_test("sort with a comparator", [] {
    Builder b;
    Value x = b.param(Type{DType::F32, {4}});
    Values r = b.sort({x}, 0, true, [](Builder& bb, const Values& a) {
      return Values{bb.compare(a[0], a[1], hlo::Cmp::LT, true)};
    });
    b.set_results({r[0]});
    CHECK(near(run_f32(b, {{3, 1, 4, 2}}, {{4}}), {1, 2, 3, 4}));
  });
  run_test("while loop (doubles until above 10)", [] {
    Builder b;
    Value x = b.param(Type{DType::F32, {2}});
    Values r = b.while_loop({x, b.constant_int(0, DType::S32)},
        [](Builder& bb, const Values& s) {
          return Values{bb.compare(s[1], bb.constant_int(3, DType::S32), hlo::Cmp::LT)};
        },
        [](Builder& bb, const Values& s) {
          return Values{bb.add(s[0], s[0]), bb.add(s[1], bb.constant_int(1, DType::S32))};
        });
    b.set_results({r[0]});
    CHECK(near(run_f32(b, {{1, 2}}, {{2}}), {8, 16}));
  });
  run_test("reduce_window (max pool)", [] {
    Builder b;
    Value x = b.param(Type{DType::F32, {1, 4}});
    Values r = b.reduce_window({x}, {b.constant(-INFINITY, DType::F32)}, {1, 2}, {1, 2}, {1, 1}, {1, 1},
                               {{0, 0}, {0, 0}}, [](Builder& bb, const Values& a) {
                                 return Values{bb.max(a[0], a[1])};
                               });
    b.set_results({r[0]});
    CHECK(near(run_f32(b, {{1, 5, 3, 2}}, {{1, 4}}), {5, 3}));
  });
  run_test("convolution (1d)", [] {
    Builder b;
    Value x = b.param(Type{DType::F32, {1, 1, 4}});
    Value w = b.param(Type{DType::F32, {1, 1, 2}});
    hlo::Builder::ConvDims dn{0, 1, {2}, 0, 1, {2}, 0, 1, {2}};
    b.set_results({b.convolution(x, w, {1, 1, 3}, dn, {1}, {{0, 0}}, {1}, {1}, 1, 1, DType::F32)});
    CHECK(near(run_f32(b, {{1, 2, 3, 4}, {1, -1}}, {{1, 1, 4}, {1, 1, 2}}), {-1, -1, -1}));
  });
  run_test("chlo.erf is accepted", [] {
    Builder b;
    Value x = b.param(Type{DType::F32, {2}});
    b.set_results({b.unary("chlo.erf", x)});
    auto r = run_f32(b, {{0, 1}}, {{2}});
    CHECK(std::fabs(r[0]) < 1e-6 && std::fabs(r[1] - 0.8427008f) < 1e-5);
  });
  run_test("complex: assemble, multiply, magnitude, parts", [] {
    Builder b;
    Value re = b.param(Type{DType::F32, {2}});
    Value im = b.param(Type{DType::F32, {2}});
    Value z = b.complex(re, im);
    CHECK(z.type.str() == "tensor<2xcomplex<f32>>");
    Value sq = b.mul(z, z);                        // |z^2| = |z|^2
    Value mag = b.abs(sq);
    CHECK(mag.dtype() == DType::F32);
    Value back = b.add(b.real(z), b.imag(b.convert(b.constant(2, DType::F32, {2}), DType::C64)));
    b.set_results({b.add(mag, back)});             // imag of a real-made complex is 0
    CHECK(near(run_f32(b, {{3, 0}, {4, 1}}, {{2}, {2}}), {28, 1}));
  });
  run_test("empty and 0-d types print", [] {
    CHECK(Type{DType::F32, {}}.str() == "tensor<f32>");
    CHECK(Type{DType::BF16, {0, 3}}.str() == "tensor<0x3xbf16>");
    CHECK(Type{DType::U8, {2}}.str() == "tensor<2xui8>");
  });
  run_test("mismatched operands raise BuildError", [] {
    Builder b;
    Value x = b.param(Type{DType::F32, {2}});
    Value y = b.param(Type{DType::F32, {3}});
    bool threw = false;
    try {
      b.add(x, y);
    } catch (const hlo::BuildError&) {
      threw = true;
    }
    CHECK(threw);
  });
  run_test("collectives over 2 replicas (CompileReplicated, ExecuteReplicated)", [] {
    auto& rt = runtime::Runtime::Get();
    CHECK(rt.device_count() >= 2);
    // all_reduce / all_gather cross-replica, then with a channel_handle
    // (cross-replica-and-partition, the same with one partition).
    for (int64_t channel : {0, 1}) {
      Builder b;
      b.set_num_replicas(2);
      Value x = b.param(Type{DType::F32, {2}});
      Value sum = b.all_reduce(x, "stablehlo.add", {{0, 1}}, channel);
      Value gathered = b.all_gather(x, 0, {{0, 1}}, channel);
      // With a channel handle, collective_permute's pairs name partitions
      // (SPMD, num_partitions = N), so a replica program leaves it out.
      Value swapped = b.collective_permute(x, {{0, 1}, {1, 0}});
      b.set_results({b.concatenate({sum, gathered, swapped}, 0)});
      std::string text = b.module_text();
      CHECK(text.find("mhlo.num_replicas = 2") != std::string::npos);
      CHECK((text.find("#stablehlo.channel_handle<handle = 1, type = 1>") != std::string::npos) == (channel > 0));
      auto exe = rt.CompileReplicated(text, {0, 1});
      std::vector<float> in0{1, 2}, in1{10, 20};
      auto a0 = rt.FromHost(in0.data(), runtime::ElementType::F32, {2}, 0);
      auto a1 = rt.FromHost(in1.data(), runtime::ElementType::F32, {2}, 1);
      auto outs = exe->ExecuteReplicated({{a0.get()}, {a1.get()}});
      CHECK(outs.size() == 2 && outs[0].size() == 1 && outs[1][0]->device() == 1);
      std::vector<float> r0(8), r1(8);
      outs[0][0]->ToHost(r0.data(), r0.size() * sizeof(float));
      outs[1][0]->ToHost(r1.data(), r1.size() * sizeof(float));
      CHECK(near(r0, {11, 22, 1, 2, 10, 20, 10, 20}));
      CHECK(near(r1, {11, 22, 1, 2, 10, 20, 1, 2}));
      bool threw = false;
      try {
        exe->ExecuteReplicated({{a1.get()}, {a0.get()}});  // arguments on the wrong devices
      } catch (const runtime::Error&) {
        threw = true;
      }
      CHECK(threw);
    }
    Builder b;
    b.set_num_replicas(2);
    Value x = b.param(Type{DType::F32, {3}});
    for (auto bad : {Builder::Groups{{0, 2}}, Builder::Groups{{0}, {1, 0}}, Builder::Groups{}}) {
      bool threw = false;
      try {
        b.all_reduce(x, "stablehlo.add", bad);
      } catch (const hlo::BuildError&) {
        threw = true;
      }
      CHECK(threw);
    }
    bool threw = false;
    try {
      b.reduce_scatter(x, 0, "stablehlo.add", {{0, 1}});  // 3 does not divide by 2
    } catch (const hlo::BuildError&) {
      threw = true;
    }
    CHECK(threw);
  });
  std::printf("%d passed, %d failed\n", g_passed, g_failed);
  return g_failed == 0 ? 0 : 1;
}
