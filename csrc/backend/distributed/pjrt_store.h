// The c10d Store as the PJRT client's key-value store: adapts a c10d::Store
// to runtime::KeyValueStore (runtime/kv_store.h), and binds registration
// and a test probe of the callbacks into torch_tpu._C.
#pragma once

#include <pybind11/pybind11.h>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <memory>

#include "runtime/kv_store.h"

namespace tt::backend::dist {

class C10dKeyValueStore : public runtime::KeyValueStore {
 public:
  explicit C10dKeyValueStore(c10::intrusive_ptr<c10d::Store> store) : store_(std::move(store)) {}
  std::string Get(const std::string& key, std::chrono::milliseconds timeout) override;
  bool TryGet(const std::string& key, std::string* value) override;
  void Put(const std::string& key, const std::string& value) override;

 private:
  c10::intrusive_ptr<c10d::Store> store_;
};

// _set_pjrt_kv_store, _pjrt_kv_store_registered, _pjrt_client_has_kv_store,
// _pjrt_kv_probe.
void bind_pjrt_store(pybind11::module& m);

}  // namespace tt::backend::dist
