#include "checkpoint/safetensors.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "checkpoint/weight_checks.h"
#include "nlohmann/json.hpp"
#include "tandem/base/status_macros.h"

namespace tandem::model::internal {
namespace {

using Json = nlohmann::json;

// A header larger than this is certainly corrupt (real checkpoints stay well under 10 MB).
constexpr std::uint64_t kMaxHeaderBytes = 100ull << 20;

absl::StatusOr<kernels::DType> ParseDType(const std::string& file, const std::string& name,
                                          const std::string& dtype) {
  if (dtype == "F32") return kernels::DType::kF32;
  if (dtype == "BF16") return kernels::DType::kBF16;
  if (dtype == "F16") return kernels::DType::kF16;
  if (dtype == "F8_E4M3") return kernels::DType::kF8E4M3;
  return absl::InvalidArgumentError(
      absl::StrCat(file, ": tensor ", name, " has dtype ", dtype,
                   "; supported dtypes are F32, BF16, F16 and F8_E4M3"));
}

struct Range {
  std::uint64_t begin;
  std::uint64_t end;
  const std::string* name;
};

absl::Status ParseEntry(const std::string& file, const std::string& name, const Json& entry,
                        const std::uint8_t* data, std::uint64_t data_size, SafetensorsTensor* out,
                        Range* range) {
  auto bad = [&](absl::string_view what) {
    return absl::InvalidArgumentError(absl::StrCat(file, ": tensor ", name, ": ", what));
  };
  if (!entry.is_object()) return bad("header entry is not an object");
  const auto dt = entry.find("dtype");
  const auto shape = entry.find("shape");
  const auto offsets = entry.find("data_offsets");
  if (dt == entry.end() || !dt->is_string()) return bad("missing dtype");
  if (shape == entry.end() || !shape->is_array()) return bad("missing shape");
  if (offsets == entry.end() || !offsets->is_array() || offsets->size() != 2 ||
      !(*offsets)[0].is_number_unsigned() || !(*offsets)[1].is_number_unsigned()) {
    return bad("data_offsets must be two non-negative integers");
  }
  TANDEM_ASSIGN_OR_RETURN(const kernels::DType dtype,
                          ParseDType(file, name, dt->get<std::string>()));
  std::uint64_t numel = 1;
  for (const Json& d : *shape) {
    if (!d.is_number_unsigned()) return bad("shape holds a non-integer or negative dimension");
    const std::uint64_t dim = d.get<std::uint64_t>();
    if (dim != 0 && numel > (std::uint64_t{1} << 48) / dim) return bad("shape is too large");
    numel *= dim;
    out->shape.push_back(static_cast<std::int64_t>(dim));
  }
  const std::uint64_t begin = (*offsets)[0].get<std::uint64_t>();
  const std::uint64_t end = (*offsets)[1].get<std::uint64_t>();
  if (begin > end || end > data_size) {
    return bad(absl::StrCat("data_offsets [", begin, ", ", end,
                            "] fall outside the data section of ", data_size, " bytes"));
  }
  if (end - begin != numel * kernels::DTypeSize(dtype)) {
    return bad(absl::StrCat("shape needs ", numel * kernels::DTypeSize(dtype),
                            " bytes but data_offsets span ", end - begin));
  }
  const std::uint8_t* ptr = data + begin;
  if (reinterpret_cast<std::uintptr_t>(ptr) % kernels::DTypeSize(dtype) != 0) {
    return bad("data is not aligned to its element size");
  }
  std::int64_t cols = out->shape.empty() ? 1 : out->shape.back();
  std::int64_t rows = 1;
  for (std::size_t i = 0; i + 1 < out->shape.size(); ++i) rows *= out->shape[i];
  out->view = kernels::WeightView{ptr, dtype, rows, cols};
  *range = Range{begin, end, nullptr};
  return absl::OkStatus();
}

absl::StatusOr<Json> ReadJsonFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot open ", path));
  std::stringstream ss;
  ss << in.rdbuf();
  Json j = Json::parse(ss.str(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return absl::InvalidArgumentError(absl::StrCat(path, " is not valid JSON"));
  return j;
}

// Gives every FP8 tensor its scale grid (see SafetensorsCheckpoint).
absl::Status AttachFp8Scales(const std::string& source, Fp8BlockSize block,
                             std::map<std::string, SafetensorsTensor>* tensors) {
  for (auto& entry : *tensors) {
    // Not a structured binding: clang 14 cannot capture those in the lambda below.
    const std::string& name = entry.first;
    SafetensorsTensor& t = entry.second;
    if (t.view.dtype != kernels::DType::kF8E4M3) continue;
    auto bad = [&](absl::string_view what) {
      return absl::InvalidArgumentError(absl::StrCat(source, ": FP8 tensor ", name, ": ", what));
    };
    const std::string scale_name = name + "_scale_inv";
    const auto it = tensors->find(scale_name);
    if (it == tensors->end()) return bad(absl::StrCat("no block scales ", scale_name));
    const kernels::WeightView& s = it->second.view;
    if (s.dtype != kernels::DType::kF32) {
      return bad(
          absl::StrCat(scale_name, " is ", std::string(kernels::DTypeName(s.dtype)), ", not F32"));
    }
    // Stacked [E, O, I] experts index their scales as one [E * O, I] matrix, which only lines up
    // when no block straddles two experts.
    if (t.shape.size() > 2 && t.shape[t.shape.size() - 2] % block.rows != 0) {
      return bad(absl::StrCat("stacked tensor whose rows (", t.shape[t.shape.size() - 2],
                              ") are not whole blocks of ", block.rows));
    }
    const std::int64_t srows = (t.view.rows + block.rows - 1) / block.rows;
    const std::int64_t scols = (t.view.cols + block.cols - 1) / block.cols;
    if (s.numel() != srows * scols || s.cols != scols) {
      return bad(absl::StrCat(scale_name, " has ", s.rows, " x ", s.cols, " scales; blocks of ",
                              block.rows, " x ", block.cols, " need ", srows, " x ", scols));
    }
    t.view.scales = {static_cast<const float*>(s.data), scols, block.rows, block.cols, 0};
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<SafetensorsFile> SafetensorsFile::Open(const std::string& path) {
  SafetensorsFile f;
  TANDEM_ASSIGN_OR_RETURN(f.file_, MappedFile::Open(path));
  const std::uint64_t size = f.file_.size();
  if (size < 8) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": ", size, " bytes is too short for a safetensors file"));
  }
  std::uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | f.file_.data()[i];
  if (header_len > size - 8 || header_len > kMaxHeaderBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": header length ", header_len, " does not fit in the file of ", size, " bytes"));
  }
  const char* header = reinterpret_cast<const char*>(f.file_.data() + 8);
  Json j = Json::parse(header, header + header_len, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": header is not a JSON object"));
  }
  const std::uint8_t* data = f.file_.data() + 8 + header_len;
  const std::uint64_t data_size = size - 8 - header_len;
  std::vector<Range> ranges;
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (it.key() == "__metadata__") continue;
    SafetensorsTensor t;
    Range r{};
    TANDEM_RETURN_IF_ERROR(ParseEntry(path, it.key(), it.value(), data, data_size, &t, &r));
    auto [pos, inserted] = f.tensors_.emplace(it.key(), std::move(t));
    r.name = &pos->first;
    ranges.push_back(r);
  }
  std::sort(ranges.begin(), ranges.end(),
            [](const Range& a, const Range& b) { return a.begin < b.begin; });
  for (std::size_t i = 1; i < ranges.size(); ++i) {
    if (ranges[i].begin < ranges[i - 1].end) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": tensors ", *ranges[i - 1].name,
                                                     " and ", *ranges[i].name,
                                                     " overlap in the data section"));
    }
  }
  return f;
}

absl::StatusOr<SafetensorsCheckpoint> SafetensorsCheckpoint::Open(const std::string& dir,
                                                                  Fp8BlockSize fp8_block) {
  namespace fs = std::filesystem;
  SafetensorsCheckpoint ckpt;
  const fs::path index_path = fs::path(dir) / "model.safetensors.index.json";
  const fs::path single_path = fs::path(dir) / "model.safetensors";
  std::error_code ec;
  if (!fs::exists(index_path, ec)) {
    if (!fs::exists(single_path, ec)) {
      return absl::NotFoundError(
          absl::StrCat(dir, " has neither model.safetensors nor model.safetensors.index.json"));
    }
    TANDEM_ASSIGN_OR_RETURN(SafetensorsFile f, SafetensorsFile::Open(single_path.string()));
    ckpt.tensors_ = f.tensors();
    ckpt.files_.push_back(std::move(f));
    TANDEM_RETURN_IF_ERROR(AttachFp8Scales(dir, fp8_block, &ckpt.tensors_));
    return ckpt;
  }
  TANDEM_ASSIGN_OR_RETURN(const Json index, ReadJsonFile(index_path.string()));
  const auto wm = index.is_object() ? index.find("weight_map") : index.end();
  if (wm == index.end() || !wm->is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat(index_path.string(), " has no weight_map object"));
  }
  std::map<std::string, std::size_t> file_of_shard;
  for (auto it = wm->begin(); it != wm->end(); ++it) {
    if (!it.value().is_string()) {
      return absl::InvalidArgumentError(
          absl::StrCat(index_path.string(), ": weight_map entry ", it.key(), " is not a string"));
    }
    const std::string shard = it.value().get<std::string>();
    // Shards are plain file names beside the index; anything else could read outside the model.
    if (shard.empty() || shard.find('/') != std::string::npos || shard == "." || shard == "..") {
      return absl::InvalidArgumentError(absl::StrCat(index_path.string(), ": tensor ", it.key(),
                                                     " names an invalid shard '", shard, "'"));
    }
    auto found = file_of_shard.find(shard);
    if (found == file_of_shard.end()) {
      TANDEM_ASSIGN_OR_RETURN(SafetensorsFile f,
                              SafetensorsFile::Open((fs::path(dir) / shard).string()));
      found = file_of_shard.emplace(shard, ckpt.files_.size()).first;
      ckpt.files_.push_back(std::move(f));
    }
    const auto& in_shard = ckpt.files_[found->second].tensors();
    const auto t = in_shard.find(it.key());
    if (t == in_shard.end()) {
      return absl::NotFoundError(absl::StrCat("tensor ", it.key(), " is listed in ",
                                              index_path.string(), " but missing from ", shard));
    }
    ckpt.tensors_.emplace(t->first, t->second);
  }
  TANDEM_RETURN_IF_ERROR(AttachFp8Scales(dir, fp8_block, &ckpt.tensors_));
  return ckpt;
}

const SafetensorsTensor* SafetensorsCheckpoint::Find(absl::string_view name) const {
  const auto it = tensors_.find(std::string(name));
  return it == tensors_.end() ? nullptr : &it->second;
}

absl::StatusOr<kernels::WeightView> SafetensorsCheckpoint::Get(absl::string_view name) const {
  const SafetensorsTensor* t = Find(name);
  if (t == nullptr) return absl::NotFoundError(absl::StrCat("missing tensor ", name));
  return t->view;
}

absl::StatusOr<kernels::WeightView> SafetensorsCheckpoint::Get(absl::string_view name,
                                                               bool check_finite) const {
  TANDEM_ASSIGN_OR_RETURN(kernels::WeightView w, Get(name));
  if (check_finite) TANDEM_RETURN_IF_ERROR(CheckFinite(name, w));
  return w;
}

absl::StatusOr<std::vector<std::int64_t>> SafetensorsCheckpoint::Shape(
    absl::string_view name) const {
  const SafetensorsTensor* t = Find(name);
  if (t == nullptr) return absl::NotFoundError(absl::StrCat("missing tensor ", name));
  return t->shape;
}

std::vector<MappedFile> SafetensorsCheckpoint::ReleaseMappings() && {
  std::vector<MappedFile> out;
  for (SafetensorsFile& f : files_) out.push_back(std::move(f).ReleaseMapping());
  return out;
}

}  // namespace tandem::model::internal
