#include "launch/infer/tool_cli.h"

namespace pf {

void add_override_option(CLI::App& app, std::vector<std::string>& overrides) {
  app.add_option("--set", overrides, "override a key of the stored configuration: section.key=value (repeatable)");
}

void add_map_unknown_option(CLI::App& app, bool& map_unknown, const std::string& what) {
  app.add_flag("--map-unknown-to-x", map_unknown, "read unknown letters " + what + "as X instead of failing");
}

std::optional<int> parse_tool_args(CLI::App& app, int argc, char** argv) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? 0 : 2;
  }
  return std::nullopt;
}

}  // namespace pf
