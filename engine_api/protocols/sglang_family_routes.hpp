#pragma once
// The server side every SGLang-family route set shares (wsbench serve --protocol sglang | stitch-*): request
// bodies read with the real schema's coercions and refusals, the endpoints all of them answer (/generate,
// /model_info, /server_info, /weights_checker, /flush_cache, /pause_generation, /continue_generation), and SGLang's
// locking around weight updates. Keys of the sources as in sglang_family.hpp; tc =
// python/sglang/srt/managers/tokenizer_control_mixin.py, sch = python/sglang/srt/managers/scheduler.py,
// wu = python/sglang/srt/managers/scheduler_components/weight_updater.py.
#include <condition_variable>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine_api/protocols/serve_routes.hpp"

namespace wsb::sglang {

/// A request the real server's schema refuses before any handler runs (FastAPI/pydantic validation).
class InvalidRequest : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// Typed access to a JSON request body with pydantic's lax coercions (the request structs are msgspec Structs
/// validated through a pydantic core schema that ignores unknown keys,
/// U:python/sglang/srt/utils/msgspec_utils.py:67-95): an int accepts an integral number or a decimal string, a bool
/// true/false, 0/1 or "true"/"false", a str only a string; an Optional field accepts null. Throws InvalidRequest with
/// the message a validation error carries.
class Body {
 public:
  /// A request without a body reads as an empty object (every required field is then "Field required").
  explicit Body(const HttpRequest& request);
  const nlohmann::json& raw() const { return body_; }
  /// The raw value, or nullptr when absent or null.
  const nlohmann::json* find(const std::string& key) const;
  std::string required_string(const std::string& key) const;
  std::optional<std::string> optional_string(const std::string& key) const;
  int64_t required_int(const std::string& key) const;
  std::optional<int64_t> optional_int(const std::string& key) const;
  bool optional_bool(const std::string& key, bool fallback) const;
  /// A string that must be one of `allowed` (a Literal field); `fallback` when absent.
  std::string literal(const std::string& key, const std::vector<std::string>& allowed,
                      const std::string& fallback) const;

 private:
  nlohmann::json body_;
};

/// HTTP 400 with FastAPI's ErrorResponse {object: "error", message, type: "Bad Request", param: null, code: 400}
/// (U:hs:541-584), the answer to a request the schema refuses.
HttpReply validation_reply(const InvalidRequest& error);
/// {"error": {"message"}} with `status` (U:hs:1996-1999), the answer /generate gives a request it cannot serve.
HttpReply error_reply(int status, const std::string& message);
/// An update endpoint's answer: {success, message} plus `extra`, HTTP 200 on success, else 400 (U:hs:1161-1187).
HttpReply update_reply(bool success, const std::string& message, nlohmann::json extra = nlohmann::json::object());
/// The message a fork's update endpoint gives for an exception it caught (traceback.format_exc(), F:wu:153-155):
/// a Python traceback whose last line is `<exception type>: <message>`; a missing source is FileNotFoundError.
std::string traceback_message(const std::exception& error);
/// True when both name the same folder (after resolving . and .. and symbolic links of existing parts).
bool same_path(const std::filesystem::path& a, const std::filesystem::path& b);

/// What the routes of one SGLang-family server share besides ServeState: requests in flight, the pause
/// (is_pause, tm:1729-1749), a writer-preferring view of ServeState::model_update_lock (an asyncio RWLock whose
/// waiting writers block new readers, U:python/sglang/srt/utils/aio_rwlock.py:43-70; std::shared_mutex gives no
/// such order), and the served model path. Built after the engine's native load.
class FamilyServer {
 public:
  explicit FamilyServer(ServeState& state);
  ServeState& state() { return state_; }
  Engine& engine() { return state_.engine(); }

  /// Fields a protocol adds to /model_info or /server_info (e.g. the staging fork's weight_update_staging).
  using InfoHook = std::function<void(nlohmann::json&)>;
  /// /generate (POST), /model_info (GET), /server_info (GET), /weights_checker (GET and POST), /flush_cache (GET
  /// and POST), /pause_generation and /continue_generation (POST).
  std::vector<Route> common_routes(InfoHook server_info = {});

  /// Runs one weight update with SGLang's locking (tm:1767-1776; tc:476-507): while paused it runs at once under
  /// the held pause (the engine's pause mode applies); otherwise it first takes the model-update lock exclusively,
  /// so requests in flight finish on the old weights and new ones wait (drain) — unless `abort_all_requests`,
  /// which aborts them first (tm:1763-1764). `commit` receives the pause mode the engine should use when unpaused.
  /// The report is recorded (ServeState::record_commit); a commit inside a pause is recorded again by
  /// /continue_generation with the pause it measured.
  CommitReport run_update(bool abort_all_requests, const std::function<CommitReport(PauseMode)>& commit);
  /// run_update's locking around an update that may leave the weights as they are (a refit bucket the engine only
  /// buffers): nothing is recorded.
  void run_locked(bool abort_all_requests, const std::function<void(PauseMode)>& update);
  /// Records a commit run under run_locked (ServeState::record_commit; again at /continue_generation when paused).
  void record_commit(const CommitReport& report);
  /// The message of SGLang's failed post-update flush when `flush_cache` would fail now: requests are held by an
  /// in_place pause (io:1499-1500; the flush asserts, wu:103-108), else nullopt. A flush before the commit (the
  /// stage/staging forks) fails likewise.
  bool flush_would_fail() const;
  /// The pause mode in effect, nullopt when not paused.
  std::optional<PauseMode> pause_mode() const;

  /// The model path /model_info reports (the boot checkpoint until a disk update names another).
  std::filesystem::path model_path() const;
  void set_model_path(const std::filesystem::path& path);
  /// The engine version served at boot.
  uint32_t boot_version() const { return boot_version_; }
  /// The folder holding the store's weight_vNNNNNN/ directories: the engine's store / "updates".
  std::filesystem::path updates_dir() const;
  /// The sync mode the engine runs ("disk", "cpu", "refit").
  std::string engine_mode() const;

  /// Records that the engine now serves `engine_version` as `text` (nullopt: the served text is kept).
  void set_served(uint32_t engine_version, const std::optional<std::string>& text);
  /// /weights_checker reports parallelism_info as a list with one entry per role ({role: "target", ...}), as the
  /// --weight-update-staging fork does, instead of upstream's one object.
  void set_parallelism_per_role() { parallelism_per_role_ = true; }

 private:
  HttpReply generate(const HttpRequest& request);
  HttpReply model_info();
  HttpReply server_info(const InfoHook& hook);
  HttpReply weights_checker(const HttpRequest& request);
  HttpReply flush_cache(const HttpRequest& request);
  HttpReply pause(const HttpRequest& request);
  HttpReply resume(const HttpRequest& request);

  ServeState& state_;
  uint32_t boot_version_ = 0;
  std::mutex control_;     // serializes pause, continue and the commit of every update
  mutable std::mutex mu_;  // guards the members below
  std::condition_variable cv_;
  bool paused_ = false;
  std::optional<PauseMode> pause_mode_;
  int writers_waiting_ = 0;
  int in_flight_ = 0;  ///< /generate requests inside the engine
  std::optional<CommitReport> commit_in_pause_;
  std::filesystem::path model_path_;
  uint64_t next_rid_ = 0;
  bool parallelism_per_role_ = false;
};

/// Wraps a handler so that InvalidRequest becomes validation_reply.
std::function<HttpReply(const HttpRequest&)> validated(std::function<HttpReply(const HttpRequest&)> handler);
/// `routes` with every handler holding `owner` (the object their handlers point into) alive.
std::vector<Route> owned_by(std::shared_ptr<void> owner, std::vector<Route> routes);

}  // namespace wsb::sglang
