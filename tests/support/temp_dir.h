// A fresh directory under the system's temporary directory for one test
// (named for the process and the test), removed with everything in it when
// the object goes.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>

namespace pf::test {

struct TempDir {
  std::string path;
  TempDir() {
    namespace fs = std::filesystem;
    path = (fs::temp_directory_path() / ("pf-test-" + std::to_string(::getpid()) + "-" +
                                         ::testing::UnitTest::GetInstance()->current_test_info()->name()))
               .string();
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() { std::filesystem::remove_all(path); }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
};

}  // namespace pf::test
