#include "runtime/errors.h"

#include <mpi.h>

#include <sstream>

#include "runtime/check.h"

namespace pf {

const char* error_kind_name(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::Cuda: return "CUDA";
    case ErrorKind::Cublas: return "cuBLAS";
    case ErrorKind::Nccl: return "NCCL";
    case ErrorKind::Mpi: return "MPI";
    case ErrorKind::Hdf5: return "HDF5";
    case ErrorKind::Memory: return "memory";
    case ErrorKind::Config: return "config";
    case ErrorKind::Io: return "I/O";
    case ErrorKind::Data: return "data";
    case ErrorKind::Value: return "value";
    case ErrorKind::Training: return "training";
    case ErrorKind::Comm: return "communication";
  }
  return "unknown";
}

int process_rank() {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (!initialized || finalized) return -1;
  int rank = -1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  return rank;
}

std::string check_failure_message(ErrorKind kind, const char* statement, const std::string& detail,
                                  const char* function, const char* file, int line) {
  std::ostringstream os;
  os << error_kind_name(kind) << " error";
  const int rank = process_rank();
  if (rank >= 0) os << " on rank " << rank;
  os << ": " << detail << "\n  at " << statement << "\n  in " << function << " (" << file << ":"
     << line << ")";
  return os.str();
}

std::string mpi_error_string(int code) {
  // Open MPI aborts when MPI_Error_string is called outside MPI_Init/Finalize.
  if (process_rank() < 0) return "MPI error code " + std::to_string(code);
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(code, text, &len) != MPI_SUCCESS) return "MPI error code " + std::to_string(code);
  return std::string(text, static_cast<size_t>(len)) + " (code " + std::to_string(code) + ")";
}

}  // namespace pf
