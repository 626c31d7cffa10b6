// The memory plan against a measured peak: never below it (the cap a plan
// sets must hold), and above it by at most a stated fraction (a plan that
// wastes the card is no plan either).
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <string>

#include "model/planner.h"

namespace pf::test {

inline void expect_plan_bounds(const MemoryPlan& plan, int64_t measured, double slack, const std::string& label) {
  const double ratio = static_cast<double>(plan.peak) / static_cast<double>(measured);
  std::printf("planner %s: measured %lld planned %lld (%.3f)\n", label.c_str(), static_cast<long long>(measured),
              static_cast<long long>(plan.peak), ratio);
  EXPECT_GE(plan.peak, measured) << label << ": the plan is below the measured peak; " << plan.summary();
  EXPECT_LE(ratio, 1.0 + slack) << label << ": the plan exceeds the measured peak by more than " << slack * 100 << "%; "
                                << plan.summary();
}

}  // namespace pf::test
