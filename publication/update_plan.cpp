// Delta lineage planning (docs/design.md "Publication format", Lineage): every step from+1..to is a DELTA whose
// base_version is the previous version; the plan hash lets TP ranks agree before anything is mutated.
#include <openssl/evp.h>

#include <fmt/format.h>

#include "core/errors.hpp"
#include "publication/publication.hpp"

namespace wsb {
namespace {

struct MdCtxDeleter {
  void operator()(EVP_MD_CTX* ctx) const { EVP_MD_CTX_free(ctx); }
};

/// SHA-256 over the ordered "version\ttensor\texpected_checksum\n" lines of every step.
std::string compute_plan_hash(const std::vector<std::unique_ptr<Publication>>& steps) {
  std::unique_ptr<EVP_MD_CTX, MdCtxDeleter> ctx(EVP_MD_CTX_new());
  if (!ctx || EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr) != 1) {
    throw Error(ErrorKind::Io, "plan hash: OpenSSL SHA-256 initialisation failed");
  }
  for (const auto& step : steps) {
    std::string version = version_string(step->version());
    for (const std::string& name : step->tensor_names()) {
      std::string line = fmt::format("{}\t{}\t{}\n", version, name, step->expected_checksum(name));
      if (EVP_DigestUpdate(ctx.get(), line.data(), line.size()) != 1) {
        throw Error(ErrorKind::Io, "plan hash: OpenSSL SHA-256 update failed");
      }
    }
  }
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  if (EVP_DigestFinal_ex(ctx.get(), digest, &length) != 1) {
    throw Error(ErrorKind::Io, "plan hash: OpenSSL SHA-256 finalisation failed");
  }
  std::string hex;
  for (unsigned int i = 0; i < length; ++i) hex += fmt::format("{:02x}", digest[i]);
  return hex;
}

}  // namespace

UpdatePlan plan_update(const Store& store, uint32_t from, uint32_t to) {
  if (to <= from) {
    throw Error(ErrorKind::Lineage, fmt::format("update plan in {}: target {} is not after {}", store.root().string(),
                                                version_string(to), version_string(from)));
  }
  if (!store.has(to)) {
    throw Error(ErrorKind::Missing,
                fmt::format("version {} not published in {}", version_string(to), store.root().string()));
  }
  UpdatePlan plan;
  plan.from = from;
  plan.to = to;
  for (uint32_t v = from + 1; v <= to; ++v) {
    if (!store.has(v)) {
      throw Error(ErrorKind::Lineage,
                  fmt::format("update plan {} -> {} in {}: gap, version {} is not published", version_string(from),
                              version_string(to), store.root().string(), version_string(v)));
    }
    auto step = std::make_unique<Publication>(store, v);
    if (step->is_full()) {
      throw Error(ErrorKind::Format, fmt::format("update plan {} -> {}: version {} in {} is FULL, not a DELTA",
                                                 version_string(from), version_string(to), version_string(v),
                                                 store.root().string()));
    }
    uint32_t base = *step->manifest().base_version;  // parse_manifest requires it for a DELTA
    if (base != v - 1) {
      throw Error(ErrorKind::Lineage,
                  fmt::format("update plan {} -> {}: version {} has base_version {}, expected {}",
                              version_string(from), version_string(to), version_string(v), version_string(base),
                              version_string(v - 1)));
    }
    plan.steps.push_back(std::move(step));
  }
  plan.plan_hash = compute_plan_hash(plan.steps);
  return plan;
}

}  // namespace wsb
