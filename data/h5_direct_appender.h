// A 1-D dataset of fixed-size elements that grows like H5Appender's, but
// whose filters (data/h5_filters.h) run on a TaskPool's threads: full chunks
// are filtered beside the caller's work and stored in order with
// H5Dwrite_chunk; the last, partial chunk is zero-padded (HDF5's fill value)
// by finish(). The dataset reads back exactly as if H5Appender had written
// it, and each chunk's stored bytes are the same. Every HDF5 call happens on
// the thread that calls append() and finish().
//   TaskPool pool(1);
//   H5DirectAppender tokens(group, "tokens", H5T_NATIVE_UINT8, H5Layout{65536, 4, true}, &pool);
//   tokens.append(buf.data(), n);   // any number of times
//   tokens.finish();                // required: writes what is left
#pragma once

#include <cstdint>
#include <deque>
#include <future>
#include <string>
#include <vector>

#include "data/h5.h"
#include "runtime/task_pool.h"

namespace pf {

class H5DirectAppender {
 public:
  // type: a native numeric type (the file stores it as is). layout.chunk > 0.
  // pool: runs the filters; it must outlive this appender.
  H5DirectAppender(hid_t loc, const std::string& name, hid_t type, const H5Layout& layout, TaskPool* pool);
  void append(const void* data, int64_t count);
  // Writes the filtered chunks still pending and the partial last chunk.
  void finish();
  int64_t size() const { return size_; }

 private:
  void submit_chunk(std::vector<uint8_t> raw);
  // Stores pending chunks whose filtering is done, oldest first; with `all`,
  // waits for (or runs) the rest, or stops at `keep` pending.
  void store_ready(bool all, size_t keep = 0);

  H5Id dset_;
  std::string name_;
  H5Layout layout_;
  TaskPool* pool_;
  size_t element_bytes_ = 0, chunk_bytes_ = 0;
  std::vector<uint8_t> partial_;  // raw bytes of the chunk being filled
  std::deque<std::future<std::vector<uint8_t>>> pending_;
  int64_t size_ = 0;           // elements appended
  int64_t chunks_stored_ = 0;  // chunks written to the file, in order
  int64_t extent_ = 0;         // the dataset's current size
  bool finished_ = false;
};

}  // namespace pf
