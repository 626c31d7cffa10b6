// The protein data file schema, version 1 ("performer-protein-v1"):
//   /                 attrs: schema="performer-protein-v1", schema_version=1,
//                            vocabulary (Vocab::description()), sources (string[]),
//                            seed, val_fraction, test_fraction, map_unknown_to_x,
//                            sequences_read, duplicates_dropped,
//                            content_digest ("fnv1a64:" + 16 hex digits over
//                            each split's name and the FNV-1a of its
//                            sequences' lengths and tokens; files prepared
//                            before it existed lack it)
//   /train /valid /test   attrs: sequences, residues (int64)
//     tokens   uint8   [residues]        concatenated residue tokens, chunked, deflate, Fletcher-32
//     offsets  int64   [sequences + 1]   sequence i is tokens[offsets[i], offsets[i+1]); offsets[0] = 0
//     ids      vlen UTF-8 string [sequences]   first word of each header
//     headers  vlen UTF-8 string [sequences]   full header text (FASTA '>' line, or built from Swiss-Prot ID/AC/DE/OS)
//   /ood              optional, same layout: sequences of held-out organisms
//                     (root attr ood_organisms, string[]); readers that do not
//                     know it ignore it, so the version stays 1
// docs/data.md is the reference; change kSchemaVersion with any layout change.
#pragma once

#include <hdf5.h>

#include <cstdint>
#include <string>
#include <vector>

namespace pf {

constexpr const char* kSchemaName = "performer-protein";
constexpr int64_t kSchemaVersion = 1;
constexpr const char* kSplitNames[3] = {"train", "valid", "test"};
constexpr const char* kOodSplitName = "ood";  // optional fourth split: held-out organisms
constexpr const char* kContentDigestAttr = "content_digest";

// "performer-protein-v1"
std::string schema_string();

// Checks the root attributes of an open data file: schema name and version and
// the vocabulary. DataError naming `path`, what was found and what is expected.
void check_schema(hid_t file, const std::string& path);

// Tokens per chunk of `tokens` and entries per chunk of `offsets` as written.
constexpr int64_t kTokenChunk = 1 << 16;
constexpr int64_t kOffsetChunk = 1 << 13;

}  // namespace pf
