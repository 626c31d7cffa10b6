// Exact duplicates within a memory budget: see duplicates.h.
#include "data/duplicates.h"

#include <cerrno>
#include <cstring>

#include "runtime/check.h"
#include "runtime/fnv1a.h"
#include "runtime/random.h"

namespace pf {

namespace {

// A second, independent 64-bit hash (mix64 over 8-byte words and the length).
uint64_t word_hash64(const uint8_t* p, int64_t n) {
  uint64_t h = mix64(0x5EEDull, static_cast<uint64_t>(n));
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t w = 0;
    for (int k = 0; k < 8; ++k) w |= static_cast<uint64_t>(p[i + k]) << (8 * k);
    h = mix64(h, w);
  }
  uint64_t w = 0;
  for (int k = 0; i + k < n; ++k) w |= static_cast<uint64_t>(p[i + k]) << (8 * k);
  return mix64(h, w);
}

}  // namespace

SequenceKey sequence_key(const uint8_t* tokens, int64_t n) {
  return {Fnv1a64().add(tokens, static_cast<size_t>(n)).value(), word_hash64(tokens, n)};
}

DuplicateFinder::DuplicateFinder(std::function<std::string()> folder, int64_t budget_bytes, std::function<void()> poll)
    : folder_(std::move(folder)),
      budget_(budget_bytes),
      poll_(std::move(poll)),
      keys_(folder_, "keys", budget_bytes / 2) {
  keys_.set_poll(poll_);
}

DropList DuplicateFinder::finish() {
  keys_.finish();
  ExternalSorter<int64_t> drops(folder_, "drops", budget_ / 2);
  drops.set_poll(poll_);
  KeyedRecord r{}, prev{};
  bool first = true;
  while (keys_.next(r)) {
    if (!first && r.a == prev.a && r.b == prev.b) drops.add(r.record);
    prev = r;
    first = false;
  }
  drops.finish();
  runs_written_ = keys_.runs_written() + drops.runs_written();
  DropList list;
  list.count_ = drops.records();
  const bool fits = list.count_ * static_cast<int64_t>(sizeof(int64_t)) <= budget_ / 2;
  if (!fits) {
    list.file_ = folder_() + "/drops.sorted";
    FILE* f = std::fopen(list.file_.c_str(), "wb");
    PF_REQUIRE(IoError, f != nullptr, "cannot open the scratch file '" << list.file_ << "': " << std::strerror(errno));
    std::vector<int64_t> block;
    block.reserve(8192);
    auto flush = [&] {
      if (!block.empty() && std::fwrite(block.data(), sizeof(int64_t), block.size(), f) != block.size()) {
        const int err = errno;
        std::fclose(f);
        PF_REQUIRE(IoError, false, "cannot write the scratch file '" << list.file_ << "': " << std::strerror(err));
      }
      block.clear();
    };
    int64_t d = 0;
    while (drops.next(d)) {
      block.push_back(d);
      if (block.size() == block.capacity()) flush();
    }
    flush();
    const bool ok = std::fflush(f) == 0 && std::ferror(f) == 0;
    const int err = errno;
    PF_REQUIRE(IoError, std::fclose(f) == 0 && ok,
               "cannot write the scratch file '" << list.file_ << "': " << std::strerror(err));
  } else {
    list.memory_.reserve(static_cast<size_t>(list.count_));
    int64_t d = 0;
    while (drops.next(d)) list.memory_.push_back(d);
  }
  return list;
}

DropList::Cursor::Cursor(const DropList& list) : list_(list) {
  if (!list.file_.empty()) {
    file_ = std::fopen(list.file_.c_str(), "rb");
    PF_REQUIRE(IoError, file_ != nullptr,
               "cannot open the scratch file '" << list.file_ << "': " << std::strerror(errno));
    block_.reserve(8192);
  }
  advance();
}

DropList::Cursor::~Cursor() {
  if (file_) std::fclose(file_);
}

bool DropList::Cursor::advance() {
  if (!file_) {
    next_ = memory_pos_ < static_cast<int64_t>(list_.memory_.size()) ? list_.memory_[static_cast<size_t>(memory_pos_++)]
                                                                     : -1;
    return next_ >= 0;
  }
  if (pos_ == block_.size()) {
    block_.resize(block_.capacity());
    const size_t n = std::fread(block_.data(), sizeof(int64_t), block_.size(), file_);
    PF_REQUIRE(IoError, n > 0 || !std::ferror(file_),
               "cannot read the scratch file '" << list_.file_ << "': " << std::strerror(errno));
    block_.resize(n);
    pos_ = 0;
    if (n == 0) {
      next_ = -1;
      return false;
    }
  }
  next_ = block_[pos_++];
  return true;
}

bool DropList::Cursor::dropped(int64_t record) {
  while (next_ >= 0 && next_ < record) advance();
  if (next_ != record) return false;
  advance();
  return true;
}

}  // namespace pf
