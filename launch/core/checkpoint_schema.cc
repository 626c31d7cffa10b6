#include "launch/core/checkpoint_schema.h"

#include <cstdio>
#include <cstring>

#include "data/h5.h"
#include "runtime/fnv1a.h"

namespace pf {

std::string checkpoint_metadata_checksum(hid_t file, hid_t optimizer) {
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
  return Fnv1a64().add(text).hex();
}

bool stores_projections(const ModelConfig& model) {
  return model.attention != AttentionKind::Softmax && model.attention != AttentionKind::Exp;
}

}  // namespace pf
