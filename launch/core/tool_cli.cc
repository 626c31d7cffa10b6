#include "launch/core/tool_cli.h"

#include <cmath>
#include <sstream>

namespace pf {

void add_override_option(CLI::App& app, std::vector<std::string>& overrides) {
  app.add_option("--set", overrides, "override a key of the stored configuration: section.key=value (repeatable)")
      ->allow_extra_args(false);
}

void add_map_unknown_option(CLI::App& app, bool& map_unknown, const std::string& what) {
  app.add_flag("--map-unknown-to-x", map_unknown, "read unknown letters " + what + "as X instead of failing");
}

namespace {

// The whole of `text` as a number; NaN when it is not one (std::stod's
// partial parses and its exceptions alike).
double whole_number(const std::string& text) {
  size_t used = 0;
  double v = std::nan("");
  try {
    v = std::stod(text, &used);
  } catch (const std::exception&) {
    return std::nan("");
  }
  return used == text.size() ? v : std::nan("");
}

}  // namespace

CLI::Validator number_in(double lo, double hi, bool open_below) {
  std::ostringstream range;
  range << (open_below ? "(" : "[") << lo << ", " << hi << "]";
  return CLI::Validator(
      [lo, hi, open_below, r = range.str()](std::string& text) -> std::string {
        const double v = whole_number(text);
        if (std::isnan(v) || v < lo || v > hi || (open_below && v == lo))
          return "'" + text + "' is not a number in " + r;
        return std::string();
      },
      "NUMBER in " + range.str());
}

CLI::Validator positive_number() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        const double v = whole_number(text);
        return std::isfinite(v) && v > 0 ? std::string() : "'" + text + "' is not a positive number";
      },
      "POSITIVE");
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
