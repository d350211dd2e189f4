// wsbench: benchmark and profiling harness for LLM weight-sync modes.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <iostream>

#include "cli/cmd_report.hpp"
#include "engine/cuda/cuda_ipc.hpp"
#include "cli/commands.hpp"
#include "engine_api/protocols/protocol.hpp"
#include "cli/enum_option.hpp"
#include "core/errors.hpp"
#include "modes/refit/host_device_ipc.hpp"
#include "modes/refit/sender_job.hpp"

int main(int argc, char** argv) {
  namespace fs = std::filesystem;
  CLI::App app{"wsbench: benchmark and profiling harness for LLM weight-sync modes"};
  app.require_subcommand(1);
  fs::path profiles;
  app.add_option("--profiles", profiles, "model profiles folder (default: models/profiles)");

  int models_tp = 1;
  auto* models = app.add_subcommand("models", "list model profiles with canonical and per-rank bytes");
  models->add_option("--tp", models_tp, "tensor-parallel size for the per-rank column")->check(CLI::Range(1, 64));

  wsb::PublishArgs publish_args;
  auto* publish = app.add_subcommand(
      "publish", "write publications into a store: synthetic deterministic versions of a profile (--model), or real "
                 "consecutive checkpoints (--from-checkpoints)");
  publish->add_option("--model", publish_args.model, "profile id");
  publish->add_option("--from-checkpoints", publish_args.from_checkpoints,
                      "DIR0 DIR1 [DIR2 ...]: Hugging Face checkpoint directories a trainer saved in order; FULL v0 from "
                      "DIR0, one DELTA per following directory (instead of --model)");
  publish->add_option("--store", publish_args.store, "store directory")->required();
  publish->add_option("--versions", publish_args.versions, "N: FULL v0 and DELTA v1..vN (as a matrix's publish_versions N); A..B: versions A to B (0 = "
                      "FULL, later = DELTA; A > 0 appends to the store); default 0..3");
  publish->add_option("--seed", publish_args.seed, "seed (default 0)");
  publish->add_option("--encoding", publish_args.encoding,
                      "xor | overwrite | auto (--from-checkpoints only: per publication, the encoding whose payloads "
                      "sum to fewer bytes; the format records one encoding per publication, not per tensor)")
      ->check(CLI::IsMember({"xor", "overwrite", "auto"}));
  publish->add_option("--json", publish_args.json, "also write the per-version figures here (JSON)");
  publish->add_option("--frame-bytes", publish_args.frame_bytes,
                      "xor mask bytes per zstd frame: 0 one frame per payload (compression_format zstd, what the "
                      "Stitch/SGLang fork reads); > 0 compression_format zstd-frames (decoded on several threads "
                      "per tensor)");
  publish->add_option("--checksum-range-bytes", publish_args.checksum_range_bytes,
                      "DELTA checksum bytes per range: 0 one xxh3-128 per tensor (checksum_format xxh3-128, what the "
                      "Stitch/SGLang fork reads); > 0, a multiple of 1 MiB, checksum_format xxh3-128-ranges (a large "
                      "tensor verified on several threads)");
  publish->add_option("--density", publish_args.density, "fraction of values moved per version")->check(CLI::Range(0.0, 1.0));
  publish->add_option("--layers", publish_args.layers, "keep only the first N layers");
  publish->add_option("--experts", publish_args.experts, "keep only the first N routed experts");
  publish->add_option("--threads", publish_args.threads, "worker threads (same bytes for any count)")
      ->check(CLI::Range(1, 256));
  publish->add_flag("--fsync", publish_args.fsync, "fsync every shard");

  wsb::RunArgs run_args;  // OUT/results.json, OUT/report.md, OUT/cells/, OUT/work/
  bool keep = false;
  auto* run = app.add_subcommand("run", "run a matrix: every cell in a fresh process; results.json, report.md, tables");
  run->add_option("matrix", run_args.matrix, "matrix JSON (e.g. matrices/smoke.json)")->required()->check(CLI::ExistingFile);
  run->add_option("--out", run_args.out, "output folder");
  run->add_option("--filter", run_args.filter, "regex over cell ids");
  run->add_option("--shard", run_args.shard, "K/N: run cells K, K+N, K+2N, ... (0-based) of the filtered list");
  run->add_flag("--keep-workdir", run_args.keep_workdir, "keep stores and checkpoints under OUT/work");
  auto* quiet = run->add_flag("--quiet", run_args.quiet, "no progress lines");
  run->add_flag("--json-progress", run_args.json_progress, "one JSON object per progress event on stderr")->excludes(quiet);

  fs::path cell_matrix, cell_out, cell_workdir;
  std::string cell_id;
  auto* cell = app.add_subcommand("cell", "run one cell of a matrix (the child process of run)");
  cell->add_option("--matrix", cell_matrix)->required();
  cell->add_option("--cell", cell_id)->required();
  cell->add_option("--out", cell_out)->required();
  cell->add_option("--workdir", cell_workdir)->required();
  cell->add_flag("--keep-workdir", keep);
  cell->group("");  // internal

  wsb::ServeArgs serve_args;
  auto* serve = app.add_subcommand("serve", "the embedded engine behind a real engine's weight-update HTTP API on loopback");
  serve->add_option("--protocol", serve_args.protocol,
                    "the API to speak: sglang | stitch-v0.5.15 | stitch-v0.5.15-host-runtime | stitch-v0.5.16 | "
                    "stitch-staging | vllm")
      ->check(CLI::IsMember(wsb::protocol_names()));
  serve->add_option("--weight-version", serve_args.weight_version,
                    "the version text reported at boot (as the real servers' flag); absent: \"default\"");
  serve->add_option("--model", serve_args.model, "profile id")->required();
  // Served engines run the store modes; refit streams from an in-process trainer simulator.
  serve->add_option("--mode", serve_args.sync.mode, "sync mode: disk | cpu")
      ->transform(CLI::CheckedTransformer(wsb::enum_names<wsb::SyncModeKind>(wsb::sync_mode_names(), {"disk", "cpu"})));
  serve->add_option("--commit-strategy", serve_args.sync.cpu.commit_strategy, "cpu mode: full | device-delta")
      ->transform(CLI::CheckedTransformer(wsb::enum_names<wsb::CommitStrategy>(wsb::commit_strategy_names())));
  serve->add_option("--delta-staging-bytes", serve_args.sync.cpu.delta_staging_bytes,
                    "device-delta staging area per device, bytes (0: the engine's default)");
  serve->add_option("--tp", serve_args.tp, "tensor-parallel size")->check(CLI::Range(1, 64));
  serve->add_option("--store", serve_args.store, "publication store the mode reads")->required();
  serve->add_option("--checkpoint", serve_args.checkpoint, "FULL checkpoint to boot from (native load)")
      ->required()->check(CLI::ExistingDirectory);
  serve->add_option("--version", serve_args.version, "version of --checkpoint");
  serve->add_option("--workdir", serve_args.workdir, "the mode's private files")->required();
  serve->add_option("--host", serve_args.host, "address to listen on");
  serve->add_option("--port", serve_args.port, "port (0: any free one, printed)")->check(CLI::Range(0, 65535));
  serve->add_option("--prepare-threads", serve_args.prepare_threads, "prepare worker threads")->check(CLI::Range(1, 1024));
  serve->add_option("--backend", serve_args.backend, "cpu | cuda")->check(CLI::IsMember({"cpu", "cuda"}));
  serve->add_option("--layers", serve_args.layers, "keep only the first N layers");
  serve->add_option("--experts", serve_args.experts, "keep only the first N routed experts");
  serve->add_option("--fault", serve_args.faults, "tests only: a failure to show (engine_api/serve.hpp)")
      ->group("");

  wsb::SoakArgs soak_args;
  auto* soak = app.add_subcommand("soak", "many update cycles (disk and cpu, identity and real deltas): are RSS, page "
                                          "cache and open files flat?");
  soak->add_option("--model", soak_args.model, "profile id (a tiny preset: llama-tiny-bf16 by default)");
  soak->add_option("--tp", soak_args.tp, "tensor-parallel size")->check(CLI::Range(1, 64));
  soak->add_option("--cycles", soak_args.cycles, "update cycles, both modes together")->check(CLI::Range(4, 100000));
  soak->add_option("--warmup", soak_args.warmup, "cycles left out of the flatness window")->check(CLI::Range(0, 100000));
  soak->add_option("--max-deviation", soak_args.max_deviation, "allowed drift inside the window: \"2%\" or 0.02");
  soak->add_option("--seed", soak_args.seed, "publisher seed");
  soak->add_option("--encoding", soak_args.encoding, "xor | overwrite")->check(CLI::IsMember({"xor", "overwrite"}));
  soak->add_option("--prepare-threads", soak_args.prepare_threads, "prepare worker threads")->check(CLI::Range(1, 1024));
  soak->add_option("--workdir", soak_args.workdir, "an absent or empty folder to work in (kept)");
  soak->add_flag("--keep-workdir", soak_args.keep_workdir, "keep the temporary folder used without --workdir");
  soak->add_option("--json", soak_args.json, "write every cycle's readings and the figures here");

  wsb::ForwardArgs forward_args;
  auto* forward = app.add_subcommand(
      "forward", "teacher-forced float32 logits of the reference forward over a token sequence, from a Hugging Face "
                 "checkpoint directory (compare with transformers)");
  forward->add_option("checkpoint", forward_args.checkpoint, "checkpoint directory (config.json + safetensors)")
      ->required();
  forward->add_option("--tokens", forward_args.tokens, "token ids, comma-separated: 1,17,42")->required();
  forward->add_option("--tp", forward_args.tp, "tensor-parallel size")->check(CLI::Range(1, 64));
  forward->add_option("--backend", forward_args.backend, "cpu | cuda")->check(CLI::IsMember({"cpu", "cuda"}));
  forward->add_option("--json", forward_args.json, "output file ({\"logits\": [[...], ...]}; - for stdout)")
      ->required();

  fs::path physics_dir = ".";
  uint64_t physics_bytes = 256ull << 20;
  int physics_threads = 2;
  auto* physics = app.add_subcommand("physics", "measure the physical floors of this machine");
  physics->add_option("--dir", physics_dir, "existing folder whose filesystem is read (the store's)")
      ->check(CLI::ExistingDirectory);
  physics->add_option("--bytes", physics_bytes, "buffer size in bytes, a multiple of 4 MiB")
      ->check(CLI::Range(uint64_t{4} << 20, uint64_t{1} << 40));
  physics->add_option("--threads", physics_threads, "memcpy threads (the prepare thread count)")
      ->check(CLI::Range(1, 1024));

  wsb::ReportCommand report(app);  // report [table|merge|compare|trace] (cli/cmd_report.hpp)

  wsb::InspectArgs inspect_args;
  auto* inspect = app.add_subcommand("inspect", "list a checkpoint's tensors: dtype, shape, file, bytes, sha256, values");
  inspect->add_option("checkpoint", inspect_args.checkpoint, "checkpoint directory or .safetensors file")->required();
  inspect->add_option("--json", inspect_args.json_out, "write JSON here (- for stdout instead of the table)");
  inspect->add_flag("--values", inspect_args.values, "decode values (auto by dtype and quantization role)");
  inspect->add_option("--decode", inspect_args.decode,
                      "TENSOR=KIND overriding the automatic decode (repeatable); KIND: none int e4m3 e5m2 e8m0 e2m1 bf16 f16 "
                      "f32 f64")
      ->allow_extra_args(false)  // one value per --decode, so a following positional stays the checkpoint
      ->take_all();
  inspect->add_option("--base", inspect_args.base,
                      "DELTA publication: the FULL publication of its base version; shows each tensor's changes "
                      "(changed elements, first positions, old -> new values)");

  fs::path codecs_json;
  auto* codecs = app.add_subcommand("codecs", "wsbench's decode tables and encoder probes as JSON");
  codecs->add_option("--json", codecs_json, "output file (default: stdout)");

  auto* refit_sender = app.add_subcommand("refit-sender", "the trainer's sender ranks of one cuda-ipc refit");
  std::string refit_sender_ipc = "cuda";
  refit_sender->add_option("--ipc", refit_sender_ipc, "device memory: cuda, or host (tests without a GPU)")
      ->check(CLI::IsMember({"cuda", "host"}));
  refit_sender->group("");  // internal: started by the engine with its job on fd 3 (modes/refit/sender_job.hpp)

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help and --version exit 0; every usage error is bad input, exit 2 like the errors found in input files
    // (CLI11's own codes, 105-110, would say nothing to a script).
    return app.exit(e) == 0 ? 0 : 2;
  }
  try {
    if (profiles.empty()) profiles = wsb::default_profiles_dir();
    if (*models) return wsb::cmd_models(profiles, models_tp, std::cout, std::cerr);
    if (*publish) return wsb::cmd_publish(profiles, publish_args);
    if (*run) return wsb::cmd_run(profiles, run_args);
    if (*cell) return wsb::cmd_cell(cell_matrix, cell_id, cell_out, cell_workdir, profiles, keep);
    if (*serve) return wsb::cmd_serve(profiles, serve_args);
    if (*physics) return wsb::cmd_physics(physics_dir, physics_bytes, physics_threads);
    if (*forward) return wsb::cmd_forward(forward_args);
    if (*soak) return wsb::cmd_soak(profiles, soak_args);
    if (report.selected()) return report.run();
    if (*inspect) return wsb::cmd_inspect(inspect_args);
    if (*codecs) return wsb::cmd_codecs(codecs_json);
    if (*refit_sender) {
      return wsb::refit::run_sender_job(refit_sender_ipc == "host"
                                            ? static_cast<const wsb::refit::DeviceIpc&>(wsb::refit::host_device_ipc())
                                            : wsb::cuda_device_ipc());
    }
  } catch (const wsb::Error& e) {
    std::cerr << fmt::format("wsbench: error ({}): {}\n", wsb::error_kind_name(e.kind()), e.what());
    return 2;
  } catch (const std::exception& e) {
    std::cerr << fmt::format("wsbench: error: {}\n", e.what());
    return 2;
  }
  return 0;
}
