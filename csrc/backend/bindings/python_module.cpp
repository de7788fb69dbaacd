// torch_tpu._C: the bindings the Python package is built on.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <torch/csrc/Event.h>
#include <torch/csrc/Generator.h>
#include <torch/csrc/utils/pybind.h>

#include <map>

#include "backend/pipeline/cpu_fallback.h"
#include "backend/bindings/distributed_bindings.h"
#include "backend/pipeline/eager_decomposition.h"
#include "backend/pipeline/executor.h"
#include "backend/pipeline/fused_cluster.h"
#include "backend/device/generator.h"
#include "backend/bindings/graph_bindings.h"
#include "backend/device/oom_count.h"
#include "backend/pipeline/op_registration.h"
#include "backend/pipeline/program_runner.h"
#include "backend/device/stream_events.h"
#include "backend/pipeline/compile_settings.h"
#include "backend/bindings/external_op_bindings.h"
#include "backend/bindings/attention_bindings.h"
#include "backend/bindings/stats_bindings.h"
#include "runtime/executable_cost.h"
#include "runtime/host_heap.h"
#include "backend/device/tpu_device.h"
#include "lowering/rule.h"
#include "runtime/compile_cache.h"
#include "runtime/runtime.h"

namespace py = pybind11;
using namespace tt;

namespace {

runtime::Runtime& rt() {
  try {
    return runtime::Runtime::Get();
  } catch (const runtime::Error& e) {
    throw std::runtime_error(std::string("torch_tpu could not start a PJRT plugin: ") + e.what());
  }
}

py::dict runtime_info() {
  auto& r = rt();
  const auto& i = r.info();
  py::dict d;
  d["plugin_path"] = i.path;
  d["platform"] = i.platform;
  d["reason"] = i.reason;
  d["pjrt_api_version"] = std::to_string(i.api_major) + "." + std::to_string(i.api_minor);
  d["pjrt_header_version"] = std::to_string(i.header_major) + "." + std::to_string(i.header_minor);
  d["platform_name"] = i.platform_name;
  d["platform_version"] = i.platform_version;
  py::dict attrs;
  for (const auto& kv : i.attributes) attrs[py::str(kv.first)] = kv.second;
  d["attributes"] = attrs;
  py::list extensions;  // PJRT_Extension_Type numbers (1: XLA's profiler)
  for (int t : runtime::PluginExtensions()) extensions.append(t);
  d["extensions"] = extensions;
  d["device_count"] = r.device_count();
  py::list kinds;
  for (int k = 0; k < r.device_count(); ++k) kinds.append(r.device_kind(k));
  d["device_kinds"] = kinds;
  d["host_heap"] = runtime::HostHeapKept() ? "kept" : "released";
  return d;
}

}  // namespace

PYBIND11_MODULE(_C, m) {
  m.doc() = "torch_tpu native core";
  m.def("_register_ops", &backend::register_lowered_ops);
  backend::bind_graph_executable(m);
  backend::bind_compile_settings(m);
  backend::bind_external_ops(m);
  backend::bind_attention(m);
  backend::bind_stats(m);
  backend::dist::bind_dist(m);
  m.def("_runtime_info", &runtime_info);
  m.def("_is_initialized", &runtime::Runtime::IsInitialized);
  m.def("_is_in_bad_fork", &backend::in_bad_fork);
  m.def("_set_process_check", [](py::function f) {
    // Never freed: it may run (and would be destroyed) after the interpreter.
    auto* fn = new py::function(std::move(f));
    backend::set_process_check([fn] {
      std::string refused;
      {
        py::gil_scoped_acquire gil;
        try {
          (*fn)();
        } catch (py::error_already_set& e) {
          refused = py::str(e.value());
        }
      }
      TORCH_CHECK(refused.empty(), refused);
    });
  });
  m.def("_device_count", [] { return rt().device_count(); });
  m.def("_device_kind", [](int d) { return backend::runtime_for(d).device_kind(d); });
  m.def("_device_description", [](int d) { return backend::runtime_for(d).device_description(d); });
  m.def("_current_device", &backend::current_device);
  m.def("_set_device", &backend::set_current_device);
  m.def("_synchronize", [](int d) {
    {
      py::gil_scoped_release no_gil;
      backend::synchronize(d);
    }
    backend::verify_device_checks();  // raises with the GIL held
  });
  // Streams (stream_events.h); torch.Stream/torch.Event reach the same state
  // through the device guard.
  m.def("_current_stream", [](int d) {
    backend::runtime_for(d);
    return backend::streams::current(d);
  });
  m.def("_exchange_stream", [](int d, int64_t id) {
    py::gil_scoped_release no_gil;  // may run pending fused work
    return backend::streams::exchange(d, id);
  });
  m.def("_stream_priority", &backend::streams::priority);
  // torch.Event.elapsed_time refuses a subclass (torch.tpu.Event) as `other`.
  m.def("_event_elapsed_time", [](py::handle start, py::handle end) {
    TORCH_CHECK_TYPE(THPEvent_Check(start.ptr()) && THPEvent_Check(end.ptr()),
                     "elapsed_time: expected two torch.Event objects");
    const c10::Event& a = reinterpret_cast<THPEvent*>(start.ptr())->event;
    return a.elapsedTime(reinterpret_cast<THPEvent*>(end.ptr())->event);
  });
  m.def("_memory_allocated", [](int d) { return backend::runtime_for(d).live_bytes(d); });
  m.def("_max_memory_allocated", [](int d) { return backend::runtime_for(d).peak_bytes(d); });
  m.def("_live_buffers", [](int d) { return backend::runtime_for(d).live_buffers(d); });
  m.def("_reset_peak_memory_stats", [](int d) { backend::runtime_for(d).reset_peak(d); });
  m.def("_memory_capacity", [](int d) { return backend::runtime_for(d).memory_capacity(d); });
  m.def("_num_ooms", [](int d) { return backend::out_of_memory_count(d); });
  m.def("_persistent_cache_dir", []() -> py::object {
    const auto& c = rt().compile_cache().config();
    return c.enabled ? py::object(py::str(c.dir)) : py::object(py::none());
  });
  m.def("_release_host_heap", &runtime::ReleaseHostHeap);
  m.def("_cache_clear", [] { backend::program_cache_clear(); });
  m.def("_set_eager_mode", [](const std::string& mode) {
    py::gil_scoped_release no_gil;
    backend::fused::set_mode(mode);
  });
  m.def("_eager_mode", &backend::fused::mode);
  m.def("_launch_blocking", &backend::launch_blocking);
  m.def("_fused_flush", [](const std::string& reason) {
    py::gil_scoped_release no_gil;
    // The reasons Python may name (flush reasons are counted by name).
    const char* named = reason == "backward" ? "backward" : reason == "optimizer" ? "optimizer" : "python";
    backend::fused::flush(named);
  });
  m.def("_reset_fused_stats", &backend::fused::reset_stats);
  m.def("_reset_fallback_ops", &backend::reset_fallback_counts);
  m.def("_set_fallback_mode", &backend::set_fallback_mode);
  m.def("_fallback_mode", &backend::fallback_mode);
  m.def("_set_eager_decomposition_handler", &backend::set_eager_decomposition_handler);
  m.def("_registered_ops", &backend::registered_ops);
  m.def("_rule_names", [] { return lowering::rule_names(false); });
  m.def("_graph_rule_names", [] { return lowering::rule_names(true); });
  m.def("_padding_facts", [] {
    // {op: (kind, {argument: identity or "ignore"})}, for the shape buckets.
    py::dict facts;
    static const char* kinds[] = {"view", "elementwise", "creation", "fills"};
    for (const auto& n : lowering::padded_op_names()) {
      const lowering::Padding* p = lowering::find_padding(n);
      py::dict fills;
      for (const auto& f : p->fills)
        fills[py::str(f.arg)] = f.ignore_index ? py::object(py::str("ignore")) : py::object(py::float_(f.value));
      facts[py::str(n)] = py::make_tuple(kinds[static_cast<int>(p->kind)], fills);
    }
    return facts;
  });
  m.def("_rule_sources", [] {
    std::map<std::string, std::string> where;
    for (const auto& n : lowering::rule_names(true)) where[n] = lowering::find_rule(n)->source;
    return where;
  });
  m.def("_queue_seed", &backend::queue_seed);
  m.def("_default_generator", [](int d) {
    backend::runtime_for(d);
    return py::reinterpret_steal<py::object>(THPGenerator_initDefaultGenerator(backend::default_generator(d)));
  });
}
