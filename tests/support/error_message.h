// The message of an expected error: expect_error_of<E>(fn) runs fn and
// returns what() of the E it throws; another kind of pf::Error, or no error,
// is a test failure (and "").
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <string>

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

}  // namespace pf::test
