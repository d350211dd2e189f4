#pragma once
// wsbench serve's own endpoints beside a protocol's (real servers answer them 404 and the harness then skips what
// needs them): GET /wsbench/storage_pointers, /wsbench/mode_memory, /wsbench/boot_phases and /wsbench/last_update
// (the last prepare's and commit's phases and the measured pause: no real server reports a pause). Both sides use
// these functions, so the shapes live in one place. Parsers throw Error(Format) naming the endpoint and the field.
//   /wsbench/storage_pointers -> {ranks: [[{name, address, bytes}, ...], ...]}   (index = TP rank)
//   /wsbench/mode_memory      -> {canonical_bytes, rank_image_bytes, staging_bytes}
//   /wsbench/boot_phases      -> {phases: [{name, seconds, bytes, floor}, ...]}
//   /wsbench/last_update      -> {prepare: {seconds, phases} | null,
//                                 commit: {seconds, pause_seconds (gate closed -> reopened), phases} | null}
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/engine.hpp"
#include "engine_api/protocols/serve_routes.hpp"

namespace wsb {

nlohmann::json phases_json(const std::vector<PhaseRecord>& phases);
nlohmann::json pointers_json(const std::vector<std::vector<StoragePointer>>& pointers);
nlohmann::json mode_memory_json(const ModeMemory& memory);
nlohmann::json last_update_json(const LastUpdate& last);

/// `section` "boot": j.phases; "prepare" | "commit": j[section].phases (empty when the section is null).
std::vector<PhaseRecord> wire_phases(const nlohmann::json& j, const std::string& section, const std::string& endpoint);
/// j.commit.pause_seconds, nullopt when there is no commit section.
std::optional<double> wire_pause_seconds(const nlohmann::json& j, const std::string& endpoint);
std::vector<std::vector<StoragePointer>> wire_pointers(const nlohmann::json& j, const std::string& endpoint);
ModeMemory wire_mode_memory(const nlohmann::json& j, const std::string& endpoint);

}  // namespace wsb
