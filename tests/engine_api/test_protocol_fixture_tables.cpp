// The recorded engine protocol fixtures (tests/fixtures/protocols): every file parses, names its method, path and
// sources, declares well-formed field tables whose own examples conform, and the checker of
// tests/support/protocol_fixtures.hpp reports unknown fields, wrong types, enum violations and missing fields with
// the exact messages the adapters' tests will assert.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/support/protocol_fixtures.hpp"

namespace {

using nlohmann::json;
using wsb::test::field_violations;
using wsb::test::list_protocol_fixtures;
using wsb::test::list_protocols;
using wsb::test::load_protocol_fixture;

const std::set<std::string> kTypeNames = {"string", "integer", "number", "boolean", "object", "array", "null"};

// The file name a path is recorded under: "/v1/completions" -> "v1_completions.json".
std::string file_for_path(std::string path) {
  path.erase(0, 1);
  std::replace(path.begin(), path.end(), '/', '_');
  return path + ".json";
}

// A field table's own structure: known type names, required/enum/open paths that exist, an example that conforms.
void expect_well_formed_table(const json& table, const std::string& where) {
  ASSERT_TRUE(table.is_object()) << where;
  ASSERT_TRUE(table.contains("fields") && table.at("fields").is_object()) << where;
  for (const auto& item : table.at("fields").items()) {
    ASSERT_TRUE(item.value().is_string()) << where << ": " << item.key();
    for (const auto& t : wsb::test::split_type_union(item.value().get<std::string>())) {
      EXPECT_TRUE(kTypeNames.count(t)) << where << ": " << item.key() << " has unknown type \"" << t << "\"";
    }
    // A declared child needs a declared parent of a matching kind.
    const std::string parent = wsb::test::protocol_detail::parent_path(item.key());
    if (!parent.empty()) {
      ASSERT_TRUE(table.at("fields").contains(parent)) << where << ": " << item.key() << " has no parent entry";
      const std::string parent_type = table.at("fields").at(parent).get<std::string>();
      const bool array_child = item.key().size() >= 2 && item.key().compare(item.key().size() - 2, 2, "[]") == 0;
      EXPECT_NE(parent_type.find(array_child ? "array" : "object"), std::string::npos) << where << ": " << item.key();
    }
  }
  const json required = table.value("required", json::array());
  for (const auto& r : required) {
    EXPECT_TRUE(table.at("fields").contains(r.get<std::string>())) << where << ": required " << r;
  }
  const json enums = table.value("enums", json::object());
  for (const auto& e : enums.items()) {
    EXPECT_TRUE(table.at("fields").contains(e.key())) << where << ": enum " << e.key();
    EXPECT_TRUE(e.value().is_array() && !e.value().empty()) << where << ": enum " << e.key();
  }
  const json open = table.value("open", json::array());
  for (const auto& o : open) {
    const std::string path = o.get<std::string>();
    EXPECT_TRUE(path.empty() || table.at("fields").contains(path)) << where << ": open " << path;
  }
  const json defaults = table.value("defaults", json::object());
  for (const auto& d : defaults.items()) {
    EXPECT_TRUE(table.at("fields").contains(d.key())) << where << ": default " << d.key();
  }
  const json one_of = table.value("one_of", json::array());
  for (const auto& group : one_of) {
    for (const auto& name : group) {
      EXPECT_TRUE(table.at("fields").contains(name.get<std::string>())) << where;
    }
  }
  if (table.contains("example")) {
    EXPECT_EQ(field_violations(table, table.at("example")), std::vector<std::string>{}) << where << " example";
  }
}

// A response or error entry: a status and exactly one body description.
void expect_well_formed_reply(const json& reply, const std::string& where, bool error) {
  ASSERT_TRUE(reply.is_object()) << where;
  ASSERT_TRUE(reply.contains("status") && reply.at("status").is_number_integer()) << where;
  const int status = reply.at("status").get<int>();
  if (error) {
    EXPECT_GE(status, 400) << where;
  } else {
    EXPECT_EQ(status, 200) << where;
  }
  ASSERT_TRUE(reply.contains("content_type")) << where;
  const int bodies = int(reply.contains("example")) + int(reply.contains("example_text")) +
                     int(reply.value("empty", false));
  EXPECT_EQ(bodies, 1) << where << ": one of example, example_text, empty";
  if (reply.contains("example_text")) {
    EXPECT_EQ(reply.at("content_type"), "text/plain") << where;
    EXPECT_TRUE(reply.at("example_text").is_string()) << where;
  }
  if (reply.contains("example")) {
    EXPECT_EQ(reply.at("content_type"), "application/json") << where;
  }
  if (reply.value("empty", false)) {
    EXPECT_TRUE(reply.at("content_type").is_null()) << where;
  }
  if (reply.contains("fields")) expect_well_formed_table(reply, where);
}

TEST(ProtocolFixtureTables, TheSixProtocolsAreRecorded) {
  EXPECT_EQ(list_protocols(), (std::vector<std::string>{"sglang", "stitch-staging", "stitch-v0.5.15",
                                                        "stitch-v0.5.15-host-runtime", "stitch-v0.5.16", "vllm"}));
}

TEST(ProtocolFixtureTables, EachProtocolHasTheEndpointsItsAdapterNeeds) {
  const std::vector<std::pair<std::string, std::vector<std::string>>> needed = {
      {"sglang",
       {"generate", "health", "model_info", "update_weights_from_disk", "update_weights_from_tensor", "weights_checker",
        "flush_cache", "pause_generation", "continue_generation"}},
      {"stitch-v0.5.15",
       {"pull_weights", "update_weights_from_disk", "generate", "model_info", "pause_generation", "continue_generation",
        "weights_checker"}},
      {"stitch-v0.5.15-host-runtime", {"pull_weights", "update_weights_from_prepared"}},
      {"stitch-v0.5.16",
       {"stage_weight_update", "update_weights_from_disk", "update_weights_from_cpu", "generate", "model_info",
        "pause_generation", "continue_generation"}},
      {"stitch-staging", {"prepare_weight_update", "commit_weight_update", "server_info", "model_info"}},
      {"vllm",
       {"pause", "resume", "is_paused", "start_weight_update", "update_weights", "finish_weight_update",
        "update_weight_version", "weight_info", "init_weight_transfer_engine", "reset_prefix_cache", "collective_rpc",
        "v1_completions", "health"}},
  };
  for (const auto& [protocol, endpoints] : needed) {
    const auto files = list_protocol_fixtures(protocol);
    for (const auto& e : endpoints) {
      EXPECT_NE(std::find(files.begin(), files.end(), e + ".json"), files.end()) << protocol << "/" << e;
    }
  }
}

TEST(ProtocolFixtureTables, EveryFixtureIsWellFormedAndItsExamplesConform) {
  int checked = 0;
  for (const auto& protocol : list_protocols()) {
    const auto files = list_protocol_fixtures(protocol);
    EXPECT_FALSE(files.empty()) << protocol;
    for (const auto& file : files) {
      const std::string where = protocol + "/" + file;
      json fx;
      ASSERT_NO_THROW(fx = load_protocol_fixture(protocol, file)) << where;
      ASSERT_TRUE(fx.is_object()) << where;

      ASSERT_TRUE(fx.contains("source") && fx.at("source").is_array() && !fx.at("source").empty()) << where;
      for (const auto& s : fx.at("source")) {
        EXPECT_TRUE(s.is_string() && !s.get<std::string>().empty()) << where;
      }

      ASSERT_TRUE(fx.contains("method") && fx.at("method").is_string()) << where;
      const std::string method = fx.at("method").get<std::string>();
      EXPECT_TRUE(method == "GET" || method == "POST" || method == "PUT") << where << ": " << method;
      if (fx.contains("methods")) {
        const auto& methods = fx.at("methods");
        EXPECT_NE(std::find(methods.begin(), methods.end(), method), methods.end()) << where;
      }
      ASSERT_TRUE(fx.contains("path") && fx.at("path").is_string()) << where;
      const std::string path = fx.at("path").get<std::string>();
      ASSERT_FALSE(path.empty()) << where;
      EXPECT_EQ(path.front(), '/') << where;
      EXPECT_EQ(file_for_path(path), file) << where;

      if (fx.contains("query")) {
        for (const auto& q : fx.at("query").items()) {
          for (const auto& t : wsb::test::split_type_union(q.value().get<std::string>())) {
            EXPECT_TRUE(kTypeNames.count(t)) << where << ": query " << q.key();
          }
        }
      }

      ASSERT_TRUE(fx.contains("request")) << where;
      if (!fx.at("request").is_null()) {
        EXPECT_NE(method, "GET") << where << ": a GET fixture records no body";
        expect_well_formed_table(fx.at("request"), where + " request");
        EXPECT_TRUE(fx.at("request").contains("example")) << where << " request example";
      }

      ASSERT_TRUE(fx.contains("response")) << where;
      expect_well_formed_reply(fx.at("response"), where + " response", false);
      const json errors = fx.value("errors", json::array());
      for (const auto& e : errors) expect_well_formed_reply(e, where + " error", true);
      ++checked;
    }
  }
  EXPECT_GE(checked, 50);
}

TEST(ProtocolFixtureTables, LoadAcceptsNamesWithOrWithoutExtension) {
  EXPECT_EQ(load_protocol_fixture("sglang", "health"), load_protocol_fixture("sglang", "health.json"));
  EXPECT_THROW(load_protocol_fixture("sglang", "no_such_endpoint"), std::runtime_error);
  EXPECT_THROW(list_protocol_fixtures("no-such-protocol"), std::runtime_error);
}

// ------------------------------------------------------------------------------------------ checker mutations

json disk_request() { return load_protocol_fixture("sglang", "update_weights_from_disk").at("request"); }
json checksum_response() { return load_protocol_fixture("sglang", "weights_checker").at("response"); }

TEST(ProtocolFieldChecker, ReportsAnUnknownTopLevelField) {
  const json table = disk_request();
  json body = table.at("example");
  body["weight_verison"] = "3";
  EXPECT_EQ(field_violations(table, body), (std::vector<std::string>{"unknown field \"weight_verison\""}));
}

TEST(ProtocolFieldChecker, ReportsAWrongType) {
  const json table = disk_request();
  json body = table.at("example");
  body["weight_version"] = 3;  // upstream SGLang wants a JSON string
  EXPECT_EQ(field_violations(table, body),
            (std::vector<std::string>{"field \"weight_version\": expected string|null, got integer"}));
  body["weight_version"] = nullptr;
  EXPECT_EQ(field_violations(table, body), std::vector<std::string>{});
}

TEST(ProtocolFieldChecker, ReportsAMissingRequiredField) {
  const json table = disk_request();
  json body = table.at("example");
  body.erase("model_path");
  EXPECT_EQ(field_violations(table, body), (std::vector<std::string>{"missing required field \"model_path\""}));
}

TEST(ProtocolFieldChecker, ReportsANestedWrongTypeInsideAnArrayElement) {
  const json table = checksum_response();
  json body = table.at("example");
  body["ranks"][0]["parallelism_info"]["tp_rank"] = "0";
  EXPECT_EQ(field_violations(table, body),
            (std::vector<std::string>{"field \"ranks[0].parallelism_info.tp_rank\": expected integer, got string"}));
}

TEST(ProtocolFieldChecker, ReportsNestedUnknownAndMissingFields) {
  const json table = checksum_response();
  json body = table.at("example");
  body["ranks"][0]["parallelism_info"]["ep_rank"] = 0;
  body["ranks"][0].erase("per_gpu_checksum");
  EXPECT_EQ(field_violations(table, body),
            (std::vector<std::string>{"unknown field \"ranks[0].parallelism_info.ep_rank\"",
                                      "missing required field \"ranks[0].per_gpu_checksum\""}));
}

TEST(ProtocolFieldChecker, DoesNotDescendIntoFreeMaps) {
  const json table = checksum_response();
  json body = table.at("example");
  body["ranks"][0]["checksums"]["model.layers.9.mlp.down_proj.weight"] = "00112233aabbccdd";
  EXPECT_EQ(field_violations(table, body), std::vector<std::string>{});
  body["ranks"][0]["checksums"] = json::array();  // the map itself is still type-checked
  EXPECT_EQ(field_violations(table, body),
            (std::vector<std::string>{"field \"ranks[0].checksums\": expected object, got array"}));
}

TEST(ProtocolFieldChecker, ChecksArrayElementsAndNestedRequestObjects) {
  const json gen = load_protocol_fixture("sglang", "generate");
  json response = gen.at("response").at("example");
  response["output_ids"][1] = "x";
  EXPECT_EQ(field_violations(gen.at("response"), response),
            (std::vector<std::string>{"field \"output_ids[1]\": expected integer, got string"}));

  json request = gen.at("request").at("example");
  request["sampling_params"]["max_tokens"] = 48;  // vLLM's name, not SGLang's
  request["sampling_params"]["max_new_tokens"] = "48";
  EXPECT_EQ(field_violations(gen.at("request"), request),
            (std::vector<std::string>{"field \"sampling_params.max_new_tokens\": expected integer|null, got string",
                                      "unknown field \"sampling_params.max_tokens\""}));
}

TEST(ProtocolFieldChecker, ReportsAValueOutsideItsEnum) {
  const json table = load_protocol_fixture("sglang", "pause_generation").at("request");
  EXPECT_EQ(field_violations(table, json{{"mode", "inplace"}}),
            (std::vector<std::string>{"field \"mode\": \"inplace\" is not one of abort|retract|in_place"}));
  EXPECT_EQ(field_violations(table, json{{"mode", "retract"}}), std::vector<std::string>{});
  EXPECT_EQ(field_violations(table, json::object()), std::vector<std::string>{});
}

TEST(ProtocolFieldChecker, ReportsAMissingOneOfGroupAndANonObjectBody) {
  const json table = load_protocol_fixture("sglang", "generate").at("request");
  EXPECT_EQ(field_violations(table, json{{"sampling_params", {{"temperature", 0}}}}),
            (std::vector<std::string>{"missing one of \"text\", \"input_ids\", \"input_embeds\""}));
  EXPECT_EQ(field_violations(table, json::array()), (std::vector<std::string>{"body: expected object, got array"}));
  EXPECT_THROW(field_violations(json::object(), json::object()), std::invalid_argument);
}

TEST(ProtocolFieldChecker, OpenObjectsAcceptUndeclaredKeys) {
  const json table = load_protocol_fixture("sglang", "generate").at("response");
  json body = table.at("example");
  body["meta_info"]["spec_accept_rate"] = 0.8;
  EXPECT_EQ(field_violations(table, body), std::vector<std::string>{});
  body["unexpected"] = true;  // the body itself is not open
  EXPECT_EQ(field_violations(table, body), (std::vector<std::string>{"unknown field \"unexpected\""}));
}

// The clients' real bodies differ across protocols; each conforms only where it belongs.
TEST(ProtocolFieldChecker, ClientBodiesBelongToTheirProtocol) {
  const json f_pull = load_protocol_fixture("stitch-v0.5.15", "pull_weights").at("request");
  const json h_pull = load_protocol_fixture("stitch-v0.5.15-host-runtime", "pull_weights").at("request");
  const json runtime_pull = h_pull.at("example");
  EXPECT_EQ(field_violations(h_pull, runtime_pull), std::vector<std::string>{});
  EXPECT_EQ(field_violations(f_pull, runtime_pull), (std::vector<std::string>{"unknown field \"prepare\""}));

  const json f_disk = load_protocol_fixture("stitch-v0.5.15", "update_weights_from_disk").at("request");
  const json u_disk = disk_request();
  EXPECT_EQ(field_violations(u_disk, f_disk.at("example")), (std::vector<std::string>{"unknown field \"weight_names\""}));

  const json staging_commit = load_protocol_fixture("stitch-staging", "commit_weight_update").at("request");
  EXPECT_EQ(field_violations(staging_commit, json{{"target_version", "7"}}),
            (std::vector<std::string>{"field \"target_version\": expected integer, got string"}));

  const json rpc = load_protocol_fixture("vllm", "collective_rpc").at("request");
  EXPECT_EQ(field_violations(rpc, json{{"args", json::array({"/ckpt/v3"})}}),
            (std::vector<std::string>{"missing required field \"method\""}));
}

}  // namespace
