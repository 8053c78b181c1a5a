#include "tandem/security/api_keys.h"

#include <algorithm>
#include <fstream>
#include <sstream>

#include "absl/container/btree_set.h"
#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "nlohmann/json.hpp"
#include "tandem/security/digest.h"

namespace tandem::security {
namespace {

using nlohmann::json;

bool IsHex64(const std::string& s) {
  return s.size() == 64 && std::all_of(s.begin(), s.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
         });
}

absl::Status LineError(int line, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("api keys line ", line, ": ", what));
}

absl::StatusOr<Limits> ParseLimits(const json& object, int line) {
  Limits limits;
  if (!object.contains("limits")) return limits;
  const json& l = object["limits"];
  if (!l.is_object()) return LineError(line, "\"limits\" must be an object");
  for (const auto& [name, value] : l.items()) {
    std::int64_t* field = name == "requests_per_minute"  ? &limits.requests_per_minute
                          : name == "tokens_per_minute"  ? &limits.tokens_per_minute
                          : name == "concurrent_streams" ? &limits.concurrent_streams
                                                         : nullptr;
    if (field == nullptr) {
      return LineError(line, absl::StrCat("unknown limit \"", name,
                                          "\" (requests_per_minute, tokens_per_minute, "
                                          "concurrent_streams)"));
    }
    if (!value.is_number_integer() || value.get<std::int64_t>() < 0) {
      return LineError(line, absl::StrCat("limit \"", name, "\" must be an integer >= 0"));
    }
    *field = value.get<std::int64_t>();
  }
  return limits;
}

}  // namespace

bool ValidTenantName(absl::string_view tenant) {
  return !tenant.empty() && tenant.size() <= 64 &&
         std::all_of(tenant.begin(), tenant.end(), [](char c) {
           return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' ||
                  c == '-';
         });
}

absl::StatusOr<ApiKeySet> ApiKeySet::Parse(absl::string_view text) {
  ApiKeySet set;
  int line_no = 0;
  for (absl::string_view raw : absl::StrSplit(text, '\n')) {
    ++line_no;
    const absl::string_view line = absl::StripAsciiWhitespace(raw);
    if (line.empty() || line.front() == '#') continue;
    json object = json::parse(line.begin(), line.end(), nullptr, /*allow_exceptions=*/false);
    if (object.is_discarded() || !object.is_object()) {
      return LineError(line_no, "not a JSON object");
    }
    for (const auto& [name, value] : object.items()) {
      if (name != "key_sha256" && name != "tenant" && name != "traffic_class" && name != "limits" &&
          name != "comment") {
        return LineError(line_no, absl::StrCat("unknown field \"", name, "\""));
      }
    }
    if (!object.contains("tenant") || !object["tenant"].is_string() ||
        !ValidTenantName(object["tenant"].get<std::string>())) {
      return LineError(line_no, "\"tenant\" must be 1-64 characters of [A-Za-z0-9._-]");
    }
    const std::string tenant = object["tenant"].get<std::string>();
    absl::StatusOr<Limits> limits = ParseLimits(object, line_no);
    if (!limits.ok()) return limits.status();
    if (!object.contains("key_sha256")) {
      if (object.contains("traffic_class")) {
        return LineError(line_no, "a tenant line (no key_sha256) takes only tenant and limits");
      }
      if (!set.tenant_limits_.emplace(tenant, *limits).second) {
        return LineError(line_no, absl::StrCat("tenant \"", tenant, "\" has limits twice"));
      }
      continue;
    }
    const json& hash = object["key_sha256"];
    if (!hash.is_string() || !IsHex64(hash.get<std::string>())) {
      return LineError(line_no, "\"key_sha256\" must be 64 hex digits (the SHA-256 of the key)");
    }
    ApiKey key;
    key.tenant = tenant;
    key.limits = *limits;
    if (object.contains("traffic_class")) {
      const json& cls = object["traffic_class"];
      if (!cls.is_string() || (cls != "chat" && cls != "agent")) {
        return LineError(line_no, "\"traffic_class\" must be chat or agent");
      }
      key.traffic_class = cls.get<std::string>();
    }
    const std::string hex = absl::AsciiStrToLower(hash.get<std::string>());
    key.key_id = absl::StrCat("key-", hex.substr(0, 12));
    std::string digest = absl::HexStringToBytes(hex);
    if (set.keys_.contains(digest)) return LineError(line_no, "the same key is listed twice");
    set.keys_.emplace(digest, Stored{digest, std::move(key)});
  }
  return set;
}

absl::StatusOr<ApiKeySet> ApiKeySet::Load(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read the API keys file ", path));
  std::stringstream text;
  text << in.rdbuf();
  absl::StatusOr<ApiKeySet> set = Parse(text.str());
  if (!set.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", set.status().message()));
  }
  return set;
}

const ApiKey* ApiKeySet::Find(absl::string_view presented_key) const {
  const std::string digest = Sha256(presented_key);
  auto it = keys_.find(digest);
  if (it == keys_.end()) return nullptr;
  if (!ConstantTimeEquals(it->second.digest, digest)) return nullptr;
  return &it->second.key;
}

Limits ApiKeySet::TenantLimits(absl::string_view tenant) const {
  auto it = tenant_limits_.find(tenant);
  return it == tenant_limits_.end() ? Limits{} : it->second;
}

std::vector<std::string> ApiKeySet::Tenants() const {
  absl::btree_set<std::string> tenants;
  for (const auto& [digest, stored] : keys_) tenants.insert(stored.key.tenant);
  for (const auto& [tenant, limits] : tenant_limits_) tenants.insert(tenant);
  return {tenants.begin(), tenants.end()};
}

std::string ApiKeySet::FileLine(absl::string_view key, const ApiKey& entry) {
  nlohmann::ordered_json line;
  line["key_sha256"] = Sha256Hex(key);
  line["tenant"] = entry.tenant;
  if (!entry.traffic_class.empty()) line["traffic_class"] = entry.traffic_class;
  nlohmann::ordered_json limits = nlohmann::ordered_json::object();
  if (entry.limits.requests_per_minute > 0) {
    limits["requests_per_minute"] = entry.limits.requests_per_minute;
  }
  if (entry.limits.tokens_per_minute > 0) limits["tokens_per_minute"] = entry.limits.tokens_per_minute;
  if (entry.limits.concurrent_streams > 0) {
    limits["concurrent_streams"] = entry.limits.concurrent_streams;
  }
  line["limits"] = std::move(limits);
  return line.dump();
}

}  // namespace tandem::security
