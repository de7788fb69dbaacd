#include "lowering/external_op.h"

#include <atomic>
#include <cstdio>
#include <map>
#include <memory>
#include <mutex>

#include "lowering/rule_call.h"

namespace tt::lowering {
namespace {

struct ExternalState {
  std::mutex mu;
  ModuleProvider provider;
  std::map<std::string, std::shared_ptr<const ExternalModule>> modules;  // by call key
};

std::mutex g_mu;
std::map<std::string, std::shared_ptr<ExternalState>>& states() {
  static std::map<std::string, std::shared_ptr<ExternalState>> s;
  return s;
}
std::atomic<int64_t> g_lowered{0}, g_reused{0};

std::string host_key(const HostArg& h) {
  using K = HostArg::Kind;
  switch (h.kind) {
    case K::None: return "N";
    case K::Int: return "i" + std::to_string(h.i);
    case K::Double: {
      char buf[40];
      std::snprintf(buf, sizeof buf, "d%.17g", h.d);
      return buf;
    }
    case K::Bool: return h.b ? "b1" : "b0";
    case K::String: return "s" + std::to_string(h.s.size()) + ":" + h.s;
    case K::IntList: return "I" + hlo::i64_list(h.ints);
    case K::Scalar: return "S";  // a runtime value; the module takes it as an operand
    default: return "?";
  }
}

std::string types_key(const std::vector<Type>& ts) {
  std::string k;
  for (const auto& t : ts) k += t.str() + ",";
  return k;
}

Values lower_module(const std::shared_ptr<ExternalState>& state, Builder& b, const Values& operands,
                    const std::vector<HostArg>& host, const Context& ctx) {
  std::vector<Type> types;
  for (const Value& v : operands) types.push_back(v.type);
  std::string key = types_key(types) + "|";
  for (const HostArg& h : host) key += host_key(h) + ";";

  std::shared_ptr<const ExternalModule> m;
  {
    std::lock_guard<std::mutex> lock(state->mu);
    auto it = state->modules.find(key);
    if (it != state->modules.end()) {
      m = it->second;
      ++g_reused;
    }
  }
  if (!m) {
    ModuleProvider provider;
    {
      std::lock_guard<std::mutex> lock(state->mu);
      provider = state->provider;
    }
    try {
      m = std::make_shared<const ExternalModule>(provider(types, host));
    } catch (const InvalidArgument&) {
      throw;
    } catch (const std::exception& e) {
      throw InvalidArgument(ctx.op + ": " + e.what());
    }
    ++g_lowered;
    std::lock_guard<std::mutex> lock(state->mu);
    state->modules.emplace(key, m);
  }
  if (m->inputs.size() != types.size())
    throw InvalidArgument(ctx.op + ": the kernel takes " + std::to_string(m->inputs.size()) +
                          " tensors, the call gives " + std::to_string(types.size()));
  for (size_t i = 0; i < types.size(); ++i)
    if (m->inputs[i] != types[i])
      throw InvalidArgument(ctx.op + ": tensor operand " + std::to_string(i) + " is " + types[i].str() +
                            ", the kernel was lowered for " + m->inputs[i].str());
  b.add_function(m->symbol, m->functions);
  Values results = b.call(m->symbol, operands, m->results);
  if (ctx.donations)
    for (const auto& d : m->donations) ctx.donations->push_back(d);
  return results;
}

Values lower_external(const std::shared_ptr<ExternalState>& state, Builder& b, const Args& args,
                      const Context& ctx) {
  Values operands;
  std::vector<HostArg> host;
  for (const Arg& a : args) {
    if (a.kind == Arg::Kind::Tensor) {
      operands.push_back(a.tensor);
    } else if (a.kind == Arg::Kind::TensorList) {
      for (const Value& v : a.tensors)
        if (v.valid()) operands.push_back(v);
    } else {
      host.push_back(static_cast<const HostArg&>(a));
    }
  }
  return lower_module(state, b, operands, host, ctx);
}

}  // namespace

void register_external_op(const std::string& name, ModuleProvider provider) {
  std::lock_guard<std::mutex> lock(g_mu);
  auto it = states().find(name);
  if (it != states().end()) {
    std::lock_guard<std::mutex> inner(it->second->mu);
    it->second->provider = std::move(provider);
    it->second->modules.clear();
    return;
  }
  if (find_rule(name)) throw std::logic_error(name + " already has a lowering rule that is not an external module");
  auto state = std::make_shared<ExternalState>();
  state->provider = std::move(provider);
  states()[name] = state;
  RuleFn fn = [state](Builder& b, const Args& args, const Context& ctx) { return lower_external(state, b, args, ctx); };
  register_rule(name, Rule{fn, false, false, false, "external module (torch_tpu._internal.pallas)"});
}

bool is_external_op(const std::string& name) {
  std::lock_guard<std::mutex> lock(g_mu);
  return states().count(name) > 0;
}

Values call_external(const std::string& name, Builder& b, const Values& operands, const std::vector<HostArg>& host,
                     const Context& ctx) {
  std::shared_ptr<ExternalState> state;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    auto it = states().find(name);
    if (it != states().end()) state = it->second;
  }
  if (!state) throw InvalidArgument(ctx.op + ": the kernel " + name + " is not registered");
  return lower_module(state, b, operands, host, ctx);
}

ExternalStats external_stats() { return {g_lowered.load(), g_reused.load()}; }

}  // namespace tt::lowering
