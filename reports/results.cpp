#include "reports/results.hpp"

namespace wsb {

const char* status_name(Status status) {
  switch (status) {
    case Status::Pass: return "pass";
    case Status::Fail: return "fail";
    case Status::Skipped: return "skipped";
  }
  return "unknown";
}

std::string Cell::mode_label() const {
  if (!transport.empty()) return mode + "+" + transport;
  return commit_strategy == "full" ? mode : mode + "+" + commit_strategy;
}

}  // namespace wsb
