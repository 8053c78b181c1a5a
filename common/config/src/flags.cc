#include "tandem/config/flags.h"

#include <cstdlib>
#include <set>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace tandem::config {

EnvLookup ProcessEnv() {
  return [](const std::string& name) -> absl::optional<std::string> {
    const char* v = std::getenv(name.c_str());
    if (v == nullptr) return absl::nullopt;
    return std::string(v);
  };
}

FlagSet::FlagSet(std::string program, std::string summary)
    : program_(std::move(program)), summary_(std::move(summary)) {}

void FlagSet::Add(const std::string& name, Kind kind, void* target, const std::string& help,
                  const std::string& env) {
  Flag f{name, kind, target, help, env, ""};
  switch (kind) {
    case Kind::kString: f.default_text = *static_cast<std::string*>(target); break;
    case Kind::kInt: f.default_text = absl::StrCat(*static_cast<int*>(target)); break;
    case Kind::kInt64: f.default_text = absl::StrCat(*static_cast<std::int64_t*>(target)); break;
    case Kind::kDouble: f.default_text = absl::StrCat(*static_cast<double*>(target)); break;
    case Kind::kBool: f.default_text = *static_cast<bool*>(target) ? "true" : "false"; break;
  }
  flags_.push_back(std::move(f));
}

void FlagSet::String(const std::string& n, std::string* t, const std::string& h,
                     const std::string& e) {
  Add(n, Kind::kString, t, h, e);
}
void FlagSet::Int(const std::string& n, int* t, const std::string& h, const std::string& e) {
  Add(n, Kind::kInt, t, h, e);
}
void FlagSet::Int64(const std::string& n, std::int64_t* t, const std::string& h,
                    const std::string& e) {
  Add(n, Kind::kInt64, t, h, e);
}
void FlagSet::Double(const std::string& n, double* t, const std::string& h, const std::string& e) {
  Add(n, Kind::kDouble, t, h, e);
}
void FlagSet::Bool(const std::string& n, bool* t, const std::string& h, const std::string& e) {
  Add(n, Kind::kBool, t, h, e);
}

const FlagSet::Flag* FlagSet::Find(const std::string& name) const {
  for (const Flag& f : flags_) {
    if (f.name == name) return &f;
  }
  return nullptr;
}

absl::Status FlagSet::Assign(const Flag& flag, const std::string& value,
                             const std::string& source) {
  auto bad = [&] {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": '", value, "' is not a valid value for --", flag.name));
  };
  switch (flag.kind) {
    case Kind::kString:
      *static_cast<std::string*>(flag.target) = value;
      return absl::OkStatus();
    case Kind::kInt: {
      int v = 0;
      if (!absl::SimpleAtoi(value, &v)) return bad();
      *static_cast<int*>(flag.target) = v;
      return absl::OkStatus();
    }
    case Kind::kInt64: {
      std::int64_t v = 0;
      if (!absl::SimpleAtoi(value, &v)) return bad();
      *static_cast<std::int64_t*>(flag.target) = v;
      return absl::OkStatus();
    }
    case Kind::kDouble: {
      double v = 0;
      if (!absl::SimpleAtod(value, &v)) return bad();
      *static_cast<double*>(flag.target) = v;
      return absl::OkStatus();
    }
    case Kind::kBool: {
      bool v = false;
      if (!absl::SimpleAtob(value, &v)) return bad();
      *static_cast<bool*>(flag.target) = v;
      return absl::OkStatus();
    }
  }
  return bad();
}

absl::Status FlagSet::Parse(int argc, const char* const* argv, const EnvLookup& env) {
  // Environment first, so that explicit flags parsed afterwards override it.
  for (const Flag& f : flags_) {
    if (f.env.empty() || !env) continue;
    if (auto v = env(f.env); v.has_value()) {
      absl::Status st = Assign(f, *v, absl::StrCat("environment variable ", f.env));
      if (!st.ok()) return st;
    }
  }
  std::set<std::string> seen;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      help_requested_ = true;
      continue;
    }
    if (arg == "--version") {
      version_requested_ = true;
      continue;
    }
    if (arg.rfind("--", 0) != 0) {
      positional_.push_back(arg);
      continue;
    }
    std::string name = arg.substr(2);
    absl::optional<std::string> value;
    if (auto eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
    }
    const Flag* flag = Find(name);
    if (flag == nullptr && !value && name.rfind("no-", 0) == 0) {
      const Flag* negated = Find(name.substr(3));
      if (negated != nullptr && negated->kind == Kind::kBool) {
        *static_cast<bool*>(negated->target) = false;
        continue;
      }
    }
    if (flag == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("unknown flag --", name, " (see --help)"));
    }
    if (!seen.insert(name).second) {
      return absl::InvalidArgumentError(absl::StrCat("flag --", name, " given twice"));
    }
    if (!value) {
      if (flag->kind == Kind::kBool) {
        value = "true";
      } else if (i + 1 < argc) {
        value = argv[++i];
      } else {
        return absl::InvalidArgumentError(absl::StrCat("flag --", name, " needs a value"));
      }
    }
    absl::Status st = Assign(*flag, *value, absl::StrCat("flag --", name));
    if (!st.ok()) return st;
  }
  return absl::OkStatus();
}

std::string FlagSet::Help() const {
  std::string out = absl::StrCat("usage: ", program_, " [flags]\n", summary_, "\n\nflags:\n");
  for (const Flag& f : flags_) {
    absl::StrAppend(&out, "  --", f.name, "  ", f.help, " (default: ",
                    f.default_text.empty() ? "\"\"" : f.default_text, ")");
    if (!f.env.empty()) absl::StrAppend(&out, " [env ", f.env, "]");
    absl::StrAppend(&out, "\n");
  }
  absl::StrAppend(&out, "  --help, --version  print this, or the build's version and commit, and exit\n");
  return out;
}

}  // namespace tandem::config
