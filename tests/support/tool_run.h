// Running a built tool from a test: a shell command line with stdout and
// stderr to a log file, its exit status and everything it printed.
#pragma once

#include <sys/wait.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

namespace pf::test {

struct ToolRun {
  int status = -1;
  std::string out;  // stdout and stderr
};

inline std::string quoted(const std::string& s) { return "'" + s + "'"; }

inline ToolRun run_tool(const std::string& cmd, const std::string& log) {
  ToolRun r;
  const int raw = std::system((cmd + " > " + quoted(log) + " 2>&1").c_str());
  r.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
  std::ifstream in(log);
  std::stringstream ss;
  ss << in.rdbuf();
  r.out = ss.str();
  return r;
}

}  // namespace pf::test
