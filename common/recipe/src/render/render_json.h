#pragma once

// JSON text as deepseek-recipe writes it (key order preserved, non-ASCII characters unescaped,
// control characters as \u00XX). Prompts use Python's json.dumps separators; how floats look
// depends on the encoding (see JsonStyle). Output constraints and other machine-read JSON use
// serde_json's compact form.

#include <string>

#include "nlohmann/json.hpp"

namespace tandem::recipe::internal {

enum class JsonStyle {
  kPrompt,    // Python json.dumps: ", " / ": ", floats as Python's repr (1e+20, 2.5e-07); V4.1
  kPromptV4,  // the same separators, floats as Rust's ryu with a '+' on exponents (1e+20, 2.5e-7)
  kCompact,   // serde_json compact: "," / ":", floats as ryu (1e20, 2.5e-7)
};

void AppendJson(const nlohmann::ordered_json& value, JsonStyle style, std::string* out);
std::string ToJson(const nlohmann::ordered_json& value, JsonStyle style);

// A float with the shortest round-trip digits, laid out as `style` does ("null" if not finite):
// see JsonStyle.
std::string FormatJsonFloat(double value, JsonStyle style = JsonStyle::kCompact);

}  // namespace tandem::recipe::internal
