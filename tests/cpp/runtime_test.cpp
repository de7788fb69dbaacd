// tt_runtime tests against a real PJRT plugin (the CPU plugin by default).
// A plain main(): prints "N passed, M failed", exits nonzero on failure.
//
//   TORCH_TPU_PLUGIN_SEARCH_PATH=<site-packages> ./tt_runtime_test
// (defaults to the site-packages CMake found; TORCH_TPU_NUM_DEVICES defaults
// to 2 here so the second-device paths run.)
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <map>
#include <mutex>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "runtime/kv_store.h"
#include "runtime/pjrt_abi.h"
#include "runtime/runtime.h"
#include "settings/settings.h"
#include "test_support.h"

using namespace tt::runtime;


// Runs `body`, expecting an Error; returns it (code -1 if none was thrown).
template <class F>
static Error ExpectError(F body) {
  try {
    body();
  } catch (const Error& e) {
    return e;
  } catch (const std::exception& e) {
    return Error(-2, std::string("non-runtime exception: ") + e.what());
  }
  return Error(-1, "no error thrown");
}



static const char* kEmpty =
    "module {\n"
    "  func.func public @main(%a: tensor<0x3xf32>) -> tensor<0x3xf32> {\n"
    "    %0 = stablehlo.add %a, %a : tensor<0x3xf32>\n"
    "    return %0 : tensor<0x3xf32>\n"
    "  }\n"
    "}\n";

static const char* kTwoOutputs =
    "module {\n"
    "  func.func public @main(%a: tensor<2x3xf32>) -> (tensor<2x3xf32>, tensor<3xi32>) {\n"
    "    %0 = stablehlo.multiply %a, %a : tensor<2x3xf32>\n"
    "    %1 = stablehlo.iota dim = 0 : tensor<3xi32>\n"
    "    return %0, %1 : tensor<2x3xf32>, tensor<3xi32>\n"
    "  }\n"
    "}\n";

// ---- key-value store callbacks (kv_store.h), called through the C ABI as a
// plugin calls them; errors come back through the stand-in below.
class MapStore : public KeyValueStore {
 public:
  std::string Get(const std::string& key, std::chrono::milliseconds timeout) override {
    std::unique_lock<std::mutex> lock(mu_);
    if (!cv_.wait_for(lock, timeout, [&] { return map_.count(key) > 0; }))
      throw KeyValueTimeout("no '" + key + "' in the map");
    return map_[key];
  }
  bool TryGet(const std::string& key, std::string* value) override {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = map_.find(key);
    if (it == map_.end()) return false;
    *value = it->second;
    return true;
  }
  void Put(const std::string& key, const std::string& value) override {
    if (key == "broken") throw std::runtime_error("store is down");
    std::lock_guard<std::mutex> lock(mu_);
    map_[key] = value;
    cv_.notify_all();
  }
 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, std::string> map_;
};

struct TestError {
  int code;
  std::string message;
};
static PJRT_Error* MakeTestError(PJRT_Error_Code code, const char* message, size_t size) {
  return reinterpret_cast<PJRT_Error*>(new TestError{static_cast<int>(code), std::string(message, size)});
}
static int TakeError(PJRT_Error* err, std::string* message) {
  if (!err) return 0;
  std::unique_ptr<TestError> e(reinterpret_cast<TestError*>(err));
  *message = e->message;
  return e->code;
}

static void TestKeyValueCallbacks() {
  MapStore store;
  PJRT_Client_Create_Args cc{};
  detail::SetKeyValueCallbacks(&cc, &store);
  PJRT_CallbackError make_error = &MakeTestError;
  std::string msg;

  PJRT_KeyValuePutCallback_Args put{};
  put.struct_size = PJRT_KeyValuePutCallback_Args_STRUCT_SIZE;
  put.key = "k";
  put.key_size = 1;
  put.value = "v\0w";
  put.value_size = 3;
  put.callback_error = &make_error;
  put.user_arg = cc.kv_put_user_arg;
  CHECK(TakeError(cc.kv_put_callback(&put), &msg) == 0);

  PJRT_KeyValueGetCallback_Args get{};
  get.struct_size = PJRT_KeyValueGetCallback_Args_STRUCT_SIZE;
  get.key = "k";
  get.key_size = 1;
  get.timeout_in_ms = 1000;
  get.callback_error = &make_error;
  get.user_arg = cc.kv_get_user_arg;
  CHECK(TakeError(cc.kv_get_callback(&get), &msg) == 0);
  CHECK(std::string(get.value, get.value_size) == std::string("v\0w", 3) && get.value_deleter_callback);
  if (get.value_deleter_callback) get.value_deleter_callback(get.value);

  get.key = "missing";
  get.key_size = 7;
  get.timeout_in_ms = 50;
  get.value = nullptr;
  CHECK(TakeError(cc.kv_get_callback(&get), &msg) == 4 && Contains(msg, "'missing' not set within 50 ms"));

  PJRT_KeyValueTryGetCallback_Args tg{};
  tg.struct_size = PJRT_KeyValueTryGetCallback_Args_STRUCT_SIZE;
  tg.key = "missing";
  tg.key_size = 7;
  tg.callback_error = &make_error;
  tg.user_arg = cc.kv_try_get_user_arg;
  CHECK(TakeError(cc.kv_try_get_callback(&tg), &msg) == 5 && Contains(msg, "'missing' is not set"));
  tg.key = "k";
  tg.key_size = 1;
  CHECK(TakeError(cc.kv_try_get_callback(&tg), &msg) == 0 && tg.value_size == 3);
  if (tg.value_deleter_callback) tg.value_deleter_callback(tg.value);

  put.key = "broken";
  put.key_size = 6;
  CHECK(TakeError(cc.kv_put_callback(&put), &msg) == 14 && Contains(msg, "store is down") &&
        Contains(msg, "'broken'"));
}

int main() {
  if (!tt::settings::Raw(tt::settings::Id::TORCH_TPU_PLUGIN_SEARCH_PATH) && std::strlen(TT_TEST_SITE_PACKAGES) > 0)
    setenv("TORCH_TPU_PLUGIN_SEARCH_PATH", TT_TEST_SITE_PACKAGES, 0);
  setenv("TORCH_TPU_NUM_DEVICES", "2", 0);

  // ---- element types
  CHECK(element_size(ElementType::F32) == 4);
  CHECK(element_size(ElementType::BF16) == 2);
  CHECK(element_size(ElementType::C128) == 16);
  CHECK(std::string(element_name(ElementType::S64)) == "s64");

  // ---- loader refusals are Errors, not crashes
  {
    Error e = ExpectError([] { LoadPluginForTest("/nonexistent/plugin.so"); });
    std::printf("missing plugin: [%d] %s\n", e.code(), e.what());
    CHECK(e.code() == 5);
    CHECK(Contains(e.what(), "/nonexistent/plugin.so"));
  }
  {
    const char* path = "/tmp/tt_runtime_test_not_a_plugin.so";
    std::ofstream(path) << "this is not an ELF file\n";
    Error e = ExpectError([&] { LoadPluginForTest(path); });
    std::printf("not a plugin: [%d] %s\n", e.code(), e.what());
    CHECK(e.code() == 9);
    CHECK(Contains(e.what(), path));
    std::remove(path);
  }
  {
    // A plugin older than the minimum, one of another major, one whose
    // function table is empty: each refused with the versions and a remedy.
    setenv("TT_FAKE_PJRT_VERSION", "0.50", 1);
    Error e = ExpectError([] { LoadPluginForTest(TT_FAKE_PLUGIN); });
    std::printf("old plugin: [%d] %s\n", e.code(), e.what());
    CHECK(e.code() == 9);
    CHECK(Contains(e.what(), TT_FAKE_PLUGIN) && Contains(e.what(), "0.50") && Contains(e.what(), "0.114"));
    setenv("TT_FAKE_PJRT_VERSION", "1.3", 1);
    e = ExpectError([] { LoadPluginForTest(TT_FAKE_PLUGIN); });
    CHECK(e.code() == 9 && Contains(e.what(), "1.3") && Contains(e.what(), "major"));
    setenv("TT_FAKE_PJRT_VERSION", "0.114", 1);
    e = ExpectError([] { LoadPluginForTest(TT_FAKE_PLUGIN); });
    std::printf("empty table: [%d] %.160s\n", e.code(), e.what());
    CHECK(e.code() == 9 && Contains(e.what(), "lacks PJRT_Error_Destroy"));
    unsetenv("TT_FAKE_PJRT_VERSION");
  }
  CHECK(!Runtime::IsInitialized());

  TestKeyValueCallbacks();
  // The client below is created with a registered store: the CPU plugin
  // accepts the callbacks (and does not call them); later registration fails.
  SetClientKeyValueStore(std::make_shared<MapStore>());
  CHECK(!ClientCreatedWithKeyValueStore());

  // ---- the runtime
  Runtime* rtp = nullptr;
  try {
    rtp = &Runtime::Get();
  } catch (const Error& e) {
    std::fprintf(stderr, "Runtime::Get failed: [%d] %s\n", e.code(), e.what());
    std::printf("%d passed, %d failed\n", g_pass, g_fail + 1);
    return 1;
  }
  Runtime& rt = *rtp;
  try {
    CHECK(Runtime::IsInitialized());
    CHECK(ClientCreatedWithKeyValueStore());
    Error late = ExpectError([] { SetClientKeyValueStore(nullptr); });
    CHECK(late.code() == 9 && Contains(late.what(), "already been started"));
    const PluginInfo& info = rt.info();
    std::printf("plugin %s\n  platform %s, reason: %s\n  API %d.%d (header %d.%d)\n  %s %s\n",
                info.path.c_str(), info.platform.c_str(), info.reason.c_str(), info.api_major,
                info.api_minor, info.header_major, info.header_minor, info.platform_name.c_str(),
                info.platform_version.c_str());
    for (const auto& a : info.attributes) std::printf("  attribute %s = %s\n", a.first.c_str(), a.second.c_str());
    CHECK(info.header_major == 0 && info.header_minor == 114);
    CHECK(info.api_major == 0);
    CHECK(!info.platform_name.empty());
    CHECK(rt.device_count() >= 1);
    for (int d = 0; d < rt.device_count(); ++d)
      std::printf("  device %d: kind '%s', '%s', capacity %lld\n", d, rt.device_kind(d).c_str(),
                  rt.device_description(d).c_str(), static_cast<long long>(rt.memory_capacity(d)));
    if (info.platform == "cpu") CHECK(rt.device_count() == tt::settings::Int(tt::settings::Id::TORCH_TPU_NUM_DEVICES));
    CHECK(rt.memory_capacity(0) > 0);
    CHECK(ExpectError([&] { rt.live_bytes(rt.device_count()); }).code() == 3);

    // A second Get() returns the same runtime.
    CHECK(&Runtime::Get() == &rt);
    // The loader hook on the plugin in use does not re-initialise it.
    CHECK(LoadPluginForTest(info.path).api_minor == info.api_minor);

    const int64_t base0 = rt.live_bytes(0), nbase0 = rt.live_buffers(0);
    const int ndev = rt.device_count();
    const int64_t base1 = ndev > 1 ? rt.live_bytes(1) : 0;
    {
      // ---- upload / download
      const float a[4] = {1, 2, 3, 4}, b[4] = {10, 20, 30, 40};
      BufferPtr ba = rt.FromHost(a, ElementType::F32, {4}, 0);
      BufferPtr bb = rt.FromHost(b, ElementType::F32, {4}, 0);
      CHECK(ba->nbytes() == 16 && ba->numel() == 4 && ba->device() == 0);
      CHECK(rt.live_bytes(0) == base0 + 32);
      CHECK(rt.live_buffers(0) == nbase0 + 2);
      CHECK(rt.peak_bytes(0) >= base0 + 32);
      float back[4] = {0};
      ba->ToHost(back, sizeof(back));
      CHECK(std::memcmp(back, a, sizeof(a)) == 0);
      CHECK(ExpectError([&] { ba->ToHost(back, 8); }).code() == 3);

      // ---- asynchronous upload: the host owner is released once the
      // plugin is done reading it, and the values arrive intact.
      {
        auto host = std::make_shared<std::vector<float>>(1 << 22);
        for (size_t i = 0; i < host->size(); ++i) (*host)[i] = static_cast<float>(i % 1000);
        std::weak_ptr<std::vector<float>> watch = host;
        const float* p = host->data();
        BufferPtr big = rt.FromHostAsync(p, ElementType::F32, {int64_t{1} << 22}, 0, std::move(host));
        CHECK(big->nbytes() == (size_t{4} << 22));
        std::vector<float> back(size_t{1} << 22);
        big->ToHost(back.data(), back.size() * 4);
        CHECK(back[0] == 0 && back[999] == 999 && back[1000] == 0 && back.back() == static_cast<float>(((1 << 22) - 1) % 1000));
        for (int i = 0; i < 500 && !watch.expired(); ++i) usleep(10000);
        CHECK(watch.expired());
      }

      // ---- aliased upload: on the CPU plugin the buffer uses the host
      // memory itself, so its owner lives exactly as long as the buffer;
      // elsewhere it is a copy and the owner is released at once.
      {
        constexpr size_t kN = size_t{1} << 20;
        std::shared_ptr<float> host(static_cast<float*>(std::aligned_alloc(64, kN * 4)), &std::free);
        for (size_t i = 0; i < kN; ++i) host.get()[i] = static_cast<float>(i % 777);
        std::weak_ptr<float> watch = host;
        const float* p = host.get();
        BufferPtr aliased = rt.FromHostAliased(p, ElementType::F32, {int64_t{1} << 20}, 0, std::move(host));
        std::vector<float> back(kN);
        aliased->ToHost(back.data(), back.size() * 4);
        CHECK(back[0] == 0 && back[776] == 776 && back[777] == 0);
        CHECK(rt.can_alias_host() == (rt.info().platform == "cpu"));
        // The CPU plugin's bytes are this process's: here, the host memory itself.
        if (rt.info().platform == "cpu") CHECK(aliased->HostAddress() == p);
        else CHECK(aliased->HostAddress() == nullptr);
        if (rt.can_alias_host()) {
          usleep(20000);
          CHECK(!watch.expired());  // still the buffer's memory
        }
        aliased.reset();
        for (int i = 0; i < 500 && !watch.expired(); ++i) usleep(10000);
        CHECK(watch.expired());
      }

      // ---- compile + execute on device 0
      ExecutablePtr add = rt.Compile(kAdd);
      CHECK(add->num_outputs() == 1);
      auto outs = add->Execute({ba.get(), bb.get()}, 0);
      CHECK(outs.size() == 1);
      CHECK(outs[0]->type() == ElementType::F32);
      CHECK(outs[0]->dims() == std::vector<int64_t>{4});
      CHECK(outs[0]->device() == 0);
      outs[0]->BlockUntilReady();
      float sum[4] = {0};
      outs[0]->ToHost(sum, sizeof(sum));
      CHECK(sum[0] == 11 && sum[1] == 22 && sum[2] == 33 && sum[3] == 44);
      if (rt.info().platform == "cpu") {  // a program's result, read in place
        const float* at = static_cast<const float*>(outs[0]->HostAddress());
        CHECK(at && std::memcmp(at, sum, sizeof(sum)) == 0);
        const float* up = static_cast<const float*>(ba->HostAddress());
        CHECK(up && std::memcmp(up, a, sizeof(a)) == 0);
      }
      CHECK(rt.live_bytes(0) == base0 + 48);

      // ---- a buffer's ready event: OnReady reports completion (once, with no
      // error), and the event stays usable after the buffer is gone.
      {
        auto pending = add->Execute({ba.get(), bb.get()}, 0);
        std::unique_ptr<Event> ready = pending[0]->ReadyEvent();
        pending.clear();
        auto calls = std::make_shared<std::atomic<int>>(0);
        auto error = std::make_shared<std::string>("unset");
        ready->OnReady([calls, error](const std::string& err) {
          *error = err;
          calls->fetch_add(1);
        });
        ready->Await();
        for (int i = 0; i < 500 && calls->load() == 0; ++i) usleep(1000);
        CHECK(calls->load() == 1 && error->empty());
        CHECK(ready->IsReady());
        int late = 0;
        ready->OnReady([&late](const std::string&) { ++late; });  // ready already: runs at once
        CHECK(late == 1);
      }

      // ---- the same (portable) executable on device 1
      if (ndev > 1) {
        BufferPtr ca = rt.CopyToDevice(*ba, 1);
        BufferPtr cb = rt.FromHost(b, ElementType::F32, {4}, 1);
        CHECK(ca->device() == 1);
        CHECK(rt.live_bytes(1) == base1 + 32);
        auto o1 = add->Execute({ca.get(), cb.get()}, 1);
        CHECK(o1.size() == 1 && o1[0]->device() == 1);
        float s1[4] = {0};
        o1[0]->ToHost(s1, sizeof(s1));
        CHECK(s1[0] == 11 && s1[3] == 44);
        // Arguments on the wrong device are refused with a clear error.
        Error e = ExpectError([&] { add->Execute({ba.get(), cb.get()}, 1); });
        CHECK(e.code() == 3 && Contains(e.what(), "tpu:0"));
        CHECK(ExpectError([&] { rt.CopyToDevice(*ca, 1); }).code() == 3);
      } else {
        std::printf("(only one device: skipping device-1 checks)\n");
      }
      // Bad device index / wrong argument count.
      CHECK(ExpectError([&] { add->Execute({ba.get(), bb.get()}, ndev); }).code() == 3);
      Error argc = ExpectError([&] { add->Execute({ba.get()}, 0); });
      std::printf("wrong arg count: [%d] %s\n", argc.code(), argc.what());
      CHECK(argc.code() > 0);

      // ---- multiple outputs of different types
      ExecutablePtr two = rt.Compile(kTwoOutputs);
      CHECK(two->num_outputs() == 2);
      const float m[6] = {1, 2, 3, 4, 5, 6};
      BufferPtr bm = rt.FromHost(m, ElementType::F32, {2, 3}, 0);
      auto o2 = two->Execute({bm.get()}, 0);
      CHECK(o2.size() == 2);
      CHECK(o2[0]->type() == ElementType::F32 && o2[0]->dims() == (std::vector<int64_t>{2, 3}));
      CHECK(o2[1]->type() == ElementType::S32 && o2[1]->dims() == std::vector<int64_t>{3});
      float sq[6];
      int32_t io[3];
      o2[0]->ToHost(sq, sizeof(sq));
      o2[1]->ToHost(io, sizeof(io));
      CHECK(sq[5] == 36 && io[0] == 0 && io[2] == 2);

      // ---- invalid MLIR: an Error with a code and a message
      Error bad = ExpectError([&] { rt.Compile("module { this is not mlir }"); });
      std::printf("invalid MLIR: [%d] %.200s\n", bad.code(), bad.what());
      CHECK(bad.code() > 0);
      CHECK(std::strlen(bad.what()) > 0);
      Error badtype = ExpectError([&] {
        rt.Compile("module { func.func public @main(%a: tensor<4xf32>) -> tensor<4xi32> {\n"
                   "  return %a : tensor<4xf32> } }");
      });
      CHECK(badtype.code() > 0);

      // ---- 0-element buffers
      BufferPtr z = rt.FromHost(nullptr, ElementType::F32, {0, 3}, 0);
      CHECK(z->numel() == 0 && z->nbytes() == 0);
      z->ToHost(nullptr, 0);
      z->BlockUntilReady();
      ExecutablePtr ez = rt.Compile(kEmpty);
      auto oz = ez->Execute({z.get()}, 0);
      CHECK(oz.size() == 1 && oz[0]->dims() == (std::vector<int64_t>{0, 3}));
      oz[0]->ToHost(nullptr, 0);
      BufferPtr scalar = rt.FromHost(a, ElementType::F32, {}, 0);
      CHECK(scalar->numel() == 1 && scalar->nbytes() == 4);
      float sv = 0;
      scalar->ToHost(&sv, 4);
      CHECK(sv == 1.0f);

      // ---- out of memory is a code-8 Error, before anything is allocated
      Error oom = ExpectError([&] { rt.FromHost(nullptr, ElementType::U8, {int64_t{1} << 50}, 0); });
      std::printf("oom: [%d] %s\n", oom.code(), oom.what());
      CHECK(oom.code() == 8 && oom.out_of_memory());
      CHECK(Contains(oom.what(), "out of memory on tpu:0: tried to allocate 1125899906842624 bytes"));
      CHECK(ExpectError([&] { rt.FromHost(a, ElementType::Invalid, {4}, 0); }).code() == 3);
      CHECK(ExpectError([&] { rt.FromHost(a, ElementType::F32, {-1}, 0); }).code() == 3);
    }
    // ---- every buffer released: accounting back to baseline
    CHECK(rt.live_bytes(0) == base0);
    CHECK(rt.live_buffers(0) == nbase0);
    if (ndev > 1) CHECK(rt.live_bytes(1) == base1);
    rt.reset_peak(0);
    CHECK(rt.peak_bytes(0) == base0);
  } catch (const Error& e) {
    ++g_fail;
    std::fprintf(stderr, "FAIL: unexpected Error [%d]: %s\n", e.code(), e.what());
  }

  std::printf("%d passed, %d failed\n", g_pass, g_fail);
  return g_fail ? 1 : 0;
}
