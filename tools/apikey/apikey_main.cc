// tandem-apikey: makes an API key for the router's --api-keys-file.
//
//   tandem-apikey --tenant acme --requests-per-minute 600 >> keys.jsonl 2> acme.key
//
// stdout: the file line (the key's SHA-256, tenant, class, limits), to append to the keys file;
// stderr: the key itself, the only time it exists in plain text: hand it to the client. With
// --stdin the key is read from standard input instead (importing a key made elsewhere).
#include <iostream>
#include <string>

#include "absl/strings/ascii.h"
#include "tandem/config/flags.h"
#include "tandem/security/api_keys.h"
#include "tandem/security/digest.h"

int main(int argc, char** argv) {
  using tandem::security::ApiKey;
  ApiKey entry;
  bool from_stdin = false;
  std::string prefix = "tdm-";
  tandem::config::FlagSet flags(
      "tandem-apikey",
      "Makes a random API key (256 bits), prints its --api-keys-file line on stdout and the key "
      "on stderr. The router then reloads the file on SIGHUP.");
  flags.String("tenant", &entry.tenant, "tenant the key belongs to (1-64 of A-Za-z0-9._-)");
  flags.String("traffic-class", &entry.traffic_class, "chat or agent (KV retention); empty: default");
  flags.Int64("requests-per-minute", &entry.limits.requests_per_minute, "per-key limit (0: none)");
  flags.Int64("tokens-per-minute", &entry.limits.tokens_per_minute,
              "per-key limit on prompt + max completion tokens (0: none)");
  flags.Int64("concurrent-streams", &entry.limits.concurrent_streams,
              "per-key limit on generations in progress (0: none)");
  flags.String("prefix", &prefix, "text the key starts with (lets secret scanners find leaks)");
  flags.Bool("stdin", &from_stdin, "hash the key given on stdin instead of making one");
  if (absl::Status st = flags.Parse(argc, argv, tandem::config::ProcessEnv()); !st.ok()) {
    std::cerr << "error: " << st.message() << "\n";
    return 2;
  }
  if (flags.help_requested()) {
    std::cout << flags.Help();
    return 0;
  }
  if (!tandem::security::ValidTenantName(entry.tenant)) {
    std::cerr << "error: --tenant must be 1-64 characters of A-Za-z0-9._-\n";
    return 2;
  }
  if (!entry.traffic_class.empty() && entry.traffic_class != "chat" &&
      entry.traffic_class != "agent") {
    std::cerr << "error: --traffic-class must be chat or agent\n";
    return 2;
  }
  if (entry.limits.requests_per_minute < 0 || entry.limits.tokens_per_minute < 0 ||
      entry.limits.concurrent_streams < 0) {
    std::cerr << "error: limits must not be negative\n";
    return 2;
  }
  std::string key;
  if (from_stdin) {
    std::getline(std::cin, key);
    key = std::string(absl::StripAsciiWhitespace(key));
    if (key.empty()) {
      std::cerr << "error: no key on stdin\n";
      return 2;
    }
  } else {
    key = prefix + tandem::security::Base64Url(tandem::security::RandomBytes(32));
  }
  std::cout << tandem::security::ApiKeySet::FileLine(key, entry) << std::endl;
  if (!from_stdin) std::cerr << key << std::endl;
  return 0;
}
