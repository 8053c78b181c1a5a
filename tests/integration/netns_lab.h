#pragma once

// Hosts for multi-host tests on one machine: Linux network namespaces the test creates itself,
// one per host, each with an `eth0` veth whose peer sits on a bridge in a namespace of its own
// (the "switch"). Addresses exist only inside the namespaces (10.77.0.0/24: the namespaces are
// private, so concurrent labs reuse it without colliding). Names carry the test process's pid
// and a counter, so parallel ctest runs never share a namespace, and a lab left behind by a test
// that crashed is deleted by the next one (its pid is gone).
//
// Faults a test can inject, on a host's link:
//   - SetLinkUp(host, false): the switch port goes down; the host's packets vanish silently, as
//     when a cable or a top-of-rack switch port fails (TCP retransmits, nothing is refused);
//   - CapBandwidth(host, rate): tbf in both directions (egress of the host's eth0 and of its
//     switch port). netem is not built into these machines' kernels.
//
// A thread of the test enters a host with InNetns: sockets keep the namespace they were created
// in, and threads the entered thread starts inherit it.

#include <fcntl.h>
#include <sched.h>
#include <sys/wait.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "child_process.h"

namespace tandem::testing {

struct CommandResult {
  int rc = -1;
  std::string output;  // stdout and stderr
};

// Runs `command` with /bin/sh; output captured.
inline CommandResult RunCommand(const std::string& command) {
  CommandResult r;
  FILE* f = ::popen((command + " 2>&1").c_str(), "r");
  if (f == nullptr) return r;
  char buf[4096];
  std::size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), f)) > 0) r.output.append(buf, n);
  const int status = ::pclose(f);
  r.rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

// Runs `fn` on a thread inside network namespace `ns` (and everything that thread starts).
// False if the namespace cannot be entered (fn did not run).
inline bool InNetns(const std::string& ns, const std::function<void()>& fn) {
  bool entered = false;
  std::thread t([&] {
    const int fd = ::open(("/var/run/netns/" + ns).c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return;
    entered = ::setns(fd, CLONE_NEWNET) == 0;
    ::close(fd);
    if (entered) fn();
  });
  t.join();
  return entered;
}

class NetnsLab {
 public:
  static constexpr const char* kPrefix = "tandemnt-";

  // Empty when namespaces can be created here; otherwise why not (the caller skips).
  static std::string Unavailable() {
    if (::geteuid() != 0) return "network namespaces need root (running as uid " +
                                 std::to_string(::geteuid()) + ")";
    if (RunCommand("command -v ip && command -v tc").rc != 0) {
      return "iproute2 (`ip`, `tc`) is not installed";
    }
    const std::string probe = std::string(kPrefix) + std::to_string(::getpid()) + "-probe";
    const CommandResult r = RunCommand("ip netns add " + probe);
    RunCommand("ip netns del " + probe);
    if (r.rc != 0) return "`ip netns add` failed: " + r.output;
    return "";
  }

  // Deletes namespaces of earlier labs whose process no longer exists.
  static void DeleteStale() {
    const CommandResult list = RunCommand("ip netns list");
    std::size_t pos = 0;
    while ((pos = list.output.find(kPrefix, pos)) != std::string::npos) {
      const std::size_t end = list.output.find_first_of(" \n", pos);
      const std::string name = list.output.substr(pos, end - pos);
      pos = end;
      const pid_t pid = std::atoi(name.c_str() + std::strlen(kPrefix));
      if (pid > 0 && ::kill(pid, 0) != 0 && errno == ESRCH) RunCommand("ip netns del " + name);
    }
  }

  NetnsLab() {
    static int counter = 0;
    prefix_ = std::string(kPrefix) + std::to_string(::getpid()) + "-" + std::to_string(counter++) + "-";
  }
  ~NetnsLab() { Destroy(); }
  NetnsLab(const NetnsLab&) = delete;
  NetnsLab& operator=(const NetnsLab&) = delete;

  // Creates the switch and one host per name, host i at 10.77.0.(i+1). Empty on success, else
  // the failing command and its output.
  std::string Create(const std::vector<std::string>& hosts) {
    if (std::string e = Cmd("ip netns add " + Ns("sw")); !e.empty()) return e;
    created_.push_back(Ns("sw"));
    for (const std::string& c : {"ip -n " + Ns("sw") + " link add br0 type bridge",
                                 "ip -n " + Ns("sw") + " link set br0 up"}) {
      if (std::string e = Cmd(c); !e.empty()) return e;
    }
    for (std::size_t i = 0; i < hosts.size(); ++i) {
      const std::string& h = hosts[i];
      const std::string ns = Ns(h);
      const std::string port = "p" + std::to_string(i + 1);
      const std::string ip = "10.77.0." + std::to_string(i + 1);
      if (std::string e = Cmd("ip netns add " + ns); !e.empty()) return e;
      created_.push_back(ns);
      for (const std::string& c :
           {"ip -n " + Ns("sw") + " link add " + port + " type veth peer name eth0 netns " + ns,
            "ip -n " + Ns("sw") + " link set " + port + " master br0 up",
            "ip -n " + ns + " addr add " + ip + "/24 dev eth0",
            "ip -n " + ns + " link set eth0 up", "ip -n " + ns + " link set lo up"}) {
        if (std::string e = Cmd(c); !e.empty()) return e;
      }
      hosts_[h] = Host{ns, ip, port};
    }
    return "";
  }

  void Destroy() {
    for (auto it = created_.rbegin(); it != created_.rend(); ++it) RunCommand("ip netns del " + *it);
    created_.clear();
    hosts_.clear();
  }

  const std::string& ns(const std::string& host) const { return hosts_.at(host).ns; }
  const std::string& ip(const std::string& host) const { return hosts_.at(host).ip; }

  // The command line prefix that runs a program on `host`.
  std::vector<std::string> Exec(const std::string& host) const {
    return {IpPath(), "netns", "exec", ns(host)};
  }

  // Takes the host's switch port down or up (the host keeps its address and sockets).
  std::string SetLinkUp(const std::string& host, bool up) {
    return Cmd("ip -n " + Ns("sw") + " link set " + hosts_.at(host).port + (up ? " up" : " down"));
  }

  // Token bucket in both directions of the host's link: `rate` in tc's syntax ("2mbit").
  // The queue holds 200 ms at the rate: a deep one (seconds) would hold heartbeats behind bulk
  // KV for longer than a lease, and the router would rightly take the worker for dead.
  std::string CapBandwidth(const std::string& host, const std::string& rate) {
    const std::string tbf = " root tbf rate " + rate + " burst 16kb latency 200ms";
    if (std::string e = Cmd("ip netns exec " + ns(host) + " tc qdisc replace dev eth0" + tbf);
        !e.empty()) {
      return e;
    }
    return Cmd("ip netns exec " + Ns("sw") + " tc qdisc replace dev " + hosts_.at(host).port + tbf);
  }
  std::string Uncap(const std::string& host) {
    RunCommand("ip netns exec " + ns(host) + " tc qdisc del dev eth0 root");
    RunCommand("ip netns exec " + Ns("sw") + " tc qdisc del dev " + hosts_.at(host).port + " root");
    return "";
  }

  static std::string IpPath() {
    for (const char* p : {"/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip", "/bin/ip"}) {
      if (::access(p, X_OK) == 0) return p;
    }
    return "ip";
  }

 private:
  struct Host {
    std::string ns, ip, port;
  };
  std::string Ns(const std::string& host) const { return prefix_ + host; }
  static std::string Cmd(const std::string& c) {
    const CommandResult r = RunCommand(c);
    return r.rc == 0 ? "" : c + ": " + r.output;
  }

  std::string prefix_;
  std::vector<std::string> created_;
  std::map<std::string, Host> hosts_;
};

}  // namespace tandem::testing
