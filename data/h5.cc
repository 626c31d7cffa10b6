// HDF5 helpers: see h5.h.
#include "data/h5.h"

#include <sys/stat.h>

#include <algorithm>
#include <sstream>

namespace pf {

namespace {

// HDF5 closes what is still open at exit (H5_term_library, which the library
// registers with atexit when it initialises). A file whose close failed (its
// last write hit a full disk) stays half-closed in HDF5's table, and closing
// it again there crashes (SIGSEGV in H5F__close_cb) after the tool has
// reported the error cleanly. Every object here is closed by its H5Id, and a
// file whose close failed is a temporary that has been removed, so nothing
// needs that exit hook: it is declined before the library's first call (this
// runs at static initialisation, before main).
[[maybe_unused]] const bool kNoExitHook = H5dont_atexit() >= 0;

herr_t collect_error(unsigned n, const H5E_error2_t* err, void* data) {
  auto* os = static_cast<std::ostringstream*>(data);
  if (n > 0) *os << "; ";
  *os << (err->func_name ? err->func_name : "?") << ": " << (err->desc ? err->desc : "");
  char minor[128] = {0};
  if (H5Eget_msg(err->min_num, nullptr, minor, sizeof(minor)) > 0) *os << " (" << minor << ")";
  return 0;
}

H5Id make_space(const std::vector<int64_t>& shape, bool unlimited = false) {
  std::vector<hsize_t> dims(shape.begin(), shape.end()), maxdims(dims);
  if (unlimited) maxdims[0] = H5S_UNLIMITED;
  if (dims.empty()) return H5Id(H5Screate(H5S_SCALAR));
  H5Id space(H5Screate_simple(static_cast<int>(dims.size()), dims.data(), maxdims.data()));
  PF_H5_CHECK(space.get());
  return space;
}

H5Id make_dcpl(const std::vector<int64_t>& shape, const H5Layout& layout) {
  H5Id dcpl(H5Pcreate(H5P_DATASET_CREATE));
  PF_H5_CHECK(dcpl.get());
  if (layout.chunk > 0 && !shape.empty()) {
    std::vector<hsize_t> chunk(shape.begin(), shape.end());
    chunk[0] = static_cast<hsize_t>(layout.chunk);
    for (auto& c : chunk) c = c == 0 ? 1 : c;
    PF_H5_CHECK(H5Pset_chunk(dcpl, static_cast<int>(chunk.size()), chunk.data()));
    if (layout.checksum) PF_H5_CHECK(H5Pset_fletcher32(dcpl));
    if (layout.deflate > 0) PF_H5_CHECK(H5Pset_deflate(dcpl, static_cast<unsigned>(layout.deflate)));
  }
  return dcpl;
}

H5Id vlen_string_type() {
  H5Id type(H5Tcopy(H5T_C_S1));
  PF_H5_CHECK(type.get());
  PF_H5_CHECK(H5Tset_size(type, H5T_VARIABLE));
  PF_H5_CHECK(H5Tset_cset(type, H5T_CSET_UTF8));
  return type;
}

std::string object_name(hid_t obj) {
  char buf[512] = {0};
  H5Iget_name(obj, buf, sizeof(buf));
  return buf;
}

}  // namespace

std::string h5_error_stack() {
  std::ostringstream os;
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_DOWNWARD, collect_error, &os);
  const std::string s = os.str();
  if (s.empty()) return "no HDF5 error stack";
  // A failed system call deep in the stack (a full disk, a read error) is
  // what a user needs first: HDF5's file driver reports it as
  // "errno = 28, error message = 'No space left on device'".
  const std::string tag = "error message = '";
  const size_t at = s.find(tag);
  if (at == std::string::npos) return s;
  const size_t end = s.find('\'', at + tag.size());
  if (end == std::string::npos) return s;
  return s.substr(at + tag.size(), end - at - tag.size()) + " (HDF5: " + s + ")";
}

void h5_quiet() { H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr); }

void H5Id::reset() noexcept {
  if (id_ < 0) return;
  switch (H5Iget_type(id_)) {
    case H5I_FILE: H5Fclose(id_); break;
    case H5I_GROUP: H5Gclose(id_); break;
    case H5I_DATASET: H5Dclose(id_); break;
    case H5I_DATASPACE: H5Sclose(id_); break;
    case H5I_DATATYPE: H5Tclose(id_); break;
    case H5I_GENPROP_LST: H5Pclose(id_); break;
    case H5I_ATTR: H5Aclose(id_); break;
    default: break;
  }
  id_ = H5I_INVALID_HID;
}

void H5Id::close() {
  if (id_ < 0) return;
  const hid_t id = id_;
  id_ = H5I_INVALID_HID;
  herr_t status = 0;
  switch (H5Iget_type(id)) {
    case H5I_FILE: status = H5Fclose(id); break;
    case H5I_GROUP: status = H5Gclose(id); break;
    case H5I_DATASET: status = H5Dclose(id); break;
    case H5I_DATASPACE: status = H5Sclose(id); break;
    case H5I_DATATYPE: status = H5Tclose(id); break;
    case H5I_GENPROP_LST: status = H5Pclose(id); break;
    case H5I_ATTR: status = H5Aclose(id); break;
    default: break;
  }
  PF_H5_CHECK(status);
}

H5Id h5_create_file(const std::string& path) {
  h5_quiet();
  // Closing a written file while an object of it is still open is an error
  // (H5F_CLOSE_SEMI), not a close that silently waits for that object: with
  // no exit hook (above), such a file would never be completed.
  H5Id fapl(H5Pcreate(H5P_FILE_ACCESS));
  PF_H5_CHECK_MSG(fapl.get(), "creating the file access list of '" << path << "'");
  PF_H5_CHECK_MSG(H5Pset_fclose_degree(fapl, H5F_CLOSE_SEMI), "setting the close degree of '" << path << "'");
  H5Id file(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, fapl));
  PF_H5_CHECK_MSG(file.get(), "cannot create HDF5 file '" << path << "'");
  return file;
}

H5Id h5_open_file(const std::string& path, bool writable) {
  h5_quiet();
  struct stat st;
  PF_REQUIRE(IoError, ::stat(path.c_str(), &st) == 0, "no such file '" << path << "'");
  // A folder, a FIFO (opening it would wait for a writer for ever), a device.
  PF_REQUIRE(IoError, S_ISREG(st.st_mode),
             "'" << path << "' is "
                 << (S_ISDIR(st.st_mode) ? "a folder" : S_ISFIFO(st.st_mode) ? "a FIFO" : "not a regular file")
                 << ", not an HDF5 file");
  H5Id file(H5Fopen(path.c_str(), writable ? H5F_ACC_RDWR : H5F_ACC_RDONLY, H5P_DEFAULT));
  PF_H5_CHECK_MSG(file.get(), "cannot open '" << path << "' as an HDF5 file (truncated or corrupt?)");
  return file;
}

std::string h5_file_name(hid_t obj) {
  char buf[1024] = {0};
  if (H5Fget_name(obj, buf, sizeof(buf)) < 0) return "?";
  return buf;
}

H5Id h5_create_group(hid_t loc, const std::string& name) {
  H5Id g(H5Gcreate2(loc, name.c_str(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
  PF_H5_CHECK_MSG(g.get(), "cannot create group '" << name << "' in " << h5_file_name(loc));
  return g;
}

bool h5_exists(hid_t loc, const std::string& name) {
  // Checks each path component, as H5Lexists requires.
  std::string prefix;
  size_t start = 0;
  while (start <= name.size()) {
    const size_t slash = name.find('/', start);
    const std::string part = name.substr(0, slash == std::string::npos ? name.size() : slash);
    if (!part.empty() && part != "/") {
      const htri_t e = H5Lexists(loc, part.c_str(), H5P_DEFAULT);
      if (e <= 0) return false;
    }
    if (slash == std::string::npos) break;
    start = slash + 1;
  }
  return true;
}

H5Id h5_open_group(hid_t loc, const std::string& name) {
  h5_quiet();
  PF_REQUIRE(Hdf5Error, h5_exists(loc, name), "no group '" << name << "' in " << h5_file_name(loc));
  H5Id g(H5Gopen2(loc, name.c_str(), H5P_DEFAULT));
  PF_H5_CHECK_MSG(g.get(), "cannot open group '" << name << "' in " << h5_file_name(loc));
  return g;
}

H5Id h5_open_dataset(hid_t loc, const std::string& name, int64_t cache_bytes) {
  h5_quiet();
  PF_REQUIRE(Hdf5Error, h5_exists(loc, name),
             "no dataset '" << name << "' under " << object_name(loc) << " in " << h5_file_name(loc));
  H5Id dapl(H5Pcreate(H5P_DATASET_ACCESS));
  PF_H5_CHECK(dapl.get());
  if (cache_bytes > 0) PF_H5_CHECK(H5Pset_chunk_cache(dapl, 10007, static_cast<size_t>(cache_bytes), 1.0));
  H5Id d(H5Dopen2(loc, name.c_str(), dapl));
  PF_H5_CHECK_MSG(d.get(), "cannot open dataset '" << name << "' in " << h5_file_name(loc));
  return d;
}

void h5_write_array_raw(hid_t loc, const std::string& name, hid_t mem_type, const void* data,
                        const std::vector<int64_t>& shape, const H5Layout& layout) {
  const std::vector<int64_t> dims = shape.empty() ? std::vector<int64_t>{1} : shape;
  H5Layout lay = layout;
  if (dims[0] == 0) lay.chunk = 0;  // HDF5 cannot chunk a zero-sized fixed dataset
  H5Id space = make_space(dims);
  H5Id dcpl = make_dcpl(dims, lay);
  H5Id dset(H5Dcreate2(loc, name.c_str(), mem_type, space, H5P_DEFAULT, dcpl, H5P_DEFAULT));
  PF_H5_CHECK_MSG(dset.get(), "cannot create dataset '" << name << "' in " << h5_file_name(loc));
  if (dims[0] > 0) {
    PF_H5_CHECK_MSG(H5Dwrite(dset, mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data), "writing '" << name << "'");
  }
}

std::vector<int64_t> h5_dataset_shape(hid_t dset) {
  H5Id space(H5Dget_space(dset));
  PF_H5_CHECK(space.get());
  const int rank = H5Sget_simple_extent_ndims(space);
  PF_H5_CHECK(rank);
  std::vector<hsize_t> dims(static_cast<size_t>(rank));
  PF_H5_CHECK(H5Sget_simple_extent_dims(space, dims.data(), nullptr));
  return std::vector<int64_t>(dims.begin(), dims.end());
}

int64_t h5_dataset_length(hid_t dset) {
  const std::vector<int64_t> dims = h5_dataset_shape(dset);
  PF_REQUIRE(
      Hdf5Error, dims.size() == 1,
      "dataset " << object_name(dset) << " in " << h5_file_name(dset) << " has rank " << dims.size() << ", expected 1");
  return dims[0];
}

void h5_require_stored(hid_t dset) {
  const std::vector<int64_t> dims = h5_dataset_shape(dset);
  int64_t elements = 1;
  for (int64_t d : dims) elements *= d;
  if (elements == 0) return;
  std::string shape;
  for (int64_t d : dims) shape += (shape.empty() ? "[" : ", ") + std::to_string(d);
  shape += "]";
  H5Id plist(H5Dget_create_plist(dset));
  PF_H5_CHECK(plist.get());
  const H5D_layout_t layout = H5Pget_layout(plist);
  if (layout == H5D_CHUNKED) {
    std::vector<hsize_t> chunk(dims.size());
    PF_H5_CHECK(H5Pget_chunk(plist, static_cast<int>(chunk.size()), chunk.data()));
    hsize_t expected = 1;
    for (size_t i = 0; i < dims.size(); ++i)
      expected *= (static_cast<hsize_t>(dims[i]) + chunk[i] - 1) / std::max<hsize_t>(chunk[i], 1);
    hsize_t stored = 0;
    H5Id space(H5Dget_space(dset));
    PF_H5_CHECK(space.get());
    PF_H5_CHECK(H5Dget_num_chunks(dset, space, &stored));
    PF_REQUIRE(DataError, stored >= expected,
               "dataset " << object_name(dset) << " in " << h5_file_name(dset) << " declares shape " << shape
                          << " in " << expected << " chunks, but the file stores only " << stored
                          << " of them (the rest would read as a fill value)");
    H5Id type(H5Dget_type(dset));
    PF_H5_CHECK(type.get());
    double chunk_bytes = static_cast<double>(H5Tget_size(type));
    for (hsize_t c : chunk) chunk_bytes *= static_cast<double>(c);
    PF_REQUIRE(DataError, chunk_bytes <= static_cast<double>(kH5MaxChunkBytes),
               "dataset " << object_name(dset) << " in " << h5_file_name(dset) << " is stored in chunks of "
                          << static_cast<int64_t>(chunk_bytes) << " bytes, above the " << kH5MaxChunkBytes
                          << " this project reads (every read inflates a whole chunk; its writers use about "
                             "1 MiB)");
  } else if (layout == H5D_CONTIGUOUS) {
    H5Id type(H5Dget_type(dset));
    PF_H5_CHECK(type.get());
    const hsize_t bytes = static_cast<hsize_t>(elements) * H5Tget_size(type);
    const hsize_t stored = H5Dget_storage_size(dset);
    PF_REQUIRE(DataError, stored >= bytes,
               "dataset " << object_name(dset) << " in " << h5_file_name(dset) << " declares shape " << shape << " ("
                          << bytes << " bytes), but the file stores only " << stored << " bytes of it");
  }
}

void h5_require_shape(hid_t dset, const std::vector<int64_t>& want, const std::string& what) {
  const std::vector<int64_t> dims = h5_dataset_shape(dset);
  bool match = dims.size() == want.size();
  for (size_t i = 0; match && i < dims.size(); ++i) match = want[i] < 0 || dims[i] == want[i];
  if (match) return;
  auto str = [](const std::vector<int64_t>& s) {
    std::string out;
    for (int64_t d : s) out += (out.empty() ? "[" : ", ") + (d < 0 ? std::string("any") : std::to_string(d));
    return out.empty() ? std::string("[]") : out + "]";
  };
  throw DataError("dataset " + object_name(dset) + " in " + h5_file_name(dset) + " has shape " + str(dims) +
                  ", expected " + str(want) + " (" + what + ")");
}

void h5_read_array_raw(hid_t dset, hid_t mem_type, void* out) {
  PF_H5_CHECK_MSG(H5Dread(dset, mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, out),
                  "reading " << object_name(dset) << " in " << h5_file_name(dset));
}

void h5_read_range_raw(hid_t dset, hid_t mem_type, int64_t first, int64_t count, void* out) {
  if (count == 0) return;
  const int64_t n = h5_dataset_length(dset);
  PF_REQUIRE(Hdf5Error, first >= 0 && count > 0 && first + count <= n,
             "range [" << first << ", " << first + count << ") outside " << object_name(dset) << " of length " << n
                       << " in " << h5_file_name(dset));
  H5Id fspace(H5Dget_space(dset));
  PF_H5_CHECK(fspace.get());
  const hsize_t start = static_cast<hsize_t>(first), cnt = static_cast<hsize_t>(count);
  PF_H5_CHECK(H5Sselect_hyperslab(fspace, H5S_SELECT_SET, &start, nullptr, &cnt, nullptr));
  H5Id mspace(H5Screate_simple(1, &cnt, nullptr));
  PF_H5_CHECK(mspace.get());
  PF_H5_CHECK_MSG(
      H5Dread(dset, mem_type, mspace, fspace, H5P_DEFAULT, out),
      "reading [" << first << ", " << first + count << ") of " << object_name(dset) << " in " << h5_file_name(dset));
}

void h5_write_strings(hid_t loc, const std::string& name, const std::vector<std::string>& v, const H5Layout& layout) {
  H5Id type = vlen_string_type();
  const std::vector<int64_t> dims{static_cast<int64_t>(v.size())};
  H5Layout lay = layout;
  if (v.empty()) lay.chunk = 0;
  H5Id space = make_space(dims);
  H5Id dcpl = make_dcpl(dims, lay);
  H5Id dset(H5Dcreate2(loc, name.c_str(), type, space, H5P_DEFAULT, dcpl, H5P_DEFAULT));
  PF_H5_CHECK_MSG(dset.get(), "cannot create dataset '" << name << "' in " << h5_file_name(loc));
  if (v.empty()) return;
  std::vector<const char*> ptrs(v.size());
  for (size_t i = 0; i < v.size(); ++i) ptrs[i] = v[i].c_str();
  PF_H5_CHECK_MSG(H5Dwrite(dset, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, ptrs.data()), "writing '" << name << "'");
}

std::vector<std::string> h5_read_string_range(hid_t dset, int64_t first, int64_t count) {
  std::vector<std::string> out;
  if (count == 0) return out;
  const int64_t n = h5_dataset_length(dset);
  PF_REQUIRE(Hdf5Error, first >= 0 && count > 0 && first + count <= n,
             "range [" << first << ", " << first + count << ") outside " << object_name(dset) << " of length " << n);
  H5Id type = vlen_string_type();
  H5Id fspace(H5Dget_space(dset));
  const hsize_t start = static_cast<hsize_t>(first), cnt = static_cast<hsize_t>(count);
  PF_H5_CHECK(H5Sselect_hyperslab(fspace, H5S_SELECT_SET, &start, nullptr, &cnt, nullptr));
  H5Id mspace(H5Screate_simple(1, &cnt, nullptr));
  std::vector<char*> ptrs(static_cast<size_t>(count), nullptr);
  PF_H5_CHECK_MSG(H5Dread(dset, type, mspace, fspace, H5P_DEFAULT, ptrs.data()),
                  "reading strings of " << object_name(dset) << " in " << h5_file_name(dset));
  out.reserve(ptrs.size());
  for (char* p : ptrs) out.emplace_back(p ? p : "");
  H5Dvlen_reclaim(type, mspace, H5P_DEFAULT, ptrs.data());
  return out;
}

std::vector<std::string> h5_read_strings(hid_t loc, const std::string& name) {
  H5Id dset = h5_open_dataset(loc, name);
  h5_require_stored(dset);
  return h5_read_string_range(dset, 0, h5_dataset_length(dset));
}

H5Id h5_create_appendable(hid_t loc, const std::string& name, hid_t type, const H5Layout& layout) {
  PF_REQUIRE(ValueError, layout.chunk > 0, "appendable dataset '" << name << "' needs a chunk size");
  H5Id space = make_space({0}, /*unlimited=*/true);
  H5Id dcpl = make_dcpl({layout.chunk}, layout);
  H5Id dset(H5Dcreate2(loc, name.c_str(), type, space, H5P_DEFAULT, dcpl, H5P_DEFAULT));
  PF_H5_CHECK_MSG(dset.get(), "cannot create dataset '" << name << "' in " << h5_file_name(loc));
  return dset;
}

H5Appender::H5Appender(hid_t loc, const std::string& name, hid_t mem_type, const H5Layout& layout)
    : mem_type_(mem_type), name_(name) {
  if (mem_type == 0) {
    type_ = vlen_string_type();
    mem_type_ = type_.get();
  }
  dset_ = h5_create_appendable(loc, name, mem_type_, layout);
}

void H5Appender::append_raw(const void* data, int64_t count) {
  if (count == 0) return;
  const hsize_t new_size = static_cast<hsize_t>(size_ + count);
  PF_H5_CHECK_MSG(H5Dset_extent(dset_, &new_size), "extending '" << name_ << "' to " << new_size);
  H5Id fspace(H5Dget_space(dset_));
  const hsize_t start = static_cast<hsize_t>(size_), cnt = static_cast<hsize_t>(count);
  PF_H5_CHECK(H5Sselect_hyperslab(fspace, H5S_SELECT_SET, &start, nullptr, &cnt, nullptr));
  H5Id mspace(H5Screate_simple(1, &cnt, nullptr));
  PF_H5_CHECK_MSG(H5Dwrite(dset_, mem_type_, mspace, fspace, H5P_DEFAULT, data), "appending to '" << name_ << "'");
  size_ += count;
}

void H5Appender::append_strings(const std::vector<std::string>& v) {
  std::vector<const char*> ptrs(v.size());
  for (size_t i = 0; i < v.size(); ++i) ptrs[i] = v[i].c_str();
  append_raw(ptrs.data(), static_cast<int64_t>(v.size()));
}

bool h5_has_attr(hid_t obj, const std::string& name) { return H5Aexists(obj, name.c_str()) > 0; }

namespace {

void write_attr_raw(hid_t obj, const std::string& name, hid_t type, const std::vector<int64_t>& shape,
                    const void* data) {
  if (h5_has_attr(obj, name)) PF_H5_CHECK(H5Adelete(obj, name.c_str()));
  H5Id space = make_space(shape);
  H5Id attr(H5Acreate2(obj, name.c_str(), type, space, H5P_DEFAULT, H5P_DEFAULT));
  PF_H5_CHECK_MSG(attr.get(), "cannot create attribute '" << name << "' in " << h5_file_name(obj));
  PF_H5_CHECK_MSG(H5Awrite(attr, type, data), "writing attribute '" << name << "'");
}

H5Id open_attr(hid_t obj, const std::string& name, int64_t* count) {
  PF_REQUIRE(Hdf5Error, h5_has_attr(obj, name),
             "no attribute '" << name << "' on " << object_name(obj) << " in " << h5_file_name(obj));
  H5Id attr(H5Aopen(obj, name.c_str(), H5P_DEFAULT));
  PF_H5_CHECK_MSG(attr.get(), "cannot open attribute '" << name << "' in " << h5_file_name(obj));
  H5Id space(H5Aget_space(attr));
  const hssize_t n = H5Sget_simple_extent_npoints(space);
  PF_H5_CHECK(n);
  *count = n;
  return attr;
}

}  // namespace

void h5_write_attr_string(hid_t obj, const std::string& name, const std::string& value) {
  h5_write_attr_strings(obj, name, {value});
}

std::string h5_read_attr_string(hid_t obj, const std::string& name) {
  const std::vector<std::string> v = h5_read_attr_strings(obj, name);
  PF_REQUIRE(Hdf5Error, v.size() == 1,
             "attribute '" << name << "' in " << h5_file_name(obj) << " holds " << v.size() << " strings, expected 1");
  return v[0];
}

void h5_write_attr_strings(hid_t obj, const std::string& name, const std::vector<std::string>& values) {
  H5Id type = vlen_string_type();
  std::vector<const char*> ptrs(values.size());
  for (size_t i = 0; i < values.size(); ++i) ptrs[i] = values[i].c_str();
  write_attr_raw(obj, name, type, {static_cast<int64_t>(values.size())}, ptrs.data());
}

std::vector<std::string> h5_read_attr_strings(hid_t obj, const std::string& name) {
  int64_t n = 0;
  H5Id attr = open_attr(obj, name, &n);
  H5Id ftype(H5Aget_type(attr));
  PF_REQUIRE(Hdf5Error, H5Tget_class(ftype) == H5T_STRING && H5Tis_variable_str(ftype) > 0,
             "attribute '" << name << "' in " << h5_file_name(obj) << " is not a variable-length string");
  H5Id type = vlen_string_type();
  std::vector<char*> ptrs(static_cast<size_t>(n), nullptr);
  PF_H5_CHECK_MSG(H5Aread(attr, type, ptrs.data()), "reading attribute '" << name << "' in " << h5_file_name(obj));
  std::vector<std::string> out;
  for (char* p : ptrs) out.emplace_back(p ? p : "");
  H5Id space(H5Aget_space(attr));
  H5Dvlen_reclaim(type, space, H5P_DEFAULT, ptrs.data());
  return out;
}

void h5_write_attr_int64(hid_t obj, const std::string& name, int64_t value) {
  write_attr_raw(obj, name, H5T_NATIVE_INT64, {}, &value);
}

int64_t h5_read_attr_int64(hid_t obj, const std::string& name) {
  const std::vector<int64_t> v = h5_read_attr_int64s(obj, name);
  PF_REQUIRE(Hdf5Error, v.size() == 1,
             "attribute '" << name << "' in " << h5_file_name(obj) << " holds " << v.size() << " values, expected 1");
  return v[0];
}

void h5_write_attr_int64s(hid_t obj, const std::string& name, const std::vector<int64_t>& values) {
  write_attr_raw(obj, name, H5T_NATIVE_INT64, {static_cast<int64_t>(values.size())}, values.data());
}

std::vector<int64_t> h5_read_attr_int64s(hid_t obj, const std::string& name) {
  int64_t n = 0;
  H5Id attr = open_attr(obj, name, &n);
  std::vector<int64_t> out(static_cast<size_t>(n));
  PF_H5_CHECK_MSG(H5Aread(attr, H5T_NATIVE_INT64, out.data()),
                  "reading attribute '" << name << "' in " << h5_file_name(obj));
  return out;
}

void h5_write_attr_double(hid_t obj, const std::string& name, double value) {
  write_attr_raw(obj, name, H5T_NATIVE_DOUBLE, {}, &value);
}

double h5_read_attr_double(hid_t obj, const std::string& name) {
  int64_t n = 0;
  H5Id attr = open_attr(obj, name, &n);
  PF_REQUIRE(Hdf5Error, n == 1,
             "attribute '" << name << "' in " << h5_file_name(obj) << " holds " << n << " values, expected 1");
  double v = 0;
  PF_H5_CHECK_MSG(H5Aread(attr, H5T_NATIVE_DOUBLE, &v), "reading attribute '" << name << "' in " << h5_file_name(obj));
  return v;
}

}  // namespace pf
