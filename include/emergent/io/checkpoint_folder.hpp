// A Hugging Face checkpoint folder: config.json plus the weights in safetensors, either one
// `model.safetensors` or `model.safetensors.index.json` and the shards it names.
//
//   emergent::CheckpointFolder f("pythia-160m");            // maps every weight file
//   f.read_f32_into("embed_out.weight", dst, {50304, 768});  // from whichever file holds it
//   std::string id = f.sha256();                             // content hash (see below)
//
// Layout rules (as transformers' from_pretrained): model.safetensors wins when both it and an
// index exist. The index is {"metadata": {...}, "weight_map": {tensor: shard file}}; shard
// names must be plain file names inside the folder. Every shard is opened and validated, every
// tensor of the weight_map must be in the shard it maps to, and every tensor of a shard must be
// mapped to that shard: an inconsistent index is an error naming the index file, the tensor and
// the shard. pytorch_model.bin checkpoints are not read (convert them to safetensors).
//
// sha256(): for one model.safetensors, the SHA-256 of its bytes, equal to `sha256sum
// model.safetensors` and to the LFS oid on the hub. For a sharded checkpoint, the SHA-256 of the
// text `sha256sum` prints for the shards in file-name order ("<hex>  <name>\n" per shard), i.e.
// `cd folder && sha256sum model-*-of-*.safetensors | sha256sum`; it changes when any shard does.
// The index file itself is not hashed (it holds no weights).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <emergent/core/error.hpp>
#include <emergent/core/parallel.hpp>
#include <emergent/io/safetensors.hpp>
#include <emergent/io/sha256.hpp>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace emergent {

// The parsed model.safetensors.index.json.
struct SafetensorsIndex {
  std::map<std::string, std::string, std::less<>> weight_map;  // tensor name -> shard file name
  std::vector<std::string> shards;                             // distinct shard names, sorted
};

// Parses the text of an index file; `where` (its path) prefixes every error.
inline SafetensorsIndex parse_safetensors_index(std::string_view text, const std::string& where) {
  namespace d = safetensors_detail;
  const nlohmann::json index = d::parse_json_strict(text, where, "index");
  if (!index.is_object()) {
    throw Error(where + ": index is not a JSON object (it is " + std::string(index.type_name()) +
                ")");
  }
  const auto map = index.find("weight_map");
  if (map == index.end()) throw Error(where + ": missing field 'weight_map'");
  if (!map->is_object()) throw Error(where + ": field 'weight_map' is not a JSON object");
  if (map->empty()) throw Error(where + ": field 'weight_map' is empty");
  SafetensorsIndex out;
  std::set<std::string> shards;
  for (const auto& [tensor, shard] : map->items()) {
    const std::string at = where + ": weight_map[" + d::quoted(tensor) + "]";
    if (!shard.is_string())
      throw Error(at + " is not a string (it is " + std::string(shard.type_name()) + ")");
    const auto& name = shard.get_ref<const std::string&>();
    // A plain file name inside the folder: a hostile index must not reach other files.
    if (name.empty() || name == "." || name == ".." || name.find('/') != std::string::npos ||
        name.find('\0') != std::string::npos) {
      throw Error(at + " = " + d::quoted(name) +
                  " is not a plain file name inside the checkpoint folder");
    }
    out.weight_map.emplace(tensor, name);
    shards.insert(name);
  }
  out.shards.assign(shards.begin(), shards.end());
  return out;
}

class CheckpointFolder {
 public:
  static constexpr std::string_view kConfigName = "config.json";
  static constexpr std::string_view kWeightsName = "model.safetensors";
  static constexpr std::string_view kIndexName = "model.safetensors.index.json";

  explicit CheckpointFolder(const std::filesystem::path& folder) : folder_(folder) {
    namespace fs = std::filesystem;
    std::error_code ec;
    if (!fs::is_directory(folder_, ec)) throw Error(folder_.string() + ": not a directory");
    if (fs::exists(folder_ / kWeightsName, ec)) {
      weights_path_ = folder_ / kWeightsName;
      files_.emplace_back(weights_path_);
      for (const TensorInfo& t : files_[0].tensors()) file_of_tensor_.emplace(t.name, 0);
    } else if (fs::exists(folder_ / kIndexName, ec)) {
      weights_path_ = folder_ / kIndexName;
      open_shards();
    } else {
      std::string hint;
      if (fs::exists(folder_ / "pytorch_model.bin", ec) ||
          fs::exists(folder_ / "pytorch_model.bin.index.json", ec)) {
        hint = " (this folder has pytorch_model.bin weights: convert them to safetensors)";
      }
      throw Error(folder_.string() + ": no weights: expected " + std::string(kWeightsName) +
                  " or " + std::string(kIndexName) + hint);
    }
  }

  const std::filesystem::path& folder() const { return folder_; }
  std::filesystem::path config_path() const { return folder_ / kConfigName; }
  // model.safetensors, or the index file of a sharded checkpoint.
  const std::filesystem::path& weights_path() const { return weights_path_; }
  bool sharded() const { return index_.has_value(); }
  // The one weight file, or the shards in file-name order.
  const std::vector<SafetensorsFile>& files() const { return files_; }

  // Every tensor of every weight file, sorted by name.
  std::vector<std::string> tensor_names() const {
    std::vector<std::string> out;
    out.reserve(file_of_tensor_.size());
    for (const auto& [name, file] : file_of_tensor_) out.push_back(name);
    return out;
  }

  bool contains(std::string_view name) const {
    return file_of_tensor_.find(name) != file_of_tensor_.end();
  }

  // The file that holds `name`; throws naming model.safetensors or the index if none does.
  const SafetensorsFile& file_of(std::string_view name) const {
    const auto it = file_of_tensor_.find(name);
    if (it == file_of_tensor_.end()) {
      throw Error(weights_path_.string() + ": missing tensor " + safetensors_detail::quoted(name) +
                  (sharded() ? " (not in the weight_map)" : ""));
    }
    return files_[it->second];
  }

  const TensorInfo& info(std::string_view name) const { return file_of(name).info(name); }

  // Converts the tensor to fp32 into dst after checking its shape (errors name the file).
  void read_f32_into(std::string_view name, std::span<float> dst,
                     const std::vector<std::int64_t>& shape) const {
    file_of(name).read_f32_into(name, dst, shape);
  }

  // See the header comment: sha256sum of model.safetensors, or of the shards' sha256sum lines.
  std::string sha256() const {
    if (!sharded()) return sha256_hex(files_[0].file_bytes());
    std::vector<std::string> digests(files_.size());
    parallel_for(static_cast<std::int64_t>(files_.size()), [&](std::int64_t i) {
      digests[static_cast<std::size_t>(i)] =
          sha256_hex(files_[static_cast<std::size_t>(i)].file_bytes());
    });
    Sha256 listing;
    for (std::size_t i = 0; i < files_.size(); ++i) {
      listing.update(digests[i]);
      listing.update("  ");
      listing.update(files_[i].path().filename().string());
      listing.update("\n");
    }
    return listing.hex_digest();
  }

 private:
  void open_shards() {
    namespace d = safetensors_detail;
    const std::string where = weights_path_.string();
    std::ifstream in(weights_path_, std::ios::binary);
    if (!in) throw Error(where + ": cannot open");
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    index_ = parse_safetensors_index(text, where);

    std::map<std::string, std::size_t, std::less<>> slot_of_shard;
    for (const std::string& shard : index_->shards) {
      try {
        files_.emplace_back(folder_ / shard);
      } catch (const Error& e) {
        std::size_t mapped = 0;
        std::string example;
        for (const auto& [tensor, file] : index_->weight_map) {
          if (file != shard) continue;
          if (mapped++ == 0) example = tensor;
        }
        throw Error(where + ": shard " + d::quoted(shard) + " (holding tensor " +
                    d::quoted(example) +
                    (mapped > 1 ? " and " + std::to_string(mapped - 1) + " more" : "") +
                    ") cannot be read: " + e.what());
      }
      slot_of_shard.emplace(shard, files_.size() - 1);
    }
    for (const auto& [tensor, shard] : index_->weight_map) {
      const std::size_t slot = slot_of_shard.at(shard);
      if (!files_[slot].contains(tensor)) {
        throw Error(where + ": tensor " + d::quoted(tensor) + " is mapped to shard " +
                    d::quoted(shard) + ", which does not contain it");
      }
      file_of_tensor_.emplace(tensor, slot);
    }
    for (const SafetensorsFile& file : files_) {
      for (const TensorInfo& t : file.tensors()) {
        const auto it = index_->weight_map.find(t.name);
        if (it == index_->weight_map.end()) {
          throw Error(where + ": shard " + d::quoted(file.path().filename().string()) +
                      " holds tensor " + d::quoted(t.name) +
                      ", which the weight_map does not list");
        }
        if (folder_ / it->second != file.path()) {
          throw Error(where + ": tensor " + d::quoted(t.name) + " is in shard " +
                      d::quoted(file.path().filename().string()) +
                      " but the weight_map maps it to " + d::quoted(it->second));
        }
      }
    }
  }

  std::filesystem::path folder_;
  std::filesystem::path weights_path_;
  std::optional<SafetensorsIndex> index_;
  std::vector<SafetensorsFile> files_;
  std::map<std::string, std::size_t, std::less<>> file_of_tensor_;  // tensor -> index into files_
};

}  // namespace emergent
