// CUDA build of engine/cuda/cupti_activity.hpp. <cupti.h> is included for its types only: every function is looked
// up with dlsym, so nothing links against libcupti. Activity API facts: CUPTI's cupti_activity.h (buffer request /
// complete callbacks, cuptiActivityGetNextRecord returning CUPTI_ERROR_MAX_LIMIT_REACHED at the end of a buffer,
// cuptiActivityFlushAll with CUPTI_ACTIVITY_FLAG_FLUSH_FORCED, timestamps in ns).
#ifdef WSBENCH_HAVE_CUDA
#include "engine/cuda/cupti_activity.hpp"

#include <cupti.h>
#include <dlfcn.h>

#include <cstdlib>
#include <mutex>
#include <string>

#include "core/errors.hpp"

namespace wsb::cupti_activity {
namespace {

constexpr size_t kBufferBytes = 8u << 20;  ///< per buffer request
constexpr size_t kBufferAlign = 8;         ///< CUPTI requires 8-byte aligned activity buffers

struct Api {
  decltype(&cuptiActivityRegisterCallbacks) register_callbacks = nullptr;
  decltype(&cuptiActivityEnable) enable = nullptr;
  decltype(&cuptiActivityDisable) disable = nullptr;
  decltype(&cuptiActivityFlushAll) flush_all = nullptr;
  decltype(&cuptiActivityGetNextRecord) next_record = nullptr;
  decltype(&cuptiActivityGetNumDroppedRecords) dropped = nullptr;
  decltype(&cuptiGetResultString) result_string = nullptr;
  std::string error;  ///< "" when every symbol resolved
};

const char* const kCandidates[] = {"libcupti.so", "libcupti.so.13", "/usr/local/cuda/lib64/libcupti.so",
                                   "/usr/local/cuda/extras/CUPTI/lib64/libcupti.so"};

template <typename Fn>
bool resolve(void* lib, const char* name, Fn* out, std::string* error) {
  *out = reinterpret_cast<Fn>(dlsym(lib, name));
  if (*out == nullptr && error->empty()) *error = std::string("libcupti lacks ") + name;
  return *out != nullptr;
}

Api load() {
  Api api;
  void* lib = nullptr;
  std::string tried;
  for (const char* candidate : kCandidates) {
    lib = dlopen(candidate, RTLD_NOW | RTLD_LOCAL);
    if (lib != nullptr) break;
    const char* why = dlerror();
    tried += std::string(tried.empty() ? "" : "; ") + candidate + ": " + (why != nullptr ? why : "not found");
  }
  if (lib == nullptr) {
    api.error = "libcupti not loadable (tried " + tried + ")";
    return api;
  }
  // Never dlclose'd: CUPTI keeps callbacks and threads alive until process exit.
  resolve(lib, "cuptiActivityRegisterCallbacks", &api.register_callbacks, &api.error);
  resolve(lib, "cuptiActivityEnable", &api.enable, &api.error);
  resolve(lib, "cuptiActivityDisable", &api.disable, &api.error);
  resolve(lib, "cuptiActivityFlushAll", &api.flush_all, &api.error);
  resolve(lib, "cuptiActivityGetNextRecord", &api.next_record, &api.error);
  resolve(lib, "cuptiActivityGetNumDroppedRecords", &api.dropped, &api.error);
  resolve(lib, "cuptiGetResultString", &api.result_string, &api.error);
  return api;
}

const Api& api() {
  static const Api loaded = load();
  return loaded;
}

std::string result_text(CUptiResult r) {
  const char* text = nullptr;
  if (api().result_string != nullptr && api().result_string(r, &text) == CUPTI_SUCCESS && text != nullptr) return text;
  return "CUPTI error " + std::to_string(static_cast<int>(r));
}

// Collected records. CUPTI may call the completion callback on its own thread, hence the mutex.
std::mutex g_mu;
bool g_collecting = false;
CuptiRecords g_records;

bool complete(uint64_t start, uint64_t end) { return start != 0 && end >= start; }

void parse_buffer(uint8_t* buffer, size_t valid) {
  CUpti_Activity* record = nullptr;
  while (api().next_record(buffer, valid, &record) == CUPTI_SUCCESS) {
    if (record->kind == CUPTI_ACTIVITY_KIND_MEMCPY) {
      const auto* m = reinterpret_cast<const CUpti_ActivityMemcpy6*>(record);
      ++g_records.memcpy_records;
      if (m->copyKind != CUPTI_ACTIVITY_MEMCPY_KIND_HTOD) continue;
      ++g_records.h2d_records;
      g_records.h2d_bytes += m->bytes;
      if (complete(m->start, m->end)) {
        g_records.h2d.push_back({m->start, m->end});
      } else {
        ++g_records.incomplete_records;
      }
    } else if (record->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL || record->kind == CUPTI_ACTIVITY_KIND_KERNEL) {
      const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(record);
      if (complete(k->start, k->end)) {
        g_records.kernels.push_back({k->start, k->end});
      } else {
        ++g_records.incomplete_records;
      }
    }
  }
}

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(kBufferAlign, kBufferBytes));
  *size = *buffer != nullptr ? kBufferBytes : 0;
  *max_records = 0;  // as many as fit
}

void CUPTIAPI buffer_completed(CUcontext context, uint32_t stream_id, uint8_t* buffer, size_t, size_t valid) {
  {
    std::lock_guard<std::mutex> lock(g_mu);
    if (g_collecting && buffer != nullptr && valid > 0) parse_buffer(buffer, valid);
    size_t dropped = 0;
    if (g_collecting && api().dropped(context, stream_id, &dropped) == CUPTI_SUCCESS) {
      g_records.dropped_records += dropped;
    }
  }
  std::free(buffer);
}

}  // namespace

std::string load_error() { return api().error; }

void begin() {
  const Api& a = api();
  if (!a.error.empty()) throw Error(ErrorKind::Resource, "CUPTI: " + a.error);
  static std::once_flag registered;
  static CUptiResult register_result = CUPTI_SUCCESS;
  std::call_once(registered, [&a] { register_result = a.register_callbacks(buffer_requested, buffer_completed); });
  if (register_result != CUPTI_SUCCESS) {
    throw Error(ErrorKind::Resource, "CUPTI: cuptiActivityRegisterCallbacks failed: " + result_text(register_result));
  }
  {
    std::lock_guard<std::mutex> lock(g_mu);
    g_records = CuptiRecords{};
    g_collecting = true;
  }
  const char* hint = " (another CUPTI subscriber such as Nsight Systems may be attached: set WSBENCH_CUPTI=0)";
  CUptiResult r = a.enable(CUPTI_ACTIVITY_KIND_MEMCPY);
  if (r != CUPTI_SUCCESS) {
    std::lock_guard<std::mutex> lock(g_mu);
    g_collecting = false;
    throw Error(ErrorKind::Resource, "CUPTI: cuptiActivityEnable(MEMCPY) failed: " + result_text(r) + hint);
  }
  r = a.enable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
  if (r != CUPTI_SUCCESS) {
    a.disable(CUPTI_ACTIVITY_KIND_MEMCPY);
    std::lock_guard<std::mutex> lock(g_mu);
    g_collecting = false;
    throw Error(ErrorKind::Resource, "CUPTI: cuptiActivityEnable(CONCURRENT_KERNEL) failed: " + result_text(r) + hint);
  }
}

CuptiRecords end() {
  const Api& a = api();
  const CUptiResult d1 = a.disable(CUPTI_ACTIVITY_KIND_MEMCPY);
  const CUptiResult d2 = a.disable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
  // Forced: deliver every buffer, also those holding records of unfinished work (they are counted incomplete).
  const CUptiResult f = a.flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  CuptiRecords out;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    g_collecting = false;
    out = std::move(g_records);
    g_records = CuptiRecords{};
  }
  if (f != CUPTI_SUCCESS) throw Error(ErrorKind::Io, "CUPTI: cuptiActivityFlushAll failed: " + result_text(f));
  if (d1 != CUPTI_SUCCESS) throw Error(ErrorKind::Io, "CUPTI: cuptiActivityDisable(MEMCPY) failed: " + result_text(d1));
  if (d2 != CUPTI_SUCCESS) {
    throw Error(ErrorKind::Io, "CUPTI: cuptiActivityDisable(CONCURRENT_KERNEL) failed: " + result_text(d2));
  }
  return out;
}

}  // namespace wsb::cupti_activity
#endif
