#pragma once
// The wsbench subcommands. Each returns the process exit code; errors throw wsb::Error (printed by main).
#include <cstdint>
#include <filesystem>
#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

#include "core/sync_options.hpp"

namespace wsb {

/// `wsbench models`: every profile with canonical bytes and per-rank runtime bytes at `tp`, on `out`. A profile file
/// that cannot be read (bad JSON, a bad field, an id other than its file name) is named with its error on `err` and
/// left out while the others are listed; then 2 is returned (bad input), else 0. Throws Error(Missing) when the
/// folder does not exist.
int cmd_models(const std::filesystem::path& profiles_dir, int tp, std::ostream& out, std::ostream& err);

struct PublishArgs {
  std::string model;
  /// --from-checkpoints DIR0 DIR1 ...: publish real consecutive checkpoints instead of a synthetic model
  std::vector<std::filesystem::path> from_checkpoints;
  std::filesystem::path store;
  std::optional<std::string> versions;  ///< "A..B", or "N" = "0..N" (as a matrix's publish_versions N); absent: 0..3
  std::optional<uint64_t> seed;         ///< absent: 0
  std::string encoding = "xor";         ///< xor | overwrite | auto (--from-checkpoints only)
  uint64_t frame_bytes = 0;  ///< xor mask bytes per zstd frame; 0: one frame per payload ("zstd")
  uint64_t checksum_range_bytes = 0;  ///< bytes per DELTA checksum range; 0: one xxh3-128 per tensor
  std::optional<double> density;
  std::optional<int> layers;
  std::optional<int> experts;
  int threads = 1;  ///< publish worker threads
  bool fsync = false;
  std::filesystem::path json;  ///< the publications as a cell's results record them (harness/publication_record.hpp)
};
/// `wsbench publish`: synthetic deterministic publications into a store (--model), or FULL v0 and one DELTA per
/// following directory of real consecutive checkpoints (--from-checkpoints, publisher/checkpoint_publisher.hpp).
/// Prints per version its kind, encoding, bytes, compression ratio and changed-element density (overall, then per
/// class of codes). Throws Error(Format) for a missing or contradictory option (--model with --from-checkpoints,
/// one directory, --versions / --seed / --density / --layers / --experts with --from-checkpoints, --encoding auto
/// without it), plus the publishers' errors.
int cmd_publish(const std::filesystem::path& profiles_dir, const PublishArgs& args);

struct ForwardArgs {
  std::filesystem::path checkpoint;  ///< Hugging Face checkpoint directory
  std::string tokens;                ///< "1,17,42"
  int tp = 1;
  std::string backend = "cpu";       ///< cpu | cuda
  std::filesystem::path json;        ///< output file; "-" = stdout
};
/// `wsbench forward` (cli/cmd_forward.cpp for the JSON): teacher-forced logits of the reference forward.
/// Throws parse_token_list's, profile_from_hf_dir's and teacher_forced_logits' errors, Error(Io) when OUT cannot be
/// written.
int cmd_forward(const ForwardArgs& args);
/// "1, 17,42" -> {1, 17, 42}. Throws Error(Format) naming the item that is not an int32.
std::vector<int32_t> parse_token_list(std::string_view text);

/// `wsbench cell` (internal: the child process of `run`): runs one matrix cell, writes its JSON to `out`.
int cmd_cell(const std::filesystem::path& matrix, const std::string& cell_id, const std::filesystem::path& out,
             const std::filesystem::path& workdir, const std::filesystem::path& profiles_dir, bool keep_workdir);

struct RunArgs {
  std::filesystem::path matrix;
  std::filesystem::path out = "results";
  std::string filter;         ///< regex over cell ids
  std::string shard;          ///< "K/N" (harness/shard.hpp); empty: the whole selection
  bool keep_workdir = false;
  bool quiet = false;         ///< no progress lines
  bool json_progress = false; ///< one JSON object per progress event on stderr
};
/// `wsbench run`: the matrix, results.json + report.md under `out`, tables on stdout; 1 when any cell failed.
/// Progress on stderr: rewritten in place on a TTY, plain lines otherwise (progress_display.hpp).
int cmd_run(const std::filesystem::path& profiles_dir, const RunArgs& args);

struct ServeArgs {
  std::string protocol = "stitch-staging";      ///< --protocol (engine_api/protocols/protocol.hpp)
  std::optional<std::string> weight_version;   ///< --weight-version: the boot version text; absent: "default"
  std::string model;
  SyncOptions sync{};                ///< --mode, --commit-strategy, --delta-staging-bytes
  int tp = 1;
  std::filesystem::path store;
  std::filesystem::path checkpoint;  ///< FULL checkpoint to boot from
  std::optional<uint32_t> version;   ///< its version; absent: the version its index records (0 if none)
  std::filesystem::path workdir;     ///< the mode's private files
  std::string host = "127.0.0.1";
  int port = 0;                      ///< 0: any free port (printed)
  int prepare_threads = 2;
  std::string backend = "cpu";
  std::optional<int> layers;
  std::optional<int> experts;
  std::vector<std::string> faults;   ///< test faults (engine_api/serve.hpp ServeFaults)
};
/// `wsbench serve`: the embedded engine as an HTTP server (engine_api/serve.hpp) until SIGTERM/SIGINT; 0 then.
int cmd_serve(const std::filesystem::path& profiles_dir, const ServeArgs& args);

struct SoakArgs {
  std::string model = "llama-tiny-bf16";
  int tp = 2;
  int cycles = 100;
  int warmup = 10;
  std::string max_deviation = "2%";  ///< "2%" or a fraction "0.02"
  uint64_t seed = 0;
  std::string encoding = "xor";
  int prepare_threads = 2;
  std::filesystem::path workdir;   ///< empty: a fresh folder under the temp dir, removed afterwards
  bool keep_workdir = false;       ///< keep that fresh folder
  std::filesystem::path json;      ///< every cycle's readings and the figures; empty: none
};
/// `wsbench soak` (harness/soak.hpp): the figures and tables on stdout, progress on stderr; 0 when every update was
/// exact and every judged resource stayed flat, 1 otherwise.
int cmd_soak(const std::filesystem::path& profiles_dir, const SoakArgs& args);

/// `wsbench physics`: the floors of this machine (host memcpy, disk read of `dir`).
int cmd_physics(const std::filesystem::path& dir, uint64_t bytes, int threads);

struct InspectArgs {
  std::filesystem::path checkpoint;        ///< checkpoint directory (index + shards, or model.safetensors) or one file
  std::filesystem::path json_out;          ///< write the JSON here ("-" = stdout instead of the table); empty: none
  bool values = false;                     ///< decode every tensor's values (JSON: all of them; table: the first 8)
  std::vector<std::string> decode;         ///< "TENSOR=KIND" requests overriding the automatic decode
  std::filesystem::path base;              ///< DELTA only: the FULL publication of its base version (show changes)
};
/// `wsbench inspect`: per tensor name, dtype, shape, file, bytes, sha256 and optionally decoded values
/// (cli/inspect.hpp).
int cmd_inspect(const InspectArgs& args);

/// `wsbench codecs`: wsbench's E4M3/E5M2/E8M0/E2M1/BF16/F16 decode tables and encoder probes as JSON ("-" or empty:
/// stdout).
int cmd_codecs(const std::filesystem::path& json_out);

}  // namespace wsb
