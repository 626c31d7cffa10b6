#include "launch/train/data_identity.h"

#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>

#include "data/prepared_data.h"
#include "runtime/check.h"

namespace pf {

std::vector<DataFileIdentity> data_identities(const std::vector<std::string>& files) {
  std::vector<DataFileIdentity> out;
  for (const std::string& path : files) {
    DataFileIdentity id;
    id.path = path;
    std::error_code ec;
    id.size = static_cast<int64_t>(std::filesystem::file_size(path, ec));
    PF_REQUIRE(IoError, !ec, "data.files: cannot read the size of '" << path << "': " << ec.message());
    const PreparedData file = open_prepared_data(path);
    id.digest = file.content_digest();
    std::ostringstream rule;
    rule << "hash seed=" << file.seed() << " val_fraction=" << file.val_fraction()
         << " test_fraction=" << file.test_fraction() << " ood=[";
    const std::vector<std::string>& names = file.ood_organisms();
    for (size_t i = 0; i < names.size(); ++i) rule << (i ? ", " : "") << names[i];
    rule << "]";
    if (file.has_clusters()) {
      const ClusterParameters& clusters = file.cluster_parameters();
      rule << " by cluster mode=" << clusters.mode << " identity=" << clusters.identity
           << " coverage=" << clusters.coverage;
    }
    id.split_rule = rule.str();
    out.push_back(std::move(id));
  }
  return out;
}

std::string data_identities_json(const std::vector<DataFileIdentity>& ids) {
  nlohmann::json a = nlohmann::json::array();
  for (const DataFileIdentity& d : ids)
    a.push_back({{"path", d.path}, {"size", d.size}, {"digest", d.digest}, {"split_rule", d.split_rule}});
  return a.dump();
}

std::vector<DataFileIdentity> parse_data_identities(const std::string& json, const std::string& origin) {
  const nlohmann::json a = nlohmann::json::parse(json, nullptr, false);
  PF_REQUIRE(DataError, a.is_array(), origin << ": the attribute 'data' is not a JSON array");
  std::vector<DataFileIdentity> out;
  for (const nlohmann::json& e : a) {
    PF_REQUIRE(DataError,
               e.is_object() && e.contains("path") && e["path"].is_string() && e.contains("size") &&
                   e["size"].is_number_integer() && e.contains("digest") && e["digest"].is_string() &&
                   e.contains("split_rule") && e["split_rule"].is_string(),
               origin << ": an entry of the attribute 'data' lacks path, size, digest or split_rule: " << e.dump());
    out.push_back({e["path"].get<std::string>(), e["size"].get<int64_t>(), e["digest"].get<std::string>(),
                   e["split_rule"].get<std::string>()});
  }
  return out;
}

std::vector<std::string> data_changes(const std::vector<DataFileIdentity>& stored,
                                      const std::vector<DataFileIdentity>& now) {
  std::vector<std::string> out;
  if (stored.size() != now.size())
    out.push_back("data.files: " + std::to_string(stored.size()) + " file(s) in the checkpoint, " +
                  std::to_string(now.size()) + " now");
  for (size_t i = 0; i < std::min(stored.size(), now.size()); ++i) {
    const DataFileIdentity &a = stored[i], &b = now[i];
    const std::string name =
        "data.files[" + std::to_string(i) + "] '" + b.path + "'" + (a.path != b.path ? " (was '" + a.path + "')" : "");
    if (!a.digest.empty() && !b.digest.empty()) {
      if (a.digest != b.digest)
        out.push_back(name + ": content digest " + a.digest + " in the checkpoint, " + b.digest + " now");
    } else if (a.size != b.size) {
      out.push_back(name + ": " + std::to_string(a.size) + " bytes in the checkpoint, " + std::to_string(b.size) +
                    " now");
    } else if (a.digest != b.digest) {
      out.push_back(name + ": content digest " + (a.digest.empty() ? "none" : a.digest) + " in the checkpoint, " +
                    (b.digest.empty() ? "none" : b.digest) + " now (the file was prepared again)");
    }
    if (a.split_rule != b.split_rule)
      out.push_back(name + ": split rule '" + a.split_rule + "' in the checkpoint, '" + b.split_rule +
                    "' now (the splits were drawn again: validation may hold proteins trained on)");
  }
  return out;
}

}  // namespace pf
