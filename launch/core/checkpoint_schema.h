// What the writer (launch/core/checkpoint.cc) and the reader
// (launch/core/checkpoint_file.cc) of a checkpoint must agree on, in one
// place: the schema's name and version, the attributes the metadata checksum
// covers, and which models store their random projections. The layout of the
// file: launch/core/checkpoint.h, docs/checkpoints.md.
#pragma once

#include <hdf5.h>

#include <cstdint>
#include <string>

#include "model/config.h"

namespace pf {

constexpr const char* kCheckpointSchema = "performer-checkpoint";
// 2: the attributes carry metadata_checksum. Version 1 files (no checksum)
// are refused: their step and data position cannot be trusted.
constexpr int64_t kCheckpointSchemaVersion = 2;
constexpr const char* kMetadataChecksumAttr = "metadata_checksum";

// FNV-1a (16 hex digits) of the attributes the metadata checksum covers,
// read from `file` and its /optimizer group `optimizer`: for each,
// "<name>=<value>\n" in a fixed order, integers in decimal, the loss scale
// as the 16 hex digits of its IEEE-754 bits, strings as stored
// (docs/checkpoints.md). Read back from the file both when writing and when
// checking, so the two cannot disagree. Hdf5Error when an attribute is missing.
std::string checkpoint_metadata_checksum(hid_t file, hid_t optimizer);

// Whether a checkpoint of `model` holds /projections/layer<l>: softmax has
// no projection, and exp's are parameters (/params/layer<l>.attn.features).
bool stores_projections(const ModelConfig& model);

}  // namespace pf
