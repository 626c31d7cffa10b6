// HDF5 helpers shared by the protein data files and checkpoints: RAII handles
// for hid_t, the PF_H5_CHECK macro (throws Hdf5Error with HDF5's error stack),
// N-d array datasets of plain numeric types, 1-D hyperslab range reads,
// variable-length string datasets, appendable (unlimited, chunked) 1-D
// datasets, and scalar / array / string attributes.
//   h5_write_array(loc, "w", data, {rows, cols})   dataset of shape [rows, cols]
//   h5_read_range(dset, first, count, out)         elements [first, first+count)
// All sizes are int64_t element counts; HDF5's automatic error printing is
// silenced on every open path (it is per thread), errors are thrown instead.
#pragma once

#include <hdf5.h>

#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "runtime/check.h"

namespace pf {

// Text of the calling thread's HDF5 error stack ("H5Dread: ...; H5Z: ..."), or
// "no HDF5 error stack" when it is empty.
std::string h5_error_stack();

// Turns off HDF5's automatic printing of the error stack for this thread.
void h5_quiet();

// PF_H5_CHECK(stmt): stmt returns herr_t / hid_t / htri_t; negative is failure.
#define PF_H5_CHECK(stmt) \
  PF_CHECK_GEN(::pf::Hdf5Error, stmt, [](auto s) { return s >= 0; }, [](auto) { return ::pf::h5_error_stack(); })

// PF_H5_CHECK_MSG(stmt, msg-stream): same, with context (a file or dataset name).
// The error stack is read before `msg` is formatted: a name looked up for the
// message (H5Iget_name, H5Fget_name) is an HDF5 call, which clears the stack
// and would lose the reason.
#define PF_H5_CHECK_MSG(stmt, msg)                                              \
  PF_CHECK_GEN(                                                                 \
      ::pf::Hdf5Error, stmt, [](auto s) { return s >= 0; }, [&](auto) {         \
        const std::string pf_h5_stack_ = ::pf::h5_error_stack();                \
        std::ostringstream pf_h5_os_;                                           \
        pf_h5_os_ << msg << ": " << pf_h5_stack_;                               \
        return pf_h5_os_.str();                                                 \
      })

// Owns one HDF5 identifier (file, group, dataset, dataspace, datatype,
// property list or attribute) and closes it with the matching H5*close.
class H5Id {
 public:
  H5Id() = default;
  explicit H5Id(hid_t id) : id_(id) {}
  ~H5Id() { reset(); }
  H5Id(const H5Id&) = delete;
  H5Id& operator=(const H5Id&) = delete;
  H5Id(H5Id&& o) noexcept : id_(o.id_) { o.id_ = H5I_INVALID_HID; }
  H5Id& operator=(H5Id&& o) noexcept {
    if (this != &o) {
      reset();
      id_ = o.id_;
      o.id_ = H5I_INVALID_HID;
    }
    return *this;
  }
  hid_t get() const { return id_; }
  operator hid_t() const { return id_; }  // NOLINT: handles pass straight to the C API
  bool valid() const { return id_ >= 0; }
  void reset() noexcept;
  // Closes now and throws Hdf5Error if closing fails (a file whose last write
  // cannot be flushed); the destructor closes silently.
  void close();

 private:
  hid_t id_ = H5I_INVALID_HID;
};

// Native HDF5 type of T (uint8/int8/uint16/int16/int32/uint32/int64/uint64/float/double).
template <typename T>
hid_t h5_native_type() {
  if constexpr (std::is_same_v<T, uint8_t>) return H5T_NATIVE_UINT8;
  else if constexpr (std::is_same_v<T, int8_t>) return H5T_NATIVE_INT8;
  else if constexpr (std::is_same_v<T, uint16_t>) return H5T_NATIVE_UINT16;
  else if constexpr (std::is_same_v<T, int16_t>) return H5T_NATIVE_INT16;
  else if constexpr (std::is_same_v<T, int32_t>) return H5T_NATIVE_INT32;
  else if constexpr (std::is_same_v<T, uint32_t>) return H5T_NATIVE_UINT32;
  else if constexpr (std::is_same_v<T, int64_t>) return H5T_NATIVE_INT64;
  else if constexpr (std::is_same_v<T, uint64_t>) return H5T_NATIVE_UINT64;
  else if constexpr (std::is_same_v<T, float>) return H5T_NATIVE_FLOAT;
  else if constexpr (std::is_same_v<T, double>) return H5T_NATIVE_DOUBLE;
  else static_assert(sizeof(T) == 0, "unsupported HDF5 element type");
}

// Files. h5_create_file truncates; h5_open_file throws IoError if the path does
// not exist and Hdf5Error (naming the path) if it is not a readable HDF5 file.
H5Id h5_create_file(const std::string& path);
H5Id h5_open_file(const std::string& path, bool writable = false);
std::string h5_file_name(hid_t obj);  // the file an object lives in, for messages

// Groups and links. h5_open_group / h5_open_dataset throw Hdf5Error naming the
// path inside the file when it does not exist.
H5Id h5_create_group(hid_t loc, const std::string& name);
H5Id h5_open_group(hid_t loc, const std::string& name);
H5Id h5_open_dataset(hid_t loc, const std::string& name, int64_t cache_bytes = 0);
bool h5_exists(hid_t loc, const std::string& name);

// Storage of a new dataset: chunk length along dim 0 (0 = contiguous), deflate
// level (0 = none, needs chunks), Fletcher-32 checksums (needs chunks).
struct H5Layout {
  int64_t chunk = 0;
  int deflate = 0;
  bool checksum = false;
};

// Datasets of plain numbers. shape = {} writes a scalar-shaped 1-element dataset
// of shape [1].
void h5_write_array_raw(hid_t loc, const std::string& name, hid_t mem_type, const void* data,
                        const std::vector<int64_t>& shape, const H5Layout& layout = {});
std::vector<int64_t> h5_dataset_shape(hid_t dset);
int64_t h5_dataset_length(hid_t dset);  // dim 0 of a 1-D dataset; Hdf5Error otherwise
// The file stores what the dataset declares: every chunk of its extent is
// allocated (chunked), or its bytes are (contiguous). A dataset declared
// larger than it was ever written reads as its fill value, which no writer of
// this project relies on: a DataError naming the dataset, the file, the
// declared shape and what is stored, before a reader allocates the shape.
// A chunked dataset's chunks hold at most kH5MaxChunkBytes each (any read
// inflates a whole chunk; this project writes chunks of about 1 MiB or less):
// a DataError naming the dataset, the file and the chunk, checked too.
void h5_require_stored(hid_t dset);
constexpr int64_t kH5MaxChunkBytes = int64_t{64} << 20;
// The dataset's shape is `want` (-1: any extent in that dimension): a
// DataError naming the dataset, the file, both shapes and `what` (what the
// shape should follow from) otherwise. Checked before anything of the
// declared size is allocated.
void h5_require_shape(hid_t dset, const std::vector<int64_t>& want, const std::string& what);
void h5_read_array_raw(hid_t dset, hid_t mem_type, void* out);
void h5_read_range_raw(hid_t dset, hid_t mem_type, int64_t first, int64_t count, void* out);

template <typename T>
void h5_write_array(hid_t loc, const std::string& name, const T* data, const std::vector<int64_t>& shape,
                    const H5Layout& layout = {}) {
  h5_write_array_raw(loc, name, h5_native_type<T>(), data, shape, layout);
}
template <typename T>
void h5_write_vector(hid_t loc, const std::string& name, const std::vector<T>& v, const H5Layout& layout = {}) {
  h5_write_array_raw(loc, name, h5_native_type<T>(), v.data(), {static_cast<int64_t>(v.size())}, layout);
}
// Reads a whole dataset (any rank); *shape receives its shape when given.
template <typename T>
std::vector<T> h5_read_array(hid_t loc, const std::string& name, std::vector<int64_t>* shape = nullptr) {
  H5Id dset = h5_open_dataset(loc, name);
  h5_require_stored(dset);
  const std::vector<int64_t> dims = h5_dataset_shape(dset);
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  std::vector<T> out(static_cast<size_t>(n));
  if (n > 0) h5_read_array_raw(dset, h5_native_type<T>(), out.data());
  if (shape) *shape = dims;
  return out;
}
// Elements [first, first + count) of an open 1-D dataset (a hyperslab; only the
// chunks that hold them are read).
template <typename T>
void h5_read_range(hid_t dset, int64_t first, int64_t count, T* out) {
  h5_read_range_raw(dset, h5_native_type<T>(), first, count, out);
}

// Variable-length UTF-8 string datasets (1-D).
void h5_write_strings(hid_t loc, const std::string& name, const std::vector<std::string>& v,
                      const H5Layout& layout = {});
std::vector<std::string> h5_read_strings(hid_t loc, const std::string& name);
std::vector<std::string> h5_read_string_range(hid_t dset, int64_t first, int64_t count);

// An empty 1-D dataset of `type` with an unlimited max size, chunked and
// filtered as `layout` says (layout.chunk > 0: ValueError otherwise).
H5Id h5_create_appendable(hid_t loc, const std::string& name, hid_t type, const H5Layout& layout);

// A 1-D dataset that grows: created empty with an unlimited max size (chunked),
// append() extends it and writes the new elements.
class H5Appender {
 public:
  // mem_type: a native numeric type, or 0 for variable-length strings.
  H5Appender(hid_t loc, const std::string& name, hid_t mem_type, const H5Layout& layout);
  void append_raw(const void* data, int64_t count);
  void append_strings(const std::vector<std::string>& v);
  int64_t size() const { return size_; }

 private:
  H5Id dset_;
  H5Id type_;
  hid_t mem_type_;
  std::string name_;
  int64_t size_ = 0;
};

// Attributes on a file, group or dataset.
bool h5_has_attr(hid_t obj, const std::string& name);
void h5_write_attr_string(hid_t obj, const std::string& name, const std::string& value);
std::string h5_read_attr_string(hid_t obj, const std::string& name);
void h5_write_attr_strings(hid_t obj, const std::string& name, const std::vector<std::string>& values);
std::vector<std::string> h5_read_attr_strings(hid_t obj, const std::string& name);
void h5_write_attr_int64(hid_t obj, const std::string& name, int64_t value);
int64_t h5_read_attr_int64(hid_t obj, const std::string& name);
void h5_write_attr_int64s(hid_t obj, const std::string& name, const std::vector<int64_t>& values);
std::vector<int64_t> h5_read_attr_int64s(hid_t obj, const std::string& name);
void h5_write_attr_double(hid_t obj, const std::string& name, double value);
double h5_read_attr_double(hid_t obj, const std::string& name);

}  // namespace pf
