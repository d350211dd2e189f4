#pragma once
// The context block of every results file (google/benchmark style): where and with what a result was measured.
#include <string>

#include <nlohmann/json.hpp>

#include "reports/results.hpp"

namespace wsb {

/// "gvisor", or the machine ("bare-metal" | "firecracker-vm" | "vm") with "/container" appended inside a
/// container, detected from inside the process:
/// gVisor reports kernel 4.4.0 in /proc/version; Firecracker guest kernels carry "-fc-" in their release here;
/// containers show /.dockerenv or a container cgroup; other VMs the "hypervisor" cpu flag.
std::string detect_host_runtime();

/// This host and build: host, cpu_model, cpu_cores, memory_bytes, kernel, os, runtime_detected, build_commit,
/// build_type, date_utc, gpus; cuda_compiled, cuda_driver, cuda_runtime in `extra`.
Context collect_context();

/// Host memory facts from /proc (bytes): rss, rss_peak (since the last reset_peak_rss), mem_available, cached; and
/// device_used_bytes per visible CUDA device (cudaMemGetInfo: total - free, all processes) when there is one.
nlohmann::json memory_snapshot();
/// Resets this process's peak RSS (VmHWM) to its current RSS, so a trial's peak excludes publishing and the
/// reference engine. Silently keeps the lifetime peak where the kernel refuses.
void reset_peak_rss();

}  // namespace wsb
