#include "launch/train/checkpoint.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <regex>

#include "data/h5.h"
#include "runtime/check.h"

namespace pf {
namespace fs = std::filesystem;

namespace {

constexpr const char* kSchema = "performer-checkpoint";
constexpr int64_t kSchemaVersion = 1;

void fsync_path(const std::string& path, bool directory) {
  const int fd = ::open(path.c_str(), directory ? O_RDONLY | O_DIRECTORY : O_RDONLY);
  PF_REQUIRE(IoError, fd >= 0, "cannot open '" << path << "' to flush it to disk");
  const int rc = ::fsync(fd);
  ::close(fd);
  PF_REQUIRE(IoError, rc == 0 || directory, "fsync of '" << path << "' failed");
}

void write_tensors(hid_t group, const ParamLayout& layout, const std::vector<float>& flat) {
  // Chunked (required for Fletcher-32 checksums), about 1 MiB per chunk.
  for (const ParamSlice& s : layout.slices()) {
    const int64_t row = s.numel / s.shape[0];
    const int64_t rows = std::max<int64_t>(1, std::min<int64_t>(s.shape[0], (int64_t{1} << 18) / std::max<int64_t>(row, 1)));
    h5_write_array<float>(group, s.name, flat.data() + s.offset, s.shape, H5Layout{rows, 0, true});
  }
}

std::vector<float> read_tensors(hid_t group, const ParamLayout& layout, const std::string& path,
                                const std::string& where) {
  std::vector<float> flat(static_cast<size_t>(layout.total()));
  for (const ParamSlice& s : layout.slices()) {
    PF_REQUIRE(DataError, h5_exists(group, s.name),
               path << ": " << where << "/" << s.name << " is missing (the checkpoint is from another model)");
    std::vector<int64_t> shape;
    const std::vector<float> v = h5_read_array<float>(group, s.name, &shape);
    PF_REQUIRE(DataError, shape == s.shape,
               path << ": " << where << "/" << s.name << " has shape " << shape_str(shape) << ", the model needs "
                    << shape_str(s.shape));
    std::copy(v.begin(), v.end(), flat.begin() + s.offset);
  }
  return flat;
}

}  // namespace

std::string checkpoint_path(const std::string& dir, int64_t step) {
  char name[64];
  std::snprintf(name, sizeof name, "ckpt-%09lld.h5", static_cast<long long>(step));
  return (fs::path(dir) / name).string();
}

void write_checkpoint(const std::string& path, const CheckpointState& st, const ParamLayout& layout,
                      const ModelConfig& model) {
  PF_REQUIRE(ValueError, static_cast<int64_t>(st.params.size()) == layout.total() &&
                             st.m.size() == st.params.size() && st.v.size() == st.params.size(),
             "checkpoint state does not match the parameter layout of " << layout.total() << " values");
  const fs::path final_path(path);
  if (final_path.has_parent_path()) fs::create_directories(final_path.parent_path());
  const std::string tmp = path + ".tmp-" + std::to_string(::getpid());
  try {
    {
      H5Id file = h5_create_file(tmp);
      h5_write_attr_string(file, "schema", kSchema);
      h5_write_attr_int64(file, "schema_version", kSchemaVersion);
      h5_write_attr_int64(file, "step", st.step);
      h5_write_attr_int64(file, "loader_epoch", st.loader.epoch);
      h5_write_attr_int64(file, "loader_sample", st.loader.sample);
      h5_write_attr_string(file, "config", st.config_text);
      h5_write_attr_int64(file, "model_seed", static_cast<int64_t>(model.seed));
      h5_write_attr_int64(file, "redraw_index", model.redraw_interval > 0 ? st.step / model.redraw_interval : 0);
      h5_write_attr_int64(file, "dp", st.dp);
      h5_write_attr_int64(file, "sp", st.sp);
      h5_write_attr_int64(file, "created", std::chrono::duration_cast<std::chrono::seconds>(
                                               std::chrono::system_clock::now().time_since_epoch())
                                               .count());
      H5Id params = h5_create_group(file, "params");
      write_tensors(params, layout, st.params);
      H5Id opt = h5_create_group(file, "optimizer");
      h5_write_attr_int64(opt, "step", st.step);
      h5_write_attr_double(opt, "loss_scale", st.loss_scale);
      h5_write_attr_int64(opt, "loss_scale_good_steps", st.loss_scale_good_steps);
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
    fsync_path(tmp, false);
    fs::rename(tmp, final_path);
    fsync_path(final_path.has_parent_path() ? final_path.parent_path().string() : ".", true);
  } catch (...) {
    std::error_code ec;
    fs::remove(tmp, ec);
    throw;
  }
}

CheckpointState read_checkpoint(const std::string& path, const ParamLayout& layout) {
  PF_REQUIRE(IoError, fs::exists(path), "checkpoint '" << path << "' does not exist");
  H5Id file;
  try {
    file = h5_open_file(path);
  } catch (const Hdf5Error& e) {
    throw DataError(path + ": not a readable HDF5 checkpoint (truncated or corrupt?): " + e.what());
  }
  PF_REQUIRE(DataError, h5_has_attr(file, "schema") && h5_read_attr_string(file, "schema") == kSchema,
             path << ": not a performer checkpoint (no schema attribute '" << kSchema << "')");
  const int64_t version = h5_read_attr_int64(file, "schema_version");
  PF_REQUIRE(DataError, version == kSchemaVersion,
             path << ": checkpoint schema version " << version << ", this build reads version " << kSchemaVersion);
  CheckpointState st;
  st.step = h5_read_attr_int64(file, "step");
  st.loader.epoch = h5_read_attr_int64(file, "loader_epoch");
  st.loader.sample = h5_read_attr_int64(file, "loader_sample");
  st.config_text = h5_read_attr_string(file, "config");
  st.dp = h5_read_attr_int64(file, "dp");
  st.sp = h5_read_attr_int64(file, "sp");
  try {
    H5Id params = h5_open_group(file, "params");
    st.params = read_tensors(params, layout, path, "/params");
    H5Id opt = h5_open_group(file, "optimizer");
    // Absent in checkpoints written before loss scaling existed (f32 runs,
    // whose scale is a fixed 1).
    if (h5_has_attr(opt, "loss_scale")) {
      st.loss_scale = h5_read_attr_double(opt, "loss_scale");
      st.loss_scale_good_steps = h5_read_attr_int64(opt, "loss_scale_good_steps");
    }
    H5Id gm = h5_open_group(file, "optimizer/m");
    st.m = read_tensors(gm, layout, path, "/optimizer/m");
    H5Id gv = h5_open_group(file, "optimizer/v");
    st.v = read_tensors(gv, layout, path, "/optimizer/v");
  } catch (const Hdf5Error& e) {
    throw DataError(path + ": damaged checkpoint (a dataset failed to read or its checksum failed): " + e.what());
  }
  return st;
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
  if (!attention_may_differ) {
    cmp("attention", attention_kind_name(a.attention), attention_kind_name(b.attention));
    if (a.attention != AttentionKind::Softmax) {
      cmp("features", num(a.features), num(b.features));
      cmp("redraw_interval", num(a.redraw_interval), num(b.redraw_interval));
      cmp("projection", num(static_cast<int>(a.projection)), num(static_cast<int>(b.projection)));
      cmp("feature_scaling", num(static_cast<int>(a.feature_scaling)), num(static_cast<int>(b.feature_scaling)));
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

std::string latest_valid_checkpoint(const std::string& dir, const ParamLayout& layout,
                                    std::vector<std::string>* skipped) {
  for (const std::string& f : list_checkpoints(dir)) {
    try {
      read_checkpoint(f, layout);
      return f;
    } catch (const Error& e) {
      if (skipped) skipped->push_back(f + ": " + e.what());
    }
  }
  return "";
}

void prune_checkpoints(const std::string& dir, int64_t keep) {
  const std::vector<std::string> files = list_checkpoints(dir);
  for (size_t i = static_cast<size_t>(std::max<int64_t>(keep, 0)); i < files.size(); ++i) fs::remove(files[i]);
  if (!fs::is_directory(dir)) return;
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (name.find(".h5.tmp-") == std::string::npos) continue;
    // A temporary left by a writer that died: its pid no longer exists.
    const std::string pid = name.substr(name.rfind('-') + 1);
    if (pid.find_first_not_of("0123456789") == std::string::npos && ::kill(std::stoi(pid), 0) != 0) {
      std::error_code ec;
      fs::remove(e.path(), ec);
    }
  }
}

}  // namespace pf
