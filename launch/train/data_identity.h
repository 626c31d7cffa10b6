// What a checkpoint records of the data it was trained on, and the check on
// resume (docs/checkpoints.md#data-identity). Per data file: the path, the
// size in bytes, the content digest that performer-data prepare stored
// (data/schema.h; "" for files prepared before it existed) and the split
// rule (seed, fractions, held-out organisms). Stored in the checkpoint as
// the JSON attribute "data".
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace pf {

struct DataFileIdentity {
  std::string path;
  int64_t size = 0;
  std::string digest;
  std::string split_rule;  // "hash seed=0 val_fraction=0.01 test_fraction=0.01 ood=[...]"
};

// The identity of each file, from the root attributes of its checked handle
// (open_prepared_data, data/prepared_data.h; no tensor is read).
std::vector<DataFileIdentity> data_identities(const std::vector<std::string>& files);
std::string data_identities_json(const std::vector<DataFileIdentity>& ids);
// DataError naming `origin` when the text is not what data_identities_json writes.
std::vector<DataFileIdentity> parse_data_identities(const std::string& json, const std::string& origin);

// What changed between the data a checkpoint was trained on and the data
// now, one line per change ("data.files[0] 'x.h5': content digest fnv1a64:..
// in the checkpoint, fnv1a64:.. now"); empty when the same. A file that
// moved (another path, same digest and size) is no change. Where either side
// lacks a digest, the size stands in for it.
std::vector<std::string> data_changes(const std::vector<DataFileIdentity>& stored,
                                      const std::vector<DataFileIdentity>& now);

}  // namespace pf
