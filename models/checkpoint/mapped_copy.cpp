#include "models/checkpoint/mapped_copy.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "core/errors.hpp"

namespace wsb {

void copy_from_mapping(std::span<const uint8_t> src, std::span<uint8_t> dst, size_t chunk) {
  if (src.size() != dst.size())
    throw Error(ErrorKind::Mismatch,
                fmt::format("copy out of a mapping: {} source bytes, {} destination bytes", src.size(), dst.size()));
  const auto page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const auto base = reinterpret_cast<uintptr_t>(src.data());
  const uintptr_t first_page = (base + page - 1) / page * page;  // the first page wholly inside src
  chunk = std::max<size_t>(chunk, 1);
  for (size_t at = 0; at < src.size(); at += chunk) {
    const size_t n = std::min(chunk, src.size() - at);
    std::memcpy(dst.data() + at, src.data() + at, n);
    // Whole pages of [first_page, base + at + n): those copied so far, released chunk by chunk.
    const uintptr_t from = std::max(first_page, (base + at) / page * page);
    const uintptr_t to = (base + at + n) / page * page;
    if (to > from) ::madvise(reinterpret_cast<void*>(from), to - from, MADV_DONTNEED);
  }
}

}  // namespace wsb
