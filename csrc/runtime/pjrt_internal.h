// Internal to csrc/runtime: the resolved PJRT function table, error
// conversion, and the plugin loader's entry points.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "runtime/pjrt_abi.h"
#include "runtime/runtime.h"

namespace tt::runtime::detail {

// The oldest plugin API minor we accept. Every struct and field we use exists
// with the 0.114 layout from 0.60 on (checked against the 0.60 and 0.81
// headers; later fields we declare are left zero, and older plugins accept
// the larger struct_size). Every function slot we require is in 0.60's table.
constexpr int kMinPluginMinor = 60;

// Function pointers fetched by slot; NULL when the plugin's table is too short.
struct Api {
  const PJRT_Api* raw = nullptr;
  int major = 0, minor = 0;
  size_t table_size = 0;  // PJRT_Api.struct_size
  PJRT_Error_Destroy_Fn* Error_Destroy = nullptr;
  PJRT_Error_Message_Fn* Error_Message = nullptr;
  PJRT_Error_GetCode_Fn* Error_GetCode = nullptr;
  PJRT_Plugin_Initialize_Fn* Plugin_Initialize = nullptr;
  PJRT_Plugin_Attributes_Fn* Plugin_Attributes = nullptr;
  PJRT_Event_Destroy_Fn* Event_Destroy = nullptr;
  PJRT_Event_IsReady_Fn* Event_IsReady = nullptr;
  PJRT_Event_Error_Fn* Event_Error = nullptr;
  PJRT_Event_Await_Fn* Event_Await = nullptr;
  PJRT_Event_OnReady_Fn* Event_OnReady = nullptr;  // optional
  PJRT_Client_Create_Fn* Client_Create = nullptr;
  PJRT_Client_Destroy_Fn* Client_Destroy = nullptr;
  PJRT_Client_PlatformName_Fn* Client_PlatformName = nullptr;
  PJRT_Client_PlatformVersion_Fn* Client_PlatformVersion = nullptr;
  PJRT_Client_AddressableDevices_Fn* Client_AddressableDevices = nullptr;
  PJRT_Client_Compile_Fn* Client_Compile = nullptr;
  PJRT_Client_BufferFromHostBuffer_Fn* Client_BufferFromHostBuffer = nullptr;
  PJRT_DeviceDescription_Id_Fn* DeviceDescription_Id = nullptr;
  PJRT_DeviceDescription_Kind_Fn* DeviceDescription_Kind = nullptr;
  PJRT_DeviceDescription_DebugString_Fn* DeviceDescription_DebugString = nullptr;
  PJRT_DeviceDescription_ToString_Fn* DeviceDescription_ToString = nullptr;
  PJRT_Device_GetDescription_Fn* Device_GetDescription = nullptr;
  PJRT_Device_MemoryStats_Fn* Device_MemoryStats = nullptr;  // optional
  PJRT_Executable_Destroy_Fn* Executable_Destroy = nullptr;
  PJRT_Executable_NumOutputs_Fn* Executable_NumOutputs = nullptr;
  PJRT_Executable_OutputElementTypes_Fn* Executable_OutputElementTypes = nullptr;
  PJRT_Executable_OutputDimensions_Fn* Executable_OutputDimensions = nullptr;
  PJRT_Executable_Serialize_Fn* Executable_Serialize = nullptr;                    // optional
  PJRT_Executable_GetCostAnalysis_Fn* Executable_GetCostAnalysis = nullptr;        // optional
  PJRT_Executable_DeserializeAndLoad_Fn* Executable_DeserializeAndLoad = nullptr;  // optional
  PJRT_LoadedExecutable_Destroy_Fn* LoadedExecutable_Destroy = nullptr;
  PJRT_LoadedExecutable_GetExecutable_Fn* LoadedExecutable_GetExecutable = nullptr;
  PJRT_LoadedExecutable_Execute_Fn* LoadedExecutable_Execute = nullptr;
  PJRT_Buffer_Destroy_Fn* Buffer_Destroy = nullptr;
  PJRT_Buffer_ToHostBuffer_Fn* Buffer_ToHostBuffer = nullptr;
  PJRT_Buffer_ReadyEvent_Fn* Buffer_ReadyEvent = nullptr;
  PJRT_Buffer_CopyToDevice_Fn* Buffer_CopyToDevice = nullptr;
  PJRT_Buffer_OnDeviceSizeInBytes_Fn* Buffer_OnDeviceSizeInBytes = nullptr;  // optional
  PJRT_Buffer_UnsafePointer_Fn* Buffer_UnsafePointer = nullptr;              // optional
};

// Zero-initialised PJRT args struct with struct_size set to our (0.114) size.
template <class T>
inline T MakeArgs(size_t struct_size) {
  T t{};
  t.struct_size = struct_size;
  return t;
}
#define TT_ARGS(T) ::tt::runtime::detail::MakeArgs<T>(T##_STRUCT_SIZE)

// Converts a PJRT_Error into tt::runtime::Error (and destroys it). `what`
// names the call, prefixed to the plugin's message. No-op for NULL.
void ThrowIfError(const Api& api, PJRT_Error* err, const char* what);
// Destroys `err` (if any) and returns its code and message; for destructors.
int SwallowError(const Api& api, PJRT_Error* err, std::string* message = nullptr);
// Compiles StableHLO text with serialized CompileOptionsProto bytes; returns
// the PJRT_LoadedExecutable (the caller owns it) or throws Error.
PJRT_LoadedExecutable* CompileMlir(const Api& api, PJRT_Client* client, const std::string& mlir_text,
                                   const std::string& compile_options);

// A loaded, version-checked, initialised plugin.
struct LoadedPlugin {
  const Api* api = nullptr;  // lives for the process
  PluginInfo info;           // path, platform, reason, versions, attributes
};
// Applies the plugin choice rules (see plugin_loader.cpp) and loads the plugin.
LoadedPlugin LoadChosenPlugin();
// Loads, checks and initialises the plugin at `path` (throws Error).
LoadedPlugin LoadPluginFile(const std::string& path, const std::string& platform,
                            const std::string& reason);

bool LogEnabled();
// Wraps a raw event; destroys it on scope exit.
void AwaitAndDestroyEvent(const Api& api, PJRT_Event* ev, const char* what);

}  // namespace tt::runtime::detail
