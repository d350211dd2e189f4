#include "engine_api/protocols/sglang_tensor_update.hpp"

#include <fmt/format.h>

#include "core/errors.hpp"

namespace wsb::sglang {

using json = nlohmann::json;

HttpReply TensorUpdates::handle(const HttpRequest& request) {
  const Body body(request);
  if (!body.raw().contains("serialized_named_tensors")) {
    throw InvalidRequest(
        "1 validation error:\n  {'type': 'missing', 'loc': ('body', 'serialized_named_tensors'), 'msg': 'Field "
        "required'}\n [{'type': 'missing', 'loc': ('body', 'serialized_named_tensors'), 'msg': 'Field required'}]");
  }
  const json* payloads = body.find("serialized_named_tensors");
  if (!payloads || !payloads->is_array()) {
    throw InvalidRequest(
        "1 validation error:\n  {'type': 'list_type', 'loc': ('body', 'serialized_named_tensors'), 'msg': 'Input "
        "should be a valid list'}\n [{'type': 'list_type', 'loc': ('body', 'serialized_named_tensors'), 'msg': "
        "'Input should be a valid list'}]");
  }
  for (const json& p : *payloads) {
    if (!p.is_string()) {
      throw InvalidRequest(
          "1 validation error:\n  {'type': 'string_type', 'loc': ('body', 'serialized_named_tensors', 0), 'msg': "
          "'Input should be a valid string'}\n [{'type': 'string_type', 'loc': ('body', 'serialized_named_tensors', "
          "0), 'msg': 'Input should be a valid string'}]");
    }
  }
  const std::optional<std::string> load_format = body.optional_string("load_format");
  const std::optional<std::string> weight_version = body.optional_string("weight_version");
  const bool flush_cache = body.optional_bool("flush_cache", true);
  const bool abort_all = body.optional_bool("abort_all_requests", false);

  // Python's repr of the decoded list is what a real traceback would print; the message names what went wrong.
  auto failed = [](const std::string& why) { return update_reply(false, "Failed to update weights: " + why); };
  if (load_format && *load_format != "direct") {
    // flattened_bucket's dict and custom loaders are not tensor lists (model_runner weight_updater.py:278-305).
    return failed(fmt::format("wsbench serve loads load_format null or 'direct', not '{}'", *load_format));
  }
  Engine& engine = server_.engine();
  const size_t tp = engine.layouts().size();
  if (payloads->size() < tp) {
    return failed(fmt::format("serialized_named_tensors has {} entries for {} TP ranks (rank r reads entry r)",
                              payloads->size(), tp));
  }
  const std::string& first = (*payloads)[0].get_ref<const std::string&>();
  for (size_t r = 1; r < tp; ++r) {
    if ((*payloads)[r].get_ref<const std::string&>() != first) {
      return failed(
          fmt::format("serialized_named_tensors[{}] differs from [0]: every TP rank of the embedded engine "
                      "shards the same canonical tensors",
                      r));
    }
  }
  std::vector<torch_pickle::NamedTensor> tensors;
  try {
    const std::vector<uint8_t> pickle = torch_pickle::base64_decode(first);
    tensors = torch_pickle::decode({reinterpret_cast<const char*>(pickle.data()), pickle.size()});
  } catch (const Error& e) {
    return failed(e.what());
  }
  const std::vector<TensorSpec> canonical = engine.options().profile.canonical_tensors();
  std::map<std::string, const TensorSpec*> specs;
  for (const auto& spec : canonical) specs[spec.name] = &spec;
  for (const auto& t : tensors) {
    auto it = specs.find(t.name);
    if (it == specs.end()) return failed(fmt::format("'{}' is not a tensor of the model", t.name));
    const TensorSpec& spec = *it->second;
    if (spec.dtype != t.dtype || spec.shape != t.shape) {
      return failed(fmt::format("'{}' is {} {}, the model expects {} {}", t.name, dtype_name(t.dtype),
                                json(t.shape).dump(), dtype_name(spec.dtype), json(spec.shape).dump()));
    }
  }
  if (flush_cache && server_.flush_would_fail()) {
    return json_reply(500,
                      json{{"success", false},
                           {"message",
                            "AssertionError: Cache flush failed after updating weights (flush_cache true while an "
                            "in_place pause holds requests; a real scheduler dies here after loading the weights)"}});
  }
  try {
    server_.run_locked(abort_all, [&](PauseMode mode) {
      std::lock_guard lock(mu_);
      for (auto& t : tensors) pending_[t.name] = std::move(t);
      if (pending_.size() < canonical.size()) {
        // The weights stay as they are until the set is complete; a version given now labels what is served.
        if (weight_version) server_.set_served(engine.weight_version(), weight_version);
        return;
      }
      const uint32_t version = server_.state().engine_version_for(weight_version);
      const CommitReport report = engine.commit_canonical(
          [this](const std::string& name) -> std::span<const uint8_t> { return pending_.at(name).bytes; }, version,
          mode);
      pending_.clear();
      server_.set_served(version, weight_version);
      server_.record_commit(report);
    });
  } catch (const Error& e) {
    {
      std::lock_guard lock(mu_);
      pending_.clear();
    }
    if (e.kind() == ErrorKind::Fatal) {
      return json_reply(
          500, json{{"success", false},
                    {"message", fmt::format("Failed to update weights: {}. The engine stopped serving.", e.what())}});
    }
    return failed(e.what());
  }
  std::string message = "Success";
  if (weight_version) message += fmt::format(" Weight version updated to {}.", *weight_version);
  return update_reply(true, message);
}

}  // namespace wsb::sglang
