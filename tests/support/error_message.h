// The message of an expected error: expect_error_of<E>(fn) runs fn and
// returns what() of the E it throws; another kind of pf::Error, or no error,
// is a test failure (and ""). expect_any_error(fn) takes any pf::Error.
// expect_error_naming<E>(fn, pieces) checks that the message names every piece.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "runtime/errors.h"

namespace pf::test {

template <typename Err>
std::string expect_error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Err& e) {
    return e.what();
  } catch (const Error& e) {
    ADD_FAILURE() << "another kind of error: " << e.what();
    return "";
  }
  ADD_FAILURE() << "no error";
  return "";
}

// The message of any pf::Error fn throws; no error is a test failure (and "").
inline std::string expect_any_error(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "no error";
  return "";
}

// fn throws an Err whose message holds every piece.
template <typename Err>
void expect_error_naming(const std::function<void()>& fn, const std::vector<std::string>& pieces) {
  const std::string m = expect_error_of<Err>(fn);
  for (const std::string& piece : pieces) EXPECT_NE(m.find(piece), std::string::npos) << piece << " not in: " << m;
}

}  // namespace pf::test
