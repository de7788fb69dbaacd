#include "backend/distributed/pjrt_store.h"

#include <torch/csrc/utils/pybind.h>

#include <string>
#include <tuple>
#include <vector>

#include "runtime/pjrt_abi.h"
#include "runtime/runtime.h"

namespace py = pybind11;

namespace tt::backend::dist {

std::string C10dKeyValueStore::Get(const std::string& key, std::chrono::milliseconds timeout) {
  // c10d reads a zero timeout as "wait forever"; PJRT means "now".
  if (timeout <= std::chrono::milliseconds::zero()) {
    std::string value;
    if (TryGet(key, &value)) return value;
    throw runtime::KeyValueTimeout("c10d store has no key '" + key + "'");
  }
  try {
    store_->wait({key}, timeout);
  } catch (const c10::DistStoreError& e) {
    if (!store_->check({key})) throw runtime::KeyValueTimeout(e.what_without_backtrace());
    throw;
  }
  auto bytes = store_->get(key);
  return std::string(bytes.begin(), bytes.end());
}

bool C10dKeyValueStore::TryGet(const std::string& key, std::string* value) {
  if (!store_->check({key})) return false;
  auto bytes = store_->get(key);
  value->assign(bytes.begin(), bytes.end());
  return true;
}

void C10dKeyValueStore::Put(const std::string& key, const std::string& value) {
  store_->set(key, std::vector<uint8_t>(value.begin(), value.end()));
}

namespace {

// What the probe's stand-in for the plugin's error constructor makes: PJRT_Error
// is opaque to the callbacks, which only hand back what callback_error made.
struct ProbeError {
  int code;
  std::string message;
};

PJRT_Error* MakeProbeError(PJRT_Error_Code code, const char* message, size_t size) {
  return reinterpret_cast<PJRT_Error*>(new ProbeError{static_cast<int>(code), std::string(message, size)});
}

// (0, value) or (PJRT error code, message) of one callback's result.
template <class Args>
std::tuple<int, std::string> Result(PJRT_Error* err, Args* args) {
  if (err != nullptr) {
    std::unique_ptr<ProbeError> e(reinterpret_cast<ProbeError*>(err));
    return {e->code, e->message};
  }
  std::string value(args->value, args->value_size);
  args->value_deleter_callback(args->value);
  return {0, value};
}

// Calls the kv callbacks PJRT_Client_Create would get for the registered
// store, through the C ABI, as a plugin does: op is "get", "try_get" or "put".
std::tuple<int, std::string> Probe(const std::string& op, const std::string& key, const std::string& value,
                                   int timeout_ms) {
  auto store = runtime::ClientKeyValueStore();
  if (!store) throw py::value_error("no PJRT key-value store is registered");
  PJRT_Client_Create_Args cc{};
  runtime::detail::SetKeyValueCallbacks(&cc, store.get());
  PJRT_CallbackError make_error = &MakeProbeError;
  if (op == "get") {
    PJRT_KeyValueGetCallback_Args a{};
    a.struct_size = PJRT_KeyValueGetCallback_Args_STRUCT_SIZE;
    a.key = key.data();
    a.key_size = key.size();
    a.timeout_in_ms = timeout_ms;
    a.callback_error = &make_error;
    a.user_arg = cc.kv_get_user_arg;
    return Result(cc.kv_get_callback(&a), &a);
  }
  if (op == "try_get") {
    PJRT_KeyValueTryGetCallback_Args a{};
    a.struct_size = PJRT_KeyValueTryGetCallback_Args_STRUCT_SIZE;
    a.key = key.data();
    a.key_size = key.size();
    a.callback_error = &make_error;
    a.user_arg = cc.kv_try_get_user_arg;
    return Result(cc.kv_try_get_callback(&a), &a);
  }
  if (op == "put") {
    PJRT_KeyValuePutCallback_Args a{};
    a.struct_size = PJRT_KeyValuePutCallback_Args_STRUCT_SIZE;
    a.key = key.data();
    a.key_size = key.size();
    a.value = value.data();
    a.value_size = value.size();
    a.callback_error = &make_error;
    a.user_arg = cc.kv_put_user_arg;
    PJRT_Error* err = cc.kv_put_callback(&a);
    if (err == nullptr) return {0, ""};
    std::unique_ptr<ProbeError> e(reinterpret_cast<ProbeError*>(err));
    return {e->code, e->message};
  }
  throw py::value_error("op must be 'get', 'try_get' or 'put', not '" + op + "'");
}

}  // namespace

void bind_pjrt_store(py::module& m) {
  m.def(
      "_set_pjrt_kv_store",
      [](c10::intrusive_ptr<c10d::Store> store) {
        std::shared_ptr<runtime::KeyValueStore> kv;
        if (store) kv = std::make_shared<C10dKeyValueStore>(std::move(store));
        try {
          runtime::SetClientKeyValueStore(std::move(kv));
        } catch (const runtime::Error& e) {
          throw std::runtime_error(e.what());  // RuntimeError
        }
      },
      py::arg("store").none(true));
  m.def("_pjrt_kv_store_registered", [] { return runtime::ClientKeyValueStore() != nullptr; });
  m.def("_pjrt_client_has_kv_store", &runtime::ClientCreatedWithKeyValueStore);
  m.def(
      "_pjrt_kv_probe",
      [](const std::string& op, const std::string& key, const std::string& value, int timeout_ms) {
        if (op != "get" && op != "try_get" && op != "put")
          throw py::value_error("op must be 'get', 'try_get' or 'put', not '" + op + "'");
        py::gil_scoped_release no_gil;  // a Python-implemented store takes the GIL itself
        return Probe(op, key, value, timeout_ms);
      },
      py::arg("op"), py::arg("key"), py::arg("value") = "", py::arg("timeout_ms") = 0);
}

}  // namespace tt::backend::dist
