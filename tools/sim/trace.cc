#include "trace.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "tandem/base/hash.h"

namespace tandem::sim {
namespace {

using nlohmann::json;

routing::BlockHash ChainHash(routing::BlockHash parent, std::uint64_t id) {
  std::uint8_t bytes[8];
  std::memcpy(bytes, &id, sizeof(id));
  return StableHash64(bytes, parent + 0x9e3779b97f4a7c15ULL);
}

bool IsNonNegativeInteger(const json& v) {
  return v.is_number_unsigned() || (v.is_number_integer() && v.get<std::int64_t>() >= 0);
}

// The request on one line, or why the line is unusable.
absl::StatusOr<TraceRequest> ParseLine(const std::string& text, int block_size) {
  const json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return absl::InvalidArgumentError("not valid JSON");
  if (!j.is_object()) return absl::InvalidArgumentError("not a JSON object");
  for (const char* field : {"timestamp", "input_length", "output_length", "hash_ids"}) {
    if (!j.contains(field)) return absl::InvalidArgumentError(absl::StrCat("missing '", field, "'"));
  }
  const json& ts = j["timestamp"];
  if (!ts.is_number() || !std::isfinite(ts.get<double>()) || ts.get<double>() < 0) {
    return absl::InvalidArgumentError("'timestamp' must be a non-negative number (ms)");
  }
  if (!IsNonNegativeInteger(j["input_length"]) || j["input_length"].get<std::int64_t>() == 0) {
    return absl::InvalidArgumentError("'input_length' must be a positive integer");
  }
  if (!IsNonNegativeInteger(j["output_length"])) {
    return absl::InvalidArgumentError("'output_length' must be a non-negative integer");
  }
  const json& ids = j["hash_ids"];
  if (!ids.is_array()) return absl::InvalidArgumentError("'hash_ids' must be an array");
  TraceRequest r;
  r.arrival_seconds = ts.get<double>() / 1000.0;
  r.input_length = j["input_length"].get<std::int64_t>();
  r.output_length = j["output_length"].get<std::int64_t>();
  // Beyond any model's context: a typo, and one such line would stall the replay for hours.
  constexpr std::int64_t kMaxTokens = std::int64_t{1} << 24;
  if (r.input_length > kMaxTokens || r.input_length < 0 || r.output_length > kMaxTokens ||
      r.output_length < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("'input_length' and 'output_length' must be at most ", kMaxTokens));
  }
  const std::int64_t expected = (r.input_length + block_size - 1) / block_size;
  if (static_cast<std::int64_t>(ids.size()) != expected) {
    return absl::InvalidArgumentError(absl::StrCat("'hash_ids' has ", ids.size(), " ids but ",
                                                   r.input_length, " tokens need ", expected,
                                                   " blocks of ", block_size));
  }
  r.chain.reserve(ids.size());
  routing::BlockHash parent = 0;
  for (const json& id : ids) {
    if (!IsNonNegativeInteger(id)) {
      return absl::InvalidArgumentError("'hash_ids' must hold non-negative integers");
    }
    parent = ChainHash(parent, id.get<std::uint64_t>());
    r.chain.push_back(parent);
  }
  return r;
}

}  // namespace

Trace ReadTrace(std::istream& in, int block_size) {
  Trace trace;
  std::string text;
  int line = 0;
  while (std::getline(in, text)) {
    ++line;
    if (text.find_first_not_of(" \t\r") == std::string::npos) continue;
    absl::StatusOr<TraceRequest> r = ParseLine(text, block_size);
    if (!r.ok()) {
      trace.skipped.push_back(absl::StrCat("line ", line, ": ", r.status().message()));
      continue;
    }
    r->line = line;
    trace.requests.push_back(*std::move(r));
  }
  std::stable_sort(trace.requests.begin(), trace.requests.end(),
                   [](const TraceRequest& a, const TraceRequest& b) {
                     return a.arrival_seconds < b.arrival_seconds;
                   });
  return trace;
}

absl::StatusOr<Trace> ReadTraceFile(const std::string& path, int block_size) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot open trace '", path, "'"));
  return ReadTrace(in, block_size);
}

std::vector<std::int64_t> InfiniteCacheMisses(const Trace& trace, int block_size) {
  absl::flat_hash_set<routing::BlockHash> seen;
  std::vector<std::int64_t> misses;
  misses.reserve(trace.requests.size());
  for (const TraceRequest& r : trace.requests) {
    std::int64_t run = 0;
    while (run < static_cast<std::int64_t>(r.chain.size()) && seen.contains(r.chain[run])) ++run;
    misses.push_back(r.input_length - std::min(run * block_size, r.input_length));
    seen.insert(r.chain.begin(), r.chain.end());
  }
  return misses;
}

double InfiniteCacheHitRate(const Trace& trace, int block_size) {
  return HitRateGivenMisses(trace, InfiniteCacheMisses(trace, block_size));
}

double HitRateGivenMisses(const Trace& trace, const std::vector<std::int64_t>& misses) {
  double hit = 0;
  double total = 0;
  for (std::size_t i = 0; i < misses.size(); ++i) {
    hit += static_cast<double>(trace.requests[i].input_length - misses[i]);
    total += static_cast<double>(trace.requests[i].input_length);
  }
  return total > 0 ? hit / total : 0;
}

}  // namespace tandem::sim
