#include "render/render_json.h"

#include <charconv>
#include <cmath>
#include <cstdlib>

namespace tandem::recipe::internal {
namespace {

void AppendString(const std::string& s, std::string* out) {
  static constexpr char kHex[] = "0123456789abcdef";
  out->push_back('"');
  for (unsigned char c : s) {
    switch (c) {
      case '"':
        out->append("\\\"");
        break;
      case '\\':
        out->append("\\\\");
        break;
      case '\b':
        out->append("\\b");
        break;
      case '\f':
        out->append("\\f");
        break;
      case '\n':
        out->append("\\n");
        break;
      case '\r':
        out->append("\\r");
        break;
      case '\t':
        out->append("\\t");
        break;
      default:
        if (c < 0x20) {
          out->append("\\u00");
          out->push_back(kHex[c >> 4]);
          out->push_back(kHex[c & 0xF]);
        } else {
          out->push_back(static_cast<char>(c));
        }
    }
  }
  out->push_back('"');
}

}  // namespace

std::string FormatJsonFloat(double value, JsonStyle style) {
  if (!std::isfinite(value)) return "null";
  char buf[64];
  // Shortest round-trip digits in the form [-]d[.ddd]e(+|-)XX, re-laid out the way ryu does.
  const auto result = std::to_chars(buf, buf + sizeof(buf), value, std::chars_format::scientific);
  std::string sci(buf, result.ptr);
  std::string out;
  std::size_t pos = 0;
  if (sci[0] == '-') {
    out.push_back('-');
    pos = 1;
  }
  const std::size_t e = sci.find('e');
  std::string digits;
  for (std::size_t i = pos; i < e; ++i) {
    if (sci[i] != '.') digits.push_back(sci[i]);
  }
  const int exponent = std::atoi(sci.c_str() + e + 1);
  const int length = static_cast<int>(digits.size());
  const int point = exponent + 1;  // digits before the decimal point
  if (style == JsonStyle::kPrompt) {
    // Python repr: positional for 1e-4 <= |v| < 1e16, else d[.ddd]e+XX / e-XX.
    if (-4 <= exponent && exponent < 16) {
      if (point <= 0) {
        out += "0.";
        out.append(static_cast<std::size_t>(-point), '0');
        out += digits;
      } else if (point >= length) {
        out += digits;
        out.append(static_cast<std::size_t>(point - length), '0');
        out += ".0";
      } else {
        out += digits.substr(0, point);
        out.push_back('.');
        out += digits.substr(point);
      }
      return out;
    }
    out.push_back(digits[0]);
    if (length > 1) {
      out.push_back('.');
      out += digits.substr(1);
    }
    out += sci.substr(e, 2);  // "e+" or "e-"
    const std::string magnitude = std::to_string(exponent < 0 ? -exponent : exponent);
    if (magnitude.size() < 2) out.push_back('0');
    out += magnitude;
    return out;
  }
  if (0 <= point - length && point <= 16) {
    out += digits;
    out.append(static_cast<std::size_t>(point - length), '0');
    out += ".0";
  } else if (0 < point && point <= 16) {
    out += digits.substr(0, point);
    out.push_back('.');
    out += digits.substr(point);
  } else if (-5 < point && point <= 0) {
    out += "0.";
    out.append(static_cast<std::size_t>(-point), '0');
    out += digits;
  } else {
    out.push_back(digits[0]);
    if (length > 1) {
      out.push_back('.');
      out += digits.substr(1);
    }
    out.push_back('e');
    if (style == JsonStyle::kPromptV4 && point - 1 >= 0) out.push_back('+');
    out += std::to_string(point - 1);
  }
  return out;
}

void AppendJson(const nlohmann::ordered_json& value, JsonStyle style, std::string* out) {
  const char* item_sep = style == JsonStyle::kCompact ? "," : ", ";
  const char* key_sep = style == JsonStyle::kCompact ? ":" : ": ";
  switch (value.type()) {
    case nlohmann::ordered_json::value_t::object: {
      out->push_back('{');
      bool first = true;
      for (const auto& [key, item] : value.items()) {
        if (!first) out->append(item_sep);
        first = false;
        AppendString(key, out);
        out->append(key_sep);
        AppendJson(item, style, out);
      }
      out->push_back('}');
      return;
    }
    case nlohmann::ordered_json::value_t::array: {
      out->push_back('[');
      bool first = true;
      for (const auto& item : value) {
        if (!first) out->append(item_sep);
        first = false;
        AppendJson(item, style, out);
      }
      out->push_back(']');
      return;
    }
    case nlohmann::ordered_json::value_t::string:
      AppendString(value.get_ref<const std::string&>(), out);
      return;
    case nlohmann::ordered_json::value_t::boolean:
      out->append(value.get<bool>() ? "true" : "false");
      return;
    case nlohmann::ordered_json::value_t::number_integer:
      out->append(std::to_string(value.get<std::int64_t>()));
      return;
    case nlohmann::ordered_json::value_t::number_unsigned:
      out->append(std::to_string(value.get<std::uint64_t>()));
      return;
    case nlohmann::ordered_json::value_t::number_float:
      out->append(FormatJsonFloat(value.get<double>(), style));
      return;
    default:
      out->append("null");
      return;
  }
}

std::string ToJson(const nlohmann::ordered_json& value, JsonStyle style) {
  std::string out;
  AppendJson(value, style, &out);
  return out;
}

}  // namespace tandem::recipe::internal
