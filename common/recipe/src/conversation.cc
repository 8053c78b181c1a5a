#include "tandem/recipe/conversation.h"

namespace tandem::recipe {

absl::string_view RoleName(Role role) {
  switch (role) {
    case Role::kSystem: return "system";
    case Role::kUser: return "user";
    case Role::kAssistant: return "assistant";
    case Role::kTool: return "tool";
    case Role::kLatestReminder: return "latest_reminder";
  }
  return "unknown";
}

absl::string_view ModelVersionName(ModelVersion version) {
  switch (version) {
    case ModelVersion::kDeepseekV4: return "v4";
    case ModelVersion::kDeepseekV41: return "v4.1";
  }
  return "unknown";
}

}  // namespace tandem::recipe
