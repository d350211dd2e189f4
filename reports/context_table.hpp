#pragma once
// The context block of a report: where and with what the numbers were measured.
#include <span>
#include <string>

#include <nlohmann/json.hpp>

#include "reports/results.hpp"
#include "reports/table.hpp"

namespace wsb {

/// Field | Value rows for the non-empty fields of `context` (memory as decimal bytes, GPUs grouped as
/// "2 × NVIDIA H200"), then one row per `extra` key in key order (strings as-is, other JSON compact).
Table context_table(const Context& context);

/// One row per host: Host | CPU | cores | memory | GPUs | runtime | kernel | commit | date.
Table hosts_table(std::span<const Context> hosts);

/// GPU list as text: identical descriptions grouped ("2 × NVIDIA H200, 1 × NVIDIA L4"); an entry is a string,
/// or an object's "name", or else its compact JSON. "" for no GPUs.
std::string gpus_text(const nlohmann::json& gpus);

}  // namespace wsb
