#pragma once

// JSON text as deepseek-recipe writes it (serde_json, key order preserved): numbers the way Rust
// prints them (1.5, 100000.0, 1e20), non-ASCII characters unescaped, control characters as
// \u00XX. Prompts use Python's json.dumps separators (", " and ": "); output constraints and
// other machine-read JSON use the compact form.

#include <string>

#include "nlohmann/json.hpp"

namespace tandem::recipe::internal {

enum class JsonStyle { kPrompt, kCompact };

void AppendJson(const nlohmann::ordered_json& value, JsonStyle style, std::string* out);
std::string ToJson(const nlohmann::ordered_json& value, JsonStyle style);

// A float as Rust's ryu formats an f64 (shortest round-trip digits; "null" if not finite).
std::string FormatJsonFloat(double value);

}  // namespace tandem::recipe::internal
