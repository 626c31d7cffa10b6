// The loader under mpiexec: every factorisation world = dp x sp of the ranks
// reads its own slices of its own samples; rank 0 gathers them and checks that
// they reassemble the global batch read by one loader with dp = sp = 1 (so dp
// groups are disjoint and complete, and sp slices join to the samples), with
// sequence and with cluster sampling (synthetic clusters: each rank draws
// the same members without communicating).
#include <gtest/gtest.h>
#include <mpi.h>
#include <unistd.h>

#include <filesystem>

#include "data/loader.h"
#include "data/prepare.h"
#include "runtime/check.h"
#include "tests/data/data_test_util.h"
#include "tests/support/synthetic_clusters.h"

namespace pf {
namespace {

// Rank 0 prepares QUERY.fasta.gz into a fresh directory; every rank gets the path.
std::string shared_data_file(std::string* dir) {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  char path[512] = {0};
  if (rank == 0) {
    std::string tmpl = (std::filesystem::temp_directory_path() / "pf_data_mpi_XXXXXX").string();
    if (mkdtemp(tmpl.data())) {
      *dir = tmpl;
      PrepareOptions o;
      o.inputs = {test::kQueryFasta};
      o.output = tmpl + "/query.h5";
      o.val_fraction = o.test_fraction = 0.1;
      prepare_dataset(o);
      test::add_synthetic_clusters(o.output);
      std::snprintf(path, sizeof(path), "%s", o.output.c_str());
    }
  }
  PF_MPI_CHECK(MPI_Bcast(path, sizeof(path), MPI_CHAR, 0, MPI_COMM_WORLD));
  return path;
}

TEST(LoaderMpi, EveryGridReassemblesTheGlobalBatch) {
  int rank = 0, world = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  std::string dir;
  const std::string file = shared_data_file(&dir);
  ASSERT_FALSE(file.empty());
  const int64_t L = 3072, B = 2, steps = 3;  // L divisible by 1, 2, 3, 4
  for (const auto& [mode, sampling] : {std::pair{SampleMode::Concat, Sampling::Sequence},
                                       {SampleMode::Single, Sampling::Sequence},
                                       {SampleMode::Concat, Sampling::Cluster},
                                       {SampleMode::Single, Sampling::Cluster},
                                       {SampleMode::Packed, Sampling::Cluster},
                                       {SampleMode::Family, Sampling::Sequence},
                                       {SampleMode::Family, Sampling::Cluster}}) {
    for (int64_t sp = 1; sp <= world; ++sp) {
      if (world % sp) continue;
      const int64_t dp = world / sp;
      LoaderOptions o;
      o.files = {file};
      o.mode = mode;
      o.sampling = sampling;
      o.sample_length = L;
      o.batch_size = B;
      o.seed = 5;
      o.dp_size = dp;
      o.dp_rank = rank / sp;
      o.sp_size = sp;
      o.sp_rank = rank % sp;
      DataLoader loader(o);
      const int64_t slice = L / sp;
      std::vector<uint8_t> mine;
      for (int64_t t = 0; t < steps; ++t) {
        const Batch b = loader.next();
        ASSERT_EQ(b.global_offset, o.sp_rank * slice);
        mine.insert(mine.end(), b.tokens.begin(), b.tokens.end());
      }
      std::vector<uint8_t> all(rank == 0 ? mine.size() * static_cast<size_t>(world) : 0);
      PF_MPI_CHECK(MPI_Gather(mine.data(), static_cast<int>(mine.size()), MPI_UINT8_T, all.data(),
                              static_cast<int>(mine.size()), MPI_UINT8_T, 0, MPI_COMM_WORLD));
      if (rank != 0) continue;
      LoaderOptions g = o;
      g.dp_size = g.sp_size = 1;
      g.dp_rank = g.sp_rank = 0;
      g.batch_size = B * dp;
      DataLoader global(g);
      for (int64_t t = 0; t < steps; ++t) {
        const Batch expect = global.next();
        for (int64_t r = 0; r < world; ++r) {
          const int64_t d = r / sp, k = r % sp;
          for (int64_t row = 0; row < B; ++row) {
            const uint8_t* got = all.data() + r * static_cast<int64_t>(mine.size()) + (t * B + row) * slice;
            const uint8_t* want = expect.tokens.data() + (d * B + row) * L + k * slice;
            ASSERT_TRUE(std::equal(got, got + slice, want))
                << sample_mode_name(mode) << " " << sampling_name(sampling) << " dp " << dp << " sp " << sp << " rank " << r << " step " << t;
          }
        }
      }
    }
  }
  PF_MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD));
  if (rank == 0 && !dir.empty()) std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace pf
