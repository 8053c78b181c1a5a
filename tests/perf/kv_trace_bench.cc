// Tiered KV store against a real prefix-reuse trace, and the disk tier's throughput against a
// plain sequential file on the same disk, in one run.
//
//   build/tests/perf/tandem_kv_trace_bench [--trace PATH] [--block_bytes 16384]
//       [--device_blocks 2000] [--host_blocks 4000] [--disk_blocks 20000] [--max_requests 0]
//       [--dir /var/tmp] [--io_mb 256] [--compression lz4|none] [--demotion_mb_s 1000]
//
// Replay: requests of the Mooncake conversation trace in timestamp order, each a chain of
// 512-token block ids turned into chained hashes. A simulated device cache (LRU of
// --device_blocks) sits on top of the store, as the engine's BlockManager will: what it evicts is
// Put into the store, what a request needs beyond its device prefix is Looked up and Fetched
// (every fetched byte is checked). The store runs on a fake clock at trace time, Step() after
// every request. Prints block hit rates per tier and the trace's own bound (infinite capacity:
// every block whose prefix was seen before is a hit).
//
// Throughput: --io_mb of blocks Put into a fresh disk tier and synced, then read back, against
// write()+fdatasync and read() of the same bytes in one file in the same directory. Page cache is
// dropped (POSIX_FADV_DONTNEED) for both before reading, so reads come from the device.
//
// Block bytes are synthetic bf16 drawn from a normal distribution (KV activations are roughly
// that); the run reports how much LZ4 saves on them, i.e. whether compression pays for float KV.

#include <fcntl.h>
#include <lz4.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <list>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "nlohmann/json.hpp"
#include "tandem/base/hash.h"
#include "tandem/kv/disk_tier.h"
#include "tandem/kv/tiered_kv_store.h"

namespace {

namespace fs = std::filesystem;
using tandem::kv::BlockKey;
using tandem::kv::TrafficClass;
using Steady = std::chrono::steady_clock;

struct Flags {
  std::string trace = std::string(TANDEM_SHARED_DIR) + "/traces/mooncake_conversation_trace.jsonl";
  std::size_t block_bytes = 16384;
  std::size_t device_blocks = 2000;
  std::size_t host_blocks = 4000;
  std::size_t disk_blocks = 20000;
  std::size_t max_requests = 0;  // 0: all
  std::string dir = "/var/tmp";
  std::size_t io_mb = 256;
  std::string compression = "lz4";
  std::uint64_t demotion_mb_s = 1000;
};

[[noreturn]] void Usage(const std::string& why) {
  std::fprintf(stderr, "kv_trace_bench: %s\n", why.c_str());
  std::exit(2);
}

std::size_t ParseSize(const std::string& name, const std::string& value) {
  char* end = nullptr;
  const unsigned long long v = std::strtoull(value.c_str(), &end, 10);
  if (value.empty() || *end != '\0') Usage("--" + name + " wants a non-negative integer");
  return static_cast<std::size_t>(v);
}

Flags ParseFlags(int argc, char** argv) {
  Flags f;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg.rfind("--", 0) != 0) Usage("unexpected argument " + arg);
    std::string name = arg.substr(2), value;
    if (auto eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
    } else if (i + 1 < argc) {
      value = argv[++i];
    } else {
      Usage("--" + name + " needs a value");
    }
    if (name == "trace") f.trace = value;
    else if (name == "block_bytes") f.block_bytes = ParseSize(name, value);
    else if (name == "device_blocks") f.device_blocks = ParseSize(name, value);
    else if (name == "host_blocks") f.host_blocks = ParseSize(name, value);
    else if (name == "disk_blocks") f.disk_blocks = ParseSize(name, value);
    else if (name == "max_requests") f.max_requests = ParseSize(name, value);
    else if (name == "dir") f.dir = value;
    else if (name == "io_mb") f.io_mb = ParseSize(name, value);
    else if (name == "compression") f.compression = value;
    else if (name == "demotion_mb_s") f.demotion_mb_s = ParseSize(name, value);
    else Usage("unknown flag --" + name);
  }
  if (f.block_bytes < 16 || f.block_bytes % 2 != 0) Usage("--block_bytes must be even and >= 16");
  if (f.compression != "lz4" && f.compression != "none") Usage("--compression is lz4 or none");
  if (f.host_blocks == 0 || f.disk_blocks == 0) Usage("--host_blocks/--disk_blocks must be > 0");
  return f;
}

struct Request {
  std::int64_t timestamp_ms = 0;
  std::vector<std::uint64_t> chain;  // chained hashes
  std::vector<std::uint64_t> parents;
};

// Malformed lines are reported with their number and skipped; the replay uses the rest.
std::vector<Request> LoadTrace(const std::string& path, std::size_t max_requests) {
  std::ifstream in(path);
  if (!in) Usage("cannot open trace " + path + " (set --trace)");
  std::vector<Request> requests;
  std::string line;
  std::size_t line_no = 0, skipped = 0;
  auto skip = [&](const std::string& why) {
    ++skipped;
    std::fprintf(stderr, "trace line %zu: %s; skipped\n", line_no, why.c_str());
  };
  while (std::getline(in, line)) {
    ++line_no;
    if (line.empty()) continue;
    auto j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.is_object()) {
      skip("not a JSON object");
      continue;
    }
    if (!j.contains("timestamp") || !j["timestamp"].is_number()) {
      skip("missing or non-numeric \"timestamp\"");
      continue;
    }
    if (!j.contains("hash_ids") || !j["hash_ids"].is_array()) {
      skip("missing or non-array \"hash_ids\"");
      continue;
    }
    Request r;
    r.timestamp_ms = static_cast<std::int64_t>(j["timestamp"].get<double>());
    bool ok = true;
    std::uint64_t parent = 0;
    for (const auto& id : j["hash_ids"]) {
      if (!id.is_number_integer() || id.get<std::int64_t>() < 0 ||
          id.get<std::int64_t>() > INT32_MAX) {
        ok = false;
        break;
      }
      const std::int32_t token = static_cast<std::int32_t>(id.get<std::int64_t>());
      const std::uint64_t hash = tandem::ChainedBlockHash(parent, std::span(&token, 1));
      r.parents.push_back(parent);
      r.chain.push_back(hash);
      parent = hash;
    }
    if (!ok) {
      skip("\"hash_ids\" holds a value that is not a non-negative 32-bit integer");
      continue;
    }
    requests.push_back(std::move(r));
    if (max_requests != 0 && requests.size() == max_requests) break;
  }
  std::printf("trace: %zu requests from %zu lines (%zu skipped) of %s\n", requests.size(), line_no,
              skipped, path.c_str());
  return requests;
}

// Deterministic per-hash block: bf16 samples of N(0, 1), as KV activations roughly are.
void FillBlock(std::uint64_t hash, std::span<std::uint8_t> out) {
  std::uint64_t x = hash ^ 0x9E3779B97F4A7C15ull;
  auto next = [&x] {
    x += 0x9E3779B97F4A7C15ull;
    std::uint64_t z = x;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  };
  for (std::size_t i = 0; i + 1 < out.size(); i += 2) {
    // Sum of four uniforms: close enough to normal for byte statistics, and cheap.
    const std::uint64_t r = next();
    float v = 0;
    for (int k = 0; k < 4; ++k) v += static_cast<float>((r >> (16 * k)) & 0xFFFF) / 65536.0f;
    v = (v - 2.0f) * 1.7320508f;
    std::uint32_t bits;
    std::memcpy(&bits, &v, 4);
    out[i] = static_cast<std::uint8_t>((bits >> 16) & 0xFF);
    out[i + 1] = static_cast<std::uint8_t>(bits >> 24);
  }
}

// The engine's device cache, reduced to what matters here: LRU membership by block hash.
class DeviceLru {
 public:
  explicit DeviceLru(std::size_t capacity) : capacity_(capacity) {}
  bool Contains(std::uint64_t hash) const { return pos_.contains(hash); }
  // Inserts or refreshes; returns the (hash, parent) pairs evicted to make room.
  void Use(std::uint64_t hash, std::uint64_t parent,
           std::vector<std::pair<std::uint64_t, std::uint64_t>>* evicted) {
    if (auto it = pos_.find(hash); it != pos_.end()) {
      lru_.splice(lru_.end(), lru_, it->second);
      return;
    }
    if (capacity_ == 0) {
      evicted->emplace_back(hash, parent);
      return;
    }
    if (lru_.size() == capacity_) {
      evicted->push_back(lru_.front());
      pos_.erase(lru_.front().first);
      lru_.pop_front();
    }
    lru_.emplace_back(hash, parent);
    pos_[hash] = std::prev(lru_.end());
  }

 private:
  std::size_t capacity_;
  std::list<std::pair<std::uint64_t, std::uint64_t>> lru_;
  absl::flat_hash_map<std::uint64_t, std::list<std::pair<std::uint64_t, std::uint64_t>>::iterator>
      pos_;
};

void Check(const absl::Status& s, const char* what) {
  if (!s.ok()) {
    std::fprintf(stderr, "%s: %s\n", what, std::string(s.message()).c_str());
    std::exit(1);
  }
}

std::string MakeTempDir(const std::string& parent) {
  std::string pattern = parent + "/tandem_kv_bench_XXXXXX";
  if (mkdtemp(pattern.data()) == nullptr) Usage("cannot create a directory under " + parent);
  return pattern;
}

void Replay(const Flags& f, const std::vector<Request>& requests, const std::string& dir) {
  tandem::kv::FakeClock clock(1'700'000'000'000);
  tandem::kv::TieredKvStoreOptions options;
  options.host_capacity_bytes = f.host_blocks * f.block_bytes;
  options.disk_path = dir + "/replay_db";
  options.disk_capacity_bytes = f.disk_blocks * (f.block_bytes + 40);
  options.disk_compression = f.compression == "lz4" ? tandem::kv::DiskCompression::kLz4IfItPays
                                                    : tandem::kv::DiskCompression::kNone;
  options.demotion_rate_bytes_per_s = f.demotion_mb_s << 20;
  options.demotion_burst_bytes = std::max<std::uint64_t>(64ull << 20, 4 * f.block_bytes);
  options.clock = &clock;
  options.background_thread = false;
  auto store_or = tandem::kv::TieredKvStore::Open(options);
  Check(store_or.status(), "open store");
  auto& store = **store_or;

  DeviceLru device(f.device_blocks);
  absl::flat_hash_set<std::uint64_t> seen;  // infinite-capacity bound
  std::uint64_t blocks = 0, bound_hits = 0, device_hits = 0, host_hits = 0, disk_hits = 0;
  std::uint64_t wrong_bytes = 0, dropped = 0;
  std::vector<std::uint8_t> expected(f.block_bytes);
  std::vector<std::pair<std::uint64_t, std::uint64_t>> evicted;
  const std::int64_t start_ms = clock.NowUnixMs();
  const auto t0 = Steady::now();
  for (const Request& r : requests) {
    clock.Set(start_ms + r.timestamp_ms);
    const std::size_t n = r.chain.size();
    blocks += n;
    std::size_t seen_prefix = 0;
    while (seen_prefix < n && seen.contains(r.chain[seen_prefix])) ++seen_prefix;
    bound_hits += seen_prefix;
    for (std::uint64_t h : r.chain) seen.insert(h);

    std::size_t on_device = 0;
    while (on_device < n && device.Contains(r.chain[on_device])) ++on_device;
    device_hits += on_device;
    auto rest = std::span(r.chain).subspan(on_device);
    auto lookup = store.Lookup(TrafficClass::kChat, rest);
    Check(lookup.status(), "lookup");
    const std::size_t want = lookup->available_prefix;
    std::vector<std::vector<std::uint8_t>> buffers(want, std::vector<std::uint8_t>(f.block_bytes));
    std::vector<std::span<std::uint8_t>> spans(buffers.begin(), buffers.end());
    tandem::kv::FetchResult fetched = store.Fetch(TrafficClass::kChat, rest.first(want), spans).get();
    Check(fetched.status, "fetch");
    for (std::size_t i = 0; i < fetched.blocks_ready; ++i) {
      (lookup->tiers[i] == tandem::kv::KvTier::kHost ? host_hits : disk_hits) += 1;
      FillBlock(rest[i], expected);
      if (buffers[i] != expected) ++wrong_bytes;
    }
    evicted.clear();
    for (std::size_t i = 0; i < n; ++i) device.Use(r.chain[i], r.parents[i], &evicted);
    for (const auto& [hash, parent] : evicted) {
      FillBlock(hash, expected);
      auto put = store.Put(TrafficClass::kChat, hash, parent, expected);
      if (put.ok() && *put == tandem::kv::PutOutcome::kDroppedFull) ++dropped;
      if (!put.ok() && !absl::IsAlreadyExists(put.status())) Check(put.status(), "put");
    }
    Check(store.Step(), "step");
  }
  const double secs = std::chrono::duration<double>(Steady::now() - t0).count();
  const auto stats = store.Stats();
  auto pct = [blocks](std::uint64_t x) { return blocks ? 100.0 * x / blocks : 0.0; };
  std::printf("replay: %llu blocks of %zu bytes in %.1f s; device %zu, host %zu, disk %zu blocks\n",
              static_cast<unsigned long long>(blocks), f.block_bytes, secs, f.device_blocks,
              f.host_blocks, f.disk_blocks);
  std::printf("  hit rate  device %.2f%%  host %.2f%%  disk %.2f%%  total %.2f%%  (bound %.2f%%)\n",
              pct(device_hits), pct(host_hits), pct(disk_hits),
              pct(device_hits + host_hits + disk_hits), pct(bound_hits));
  std::printf("  host: demotions %llu evictions %llu dropped puts %llu; disk: blocks %llu "
              "evictions %llu corruptions %llu; promotions %llu, mean promotion latency %.1f us\n",
              static_cast<unsigned long long>(stats.host.demotions),
              static_cast<unsigned long long>(stats.host.evictions),
              static_cast<unsigned long long>(dropped),
              static_cast<unsigned long long>(stats.disk.blocks),
              static_cast<unsigned long long>(stats.disk.evictions),
              static_cast<unsigned long long>(stats.disk.corruptions),
              static_cast<unsigned long long>(stats.disk.promotions),
              stats.disk.promotions
                  ? static_cast<double>(stats.disk.promotion_latency_us_sum) / stats.disk.promotions
                  : 0.0);
  std::printf("  fetched blocks with wrong bytes: %llu (must be 0)\n",
              static_cast<unsigned long long>(wrong_bytes));
  if (wrong_bytes != 0) std::exit(1);
}

void DropPageCache(const std::string& path) {
  for (const auto& entry : fs::recursive_directory_iterator(path)) {
    if (!entry.is_regular_file()) continue;
    const int fd = ::open(entry.path().c_str(), O_RDONLY);
    if (fd < 0) continue;
    ::fdatasync(fd);
    ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    ::close(fd);
  }
}

double MbPerSec(std::uint64_t bytes, Steady::time_point start) {
  return static_cast<double>(bytes) / 1e6 /
         std::chrono::duration<double>(Steady::now() - start).count();
}

void Throughput(const Flags& f, const std::string& dir) {
  const std::size_t n = std::max<std::size_t>(1, (f.io_mb << 20) / f.block_bytes);
  const std::uint64_t total = static_cast<std::uint64_t>(n) * f.block_bytes;
  std::vector<std::uint8_t> data(total);
  for (std::size_t i = 0; i < n; ++i) {
    FillBlock(i + 1, std::span(data).subspan(i * f.block_bytes, f.block_bytes));
  }
  // Does LZ4 pay on float KV? Measured on the same blocks the throughput run writes.
  std::uint64_t lz4_bytes = 0;
  std::vector<char> scratch(LZ4_compressBound(static_cast<int>(f.block_bytes)));
  for (std::size_t i = 0; i < n; ++i) {
    lz4_bytes += LZ4_compress_default(reinterpret_cast<const char*>(&data[i * f.block_bytes]),
                                      scratch.data(), static_cast<int>(f.block_bytes),
                                      static_cast<int>(scratch.size()));
  }
  std::printf("lz4 on bf16 N(0,1) blocks: %.3f of the raw size (stored compressed only below "
              "0.875)\n",
              static_cast<double>(lz4_bytes) / total);

  tandem::kv::FakeClock clock(1'700'000'000'000);
  tandem::kv::EventLog events(16);
  tandem::kv::DiskTierOptions options;
  options.path = dir + "/io_db";
  options.capacity_bytes = total * 2;
  options.compression = f.compression == "lz4" ? tandem::kv::DiskCompression::kLz4IfItPays
                                               : tandem::kv::DiskCompression::kNone;
  double tier_write = 0, tier_read = 0;
  {
    auto tier_or = tandem::kv::DiskTier::Open(options, &clock, &events);
    Check(tier_or.status(), "open disk tier");
    auto& tier = **tier_or;
    auto start = Steady::now();
    for (std::size_t i = 0; i < n; ++i) {
      Check(tier.Put(BlockKey{TrafficClass::kChat, i + 1}, 0, clock.NowUnixMs() + 3'600'000,
                     std::span(data).subspan(i * f.block_bytes, f.block_bytes)),
            "disk put");
    }
    Check(tier.Sync(), "sync");
    tier_write = MbPerSec(total, start);
    DropPageCache(options.path);
    std::vector<std::uint8_t> out(f.block_bytes);
    start = Steady::now();
    for (std::size_t i = 0; i < n; ++i) {
      Check(tier.Read(BlockKey{TrafficClass::kChat, i + 1}, out), "disk read");
    }
    tier_read = MbPerSec(total, start);
    if (std::memcmp(out.data(), &data[(n - 1) * f.block_bytes], f.block_bytes) != 0) {
      Usage("disk tier read back different bytes");
    }
  }

  const std::string file = dir + "/plain.bin";
  const int fd = ::open(file.c_str(), O_CREAT | O_TRUNC | O_WRONLY, 0600);
  if (fd < 0) Usage("cannot create " + file);
  auto start = Steady::now();
  for (std::size_t i = 0; i < n; ++i) {
    if (::write(fd, &data[i * f.block_bytes], f.block_bytes) !=
        static_cast<ssize_t>(f.block_bytes)) {
      Usage("short write to " + file);
    }
  }
  ::fdatasync(fd);
  const double file_write = MbPerSec(total, start);
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  ::close(fd);
  const int rfd = ::open(file.c_str(), O_RDONLY);
  std::vector<std::uint8_t> out(f.block_bytes);
  start = Steady::now();
  for (std::size_t i = 0; i < n; ++i) {
    if (::read(rfd, out.data(), f.block_bytes) != static_cast<ssize_t>(f.block_bytes)) {
      Usage("short read from " + file);
    }
  }
  const double file_read = MbPerSec(total, start);
  ::close(rfd);
  std::printf("disk tier vs plain file, %zu blocks of %zu bytes (%.0f MB) in %s:\n", n,
              f.block_bytes, total / 1e6, dir.c_str());
  std::printf("  write+sync  tier %.0f MB/s  file %.0f MB/s  ratio %.2f\n", tier_write, file_write,
              tier_write / file_write);
  std::printf("  read        tier %.0f MB/s  file %.0f MB/s  ratio %.2f\n", tier_read, file_read,
              tier_read / file_read);
}

}  // namespace

int main(int argc, char** argv) {
  const Flags flags = ParseFlags(argc, argv);
  const std::vector<Request> requests = LoadTrace(flags.trace, flags.max_requests);
  const std::string dir = MakeTempDir(flags.dir);
  Replay(flags, requests, dir);
  Throughput(flags, dir);
  std::error_code ec;
  fs::remove_all(dir, ec);
  return 0;
}
