// PJRT_Client_Create's key-value callbacks, served by the registered
// KeyValueStore. Each callback turns every failure into a PJRT_Error made by
// the plugin's callback_error (never lets an exception cross the C ABI):
// a timeout is DEADLINE_EXCEEDED, an absent key in try-get NOT_FOUND, any
// other store failure UNAVAILABLE, with the key and the store's message.
#include "runtime/kv_store.h"

#include <cstddef>
#include <cstring>
#include <mutex>

#include "runtime/pjrt_abi.h"
#include "runtime/error.h"

namespace tt::runtime {
namespace {

std::mutex g_mu;
std::shared_ptr<KeyValueStore> g_store;  // guarded by g_mu
bool g_client_starting = false;          // guarded by g_mu
bool g_client_has_store = false;         // guarded by g_mu

PJRT_Error* Fail(PJRT_CallbackError* make_error, PJRT_Error_Code code, const std::string& message) {
  if (make_error == nullptr || *make_error == nullptr) return nullptr;  // the plugin gave no way to report
  return (*make_error)(code, message.data(), message.size());
}

std::string KeyOf(const char* key, size_t size) { return std::string(key ? key : "", key ? size : 0); }

void DeleteValue(char* value) { delete[] value; }

// Hands `value` to the plugin as a new[] copy it frees with DeleteValue.
template <class Args>
void SetValue(Args* args, const std::string& value) {
  char* out = new char[value.size() + 1];
  std::memcpy(out, value.data(), value.size());
  out[value.size()] = '\0';
  args->value = out;
  args->value_size = value.size();
  args->value_deleter_callback = &DeleteValue;
}

KeyValueStore* StoreOf(void* user_arg) { return static_cast<KeyValueStore*>(user_arg); }

PJRT_Error* KvGet(PJRT_KeyValueGetCallback_Args* args) {
  const std::string key = KeyOf(args->key, args->key_size);
  try {
    auto timeout = std::chrono::milliseconds(args->timeout_in_ms < 0 ? 0 : args->timeout_in_ms);
    SetValue(args, StoreOf(args->user_arg)->Get(key, timeout));
    return nullptr;
  } catch (const KeyValueTimeout& e) {
    return Fail(args->callback_error, PJRT_Error_Code_DEADLINE_EXCEEDED,
                "key-value store: key '" + key + "' not set within " + std::to_string(args->timeout_in_ms) +
                    " ms: " + e.what());
  } catch (const std::exception& e) {
    return Fail(args->callback_error, PJRT_Error_Code_UNAVAILABLE,
                "key-value store: get of key '" + key + "' failed: " + e.what());
  }
}

PJRT_Error* KvTryGet(PJRT_KeyValueTryGetCallback_Args* args) {
  const std::string key = KeyOf(args->key, args->key_size);
  try {
    std::string value;
    if (!StoreOf(args->user_arg)->TryGet(key, &value))
      return Fail(args->callback_error, PJRT_Error_Code_NOT_FOUND, "key-value store: key '" + key + "' is not set");
    SetValue(args, value);
    return nullptr;
  } catch (const std::exception& e) {
    return Fail(args->callback_error, PJRT_Error_Code_UNAVAILABLE,
                "key-value store: try-get of key '" + key + "' failed: " + e.what());
  }
}

PJRT_Error* KvPut(PJRT_KeyValuePutCallback_Args* args) {
  const std::string key = KeyOf(args->key, args->key_size);
  try {
    StoreOf(args->user_arg)->Put(key, std::string(args->value ? args->value : "", args->value ? args->value_size : 0));
    return nullptr;
  } catch (const std::exception& e) {
    return Fail(args->callback_error, PJRT_Error_Code_UNAVAILABLE,
                "key-value store: put of key '" + key + "' failed: " + e.what());
  }
}

}  // namespace

void SetClientKeyValueStore(std::shared_ptr<KeyValueStore> store) {
  std::lock_guard<std::mutex> lock(g_mu);
  // Every client is created after BeginClientCreate, so this also covers a started one.
  if (g_client_starting)
    throw Error(9, "the PJRT client has already been started; register its key-value store before the first tpu "
                   "tensor or device query");
  g_store = std::move(store);
}

std::shared_ptr<KeyValueStore> ClientKeyValueStore() {
  std::lock_guard<std::mutex> lock(g_mu);
  return g_store;
}

bool ClientCreatedWithKeyValueStore() {
  std::lock_guard<std::mutex> lock(g_mu);
  return g_client_has_store;
}

namespace detail {

void SetKeyValueCallbacks(PJRT_Client_Create_Args* args, KeyValueStore* store) {
  args->kv_get_callback = &KvGet;
  args->kv_get_user_arg = store;
  args->kv_try_get_callback = &KvTryGet;
  args->kv_try_get_user_arg = store;
  args->kv_put_callback = &KvPut;
  args->kv_put_user_arg = store;
}

bool BeginClientCreate(PJRT_Client_Create_Args* args) {
  std::lock_guard<std::mutex> lock(g_mu);
  g_client_starting = true;
  if (!g_store) return false;
  // Kept alive for the process: the client may call back until it is destroyed.
  static auto* keep = new std::shared_ptr<KeyValueStore>();
  *keep = g_store;
  SetKeyValueCallbacks(args, g_store.get());
  return true;
}

void MarkClientCreatedWithKeyValueStore() {
  std::lock_guard<std::mutex> lock(g_mu);
  g_client_has_store = true;
}

}  // namespace detail
}  // namespace tt::runtime
