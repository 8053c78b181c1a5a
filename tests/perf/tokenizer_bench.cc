// tokenizer.json encode throughput, one thread: tandem_tokenizer_bench TOKENIZER_JSON CORPUS [REPS]
// Encodes every line of CORPUS (all added tokens recognized, like the reference's
// encode(line, add_special_tokens=False)) REPS times and prints the best pass as
// "tandem_mb_per_s <MB/s> bytes <n> tokens <n>". tests/perf/tokenizer_bench.py runs it beside
// the Python `tokenizers` library and prints the ratio.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "tandem/tokenizer/hf_bpe_tokenizer.h"

int main(int argc, char** argv) {
  if (argc < 3) {
    std::cerr << "usage: tandem_tokenizer_bench TOKENIZER_JSON CORPUS [REPS]\n";
    return 2;
  }
  const int reps = argc > 3 ? std::max(1, std::atoi(argv[3])) : 5;
  auto tok = tandem::tokenizer::HfBpeTokenizer::Load(argv[1]);
  if (!tok.ok()) {
    std::cerr << tok.status() << "\n";
    return 1;
  }
  std::ifstream in(argv[2], std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  if (!in) {
    std::cerr << "cannot read " << argv[2] << "\n";
    return 1;
  }
  const std::string corpus = text.str();
  const std::vector<std::string> lines = absl::StrSplit(corpus, '\n');
  std::size_t bytes = 0;
  for (const auto& l : lines) bytes += l.size();

  double best = 1e30;
  std::size_t tokens = 0;
  for (int r = 0; r < reps + 1; ++r) {  // the first pass warms caches and is not counted
    const auto start = std::chrono::steady_clock::now();
    std::size_t n = 0;
    for (const auto& line : lines) {
      auto ids = (*tok)->EncodeWith(line, false, tandem::tokenizer::AddedTokenSpellings::kAll);
      if (!ids.ok()) {
        std::cerr << ids.status() << "\n";
        return 1;
      }
      n += ids->size();
    }
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (r > 0) best = std::min(best, s);
    tokens = n;
  }
  std::printf("tandem_mb_per_s %.3f bytes %zu tokens %zu\n", bytes / best / 1e6, bytes, tokens);
  return 0;
}
