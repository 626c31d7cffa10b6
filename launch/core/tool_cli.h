// Command-line pieces the inference tools (performer-score, -embed,
// -generate) share: the same options spelled the same way, and one parse that
// maps usage errors to exit status 2.
#pragma once

#include <CLI/CLI.hpp>
#include <optional>
#include <string>
#include <vector>

namespace pf {

// --set section.key=value (repeatable): overrides of the checkpoint's stored configuration.
void add_override_option(CLI::App& app, std::vector<std::string>& overrides);
// --map-unknown-to-x; `what` says whose letters ("", "of prompts ").
void add_map_unknown_option(CLI::App& app, bool& map_unknown, const std::string& what = "");
// A number in [lo, hi], or (lo, hi] when `open_below` (NaN and text refused,
// naming the value), for ->check(): CLI::Range lets NaN through, since every
// comparison with it is false.
CLI::Validator number_in(double lo, double hi, bool open_below = false);
// A finite number above 0 (a count, a size, repetitions), naming the value
// when it is not one.
CLI::Validator positive_number();
// Parses argv: nothing when the run goes on, else the exit status (0 after
// --help, 2 after a usage error, whose message CLI11 has printed).
std::optional<int> parse_tool_args(CLI::App& app, int argc, char** argv);

}  // namespace pf
