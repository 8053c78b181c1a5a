#include "tandem/kv/types.h"

#include "absl/strings/str_cat.h"

namespace tandem::kv {

absl::StatusOr<TrafficClass> ParseTrafficClass(absl::string_view name) {
  if (name == "chat") return TrafficClass::kChat;
  if (name == "agent") return TrafficClass::kAgent;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown traffic class '", name, "' (expected chat or agent)"));
}

absl::string_view TrafficClassName(TrafficClass cls) {
  switch (cls) {
    case TrafficClass::kChat:
      return "chat";
    case TrafficClass::kAgent:
      return "agent";
  }
  return "unknown";
}

absl::Status ValidateTrafficClass(TrafficClass cls) {
  const int value = static_cast<int>(cls);
  if (value < 0 || value >= kNumTrafficClasses) {
    return absl::InvalidArgumentError(absl::StrCat("unknown traffic class value ", value));
  }
  return absl::OkStatus();
}

absl::string_view KvTierName(KvTier tier) {
  switch (tier) {
    case KvTier::kDevice:
      return "device";
    case KvTier::kHost:
      return "host";
    case KvTier::kDisk:
      return "disk";
  }
  return "unknown";
}

}  // namespace tandem::kv
