// UCX listens for KV peers only on the ports it is given, so that a network
// policy can open exactly those to the workers (UCX accepts any peer that
// reaches a listening port).
#include <dirent.h>
#include <unistd.h>

#include <cstdint>
#include <fstream>
#include <random>
#include <set>
#include <sstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "tandem/transport/ucx_agent.h"
#include "gtest/gtest.h"

namespace tandem::transport {
namespace {

std::set<std::uint64_t> OwnSocketInodes() {
  std::set<std::uint64_t> inodes;
  DIR *dir = opendir("/proc/self/fd");
  if (dir == nullptr)
    return inodes;
  while (dirent *entry = readdir(dir)) {
    char target[256];
    const std::string path = absl::StrCat("/proc/self/fd/", entry->d_name);
    const ssize_t n = readlink(path.c_str(), target, sizeof(target) - 1);
    if (n <= 0)
      continue;
    target[n] = '\0';
    unsigned long long inode = 0;
    if (std::sscanf(target, "socket:[%llu]", &inode) == 1)
      inodes.insert(inode);
  }
  closedir(dir);
  return inodes;
}

// TCP ports this process listens on (IPv4 and IPv6).
std::set<int> OwnListeningPorts() {
  const std::set<std::uint64_t> own = OwnSocketInodes();
  std::set<int> ports;
  for (const char *table : {"/proc/self/net/tcp", "/proc/self/net/tcp6"}) {
    std::ifstream in(table);
    std::string line;
    std::getline(in, line); // header
    while (std::getline(in, line)) {
      std::istringstream fields(line);
      std::string slot, local, remote, state, queues, timer, retransmits, uid,
          timeout;
      std::uint64_t inode = 0;
      fields >> slot >> local >> remote >> state >> queues >> timer >>
          retransmits >> uid >> timeout >> inode;
      if (state != "0A" || !own.contains(inode))
        continue; // 0A: LISTEN
      ports.insert(std::stoi(local.substr(local.find(':') + 1), nullptr, 16));
    }
  }
  return ports;
}

TEST(UcxPortRangeTest, TheTcpTransportListensOnlyInsideTheRange) {
  // A random window, so that concurrent test runs rarely collide on a busy one.
  std::mt19937 rng(std::random_device{}());
  const int lo = 40000 + static_cast<int>(rng() % 2000) * 10;
  const int hi = lo + 9;
  const std::set<int> before = OwnListeningPorts();
  auto agent = CreateUcxAgent(
      {.transports = "tcp", .tcp_port_range = absl::StrCat(lo, "-", hi)});
  ASSERT_TRUE(agent.ok()) << agent.status();
  std::set<int> opened;
  for (int port : OwnListeningPorts()) {
    if (!before.contains(port))
      opened.insert(port);
  }
  ASSERT_FALSE(opened.empty())
      << "the TCP transport opened no listening socket";
  for (int port : opened) {
    EXPECT_GE(port, lo);
    EXPECT_LE(port, hi);
  }
}

TEST(UcxPortRangeTest, KvStillFlowsBetweenAgentsConfinedToRanges) {
  std::mt19937 rng(std::random_device{}());
  const int lo = 44000 + static_cast<int>(rng() % 1000) * 10;
  const std::string range = absl::StrCat(lo, "-", lo + 9);
  auto receiver =
      CreateUcxAgent({.transports = "tcp", .tcp_port_range = range});
  ASSERT_TRUE(receiver.ok()) << receiver.status();
  auto sender = CreateUcxAgent({.transports = "tcp", .tcp_port_range = range});
  ASSERT_TRUE(sender.ok()) << sender.status();

  std::vector<std::uint8_t> pool(4096, 0);
  std::uint64_t flag = 0;
  auto pool_reg = (*receiver)->RegisterMemory(pool.data(), pool.size());
  ASSERT_TRUE(pool_reg.ok()) << pool_reg.status();
  auto flag_reg = (*receiver)->RegisterMemory(&flag, sizeof(flag));
  ASSERT_TRUE(flag_reg.ok()) << flag_reg.status();

  std::vector<std::uint8_t> source(pool.size());
  for (std::size_t i = 0; i < source.size(); ++i)
    source[i] = static_cast<std::uint8_t>(i * 7 + 1);
  const std::uint64_t flag_value = 0x5eed;
  GatedWrite write;
  write.peer_address = (*receiver)->local_address();
  write.regions = {(*pool_reg)->descriptor(), (*flag_reg)->descriptor()};
  write.data.push_back(
      {source.data(), source.size(), 0, write.regions[0].base});
  write.flags.push_back(
      {&flag_value, sizeof(flag_value), 1, write.regions[1].base});
  auto id = (*sender)->StartGatedWrite(write);
  ASSERT_TRUE(id.ok()) << id.status();
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::seconds(20);
  TransferStatus status;
  while ((status = (*sender)->Poll(*id)).state == TransferState::kInProgress &&
         std::chrono::steady_clock::now() < deadline) {
    (*receiver)->Progress();
  }
  ASSERT_EQ(status.state, TransferState::kDone) << status.cause;
  (*sender)->Release(*id);
  EXPECT_EQ(pool, source);
  EXPECT_EQ(flag, flag_value);
}

TEST(UcxPortRangeTest, MalformedRangesAreRefusedAtStartup) {
  EXPECT_TRUE(ValidatePortRange("").ok());
  EXPECT_TRUE(ValidatePortRange("7000-7099").ok());
  EXPECT_TRUE(ValidatePortRange("7000-7000").ok());
  for (const char *bad : {"7000", "7099-7000", "0-10", "1-70000", "a-b",
                          "7000-", "-7000", "7000-7099-7100", " 7000-7099"}) {
    EXPECT_FALSE(ValidatePortRange(bad).ok()) << bad;
    EXPECT_FALSE(
        CreateUcxAgent({.transports = "tcp", .tcp_port_range = bad}).ok())
        << bad;
  }
}

} // namespace
} // namespace tandem::transport
