// The HTTP engine API's JSON: exact round trips (logprob bits survive), SGLang-shaped responses without the wsbench
// extras, and wrong shapes rejected with the endpoint and the field named.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>

#include "engine_api/http_api.hpp"
#include "tests/support/test_support.hpp"

namespace wsb {
namespace {

using json = nlohmann::json;

TEST(EngineApi, GenerateResponseRoundTripKeepsLogprobBitsAndFingerprint) {
  GenerateResponse r;
  r.output_ids = {65, 300, 7};
  r.text = detokenize(r.output_ids);
  r.logprobs = {-0.1f, std::nextafter(-2.5f, 0.0f), -1e-7f};
  r.weight_version = 12;
  r.step_times = {1.5, 1.75};
  r.restarts = 1;
  const GenerateResponse back =
      api::parse_generate_response(json::parse(api::generate_response_json(r).dump()), "POST /generate");
  EXPECT_EQ(back.output_ids, r.output_ids);
  EXPECT_EQ(back.text, "A<|300|>\x07");
  ASSERT_EQ(back.logprobs.size(), 3u);
  for (size_t i = 0; i < 3; ++i) EXPECT_EQ(std::bit_cast<uint32_t>(back.logprobs[i]), std::bit_cast<uint32_t>(r.logprobs[i]));
  EXPECT_EQ(back.weight_version, 12u);
  ASSERT_EQ(back.step_times.size(), 2u);  // CLOCK_MONOTONIC on the wire, this process's steady_seconds() again here
  EXPECT_NEAR(back.step_times[0], 1.5, 1e-6);
  EXPECT_NEAR(back.step_times[1], 1.75, 1e-6);
  EXPECT_EQ(back.restarts, 1);
  EXPECT_EQ(fingerprint(back), fingerprint(r));
  EXPECT_EQ(api::generate_response_json(r)["meta_info"]["weight_version"], "000012");
}

TEST(EngineApi, SglangShapedResponseWithoutExtrasParses) {
  const json j = json::parse(R"({"text": "hi", "output_ids": [104, 105],
      "meta_info": {"weight_version": "3", "output_token_logprobs": [[-0.5, 104, null], [-0.25, 105, "i"]],
                    "finish_reason": {"type": "length"}}})");
  const GenerateResponse r = api::parse_generate_response(j, "POST /generate");
  EXPECT_EQ(r.weight_version, 3u);
  EXPECT_EQ(r.logprobs, (std::vector<float>{-0.5f, -0.25f}));
  EXPECT_TRUE(r.step_times.empty());
  EXPECT_EQ(r.restarts, 0);
}

TEST(EngineApi, WrongShapesNameTheEndpointAndTheField) {
  const std::string ep = "POST /generate";
  test::expect_error([&] { api::parse_generate_response(json{{"unexpected", true}}, ep); }, ErrorKind::Format,
                     {"POST /generate: field 'text' is missing"});
  test::expect_error([&] { api::parse_generate_response(json::array(), ep); }, ErrorKind::Format,
                     {"POST /generate: the response must be a JSON object, got array"});
  test::expect_error(
      [&] { api::parse_generate_response(json{{"text", ""}, {"output_ids", {1}}, {"meta_info", json::object()}}, ep); },
      ErrorKind::Format, {"POST /generate: field 'meta_info.weight_version' is missing"});
  test::expect_error(
      [&] {
        api::parse_generate_response(
            json{{"text", ""}, {"output_ids", {1}}, {"meta_info", {{"weight_version", "v1"}}}}, ep);
      },
      ErrorKind::Format, {"POST /generate: field 'meta_info.weight_version': 'v1' is not a version"});
  test::expect_error(
      [&] {
        api::parse_generate_response(json{{"text", ""}, {"output_ids", {1, 2}},
                                          {"meta_info", {{"weight_version", 1}, {"output_token_logprobs", {{-1.0, 1, nullptr}}}}}},
                                     ep);
      },
      ErrorKind::Format, {"field 'meta_info.output_token_logprobs' has 1 entries for 2 output_ids"});
  test::expect_error([&] { api::parse_checksums(json{{"success", true}, {"checksums", json::array()}}, "POST /weights_checker"); },
                     ErrorKind::Format, {"POST /weights_checker: field 'checksums' lists no TP rank"});
  test::expect_error([&] { api::parse_prepare_response(json{{"success", false}, {"message", "no"}}, 1, "POST /p"); },
                     ErrorKind::Format, {"POST /p: success is false: no"});
  test::expect_error([&] { api::parse_commit_response(json{{"success", true}, {"weight_version", 2}}, 3, "POST /c"); },
                     ErrorKind::Format, {"POST /c: committed 000003 but weight_version is 000002"});
}

TEST(EngineApi, GenerateRequestIsGreedyOnly) {
  GenerateRequest request;
  request.input_ids = {1, 2, 3};
  request.max_new_tokens = 5;
  const GenerateRequest back = api::parse_generate_request(api::generate_request_json(request), "POST /generate");
  EXPECT_EQ(back.input_ids, request.input_ids);
  EXPECT_EQ(back.max_new_tokens, 5);
  EXPECT_TRUE(back.return_logprob);
  test::expect_error(
      [] {
        api::parse_generate_request(json{{"input_ids", {1}}, {"sampling_params", {{"temperature", 0.7}}}}, "POST /generate");
      },
      ErrorKind::Format, {"POST /generate: field 'sampling_params.temperature' must be 0 (greedy decoding only)"});
  test::expect_error([] { api::parse_generate_request(json{{"input_ids", {-1}}}, "POST /generate"); }, ErrorKind::Format,
                     {"field 'input_ids[]' must be 0..2147483647, got -1"});
}

TEST(EngineApi, VersionsAndErrorKinds) {
  EXPECT_EQ(api::parse_version(json(7), "v"), 7u);
  EXPECT_EQ(api::parse_version(json("000042"), "v"), 42u);
  test::expect_error([] { api::parse_version(json(-1), "v"); }, ErrorKind::Format, {"v: version -1 out of range"});
  test::expect_error([] { api::parse_version(json(1.5), "v"); }, ErrorKind::Format,
                     {"v: a version must be an integer or a string of digits, got 1.5"});
  EXPECT_EQ(api::parse_error_kind("missing"), ErrorKind::Missing);
  EXPECT_EQ(api::parse_error_kind("state"), ErrorKind::State);
  EXPECT_FALSE(api::parse_error_kind("nope").has_value());
}

}  // namespace
}  // namespace wsb
