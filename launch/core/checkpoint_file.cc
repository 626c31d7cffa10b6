#include "launch/core/checkpoint_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>

#include "data/vocab.h"
#include "launch/core/checkpoint_schema.h"
#include "model/model.h"
#include "runtime/check.h"

namespace pf {
namespace fs = std::filesystem;

namespace {

// The attributes of an open checkpoint, checked: the schema and its version,
// the metadata checksum, the step against the optimizer's, each number
// within what a run writes.
CheckpointState read_metadata(hid_t file, const std::string& path) {
  PF_REQUIRE(DataError, h5_has_attr(file, "schema") && h5_read_attr_string(file, "schema") == kCheckpointSchema,
             path << ": not a performer checkpoint (no schema attribute '" << kCheckpointSchema << "')");
  CheckpointState st;
  std::string stored_checksum, computed_checksum;
  int64_t optimizer_step = 0;
  try {
    const int64_t version = h5_read_attr_int64(file, "schema_version");
    // A sound file that this build cannot continue: refused, never skipped.
    PF_REQUIRE(ConfigError, version == kCheckpointSchemaVersion,
               path << ": checkpoint schema version " << version << ", this build reads version "
                    << kCheckpointSchemaVersion
                    << (version == 1 ? " (version 1 files carry no metadata checksum, so their step and data "
                                       "position cannot be verified; resume them with the build that wrote them)"
                                     : ""));
    H5Id opt = h5_open_group(file, "optimizer");
    PF_REQUIRE(DataError, h5_has_attr(file, kMetadataChecksumAttr),
               path << ": damaged checkpoint: the attribute " << kMetadataChecksumAttr << " is missing");
    stored_checksum = h5_read_attr_string(file, kMetadataChecksumAttr);
    computed_checksum = checkpoint_metadata_checksum(file, opt);
    st.step = h5_read_attr_int64(file, "step");
    st.loader.epoch = h5_read_attr_int64(file, "loader_epoch");
    st.loader.sample = h5_read_attr_int64(file, "loader_sample");
    st.config_text = h5_read_attr_string(file, "config");
    st.dp = h5_read_attr_int64(file, "dp");
    st.sp = h5_read_attr_int64(file, "sp");
    if (h5_has_attr(file, "run_id")) st.run_id = h5_read_attr_string(file, "run_id");
    if (h5_has_attr(file, "data")) st.data = h5_read_attr_string(file, "data");
    optimizer_step = h5_read_attr_int64(opt, "step");
    st.loss_scale = h5_read_attr_double(opt, "loss_scale");
    st.loss_scale_good_steps = h5_read_attr_int64(opt, "loss_scale_good_steps");
  } catch (const Hdf5Error& e) {
    throw DataError(path + ": damaged checkpoint (an attribute failed to read): " + e.what());
  }
  // The step names the file, keys the masks and the schedule, and AdamW's
  // bias correction counts its own: they must agree.
  PF_REQUIRE(DataError, st.step == optimizer_step,
             path << ": damaged checkpoint: step " << st.step << " but the optimizer's step is " << optimizer_step);
  PF_REQUIRE(DataError, stored_checksum == computed_checksum,
             path << ": damaged checkpoint: the metadata checksum does not match (stored " << stored_checksum
                  << ", computed " << computed_checksum
                  << "): an attribute (step, data position, configuration, ...) was changed");
  // A file that passes its checksum can still have been written by hand: each
  // number within what a run writes, named, before anything uses it.
  auto at_least = [&](const char* name, int64_t value, int64_t low) {
    PF_REQUIRE(DataError, value >= low,
               path << ": damaged checkpoint: the attribute " << name << " is " << value << ", below " << low);
  };
  at_least("step", st.step, 0);
  at_least("loader_epoch", st.loader.epoch, 0);
  at_least("loader_sample", st.loader.sample, 0);
  at_least("dp", st.dp, 1);
  at_least("sp", st.sp, 1);
  at_least("optimizer/loss_scale_good_steps", st.loss_scale_good_steps, 0);
  PF_REQUIRE(DataError, std::isfinite(st.loss_scale) && st.loss_scale >= 0,
             path << ": damaged checkpoint: the attribute optimizer/loss_scale is " << st.loss_scale
                  << ", not a finite number >= 0");
  return st;
}

// The groups of tensors a reader reads: /params and, with `moments`, AdamW's m and v.
std::vector<std::string> tensor_groups(bool moments) {
  if (moments) return {"params", "optimizer/m", "optimizer/v"};
  return {"params"};
}

// Every tensor of `layout` in `group` as the reader will read it: present,
// float32, of the layout's shape, in chunks no larger than that shape, and
// its data stored in the file (at least 4 bytes an element, so a declared
// shape is backed by the file's own bytes). Checked for every tensor before
// any is read: what a reader allocates is what the model needs, never what
// a file declares.
void check_group(hid_t group, const ParamLayout& layout, const std::string& path, const std::string& where) {
  for (const ParamSlice& s : layout.slices()) {
    const std::string name = where + "/" + s.name;
    PF_REQUIRE(DataError, h5_exists(group, s.name),
               path << ": " << name << " is missing (the checkpoint is from another model)");
    H5Id d = h5_open_dataset(group, s.name);
    const std::vector<int64_t> shape = h5_dataset_shape(d);
    PF_REQUIRE(DataError, shape == s.shape,
               path << ": " << name << " has shape " << shape_str(shape) << ", the model needs " << shape_str(s.shape));
    H5Id type(H5Dget_type(d));
    PF_H5_CHECK(type.get());
    PF_REQUIRE(DataError, H5Tget_class(type) == H5T_FLOAT && H5Tget_size(type) == sizeof(float),
               path << ": " << name << " is not stored as float32");
    H5Id plist(H5Dget_create_plist(d));
    PF_H5_CHECK(plist.get());
    if (H5Pget_layout(plist) == H5D_CHUNKED) {
      std::vector<hsize_t> chunk(shape.size());
      PF_REQUIRE(DataError,
                 H5Pget_chunk(plist, static_cast<int>(chunk.size()), chunk.data()) == static_cast<int>(chunk.size()),
                 path << ": " << name << " has chunks of another rank than its shape " << shape_str(shape));
      for (size_t i = 0; i < chunk.size(); ++i)
        PF_REQUIRE(DataError, static_cast<int64_t>(chunk[i]) <= shape[i],
                   path << ": " << name << " of shape " << shape_str(shape) << " declares chunks of "
                        << shape_str(std::vector<int64_t>(chunk.begin(), chunk.end())) << ", larger than itself");
    }
    const int64_t bytes = s.numel * static_cast<int64_t>(sizeof(float));
    const int64_t stored = static_cast<int64_t>(H5Dget_storage_size(d));
    PF_REQUIRE(DataError, stored >= bytes,
               path << ": " << name << " of shape " << shape_str(shape) << " (" << bytes << " bytes) has only "
                    << stored << " bytes stored in the file");
    h5_require_stored(d);  // and every chunk: bytes enough can still leave one unwritten
    // A copy rewritten by another program (h5repack) may have lost the
    // checksums: a damaged value would then be read without a word.
    bool checksummed = false;
    for (int i = 0, n = H5Pget_nfilters(plist); i < n && !checksummed; ++i) {
      unsigned flags = 0, config = 0;
      size_t values = 0;
      checksummed = H5Pget_filter2(plist, static_cast<unsigned>(i), &flags, &values, nullptr, 0, nullptr, &config) ==
                    H5Z_FILTER_FLETCHER32;
    }
    PF_REQUIRE(DataError, checksummed,
               path << ": " << name
                    << " carries no Fletcher-32 checksum (rewritten by another program?): damage to it could not be "
                       "detected. performer-train checksums every tensor of its checkpoints");
  }
}

// Reads every tensor of `layout` (checked by check_group) into one flat
// buffer, refusing a value that is not finite: the trainer never saves one.
std::vector<float> read_group(hid_t group, const ParamLayout& layout, const std::string& path,
                              const std::string& where) {
  std::vector<float> flat(static_cast<size_t>(layout.total()));
  for (const ParamSlice& s : layout.slices()) {
    H5Id d = h5_open_dataset(group, s.name);
    float* v = flat.data() + s.offset;
    h5_read_array_raw(d, H5T_NATIVE_FLOAT, v);
    const float* bad = std::find_if(v, v + s.numel, [](float x) { return !std::isfinite(x); });
    PF_REQUIRE(DataError, bad == v + s.numel,
               path << ": " << where << "/" << s.name << " holds " << *bad << " (element " << bad - v
                    << "): a checkpoint holds finite values only");
  }
  return flat;
}

// The stored /projections are what the stored configuration draws at the
// stored redraw index. This build draws them again and the Python package
// reads them: a file whose projections were changed would be one model here
// and another there, so it is refused as damaged.
void verify_projections(hid_t file, const std::string& path, const ModelConfig& model) {
  if (!stores_projections(model)) return;
  const int64_t redraw = h5_read_attr_int64(file, "redraw_index");
  H5Id group = h5_open_group(file, "projections");
  for (int64_t l = 0; l < model.layers; ++l) {
    const std::string name = "layer" + std::to_string(l);
    PF_REQUIRE(DataError, h5_exists(group, name),
               path << ": damaged checkpoint: /projections/" << name << " is missing");
    // The shape first: a crafted one is refused before anything of its size is read.
    const std::vector<int64_t> want = {model.features, model.head_dim()};
    const bool shaped = h5_dataset_shape(H5Id(h5_open_dataset(group, name)).get()) == want;
    PF_REQUIRE(DataError, shaped && h5_read_array<float>(group, name) == layer_projection(model, l, redraw),
               path << ": damaged checkpoint: /projections/" << name
                    << " is not the projection that model.seed = " << model.seed << " draws at redraw index " << redraw
                    << " (changed after the file was written: this build would use the drawn one, "
                       "performer-export the stored one)");
  }
}

}  // namespace

CheckpointFile open_checkpoint(const std::string& path) {
  PF_REQUIRE(IoError, fs::exists(path), "checkpoint '" << path << "' does not exist");
  // (An IoError as for any unreadable file; the callers that know the key
  // name it first with require_checkpoint_file.)
  PF_REQUIRE(IoError, !fs::is_directory(path),
             "'" << path << "' is a folder, not a checkpoint file: name a checkpoint file (ckpt-*.h5) inside it; "
                 << describe_checkpoints_in(path));
  // A file this process may not read (permissions, a failing disk, a stale
  // network handle) is not a damaged checkpoint: --resume auto must stop on
  // it rather than skip it and start again at step 0.
  const int fd = ::open(path.c_str(), O_RDONLY);
  char probe = 0;
  const bool readable = fd >= 0 && ::read(fd, &probe, 1) >= 0;
  const int err = errno;
  if (fd >= 0) ::close(fd);
  PF_REQUIRE(ConfigError, readable,
             "checkpoint '" << path << "' cannot be read: " << std::strerror(err)
                            << " (a file that cannot be read is not taken for a damaged one and skipped; make it "
                               "readable, or move it away)");
  H5Id file;
  try {
    file = h5_open_file(path);
  } catch (const Hdf5Error& e) {
    throw DataError(path + ": not a readable HDF5 checkpoint (truncated or corrupt?): " + e.what());
  }
  CheckpointState metadata = read_metadata(file, path);
  return CheckpointFile(path, std::move(file), std::move(metadata));
}

TrainConfig CheckpointFile::config(const std::vector<std::string>& overrides) const {
  return parse_train_config_text(metadata_.config_text, path_, overrides);
}

ModelConfig CheckpointFile::stored_model() const {
  return parse_train_config_text(metadata_.config_text, path_ + " (stored configuration)").model;
}

// The rows of the stored token embedding are the checkpoint's vocabulary
// (model.vocab is not a configuration key: it is this build's).
void CheckpointFile::require_protein_vocabulary(const ModelConfig& model) const {
  int64_t rows = model.vocab;
  try {
    if (h5_exists(file_, "params")) {
      H5Id params = h5_open_group(file_, "params");
      if (h5_exists(params, "embedding")) {
        H5Id d = h5_open_dataset(params, "embedding");
        const std::vector<int64_t> shape = h5_dataset_shape(d);
        if (!shape.empty()) rows = shape[0];
      }
    }
  } catch (const Hdf5Error& e) {
    throw ConfigError(path_ + ": not a usable checkpoint: " + e.what());
  }
  PF_REQUIRE(ConfigError, rows == Vocab::kSize && model.vocab == Vocab::kSize,
             path_ << ": checkpoint of another vocabulary: its token embedding has " << rows
                   << " rows, but this build's protein vocabulary has " << static_cast<int>(Vocab::kSize) << " tokens ("
                   << Vocab::description() << "): its token ids would be read as other letters");
}

void CheckpointFile::check_tensors(const ParamLayout& layout, bool moments) const {
  try {
    for (const std::string& g : tensor_groups(moments)) check_group(h5_open_group(file_, g), layout, path_, "/" + g);
  } catch (const Hdf5Error& e) {
    throw DataError(path_ + ": damaged checkpoint (a dataset's declaration failed to read): " + e.what());
  }
}

void CheckpointFile::check_params(const ParamLayout& layout) const { check_tensors(layout, false); }

CheckpointState CheckpointFile::read_tensors(const ParamLayout& layout, bool moments) const {
  check_tensors(layout, moments);
  CheckpointState st = metadata_;
  try {
    if (h5_exists(file_, "projections") && !st.config_text.empty()) verify_projections(file_, path_, stored_model());
    std::vector<float>* const into[] = {&st.params, &st.m, &st.v};  // in the order of tensor_groups
    const std::vector<std::string> groups = tensor_groups(moments);
    for (size_t i = 0; i < groups.size(); ++i)
      *into[i] = read_group(h5_open_group(file_, groups[i]), layout, path_, "/" + groups[i]);
  } catch (const Hdf5Error& e) {
    throw DataError(path_ + ": damaged checkpoint (a dataset failed to read or its checksum failed): " + e.what());
  }
  return st;
}

std::vector<float> CheckpointFile::read_params(const ParamLayout& layout) const {
  return read_tensors(layout, false).params;
}

CheckpointState CheckpointFile::read_state(const ParamLayout& layout) const { return read_tensors(layout, true); }

bool is_damaged_checkpoint_error(const Error& e) {
  return e.kind() == ErrorKind::Data || e.kind() == ErrorKind::Hdf5 || e.kind() == ErrorKind::Io;
}

}  // namespace pf
