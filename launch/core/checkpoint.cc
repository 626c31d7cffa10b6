#include "launch/core/checkpoint.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <regex>

#include "data/h5.h"
#include "data/replaceable_output.h"
#include "launch/core/checkpoint_file.h"
#include "launch/core/checkpoint_schema.h"
#include "launch/core/model_rules.h"
#include "model/model.h"
#include "runtime/atomic_file.h"
#include "runtime/check.h"

namespace pf {
namespace fs = std::filesystem;

namespace {

void write_tensors(hid_t group, const ParamLayout& layout, const std::vector<float>& flat) {
  // Chunked (required for Fletcher-32 checksums), about 1 MiB per chunk.
  for (const ParamSlice& s : layout.slices()) {
    const int64_t row = s.numel / s.shape[0];
    const int64_t rows =
        std::max<int64_t>(1, std::min<int64_t>(s.shape[0], (int64_t{1} << 18) / std::max<int64_t>(row, 1)));
    h5_write_array<float>(group, s.name, flat.data() + s.offset, s.shape, H5Layout{rows, 0, true});
  }
}

// /projections/layer<l> [m, D]: the random projections the model uses at
// this checkpoint's step (none for softmax attention), so that programs
// outside this build (the Python package) run the same function. The model
// itself draws them again from their key; they are written, never read.
void write_projections(hid_t file, const ModelConfig& model, int64_t redraw) {
  if (!stores_projections(model)) return;
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
  // A failed write (a full disk) names the checkpoint and what is left.
  const std::string failed = "checkpoint " + path + " of step " + std::to_string(st.step) +
                             " was not written (the earlier checkpoints are kept): ";
  try {
    H5Id file = h5_create_file(tmp);
    h5_write_attr_string(file, "schema", kCheckpointSchema);
    h5_write_attr_int64(file, "schema_version", kCheckpointSchemaVersion);
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
    h5_write_attr_string(file, kMetadataChecksumAttr, checkpoint_metadata_checksum(file, opt));
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
    output.commit(ReplaceableOutput::Flush::ToDisk);
  } catch (const Hdf5Error& e) {
    throw Hdf5Error(failed + e.what());
  } catch (const IoError& e) {
    throw IoError(failed + e.what());
  }
}

std::string describe_checkpoints_in(const std::string& dir) {
  const std::vector<std::string> found = list_checkpoints(dir);
  if (found.empty()) return "it holds no checkpoint (ckpt-*.h5)";
  return "the newest of the " + std::to_string(found.size()) + " checkpoint(s) in it is '" + found.front() + "'";
}

void require_checkpoint_file(const std::string& path, const std::string& key, const std::string& otherwise) {
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  PF_REQUIRE(ConfigError, fs::exists(st),
             key << " = '" << path << "': no such file (" << key << " takes a checkpoint file, ckpt-*.h5" << otherwise
                 << ")");
  PF_REQUIRE(ConfigError, !fs::is_directory(st),
             key << " = '" << path << "' is a folder: " << key
                 << " takes a checkpoint file (ckpt-*.h5), such as one inside that folder" << otherwise << "; "
                 << describe_checkpoints_in(path));
  PF_REQUIRE(ConfigError, fs::is_regular_file(st),
             key << " = '" << path << "' is not a regular file: " << key << " takes a checkpoint file (ckpt-*.h5)"
                 << otherwise);
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
      const CheckpointFile checkpoint = open_checkpoint(f);
      // The model is compared before the tensors are read: a checkpoint of
      // another shape is refused for what it is, not skipped as damaged.
      try {
        require_same_model(f, checkpoint.stored_model(), current);
      } catch (const ConfigError& e) {
        throw ConfigError(std::string(e.what()) +
                          "\n--resume auto stops rather than start at step 0 over this checkpoint: resume with the "
                          "model it was written with, or set another checkpoint.dir");
      }
      checkpoint.read_state(layout);
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
      m = open_checkpoint(f).metadata();
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
