#pragma once

// An independent reader of the Prometheus text format 0.0.4 for tests: renders are parsed back
// and compared, so escaping or bucket mistakes in the writer cannot hide behind string matches.

#include <cstdlib>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace tandem::metrics::testing {

struct Sample {
  std::string name;
  std::map<std::string, std::string> labels;
  double value = 0;
};

struct Exposition {
  std::map<std::string, std::string> help;  // Unescaped.
  std::map<std::string, std::string> type;
  std::vector<Sample> samples;
  std::vector<std::string> errors;

  // The samples named `name` whose labels include every pair in `match`.
  std::vector<Sample> Find(const std::string& name,
                           const std::map<std::string, std::string>& match = {}) const {
    std::vector<Sample> found;
    for (const Sample& s : samples) {
      if (s.name != name) continue;
      bool ok = true;
      for (const auto& [k, v] : match) {
        auto it = s.labels.find(k);
        ok = ok && it != s.labels.end() && it->second == v;
      }
      if (ok) found.push_back(s);
    }
    return found;
  }
  std::optional<double> Value(const std::string& name,
                              const std::map<std::string, std::string>& match = {}) const {
    std::vector<Sample> found = Find(name, match);
    if (found.size() != 1) return std::nullopt;
    return found[0].value;
  }
};

inline std::string UnescapeText(const std::string& text, bool quotes, std::string* error) {
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '\\') {
      out += text[i];
      continue;
    }
    if (++i == text.size()) {
      *error = "dangling backslash";
      break;
    }
    switch (text[i]) {
      case '\\': out += '\\'; break;
      case 'n': out += '\n'; break;
      case '"':
        if (quotes) {
          out += '"';
          break;
        }
        [[fallthrough]];
      default: *error = std::string("bad escape \\") + text[i];
    }
  }
  return out;
}

inline double ParseNumber(const std::string& text, std::string* error) {
  if (text == "+Inf") return 1.0 / 0.0;
  if (text == "-Inf") return -1.0 / 0.0;
  if (text == "NaN") return 0.0 / 0.0;
  char* end = nullptr;
  double v = std::strtod(text.c_str(), &end);
  if (text.empty() || *end != '\0') *error = "bad number '" + text + "'";
  return v;
}

// Parses `name{k="v",...} value`; labels may contain escaped quotes, commas and braces.
inline bool ParseSample(const std::string& line, Sample* sample, std::string* error) {
  size_t i = 0;
  while (i < line.size() && line[i] != '{' && line[i] != ' ') ++i;
  sample->name = line.substr(0, i);
  if (i < line.size() && line[i] == '{') {
    ++i;
    while (i < line.size() && line[i] != '}') {
      size_t eq = line.find('=', i);
      if (eq == std::string::npos || eq + 1 >= line.size() || line[eq + 1] != '"') {
        *error = "bad label in: " + line;
        return false;
      }
      std::string key = line.substr(i, eq - i);
      size_t j = eq + 2;
      std::string raw;
      while (j < line.size() && line[j] != '"') {
        if (line[j] == '\\' && j + 1 < line.size()) raw += line[j++];
        raw += line[j++];
      }
      if (j >= line.size()) {
        *error = "unterminated label value in: " + line;
        return false;
      }
      sample->labels[key] = UnescapeText(raw, true, error);
      i = j + 1;
      if (i < line.size() && line[i] == ',') ++i;
    }
    if (i >= line.size()) {
      *error = "unterminated label set in: " + line;
      return false;
    }
    ++i;
  }
  if (i >= line.size() || line[i] != ' ') {
    *error = "no value in: " + line;
    return false;
  }
  sample->value = ParseNumber(line.substr(i + 1), error);
  return error->empty();
}

inline Exposition ParseExposition(const std::string& text) {
  Exposition exp;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t nl = text.find('\n', pos);
    if (nl == std::string::npos) {
      exp.errors.push_back("last line lacks a newline");
      break;
    }
    std::string line = text.substr(pos, nl - pos);
    pos = nl + 1;
    std::string error;
    if (line.rfind("# HELP ", 0) == 0 || line.rfind("# TYPE ", 0) == 0) {
      size_t sp = line.find(' ', 7);
      std::string name = line.substr(7, sp - 7);
      std::string rest = sp == std::string::npos ? "" : line.substr(sp + 1);
      if (line[2] == 'H') {
        exp.help[name] = UnescapeText(rest, false, &error);
      } else {
        exp.type[name] = rest;
      }
    } else {
      Sample sample;
      if (ParseSample(line, &sample, &error)) exp.samples.push_back(sample);
    }
    if (!error.empty()) exp.errors.push_back(error);
  }
  return exp;
}

}  // namespace tandem::metrics::testing
