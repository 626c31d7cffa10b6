// Check macros carry statement, detail, function, file:line; typed errors.
#include <gtest/gtest.h>

#include "runtime/check.h"
#include "runtime/device.h"
#include "runtime/dtype.h"

namespace pf {
namespace {

int fails_with(int code) { return code; }

TEST(Errors, MpiCheckThrowsTypedErrorWithContext) {
  try {
    PF_MPI_CHECK(fails_with(1));
    FAIL() << "no throw";
  } catch (const MpiError& e) {
    const std::string what = e.what();
    EXPECT_EQ(e.kind(), ErrorKind::Mpi);
    EXPECT_NE(what.find("fails_with(1)"), std::string::npos) << what;
    EXPECT_NE(what.find("test_errors.cc:"), std::string::npos) << what;
    EXPECT_NE(what.find("TestBody"), std::string::npos) << what;
    EXPECT_NE(what.find("MPI error"), std::string::npos) << what;
  }
}

TEST(Errors, MpiCheckPassesOnSuccess) { EXPECT_NO_THROW(PF_MPI_CHECK(fails_with(0))); }

TEST(Errors, RequireFormatsMessage) {
  const int n = -3;
  try {
    PF_REQUIRE(ValueError, n > 0, "n must be positive, got " << n);
    FAIL() << "no throw";
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("n must be positive, got -3"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("n > 0"), std::string::npos);
  }
}

TEST(Errors, RankIsUnknownWithoutMpi) { EXPECT_EQ(process_rank(), -1); }

TEST(Devices, NoGpuIsACleanAnswer) {
  const int n = cuda_device_count();
  EXPECT_GE(n, 0);
  if (n == 0) {
    EXPECT_FALSE(cuda_unavailable_reason().empty());
    EXPECT_THROW(set_current_device(Device::cuda(0)), CudaError);
  }
  EXPECT_NO_THROW(set_current_device(Device::cpu()));
  Stream s = create_stream(Device::cpu());
  EXPECT_NO_THROW(synchronize(s));
  destroy_stream(s);
}

TEST(DTypes, SizesNamesAndParsing) {
  EXPECT_EQ(dtype_size(DType::f64), 8);
  EXPECT_EQ(dtype_size(DType::bf16), 2);
  EXPECT_EQ(dtype_size(DType::u8), 1);
  for (DType t : {DType::f64, DType::f32, DType::f16, DType::bf16, DType::i64, DType::i32, DType::u8})
    EXPECT_EQ(parse_dtype(dtype_name(t)), t);
  EXPECT_THROW(parse_dtype("f128"), ValueError);
}

}  // namespace
}  // namespace pf
