#pragma once
// Checks of the wsb::Error a callable throws, shared by the test suites (light: gtest and core/errors.hpp only, so
// suites of any library include it).
#include <gtest/gtest.h>

#include <functional>
#include <initializer_list>
#include <string>

#include "core/errors.hpp"

namespace wsb::test {

/// Expects `fn` to throw wsb::Error of `kind` whose message contains every one of `parts`.
inline void expect_error(const std::function<void()>& fn, ErrorKind kind, std::initializer_list<std::string> parts) {
  try {
    fn();
    ADD_FAILURE() << "no exception";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), kind) << e.what();
    for (const std::string& part : parts) EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
  }
}

/// Expects `fn` to throw wsb::Error of `kind`; returns its whole message (compare it exactly). Adds a failure and
/// returns "" when `fn` returns normally.
inline std::string error_message(const std::function<void()>& fn, ErrorKind kind) {
  try {
    fn();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), kind) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "no exception";
  return "";
}

/// The message of the wsb::Error `fn` throws, whatever its kind; "" when `fn` returns normally.
inline std::string error_text(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

/// The wsb::Error `fn` throws as "<kind>: <message>" (kind as error_kind_name spells it); "" when `fn` returns
/// normally.
inline std::string error_kind_and_text(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return std::string(error_kind_name(e.kind())) + ": " + e.what();
  }
  return "";
}

}  // namespace wsb::test
