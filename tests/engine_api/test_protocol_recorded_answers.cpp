// Every answer recorded from the real sources (tests/fixtures/protocols/<protocol>/*.json, response.example) that a
// protocol table reads parses with that table: the generate answer, the version, the checksums, and the answer of
// every prepare, pause, commit and continue call the table makes for each mode and pause mode it supports. A table
// that expected a field the real server does not send fails here.
#include <gtest/gtest.h>

#include <map>

#include "engine_api/protocols/protocol.hpp"
#include "tests/support/protocol_fixtures.hpp"

namespace wsb {
namespace {

using json = nlohmann::json;

/// The protocol's fixtures by path ("/generate" -> the file's JSON).
std::map<std::string, json> fixtures_by_path(const std::string& protocol) {
  std::map<std::string, json> out;
  for (const auto& file : test::list_protocol_fixtures(protocol)) {
    json f = test::load_protocol_fixture(protocol, file);
    EXPECT_TRUE(f.contains("path") && f["path"].is_string()) << protocol << "/" << file;
    if (!f.contains("path") || !f["path"].is_string()) continue;
    const std::string path = f["path"].get<std::string>();
    out[path] = std::move(f);
  }
  return out;
}

/// The recorded 200 answer of `request`'s endpoint (fails the test when none was recorded).
const json* recorded_answer(const std::map<std::string, json>& fixtures, const HttpRequest& request,
                            const std::string& protocol) {
  auto it = fixtures.find(request.path);
  if (it == fixtures.end()) {
    ADD_FAILURE() << protocol << ": no recorded fixture for " << request.endpoint();
    return nullptr;
  }
  const json& response = it->second["response"];
  if (!response.contains("example")) return nullptr;  // plain text or an empty body: nothing to parse
  return &response["example"];
}

class RecordedAnswers : public ::testing::TestWithParam<std::string> {};

TEST_P(RecordedAnswers, ParseWithTheProtocolTable) {
  const std::string name = GetParam();
  const auto protocol = make_protocol(name);
  const auto fixtures = fixtures_by_path(name);
  int parsed = 0;

  GenerateRequest probe{{72, 105}, 4, true};
  if (const json* answer = recorded_answer(fixtures, protocol->generate(probe), name)) {
    const GenerateResult r = protocol->parse_generate(*answer);
    EXPECT_FALSE(r.response.output_ids.empty()) << name;
    ++parsed;
  }
  if (const json* answer = recorded_answer(fixtures, protocol->weight_version(), name)) {
    protocol->parse_weight_version(*answer);
    ++parsed;
  }
  if (const auto request = protocol->checksums()) {
    if (const json* answer = recorded_answer(fixtures, *request, name)) {
      EXPECT_FALSE(protocol->parse_checksums(*answer).ranks.empty()) << name;
      ++parsed;
    }
  }
  for (SyncModeKind mode : protocol->modes()) {
    for (PauseMode pause : protocol->pause_modes()) {
      UpdateSpec spec;
      spec.served = 0;
      spec.target = 3;  // the version the recorded answers name (vLLM's /update_weight_version echoes it)
      spec.store = "/store";
      spec.checkpoint_dir = "/harness/checkpoint";
      spec.local_checkpoint_dir = "/work/engine-checkpoint";
      spec.base_checkpoint_dir = "/store/updates/weight_v000000";
      spec.mode = mode;
      spec.pause = pause;
      spec.tp = 1;
      spec.bucket_bytes = 1 << 20;
      std::vector<HttpRequest> calls;
      if (auto prepare = protocol->prepare(spec)) calls.push_back(*prepare);
      if (mode != SyncModeKind::Refit) {  // refit buckets read the materialized checkpoint's tensors
        for (const auto& call : protocol->commit(spec)) calls.push_back(call.request);
      }
      for (const auto& request : calls) {
        if (protocol->plain_text(request)) continue;
        if (const json* answer = recorded_answer(fixtures, request, name)) {
          EXPECT_NO_THROW(protocol->check_update_reply(request, *answer))
              << name << " " << request.endpoint() << " " << answer->dump();
          ++parsed;
        }
      }
    }
  }
  EXPECT_GE(parsed, 4) << name;
}

INSTANTIATE_TEST_SUITE_P(Protocols, RecordedAnswers, ::testing::ValuesIn(protocol_names()),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           std::string n = info.param;
                           for (char& c : n) {
                             if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
                           }
                           return n;
                         });

}  // namespace
}  // namespace wsb
