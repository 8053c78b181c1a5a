#include "tandem/security/cache_salt.h"

#include <span>
#include <string>

#include "absl/strings/str_cat.h"
#include "tandem/base/hash.h"

namespace tandem::security {
namespace {

constexpr std::uint64_t kSaltSeed = 0x7a6e64656d53616cULL;  // "tndemSal"

}  // namespace

std::uint64_t CacheSaltRoot(absl::string_view salt) {
  const std::string material = absl::StrCat("tandem-cache-salt/v1", absl::string_view("\0", 1), salt);
  const std::uint64_t h = StableHash64(
      std::span(reinterpret_cast<const std::uint8_t*>(material.data()), material.size()), kSaltSeed);
  return h == 0 ? 1 : h;
}

std::uint64_t RequestKvHashRoot(bool per_tenant, absl::string_view tenant,
                                absl::string_view cache_salt) {
  const absl::string_view nul("\0", 1);
  std::string material;
  if (per_tenant && !tenant.empty()) material = absl::StrCat("tenant", nul, tenant, nul);
  if (!cache_salt.empty()) absl::StrAppend(&material, "salt", nul, cache_salt);
  return material.empty() ? 0 : CacheSaltRoot(material);
}

}  // namespace tandem::security
