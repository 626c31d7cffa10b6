// Typed errors. Every failure inside the library becomes one of these, carrying
// the failing statement, function, file:line and MPI rank; only launch/ turns an
// error into an exit code.
#pragma once

#include <stdexcept>
#include <string>

namespace pf {

enum class ErrorKind { Cuda, Cublas, Nccl, Mpi, Hdf5, Memory, Config, Io, Data, Value, Comm, Training };

const char* error_kind_name(ErrorKind kind);

class Error : public std::runtime_error {
 public:
  Error(ErrorKind kind, const std::string& what) : std::runtime_error(what), kind_(kind) {}
  ErrorKind kind() const { return kind_; }

 private:
  ErrorKind kind_;
};

#define PF_DEFINE_ERROR(Name, Kind) \
  class Name : public Error {       \
   public:                          \
    explicit Name(const std::string& what) : Error(ErrorKind::Kind, what) {} \
  }
PF_DEFINE_ERROR(CudaError, Cuda);
PF_DEFINE_ERROR(CublasError, Cublas);
PF_DEFINE_ERROR(NcclError, Nccl);
PF_DEFINE_ERROR(MpiError, Mpi);
PF_DEFINE_ERROR(Hdf5Error, Hdf5);
PF_DEFINE_ERROR(MemoryError, Memory);
PF_DEFINE_ERROR(ConfigError, Config);
PF_DEFINE_ERROR(IoError, Io);
PF_DEFINE_ERROR(DataError, Data);
PF_DEFINE_ERROR(ValueError, Value);
PF_DEFINE_ERROR(CommError, Comm);
PF_DEFINE_ERROR(TrainingError, Training);  // the run cannot go on (e.g. gradients never finite)
#undef PF_DEFINE_ERROR

// The MPI rank of this process in MPI_COMM_WORLD, or -1 before MPI_Init / after
// MPI_Finalize. Used only to label messages.
int process_rank();

// "<kind> error on rank R: <detail>\n  at <statement>\n  in <function> (<file>:<line>)"
std::string check_failure_message(ErrorKind kind, const char* statement, const std::string& detail,
                                  const char* function, const char* file, int line);

}  // namespace pf
