// The key-value store a multi-process PJRT client shares with its peers
// (PJRT_Client_Create's kv_get / kv_try_get / kv_put callbacks). libtpu and
// the CUDA plugin exchange topology through it; the CPU plugin ignores it.
// Knows nothing of PyTorch: the backend adapts a c10d::Store to this
// interface (backend/distributed/pjrt_store.cpp).
#pragma once

#include <chrono>
#include <memory>
#include <stdexcept>
#include <string>

struct PJRT_Client_Create_Args;

namespace tt::runtime {

class KeyValueStore {
 public:
  virtual ~KeyValueStore() = default;
  // Blocks until `key` is set, then returns its value; throws
  // KeyValueTimeout after `timeout`. Must be thread-safe.
  virtual std::string Get(const std::string& key, std::chrono::milliseconds timeout) = 0;
  // The value of `key` if it is set now; false without waiting if not.
  virtual bool TryGet(const std::string& key, std::string* value) = 0;
  virtual void Put(const std::string& key, const std::string& value) = 0;
};

// Thrown by KeyValueStore::Get when the key did not appear in time.
class KeyValueTimeout : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Registers the store the client will be created with. Must precede the
// client: throws Error(9) once Runtime has started. Passing nullptr unregisters.
void SetClientKeyValueStore(std::shared_ptr<KeyValueStore> store);
std::shared_ptr<KeyValueStore> ClientKeyValueStore();

// Whether PJRT_Client_Create was given the callbacks (a store was registered
// when the client started).
bool ClientCreatedWithKeyValueStore();

namespace detail {
// Points args' kv callbacks at `store` (which must outlive their use).
void SetKeyValueCallbacks(PJRT_Client_Create_Args* args, KeyValueStore* store);
// Called once, just before PJRT_Client_Create: from now on registration is
// refused. Fills args' callbacks from the registered store (NULL when none;
// the store is then kept for the process) and returns whether it did.
bool BeginClientCreate(PJRT_Client_Create_Args* args);
void MarkClientCreatedWithKeyValueStore();
}  // namespace detail

}  // namespace tt::runtime
