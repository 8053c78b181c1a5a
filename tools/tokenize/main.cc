// tandem-tokenize --tokenizer FILE [--decode] [--whole] [--json] [--added-tokens=all|non-special|none]
//
// Encode (default): prints the ids of each stdin line, space-separated, one output line per input
// line. --whole encodes all of stdin as one text. --json reads each line as a JSON string (so a
// text may hold newlines). --added-tokens says which added-token spellings become their ids
// (default all, like the reference `tokenizers` encode(text, add_special_tokens=False)).
// Decode: each stdin line is space-separated ids; prints the text (--json: as a JSON string).
#include <cstdio>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "nlohmann/json.hpp"
#include "tandem/tokenizer/hf_bpe_tokenizer.h"
#include "tandem/tokenizer/incremental_decoder.h"

namespace {

using tandem::tokenizer::AddedTokenSpellings;
using tandem::tokenizer::HfBpeTokenizer;

struct Options {
  std::string tokenizer;
  bool decode = false;
  bool whole = false;
  bool json = false;
  AddedTokenSpellings spellings = AddedTokenSpellings::kAll;
};

int Usage(const std::string& error) {
  std::cerr << "error: " << error << "\nusage: tandem-tokenize --tokenizer FILE [--decode] "
               "[--whole] [--json] [--added-tokens=all|non-special|none]\n";
  return 2;
}

int Fail(const std::string& what, const absl::Status& status) {
  std::cerr << "error: " << what << ": " << status << "\n";
  return 1;
}

int EncodeText(const HfBpeTokenizer& tok, const Options& opt, const std::string& text,
               const std::string& where) {
  auto ids = tok.EncodeWith(text, /*add_bos=*/false, opt.spellings);
  if (!ids.ok()) return Fail(where, ids.status());
  std::cout << absl::StrJoin(*ids, " ") << "\n";
  return 0;
}

int Encode(const HfBpeTokenizer& tok, const Options& opt) {
  if (opt.whole) {
    std::ostringstream all;
    all << std::cin.rdbuf();
    return EncodeText(tok, opt, all.str(), "stdin");
  }
  std::string line;
  for (int n = 1; std::getline(std::cin, line); ++n) {
    std::string text = line;
    if (opt.json) {
      const auto parsed = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
      if (!parsed.is_string()) {
        return Fail("line " + std::to_string(n),
                    absl::InvalidArgumentError("expected a JSON string"));
      }
      text = parsed.get<std::string>();
    }
    if (const int rc = EncodeText(tok, opt, text, "line " + std::to_string(n)); rc != 0) return rc;
  }
  return 0;
}

int Decode(const HfBpeTokenizer& tok, const Options& opt) {
  std::string line;
  for (int n = 1; std::getline(std::cin, line); ++n) {
    const std::string where = "line " + std::to_string(n);
    tandem::tokenizer::IncrementalDecoder decoder(tok);
    std::string text;
    for (const absl::string_view field : absl::StrSplit(line, ' ', absl::SkipEmpty())) {
      std::int32_t id;
      if (!absl::SimpleAtoi(field, &id)) {
        return Fail(where, absl::InvalidArgumentError("'" + std::string(field) + "' is not an id"));
      }
      auto piece = decoder.Push(id);
      if (!piece.ok()) return Fail(where, piece.status());
      text += *piece;
    }
    text += decoder.Flush();
    if (opt.json) {
      std::cout << nlohmann::json(text).dump() << "\n";
    } else {
      std::cout << text << "\n";
    }
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::ios::sync_with_stdio(false);
  Options opt;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--tokenizer" && i + 1 < argc) {
      opt.tokenizer = argv[++i];
    } else if (arg.rfind("--tokenizer=", 0) == 0) {
      opt.tokenizer = arg.substr(12);
    } else if (arg == "--decode") {
      opt.decode = true;
    } else if (arg == "--whole") {
      opt.whole = true;
    } else if (arg == "--json") {
      opt.json = true;
    } else if (arg == "--added-tokens=all") {
      opt.spellings = AddedTokenSpellings::kAll;
    } else if (arg == "--added-tokens=non-special") {
      opt.spellings = AddedTokenSpellings::kNonSpecialOnly;
    } else if (arg == "--added-tokens=none") {
      opt.spellings = AddedTokenSpellings::kPlainText;
    } else {
      return Usage("unknown argument '" + arg + "'");
    }
  }
  if (opt.tokenizer.empty()) return Usage("--tokenizer FILE is required");
  auto tok = HfBpeTokenizer::Load(opt.tokenizer);
  if (!tok.ok()) return Fail("loading the tokenizer", tok.status());
  return opt.decode ? Decode(**tok, opt) : Encode(**tok, opt);
}
