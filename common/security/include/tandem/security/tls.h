#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/support/channel_arguments.h"
#include "tandem/config/flags.h"

namespace tandem::security {

// Mutual TLS of the control plane (router <-> workers), from PEM files. With the three files
// every gRPC server of the process requires a client certificate signed by `ca_file` and every
// channel presents `cert_file` and accepts only servers whose certificate `ca_file` signed (and
// whose name matches the address dialled, or `server_name`). Files are re-read when they change
// (certificate rotation without a restart).
struct TlsConfig {
  std::string cert_file;    // this process's certificate chain (PEM)
  std::string key_file;     // its private key (PEM)
  std::string ca_file;      // the CA bundle peers must be signed by (PEM)
  bool required = false;    // refuse to start without the three files
  std::string server_name;  // name expected in servers' certificates; empty: the dialled host

  bool enabled() const { return !cert_file.empty() || !key_file.empty() || !ca_file.empty(); }
};

// All three files or none; readable PEM; the key matches the certificate; `required` has files.
// `flag_prefix` names the flags in errors ("--tls").
absl::Status ValidateTls(const TlsConfig& config, const std::string& flag_prefix = "--tls");

// --tls-cert, --tls-key, --tls-ca, --tls-required, --tls-server-name, each with the variable
// `env_prefix` + TLS_CERT, ...: the same flags on the router and every worker.
void BindTlsFlags(config::FlagSet* flags, TlsConfig* tls, const std::string& env_prefix);

// Insecure credentials when TLS is off.
std::shared_ptr<grpc::ServerCredentials> ServerCredentials(const TlsConfig& config);
std::shared_ptr<grpc::ChannelCredentials> ChannelCredentials(const TlsConfig& config);
// Channel arguments that go with ChannelCredentials (the expected server name).
grpc::ChannelArguments ChannelArguments(const TlsConfig& config);
// A channel to `address` with both.
std::shared_ptr<grpc::Channel> CreateChannel(const std::string& address, const TlsConfig& config);

}  // namespace tandem::security
