// Training in-process as performer-train runs it, for the training tests:
// the configuration from overrides (and a file), a session over the world,
// run_training; plus the helpers those tests share.
#pragma once

#include <mpi.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "launch/core/session.h"
#include "launch/core/train_config.h"
#include "launch/train/train_loop.h"
#include "tests/e2e/train_fixtures.h"

namespace pf::test {

inline TrainOutcome train(const std::vector<std::string>& overrides, const std::string& config_file = "") {
  const TrainConfig cfg = load_train_config(config_file, overrides);
  Session session(cfg, MPI_COMM_WORLD);
  std::ostringstream log;
  return run_training(cfg, session, log);
}

// `o` with the key=value overrides of `extra` set (replacing the same keys).
inline std::vector<std::string> with(std::vector<std::string> o, const std::vector<std::string>& extra) {
  set_overrides(o, extra);
  return o;
}

inline std::string file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream os;
  os << in.rdbuf();
  return os.str();
}

}  // namespace pf::test
