#pragma once

// Field access for tokenizer.json with errors that name the offending field ("model.vocab['x']").
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"

namespace tandem::tokenizer::internal {

using Json = nlohmann::json;

inline absl::Status FieldError(const std::string& where, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("tokenizer.json: ", where, ": ", what));
}

inline absl::StatusOr<const Json*> Field(const Json& parent, const std::string& where,
                                         const char* key) {
  if (!parent.is_object()) return FieldError(where, "expected an object");
  const auto it = parent.find(key);
  if (it == parent.end()) return FieldError(absl::StrCat(where, ".", key), "missing");
  return &*it;
}

// A member that may be absent or null: nullptr then.
inline const Json* OptionalField(const Json& parent, const char* key) {
  if (!parent.is_object()) return nullptr;
  const auto it = parent.find(key);
  return it == parent.end() || it->is_null() ? nullptr : &*it;
}

inline absl::StatusOr<std::string> StringField(const Json& parent, const std::string& where,
                                               const char* key) {
  auto f = Field(parent, where, key);
  if (!f.ok()) return f.status();
  if (!(*f)->is_string()) return FieldError(absl::StrCat(where, ".", key), "expected a string");
  return (*f)->get<std::string>();
}

// Absent or null reads as `fallback`.
inline absl::StatusOr<bool> BoolField(const Json& parent, const std::string& where, const char* key,
                                      bool fallback) {
  const Json* f = OptionalField(parent, key);
  if (f == nullptr) return fallback;
  if (!f->is_boolean()) return FieldError(absl::StrCat(where, ".", key), "expected true or false");
  return f->get<bool>();
}

}  // namespace tandem::tokenizer::internal
