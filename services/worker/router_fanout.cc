#include "router_fanout.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <sys/socket.h>

#include <future>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "grpcpp/create_channel.h"
#include "tandem/config/service_main.h"

namespace tandem::worker {

RouterFanout::RouterFanout(RouterFanoutOptions options, RunOnEngine run_on_engine)
    : options_(std::move(options)), run_on_engine_(std::move(run_on_engine)) {}

void RouterFanout::Start() {
  Sync(Resolve());  // the first routers are joined before Start returns
  thread_ = std::thread([this] { Run(); });
}

void RouterFanout::StopResolving() {
  {
    std::lock_guard<std::mutex> lock(stop_mu_);
    stopping_ = true;
  }
  stop_cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

RouterFanout::~RouterFanout() { Shutdown(); }

void RouterFanout::Shutdown() {
  StopResolving();
  std::map<std::string, std::shared_ptr<Peer>> peers;
  {
    std::lock_guard<std::mutex> lock(mu_);
    peers.swap(peers_);
  }
  // Each peer stops its heartbeats, then its KV stream (Peer's member order), outside the lock.
}

std::map<std::string, std::set<std::string>> RouterFanout::ResolveAll(const std::string& routers) {
  std::map<std::string, std::set<std::string>> out;
  for (absl::string_view part : absl::StrSplit(routers, ',', absl::SkipWhitespace())) {
    const std::string spec(absl::StripAsciiWhitespace(part));
    auto hp = config::ParseHostPort("router", spec);
    if (!hp.ok()) continue;
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* found = nullptr;
    if (getaddrinfo(hp->host.c_str(), std::to_string(hp->port).c_str(), &hints, &found) != 0) {
      continue;
    }
    std::set<std::string> v4, v6;
    for (addrinfo* a = found; a != nullptr; a = a->ai_next) {
      char text[INET6_ADDRSTRLEN] = {};
      if (a->ai_family == AF_INET) {
        inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(a->ai_addr)->sin_addr, text, sizeof text);
        v4.insert(absl::StrCat(text, ":", hp->port));
      } else if (a->ai_family == AF_INET6) {
        inet_ntop(AF_INET6, &reinterpret_cast<sockaddr_in6*>(a->ai_addr)->sin6_addr, text,
                  sizeof text);
        v6.insert(absl::StrCat("[", text, "]:", hp->port));
      }
    }
    freeaddrinfo(found);
    // One family only: a router reachable over both (localhost, a dual-stack pod) would otherwise
    // be joined twice, with two KV streams for one worker.
    out[spec] = v4.empty() ? v6 : v4;
  }
  return out;
}

std::set<std::string> RouterFanout::Resolve() {
  if (options_.resolve) return options_.resolve();
  std::map<std::string, std::set<std::string>> now = ResolveAll(options_.routers);
  std::set<std::string> all;
  for (absl::string_view part : absl::StrSplit(options_.routers, ',', absl::SkipWhitespace())) {
    const std::string spec(absl::StripAsciiWhitespace(part));
    auto it = now.find(spec);
    // A failed lookup (a DNS hiccup) keeps the routers we had: leaving them would deregister
    // nothing but drop their KV streams and registrations for no reason.
    if (it == now.end()) {
      auto last = last_resolved_.find(spec);
      if (last != last_resolved_.end()) all.insert(last->second.begin(), last->second.end());
      continue;
    }
    last_resolved_[spec] = it->second;
    all.insert(it->second.begin(), it->second.end());
  }
  return all;
}

void RouterFanout::Sync(const std::set<std::string>& addresses) {
  std::vector<std::shared_ptr<Peer>> gone;
  std::vector<std::string> added;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto it = peers_.begin(); it != peers_.end();) {
      if (addresses.count(it->first) == 0) {
        gone.push_back(std::move(it->second));
        it = peers_.erase(it);
      } else {
        ++it;
      }
    }
    for (const std::string& a : addresses) {
      if (peers_.count(a) == 0) added.push_back(a);
    }
  }
  gone.clear();  // a router pod that went away: its link and stream stop (threads joined here)
  for (const std::string& address : added) {
    auto peer = std::make_shared<Peer>();
    KvEventPublisherOptions popts = options_.publisher;
    run_on_engine_([&] {
      std::lock_guard<std::mutex> lock(mu_);
      popts.initial_device_blocks.assign(device_.begin(), device_.end());
      peer->publisher = std::make_unique<KvEventPublisher>(
          security::CreateChannel(address, options_.tls), popts, options_.store);
      peers_[address] = peer;
    });
    RouterLink::KvSync sync;
    KvEventPublisher* publisher = peer->publisher.get();
    sync.last_event_seq = [publisher] { return publisher->last_sent_seq(); };
    sync.resend_snapshot = [publisher] { publisher->RequestSnapshot(); };
    auto link = std::make_unique<RouterLink>(address, options_.info, options_.heartbeat_ms,
                                             options_.load, std::move(sync), options_.tls);
    std::lock_guard<std::mutex> lock(mu_);
    peer->link = std::move(link);
  }
}

void RouterFanout::Run() {
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(stop_mu_);
      if (stop_cv_.wait_for(lock, options_.resolve_interval, [&] { return stopping_; })) return;
    }
    Sync(Resolve());
  }
}

void RouterFanout::OnDeviceEvent(const engine::KvCacheEvent& event) {
  std::lock_guard<std::mutex> lock(mu_);
  if (event.kind == engine::KvCacheEvent::Kind::kStored) {
    ++device_[event.block_hash];
  } else if (auto it = device_.find(event.block_hash); it != device_.end() && --it->second <= 0) {
    device_.erase(it);
  }
  for (auto& [address, peer] : peers_) {
    if (peer->publisher != nullptr) peer->publisher->OnDeviceEvent(event);
  }
}

bool RouterFanout::registered() const { return registered_routers() > 0; }

int RouterFanout::routers() const {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<int>(peers_.size());
}

int RouterFanout::registered_routers() const {
  std::lock_guard<std::mutex> lock(mu_);
  int n = 0;
  for (const auto& [address, peer] : peers_) n += peer->link != nullptr && peer->link->registered();
  return n;
}

void RouterFanout::HeartbeatNow() {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& [address, peer] : peers_) {
    if (peer->link != nullptr) peer->link->HeartbeatNow();
  }
}

int RouterFanout::Deregister(const std::string& reason) {
  StopResolving();  // no router joins after this
  std::vector<std::shared_ptr<Peer>> peers;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [address, peer] : peers_) peers.push_back(peer);
  }
  // In parallel: each call waits up to its own deadline, and a drain should not pay them in turn.
  std::vector<std::future<bool>> calls;
  for (auto& peer : peers) {
    if (peer->link == nullptr) continue;
    calls.push_back(std::async(std::launch::async,
                               [link = peer->link.get(), &reason] { return link->Deregister(reason); }));
  }
  int accepted = 0;
  for (auto& call : calls) accepted += call.get();
  return accepted;
}

KvEventPublisherStats RouterFanout::publisher_stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  KvEventPublisherStats sum;
  for (const auto& [address, peer] : peers_) {
    if (peer->publisher == nullptr) continue;
    const KvEventPublisherStats s = peer->publisher->stats();
    sum.events_sent += s.events_sent;
    sum.snapshots_sent += s.snapshots_sent;
    sum.events_dropped += s.events_dropped;
    sum.streams_opened += s.streams_opened;
    sum.pending_events += s.pending_events;
  }
  return sum;
}

}  // namespace tandem::worker
