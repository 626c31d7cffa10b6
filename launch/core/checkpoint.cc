#include "launch/core/checkpoint.h"

#include <signal.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <regex>

#include "data/h5.h"
#include "data/replaceable_output.h"
#include "launch/core/train_config.h"
#include "model/model.h"
#include "runtime/atomic_file.h"
#include "runtime/check.h"
#include "runtime/fnv1a.h"

namespace pf {
namespace fs = std::filesystem;

namespace {

constexpr const char* kSchema = "performer-checkpoint";
// 2: the attributes carry metadata_checksum. Version 1 files (no checksum)
// are refused: their step and data position cannot be trusted.
constexpr int64_t kSchemaVersion = 2;
constexpr const char* kChecksumAttr = "metadata_checksum";

// The attributes the metadata checksum covers, as text in this order: for
// each, "<name>=<value>\n", integers in decimal, the loss scale as the 16 hex
// digits of its IEEE-754 bits, strings as stored (docs/checkpoints.md). Read
// back from the file both when writing and when checking, so the two cannot
// disagree.
std::string metadata_text(hid_t file, hid_t optimizer) {
  std::string text;
  auto add = [&](const char* name, const std::string& value) { text.append(name).append("=").append(value) += '\n'; };
  auto i64 = [&](hid_t obj, const char* attr, const char* name) {
    add(name, std::to_string(h5_read_attr_int64(obj, attr)));
  };
  add("schema", h5_read_attr_string(file, "schema"));
  for (const char* a : {"schema_version", "step", "loader_epoch", "loader_sample"}) i64(file, a, a);
  add("config", h5_read_attr_string(file, "config"));
  for (const char* a : {"model_seed", "redraw_index", "dp", "sp", "created"}) i64(file, a, a);
  for (const char* a : {"run_id", "data"})
    if (h5_has_attr(file, a)) add(a, h5_read_attr_string(file, a));
  i64(optimizer, "step", "optimizer/step");
  const double scale = h5_read_attr_double(optimizer, "loss_scale");
  uint64_t bits = 0;
  std::memcpy(&bits, &scale, sizeof bits);
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(bits));
  add("optimizer/loss_scale", hex);
  i64(optimizer, "loss_scale_good_steps", "optimizer/loss_scale_good_steps");
  return text;
}

std::string fnv1a64(const std::string& bytes) { return Fnv1a64().add(bytes).hex(); }

void write_tensors(hid_t group, const ParamLayout& layout, const std::vector<float>& flat) {
  // Chunked (required for Fletcher-32 checksums), about 1 MiB per chunk.
  for (const ParamSlice& s : layout.slices()) {
    const int64_t row = s.numel / s.shape[0];
    const int64_t rows =
        std::max<int64_t>(1, std::min<int64_t>(s.shape[0], (int64_t{1} << 18) / std::max<int64_t>(row, 1)));
    h5_write_array<float>(group, s.name, flat.data() + s.offset, s.shape, H5Layout{rows, 0, true});
  }
}

// Every tensor of `layout` in `group` as the reader will read it: present,
// float32, of the layout's shape, in chunks no larger than that shape, and
// its data stored in the file (at least 4 bytes an element, so a declared
// shape is backed by the file's own bytes). Checked for every tensor before
// any is read: what a reader allocates is what the model needs, never what
// a file declares.
void check_tensors(hid_t group, const ParamLayout& layout, const std::string& path, const std::string& where) {
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
  }
}

// Reads every tensor of `layout` (checked by check_tensors) into one flat
// buffer, refusing a value that is not finite: the trainer never saves one.
std::vector<float> read_tensors(hid_t group, const ParamLayout& layout, const std::string& path,
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

// /projections/layer<l> [m, D]: the random projections the model uses at
// this checkpoint's step (none for softmax attention), so that programs
// outside this build (the Python package) run the same function. The model
// itself draws them again from their key; they are written, never read.
void write_projections(hid_t file, const ModelConfig& model, int64_t redraw) {
  // softmax has none; exp's are parameters (/params/layer<l>.attn.features).
  if (model.attention == AttentionKind::Softmax || model.attention == AttentionKind::Exp) return;
  H5Id group = h5_create_group(file, "projections");
  for (int64_t l = 0; l < model.layers; ++l) {
    const std::vector<float> w = layer_projection(model, l, redraw);
    h5_write_array<float>(group, "layer" + std::to_string(l), w.data(), {model.features, model.head_dim()},
                          H5Layout{model.features, 0, true});
  }
}

// What write_checkpoint may replace: an earlier checkpoint.
OutputKind checkpoint_kind() {
  return {"a checkpoint", [](const std::string& p) {
            return h5_root_has_attributes(p, {"schema", "schema_version", "step", "config"});
          }};
}

}  // namespace

std::string checkpoint_path(const std::string& dir, int64_t step) {
  char name[64];
  std::snprintf(name, sizeof name, "ckpt-%09lld.h5", static_cast<long long>(step));
  return (fs::path(dir) / name).string();
}

void write_checkpoint(const std::string& path, const CheckpointState& st, const ParamLayout& layout,
                      const ModelConfig& model) {
  PF_REQUIRE(ValueError,
             static_cast<int64_t>(st.params.size()) == layout.total() && st.m.size() == st.params.size() &&
                 st.v.size() == st.params.size(),
             "checkpoint state does not match the parameter layout of " << layout.total() << " values");
  const fs::path final_path(path);
  if (final_path.has_parent_path()) fs::create_directories(final_path.parent_path());
  // Replaces only an earlier checkpoint (the trainer sets anything else at
  // this name aside first), and only the one there now.
  ReplaceableOutput output("checkpoint", path, checkpoint_kind());
  const std::string& tmp = output.temporary_path();  // removed unless committed
  {
    H5Id file = h5_create_file(tmp);
    h5_write_attr_string(file, "schema", kSchema);
    h5_write_attr_int64(file, "schema_version", kSchemaVersion);
    h5_write_attr_int64(file, "step", st.step);
    h5_write_attr_int64(file, "loader_epoch", st.loader.epoch);
    h5_write_attr_int64(file, "loader_sample", st.loader.sample);
    h5_write_attr_string(file, "config", st.config_text);
    h5_write_attr_int64(file, "model_seed", static_cast<int64_t>(model.seed));
    const int64_t redraw = projection_redraw_index(model, st.step);
    h5_write_attr_int64(file, "redraw_index", redraw);
    h5_write_attr_int64(file, "dp", st.dp);
    h5_write_attr_int64(file, "sp", st.sp);
    h5_write_attr_int64(
        file, "created",
        std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count());
    h5_write_attr_string(file, "run_id", st.run_id);
    h5_write_attr_string(file, "data", st.data);
    H5Id params = h5_create_group(file, "params");
    write_tensors(params, layout, st.params);
    write_projections(file, model, redraw);
    H5Id opt = h5_create_group(file, "optimizer");
    h5_write_attr_int64(opt, "step", st.step);
    h5_write_attr_double(opt, "loss_scale", st.loss_scale);
    h5_write_attr_int64(opt, "loss_scale_good_steps", st.loss_scale_good_steps);
    h5_write_attr_string(file, kChecksumAttr, fnv1a64(metadata_text(file, opt)));
    H5Id gm = h5_create_group(opt, "m");
    write_tensors(gm, layout, st.m);
    H5Id gv = h5_create_group(opt, "v");
    write_tensors(gv, layout, st.v);
    PF_H5_CHECK_MSG(H5Fflush(file.get(), H5F_SCOPE_GLOBAL), "flushing " << tmp);
    gv.close();
    gm.close();
    opt.close();
    params.close();
    file.close();
  }
  output.commit(ReplaceableOutput::Flush::ToDisk);
}

namespace {

// For a folder given where a checkpoint file belongs: the file the user
// probably meant (its newest checkpoint), or that it holds none.
std::string checkpoints_in(const std::string& dir) {
  const std::vector<std::string> found = list_checkpoints(dir);
  if (found.empty()) return "it holds no checkpoint (ckpt-*.h5)";
  return "the newest of the " + std::to_string(found.size()) + " checkpoint(s) in it is '" + found.front() + "'";
}

}  // namespace

void require_checkpoint_file(const std::string& path, const std::string& key, const std::string& otherwise) {
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  PF_REQUIRE(ConfigError, fs::exists(st),
             key << " = '" << path << "': no such file (" << key << " takes a checkpoint file, ckpt-*.h5" << otherwise
                 << ")");
  PF_REQUIRE(ConfigError, !fs::is_directory(st),
             key << " = '" << path << "' is a folder: " << key
                 << " takes a checkpoint file (ckpt-*.h5), such as one inside that folder" << otherwise << "; "
                 << checkpoints_in(path));
  PF_REQUIRE(ConfigError, fs::is_regular_file(st),
             key << " = '" << path << "' is not a regular file: " << key << " takes a checkpoint file (ckpt-*.h5)"
                 << otherwise);
}

CheckpointState read_checkpoint_metadata(const std::string& path) {
  PF_REQUIRE(IoError, fs::exists(path), "checkpoint '" << path << "' does not exist");
  // (An IoError as for any unreadable file; the callers that know the key
  // name it first with require_checkpoint_file.)
  PF_REQUIRE(IoError, !fs::is_directory(path),
             "'" << path << "' is a folder, not a checkpoint file: name a checkpoint file (ckpt-*.h5) inside it; "
                 << checkpoints_in(path));
  H5Id file;
  try {
    file = h5_open_file(path);
  } catch (const Hdf5Error& e) {
    throw DataError(path + ": not a readable HDF5 checkpoint (truncated or corrupt?): " + e.what());
  }
  PF_REQUIRE(DataError, h5_has_attr(file, "schema") && h5_read_attr_string(file, "schema") == kSchema,
             path << ": not a performer checkpoint (no schema attribute '" << kSchema << "')");
  CheckpointState st;
  std::string stored_checksum, computed_checksum;
  int64_t optimizer_step = 0;
  try {
    const int64_t version = h5_read_attr_int64(file, "schema_version");
    // A sound file that this build cannot continue: refused, never skipped.
    PF_REQUIRE(ConfigError, version == kSchemaVersion,
               path << ": checkpoint schema version " << version << ", this build reads version " << kSchemaVersion
                    << (version == 1 ? " (version 1 files carry no metadata checksum, so their step and data "
                                       "position cannot be verified; resume them with the build that wrote them)"
                                     : ""));
    H5Id opt = h5_open_group(file, "optimizer");
    PF_REQUIRE(DataError, h5_has_attr(file, kChecksumAttr),
               path << ": damaged checkpoint: the attribute " << kChecksumAttr << " is missing");
    stored_checksum = h5_read_attr_string(file, kChecksumAttr);
    computed_checksum = fnv1a64(metadata_text(file, opt));
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

namespace {

// The groups of tensors a reader reads: /params and, with `moments`, AdamW's m and v.
std::vector<std::string> tensor_groups(bool moments) {
  if (moments) return {"params", "optimizer/m", "optimizer/v"};
  return {"params"};
}

// The stored /projections are what the stored configuration draws at the
// stored redraw index. This build draws them again and the Python package
// reads them: a file whose projections were changed would be one model here
// and another there, so it is refused as damaged.
void verify_projections(hid_t file, const std::string& path, const CheckpointState& st) {
  if (!h5_exists(file, "projections") || st.config_text.empty()) return;
  const ModelConfig model = parse_train_config_text(st.config_text, path + " (stored configuration)").model;
  if (model.attention == AttentionKind::Softmax || model.attention == AttentionKind::Exp) return;
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

// read_checkpoint_metadata, then every tensor checked, then read.
CheckpointState read_checkpoint_tensors(const std::string& path, const ParamLayout& layout, bool moments) {
  CheckpointState st = read_checkpoint_metadata(path);
  check_checkpoint_tensors(path, layout, moments);
  try {
    H5Id file = h5_open_file(path);
    verify_projections(file, path, st);
    std::vector<float>* const into[] = {&st.params, &st.m, &st.v};  // in the order of tensor_groups
    const std::vector<std::string> groups = tensor_groups(moments);
    for (size_t i = 0; i < groups.size(); ++i)
      *into[i] = read_tensors(h5_open_group(file, groups[i]), layout, path, "/" + groups[i]);
  } catch (const Hdf5Error& e) {
    throw DataError(path + ": damaged checkpoint (a dataset failed to read or its checksum failed): " + e.what());
  }
  return st;
}

}  // namespace

void check_checkpoint_tensors(const std::string& path, const ParamLayout& layout, bool moments) {
  try {
    H5Id file = h5_open_file(path);
    for (const std::string& g : tensor_groups(moments)) check_tensors(h5_open_group(file, g), layout, path, "/" + g);
  } catch (const Hdf5Error& e) {
    throw DataError(path + ": damaged checkpoint (a dataset's declaration failed to read): " + e.what());
  }
}

CheckpointState read_checkpoint(const std::string& path, const ParamLayout& layout) {
  return read_checkpoint_tensors(path, layout, true);
}

CheckpointState read_checkpoint_params(const std::string& path, const ParamLayout& layout) {
  return read_checkpoint_tensors(path, layout, false);
}

bool is_damaged_checkpoint_error(const Error& e) {
  return e.kind() == ErrorKind::Data || e.kind() == ErrorKind::Hdf5 || e.kind() == ErrorKind::Io;
}

ModelConfig require_compatible_model(const std::string& path, const CheckpointState& metadata,
                                     const ModelConfig& current, bool attention_may_differ, const std::string& what) {
  const TrainConfig stored = parse_train_config_text(metadata.config_text, path + " (stored configuration)");
  const std::vector<std::string> diff = model_incompatibilities(stored.model, current, attention_may_differ);
  if (!diff.empty()) {
    std::string msg = path + ": " + what + ":";
    for (const auto& d : diff) msg += "\n  " + d;
    throw ConfigError(msg);
  }
  return stored.model;
}

std::vector<std::string> model_incompatibilities(const ModelConfig& a, const ModelConfig& b,
                                                 bool attention_may_differ) {
  std::vector<std::string> out;
  auto cmp = [&](const char* key, const std::string& x, const std::string& y) {
    if (x != y) out.push_back(std::string("model.") + key + ": " + x + " in the checkpoint, " + y + " now");
  };
  auto num = [](auto v) { return std::to_string(v); };
  cmp("vocab", num(a.vocab), num(b.vocab));
  cmp("layers", num(a.layers), num(b.layers));
  cmp("width", num(a.width), num(b.width));
  cmp("heads", num(a.heads), num(b.heads));
  cmp("ffn", num(a.ffn), num(b.ffn));
  cmp("objective", objective_name(a.objective), objective_name(b.objective));
  cmp("positional", positional_name(a.positional), positional_name(b.positional));
  cmp("window", num(a.window), num(b.window));
  if (a.attention == AttentionKind::Exp && b.attention == AttentionKind::Exp) {
    cmp("exp_key_norm", a.exp_key_norm ? "true" : "false", b.exp_key_norm ? "true" : "false");
    if (attention_may_differ && a.features != b.features)  // (else compared below)
      out.push_back("model.features: " + num(a.features) + " in the checkpoint, " + num(b.features) +
                    " now (exp trains its feature map: the number of features is the shape of a parameter)");
  }
  if (!attention_may_differ) {
    cmp("attention", attention_kind_name(a.attention), attention_kind_name(b.attention));
    if (a.attention != AttentionKind::Softmax) {
      cmp("features", num(a.features), num(b.features));
      cmp("redraw_interval", num(a.redraw_interval), num(b.redraw_interval));
      cmp("projection", projection_name(a.projection), projection_name(b.projection));
      cmp("feature_scaling", feature_scaling_name(a.feature_scaling), feature_scaling_name(b.feature_scaling));
      cmp("feature_draw", num(a.feature_draw), num(b.feature_draw));
    }
  }
  cmp("seed", num(a.seed), num(b.seed));
  return out;
}

std::vector<std::string> list_checkpoints(const std::string& dir) {
  std::vector<std::string> files;
  if (!fs::is_directory(dir)) return files;
  static const std::regex pattern("ckpt-[0-9]+\\.h5");
  for (const auto& e : fs::directory_iterator(dir))
    if (e.is_regular_file() && std::regex_match(e.path().filename().string(), pattern))
      files.push_back(e.path().string());
  std::sort(files.rbegin(), files.rend());
  return files;
}

std::string latest_valid_checkpoint(const std::string& dir, const ModelConfig& current,
                                    std::vector<std::string>* skipped) {
  const ParamLayout layout(current);
  for (const std::string& f : list_checkpoints(dir)) {
    try {
      // The model is compared before the tensors are read: a checkpoint of
      // another shape is refused for what it is, not skipped as damaged.
      const CheckpointState metadata = read_checkpoint_metadata(f);
      try {
        require_compatible_model(f, metadata, current, false, "checkpoint is from an incompatible model configuration");
      } catch (const ConfigError& e) {
        throw ConfigError(std::string(e.what()) +
                          "\n--resume auto stops rather than start at step 0 over this checkpoint: resume with the "
                          "model it was written with, or set another checkpoint.dir");
      }
      read_checkpoint(f, layout);
      return f;
    } catch (const Error& e) {
      if (!is_damaged_checkpoint_error(e)) throw;
      if (skipped) skipped->push_back(f + ": " + e.what());
    }
  }
  return "";
}

std::vector<std::pair<std::string, int64_t>> checkpoints_of_run(const std::string& dir, const std::string& run_id) {
  std::vector<std::pair<std::string, int64_t>> out;
  if (run_id.empty()) return out;
  for (const std::string& f : list_checkpoints(dir)) {
    CheckpointState m;
    try {
      m = read_checkpoint_metadata(f);
    } catch (const Error&) {
      continue;  // unreadable: not known to be this run's
    }
    if (m.run_id == run_id) out.emplace_back(f, m.step);
  }
  return out;
}

void prune_checkpoints(const std::string& dir, int64_t keep, const std::string& run_id) {
  int64_t kept = 0;
  for (const auto& [f, step] : checkpoints_of_run(dir, run_id))
    if (++kept > keep) fs::remove(f);
  if (!fs::is_directory(dir)) return;
  // A checkpoint's temporary left by a writer that died: "ckpt-<step>.h5.tmp-<pid>"
  // that is_stale_hdf5_temporary recognises. Nothing else is touched.
  static const std::regex temporary("ckpt-[0-9]+\\.h5\\.tmp-([0-9]{1,9})");
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    std::smatch m;
    std::error_code link_ec;  // a link bearing the name is the user's, whatever it points to
    if (!fs::is_regular_file(e.symlink_status(link_ec)) || !std::regex_match(name, m, temporary)) continue;
    if (is_stale_hdf5_temporary(e.path().string(), std::stol(m[1].str()))) {
      std::error_code ec;
      fs::remove(e.path(), ec);
    }
  }
}

}  // namespace pf
