#pragma once
// JSON (de)serialization of the results schema (reports/results.hpp), found by nlohmann::json through ADL.
// Reading: required fields missing or of the wrong type throw std::runtime_error naming the object (results,
// context, "cell '<id>'", "cell '<id>' trial <index>", ... phase '<name>') and the field; unknown keys go to
// `extra` and are written back by to_json (a named field wins over an `extra` key of the same name).
//
// Required fields — results: schema_version, context, cells; context: host; cell: id, model, mode, runtime,
// engine, tp, n, status, trials; floors (when present): host_memcpy_gbps, disk_read_gbps; bytes (when present):
// canonical; trial: index, status, times_s; phase: name, seconds; check: name, pass.
// Everything else is optional. A cell without "host" takes the file's context.host.
#include <string>

#include <nlohmann/json.hpp>

#include "reports/results.hpp"

namespace wsb {

/// Parses "pass" | "fail" | "skipped"; throws std::runtime_error naming `where` for anything else.
Status parse_status(const std::string& text, const std::string& where);

void to_json(nlohmann::json& j, const Context& v);
void to_json(nlohmann::json& j, const Floors& v);
void to_json(nlohmann::json& j, const Bytes& v);
void to_json(nlohmann::json& j, const Phase& v);
void to_json(nlohmann::json& j, const Check& v);
void to_json(nlohmann::json& j, const RankStream& v);
void to_json(nlohmann::json& j, const Trial& v);
void to_json(nlohmann::json& j, const Cell& v);
void to_json(nlohmann::json& j, const Results& v);

void from_json(const nlohmann::json& j, Context& v);
void from_json(const nlohmann::json& j, Floors& v);
void from_json(const nlohmann::json& j, Bytes& v);
void from_json(const nlohmann::json& j, Phase& v);
void from_json(const nlohmann::json& j, Check& v);
void from_json(const nlohmann::json& j, Trial& v);
void from_json(const nlohmann::json& j, Cell& v);
void from_json(const nlohmann::json& j, Results& v);

/// Same as from_json, with `where` naming the object in error messages. For parse_trial it names the owner
/// ("cell 'a/b/native/tp1'"), to which " trial <index>" is appended; for parse_cell it is used only until the
/// cell's id is known, after which messages say "cell '<id>'".
Context parse_context(const nlohmann::json& j, const std::string& where);
Trial parse_trial(const nlohmann::json& j, const std::string& where);
Cell parse_cell(const nlohmann::json& j, const std::string& where);
Results parse_results(const nlohmann::json& j, const std::string& where);

}  // namespace wsb
