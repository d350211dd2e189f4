#include "modes/refit/sender_job.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <nlohmann/json.hpp>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "core/errors.hpp"

namespace wsb::refit {
namespace {

namespace fs = std::filesystem;

[[noreturn]] void io_error(const std::string& what) {
  throw Error(ErrorKind::Io, fmt::format("refit: cuda-ipc sender job: {}: {}", what, std::strerror(errno)));
}

/// The job of one refit: geometry, GPUs and every rank's weights as (region, offset) of the shared buffers.
nlohmann::json make_job(const TrainerSim& trainer, const ShmTransport& control, uint64_t bucket_bytes,
                        const CudaIpcGpus& gpus, const std::vector<const HostBuffer*>& regions, int pack_threads) {
  nlohmann::json j;
  j["ranks"] = control.ranks();
  j["bucket_bytes"] = bucket_bytes;
  j["pack_threads"] = pack_threads;
  j["control_depth"] = control.depth();
  j["control_mapping_bytes"] = control.mapping_bytes();
  j["parent_pid"] = static_cast<int>(getpid());
  j["base_gpu_id"] = gpus.base_gpu_id;
  j["rank_devices"] = gpus.rank_devices;
  j["regions"] = nlohmann::json::array();
  for (const HostBuffer* b : regions) j["regions"].push_back(b->size());
  j["shards"] = nlohmann::json::array();
  for (int r = 0; r < control.ranks(); ++r) {
    nlohmann::json shard = nlohmann::json::array();
    for (const ShardWeight& w : trainer.rank_weights(r)) {
      std::optional<size_t> region;
      for (size_t i = 0; i < regions.size() && !region; ++i) {
        const uint8_t* base = regions[i]->data();
        if (w.bytes.data() >= base && w.bytes.data() + w.bytes.size() <= base + regions[i]->size()) region = i;
      }
      if (!region) {
        throw Error(ErrorKind::Mismatch,
                    fmt::format("refit: cuda-ipc sender job: rank {}: weight '{}' lies outside the trainer's shared "
                                "buffers", r, w.spec.name));
      }
      shard.push_back({{"name", w.spec.name},
                       {"dtype", std::string(dtype_name(w.spec.dtype))},
                       {"shape", w.spec.shape},
                       {"region", *region},
                       {"offset", w.bytes.data() - regions[*region]->data()}});
    }
    j["shards"].push_back(std::move(shard));
  }
  return j;
}

/// A memfd holding `text`.
int text_memfd(const std::string& text) {
  const int fd = memfd_create("wsbench-refit-job", MFD_CLOEXEC);
  if (fd < 0) io_error("memfd_create");
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int error = errno;
      close(fd);
      errno = error;
      io_error("writing the job");
    }
    done += static_cast<size_t>(n);
  }
  return fd;
}

/// The whole content of memfd `fd` (`what` names it in errors).
std::string read_fd(int fd, const char* what) {
  struct stat st {};
  if (fstat(fd, &st) != 0) io_error(fmt::format("fstat of {}", what));
  std::string text(static_cast<size_t>(st.st_size), '\0');
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = pread(fd, text.data() + done, text.size() - done, static_cast<off_t>(done));
    if (n < 0 && errno == EINTR) continue;
    if (n == 0) {
      throw Error(ErrorKind::Truncated, fmt::format("refit: cuda-ipc sender job: {} ends at {} of {} B", what,
                                                    done, text.size()));
    }
    if (n < 0) io_error(fmt::format("reading {}", what));
    done += static_cast<size_t>(n);
  }
  return text;
}

/// A region of the trainer's weights mapped read-only in the sender process.
struct Mapping {
  void* data = nullptr;
  size_t bytes = 0;
  Mapping(int fd, size_t size) : bytes(size) {
    struct stat st {};
    if (fstat(fd, &st) != 0 || static_cast<uint64_t>(st.st_size) < size) {
      const int error = errno;
      close(fd);
      throw Error(ErrorKind::Mismatch,
                  fmt::format("refit: cuda-ipc sender job: weights region fd {} holds {} B, the job says {} B{}", fd,
                              static_cast<uint64_t>(st.st_size), size,
                              error != 0 ? fmt::format(" ({})", std::strerror(error)) : std::string()));
    }
    // Not populated here (MAP_POPULATE would fill 16 GB of page tables on this one thread before the CUDA setup
    // starts): populate_mappings does it on the pack threads while the channels open.
    data = mmap(nullptr, bytes == 0 ? 1 : bytes, PROT_READ, MAP_SHARED, fd, 0);
    const int error = errno;
    close(fd);  // the mapping keeps the memory
    if (data == MAP_FAILED) {
      errno = error;
      io_error(fmt::format("mmap of a {} B weights region", bytes));
    }
  }
  ~Mapping() { munmap(data, bytes == 0 ? 1 : bytes); }
  Mapping(const Mapping&) = delete;
  Mapping& operator=(const Mapping&) = delete;
};

/// Blocks until the release pipe reaches EOF (or carries a byte).
void wait_for_release() {
  char byte = 0;
  while (read(kJobReleaseFd, &byte, 1) < 0 && errno == EINTR) {
  }
}

/// Blocks for the start byte; false when the pipe reached EOF without it (the engine gave up before the stream).
bool wait_for_start() {
  char byte = 0;
  ssize_t n = -1;
  while ((n = read(kJobStartFd, &byte, 1)) < 0 && errno == EINTR) {
  }
  return n == 1;
}

/// The rank threads' gate: opened once the engine's start byte came (or the engine gave up).
class StartGate {
 public:
  void open(bool go) {
    {
      std::lock_guard lock(mu_);
      decided_ = true;
      go_ = go;
    }
    cv_.notify_all();
  }
  /// Blocks until open(); returns its `go`.
  bool wait() {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return decided_; });
    return go_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool decided_ = false;
  bool go_ = false;
};

}  // namespace

fs::path sender_executable(const fs::path& configured) {
  if (!configured.empty()) return configured;
  if (const char* env = std::getenv("WSBENCH_EXE"); env != nullptr && *env != '\0') return env;
  std::error_code ec;
  const fs::path self = fs::read_symlink("/proc/self/exe", ec);
  std::vector<fs::path> tried{"$WSBENCH_EXE"};
  if (!ec) {
    if (self.filename() == "wsbench") return self;
    for (const fs::path& candidate : {self.parent_path() / "wsbench", self.parent_path().parent_path() / "wsbench"}) {
      if (fs::is_regular_file(candidate, ec)) return candidate;
      tried.push_back(candidate);
    }
  }
  std::string list;
  for (const auto& t : tried) list += (list.empty() ? "" : ", ") + t.string();
  throw Error(ErrorKind::Missing,
              fmt::format("refit: the cuda-ipc transport runs its senders in `wsbench refit-sender`, and no wsbench "
                          "executable was found (tried {}): set WSBENCH_EXE",
                          list));
}

CudaIpcSenders::CudaIpcSenders(const fs::path& exe, std::string_view ipc_kind, const TrainerSim& trainer,
                               ShmTransport& control, uint64_t bucket_size_bytes, const CudaIpcGpus& gpus,
                               int pack_threads) {
  const std::vector<const HostBuffer*> regions = trainer.buffers();
  for (size_t i = 0; i < regions.size(); ++i) {
    if (regions[i]->shared_fd() < 0) {
      throw Error(ErrorKind::Mismatch,
                  fmt::format("refit: cuda-ipc sender job: trainer buffer {} is private memory; the trainer must be "
                              "built with HostMemory::Shared",
                              i));
    }
  }
  const int job = text_memfd(make_job(trainer, control, bucket_size_bytes, gpus, regions, pack_threads).dump());
  // The start signal is a socket, not a pipe: writing it to a process that already exited must fail with EPIPE
  // (MSG_NOSIGNAL), not raise SIGPIPE in the engine.
  int start_fds[2] = {-1, -1}, release_fds[2] = {-1, -1};
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, start_fds) != 0 || pipe2(release_fds, O_CLOEXEC) != 0) {
    const int error = errno;
    close(job);
    for (int fd : {start_fds[0], start_fds[1]}) {
      if (fd >= 0) close(fd);
    }
    errno = error;
    io_error("socketpair / pipe2");
  }
  start_write_ = start_fds[1];
  release_write_ = release_fds[1];
  stderr_fd_ = memfd_create("wsbench-refit-sender-stderr", MFD_CLOEXEC);
  std::vector<int> fds{job, control.fd(), start_fds[0], release_fds[0]};
  for (const HostBuffer* b : regions) fds.push_back(b->shared_fd());
  const auto close_child_ends = [&] {
    close(job);
    close(start_fds[0]);
    close(release_fds[0]);
  };
  try {
    process_ = std::make_unique<SenderProcess>(
        exe, std::vector<std::string>{"refit-sender", "--ipc", std::string(ipc_kind)}, fds, stderr_fd_);
  } catch (...) {
    close_child_ends();
    for (int* fd : {&start_write_, &release_write_, &stderr_fd_}) {
      if (*fd >= 0) close(*fd);
      *fd = -1;
    }
    throw;
  }
  close_child_ends();
}

void CudaIpcSenders::start() noexcept {
  const char byte = 1;
  while (send(start_write_, &byte, 1, MSG_NOSIGNAL) < 0 && errno == EINTR) {
  }
}

CudaIpcSenders::~CudaIpcSenders() {
  if (start_write_ >= 0) close(start_write_);
  if (release_write_ >= 0) close(release_write_);
  process_.reset();  // kills the process if it still runs
  if (stderr_fd_ >= 0) close(stderr_fd_);
}

void CudaIpcSenders::release_and_join() {
  if (release_write_ >= 0) {
    close(release_write_);
    release_write_ = -1;
  }
  try {
    process_->join();
  } catch (const Error& e) {
    // The process's own reason (it prints one line per failure) is what a user needs to see.
    std::string text = stderr_fd_ >= 0 ? read_fd(stderr_fd_, "the sender process's stderr") : std::string();
    while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
    const size_t line = text.rfind('\n');
    if (line != std::string::npos) text = text.substr(line + 1);
    if (text.empty()) throw;
    throw Error(e.kind(), fmt::format("{}: {}", e.what(), text));
  }
}

/// Fills this process's page tables for every mapping, in 64 MiB pieces across `pool`, while the trainer still
/// prepares: a fresh process touching 16 GB of shared pages for the first time inside the stream pays a page fault
/// per 4 KiB there (about 0.3 core-seconds per GB on the build host). The pages are the trainer's, already
/// resident. MADV_POPULATE_READ (Linux 5.14) where the kernel has it, else one read per page. Never throws: a page
/// left unpopulated is faulted in by the stream as before.
void populate_mappings(const std::vector<std::unique_ptr<Mapping>>& mappings, WorkPool& pool) {
  constexpr size_t kPiece = size_t{64} << 20;
  std::vector<std::pair<const uint8_t*, size_t>> pieces;
  for (const auto& m : mappings) {
    for (size_t at = 0; at < m->bytes; at += kPiece) {
      pieces.emplace_back(static_cast<const uint8_t*>(m->data) + at, std::min(kPiece, m->bytes - at));
    }
  }
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  try {
    pool.run(pieces.size(), [&](size_t i) {
      const auto [data, n] = pieces[i];
#ifdef MADV_POPULATE_READ
      if (madvise(const_cast<uint8_t*>(data), n, MADV_POPULATE_READ) == 0) return;
#endif
      volatile uint8_t sink = 0;
      for (size_t at = 0; at < n; at += page) sink = static_cast<uint8_t>(sink + data[at]);
    });
  } catch (...) {
  }
}

int run_sender_job(const DeviceIpc& ipc) {
  std::vector<std::unique_ptr<Mapping>> mappings;
  std::unique_ptr<ShmTransport> control;
  std::unique_ptr<CudaIpcTransport> transport;
  std::vector<std::vector<ShardWeight>> shards;
  uint64_t bucket_bytes = 0;
  std::unique_ptr<WorkPool> pack_pool;
  try {
    const nlohmann::json job = nlohmann::json::parse(read_fd(kJobFd, "the job"));
    close(kJobFd);
    const int ranks = job.at("ranks").get<int>();
    bucket_bytes = job.at("bucket_bytes").get<uint64_t>();
    pack_pool = std::make_unique<WorkPool>(job.value("pack_threads", 1));
    int fd = kJobFirstRegionFd;
    for (const auto& bytes : job.at("regions")) mappings.push_back(std::make_unique<Mapping>(fd++, bytes.get<size_t>()));
    ShmTransportOptions options;
    options.depth = job.at("control_depth").get<size_t>();
    // The senders stop when the engine's process (their receiver) is gone.
    options.receiver_alive = [parent = job.at("parent_pid").get<int>()] { return getppid() == parent; };
    control = ShmTransport::attach(kJobControlFd, ranks, kCudaIpcControlBytes, std::move(options));
    CudaIpcGpus gpus{.rank_devices = job.at("rank_devices").get<std::vector<int>>(),
                     .base_gpu_id = job.at("base_gpu_id").get<int>()};
    transport = std::make_unique<CudaIpcTransport>(*control, bucket_bytes, ipc, std::move(gpus));
    for (const auto& shard : job.at("shards")) {
      std::vector<ShardWeight>& weights = shards.emplace_back();
      for (const auto& w : shard) {
        TensorSpec spec;
        spec.name = w.at("name").get<std::string>();
        const auto dtype = parse_dtype(w.at("dtype").get<std::string>());
        if (!dtype) throw Error(ErrorKind::Format, fmt::format("weight '{}': unknown dtype", spec.name));
        spec.dtype = *dtype;
        spec.shape = w.at("shape").get<Shape>();
        const Mapping& m = *mappings.at(w.at("region").get<size_t>());
        const uint64_t offset = w.at("offset").get<uint64_t>();
        if (offset > m.bytes || spec.bytes() > m.bytes - offset) {
          throw Error(ErrorKind::Format, fmt::format("weight '{}' lies beyond its {} B region", spec.name, m.bytes));
        }
        weights.push_back(ShardWeight{spec, {static_cast<const uint8_t*>(m.data) + offset, spec.bytes()}});
      }
    }
    if (shards.size() != static_cast<size_t>(ranks)) throw Error(ErrorKind::Format, "one shard per rank expected");
  } catch (const std::exception& e) {
    // The receivers learn it from their channels (a failed stream), not only from the exit status.
    if (control) {
      for (int r = 0; r < control->ranks(); ++r) control->sender(r).fail(fmt::format("sender process: {}", e.what()));
    }
    std::cerr << "wsbench refit-sender: " << e.what() << "\n";
    return 1;
  }
  std::atomic<bool> failed{false};
  {
    StartGate gate;
    std::vector<std::thread> threads;
    for (size_t r = 0; r < shards.size(); ++r) {
      threads.emplace_back([&, r] {
        const int rank = static_cast<int>(r);
        try {
          // Device ring, pinned staging, handshake: set up while the engine's trainer still advances the weights.
          transport->open_sender(rank);
        } catch (const std::exception& e) {
          failed = true;
          transport->sender(rank).fail(e.what());
          gate.wait();
          return;
        }
        if (!gate.wait()) {
          failed = true;
          transport->sender(rank).fail("sender process: the engine closed the link before the stream started");
          return;
        }
        try {
          // Each bucket is packed in pieces into the channel's pinned staging, each piece's device copy running
          // while the next piece is packed (CudaIpcTransport's send_filled).
          stream_shard(static_cast<int>(r), shards[r], bucket_bytes, *transport,
                       SendOptions{.pack_pool = pack_pool.get(), .buffers = nullptr, .send_ahead = false});
        } catch (...) {
          failed = true;  // stream_shard failed the channel with the error text
        }
      });
    }
    // The page tables fill beside the channels' setup and the wait for the trainer; the stream starts after both.
    std::thread populate([&] { populate_mappings(mappings, *pack_pool); });
    const bool go = wait_for_start();
    populate.join();
    if (!go) std::cerr << "wsbench refit-sender: the engine closed the link before the stream started\n";
    gate.open(go);
    for (auto& t : threads) t.join();
  }
  wait_for_release();
  transport.reset();  // frees the rings: every import is closed by now
  return failed ? 1 : 0;
}

}  // namespace wsb::refit
