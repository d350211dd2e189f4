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

}  // namespace wsb
