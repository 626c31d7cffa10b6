// The protein data file schema, version 2 ("performer-protein-v2"):
//   /                 attrs: schema="performer-protein-v2", schema_version=2,
//                            vocabulary (Vocab::description()), sources (string[]),
//                            seed, val_fraction, test_fraction, map_unknown_to_x,
//                            sequences_read, duplicates_dropped,
//                            split_rule ("sequence": a keyed hash of each
//                            sequence; "cluster": by MMseqs2 cluster),
//                            content_digest ("fnv1a64:" + 16 hex digits over
//                            each split's name and the FNV-1a of its
//                            sequences' lengths and tokens, and with clusters
//                            of its cluster column; files prepared before it
//                            existed lack it)
//   /train /valid /test   attrs: sequences, residues (int64)
//     tokens   uint8   [residues]        concatenated residue tokens, chunked, deflate, Fletcher-32
//     offsets  int64   [sequences + 1]   sequence i is tokens[offsets[i], offsets[i+1]); offsets[0] = 0
//     ids      vlen UTF-8 string [sequences]   first word of each header
//     headers  vlen UTF-8 string [sequences]   full header text (FASTA '>' line, or built from Swiss-Prot ID/AC/DE/OS)
//     clusters int64 [sequences]     cluster split only: index into /clusters
//   /ood              optional, same layout: sequences of held-out organisms
//                     (root attr ood_organisms, string[])
//   /clusters         cluster split only; attrs count, mode, identity,
//                     coverage, mmseqs_version, split_rounds,
//                     clusters_moved_to_train, sequences_moved_to_train
//     representatives  vlen UTF-8 string [count]  id of each cluster's representative
//     sizes            int64 [count]              members in the file (all splits)
// Version 1 is version 2 without split_rule and clusters: it is read as a
// sequence split.
// docs/data.md is the reference; change kSchemaVersion with any layout change.
// Readers open a file with open_prepared_data (data/prepared_data.h), which
// checks all of this before they read.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace pf {

constexpr const char* kSchemaName = "performer-protein";
constexpr int64_t kSchemaVersion = 2;
constexpr int64_t kOldestSchemaVersion = 1;  // still read: a version-1 file is an unclustered one
constexpr const char* kSplitNames[3] = {"train", "valid", "test"};
constexpr const char* kOodSplitName = "ood";  // optional fourth split: held-out organisms
constexpr const char* kContentDigestAttr = "content_digest";
// Version 2: how the splits were made, and the clusters of a cluster split.
constexpr const char* kSplitRuleAttr = "split_rule";  // root attr; absent in version 1 (= sequence)
constexpr const char* kSplitRuleSequence = "sequence";
constexpr const char* kSplitRuleCluster = "cluster";
constexpr const char* kClustersName = "clusters";  // the /clusters group and each split's cluster column

// "performer-protein-v2": the version this build writes.
std::string schema_string();

// Tokens per chunk of `tokens` and entries per chunk of `offsets` as written.
constexpr int64_t kTokenChunk = 1 << 16;
constexpr int64_t kOffsetChunk = 1 << 13;

}  // namespace pf
