#include "tandem/security/tls.h"

#include <openssl/bio.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <fstream>
#include <map>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/tls_certificate_provider.h"
#include "grpcpp/security/tls_credentials_options.h"

namespace tandem::security {
namespace {

constexpr unsigned kRefreshSeconds = 60;  // how often rotated files are picked up

absl::StatusOr<std::string> ReadFile(const std::string& path, const std::string& flag) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat(flag, ": cannot read ", path));
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

struct BioDeleter {
  void operator()(BIO* b) const { BIO_free(b); }
};
struct X509Deleter {
  void operator()(X509* x) const { X509_free(x); }
};
struct KeyDeleter {
  void operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); }
};

std::unique_ptr<BIO, BioDeleter> Bio(const std::string& pem) {
  return std::unique_ptr<BIO, BioDeleter>(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
}

// One file watcher per set of files for the whole process (each has a thread that re-reads the
// files): the router dials every worker with the same one. Loaded once when made, so the first
// handshake already has the certificates.
std::shared_ptr<grpc::experimental::CertificateProviderInterface> Provider(const TlsConfig& c) {
  static absl::Mutex mu(absl::kConstInit);
  static auto* providers = new std::map<
      std::string, std::shared_ptr<grpc::experimental::CertificateProviderInterface>>();
  const std::string id = absl::StrCat(c.cert_file, "\n", c.key_file, "\n", c.ca_file);
  absl::MutexLock lock(&mu);
  auto& provider = (*providers)[id];
  if (provider == nullptr) {
    provider = std::make_shared<grpc::experimental::FileWatcherCertificateProvider>(
        c.key_file, c.cert_file, c.ca_file, kRefreshSeconds);
  }
  return provider;
}

}  // namespace

absl::Status ValidateTls(const TlsConfig& c, const std::string& p) {
  if (!c.enabled()) {
    if (c.required) {
      return absl::InvalidArgumentError(absl::StrCat(
          p, "-required needs ", p, "-cert, ", p, "-key and ", p, "-ca"));
    }
    return absl::OkStatus();
  }
  if (c.cert_file.empty() || c.key_file.empty() || c.ca_file.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(p, "-cert, ", p, "-key and ", p, "-ca go together (mutual TLS)"));
  }
  auto cert_pem = ReadFile(c.cert_file, p + "-cert");
  if (!cert_pem.ok()) return cert_pem.status();
  auto key_pem = ReadFile(c.key_file, p + "-key");
  if (!key_pem.ok()) return key_pem.status();
  auto ca_pem = ReadFile(c.ca_file, p + "-ca");
  if (!ca_pem.ok()) return ca_pem.status();
  std::unique_ptr<X509, X509Deleter> cert(
      PEM_read_bio_X509(Bio(*cert_pem).get(), nullptr, nullptr, nullptr));
  if (cert == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(p, "-cert: ", c.cert_file, " holds no PEM certificate"));
  }
  std::unique_ptr<EVP_PKEY, KeyDeleter> key(
      PEM_read_bio_PrivateKey(Bio(*key_pem).get(), nullptr, nullptr, nullptr));
  if (key == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat(p, "-key: ", c.key_file, " holds no unencrypted PEM private key"));
  }
  if (X509_check_private_key(cert.get(), key.get()) != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(p, "-key: ", c.key_file, " is not the key of ", c.cert_file));
  }
  std::unique_ptr<X509, X509Deleter> ca(
      PEM_read_bio_X509(Bio(*ca_pem).get(), nullptr, nullptr, nullptr));
  if (ca == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(p, "-ca: ", c.ca_file, " holds no PEM certificate"));
  }
  return absl::OkStatus();
}

std::shared_ptr<grpc::ServerCredentials> ServerCredentials(const TlsConfig& c) {
  if (!c.enabled()) return grpc::InsecureServerCredentials();
  grpc::experimental::TlsServerCredentialsOptions options(Provider(c));
  options.watch_root_certs();
  options.watch_identity_key_cert_pairs();
  options.set_cert_request_type(GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  return grpc::experimental::TlsServerCredentials(options);
}

std::shared_ptr<grpc::ChannelCredentials> ChannelCredentials(const TlsConfig& c) {
  if (!c.enabled()) return grpc::InsecureChannelCredentials();
  grpc::experimental::TlsChannelCredentialsOptions options;
  options.set_certificate_provider(Provider(c));
  options.watch_root_certs();
  options.watch_identity_key_cert_pairs();
  options.set_verify_server_certs(true);
  return grpc::experimental::TlsCredentials(options);
}

grpc::ChannelArguments ChannelArguments(const TlsConfig& c) {
  grpc::ChannelArguments args;
  if (c.enabled() && !c.server_name.empty()) args.SetSslTargetNameOverride(c.server_name);
  return args;
}

std::shared_ptr<grpc::Channel> CreateChannel(const std::string& address, const TlsConfig& c) {
  return grpc::CreateCustomChannel(address, ChannelCredentials(c), ChannelArguments(c));
}

void BindTlsFlags(config::FlagSet* f, TlsConfig* tls, const std::string& env_prefix) {
  f->String("tls-cert", &tls->cert_file,
            "PEM certificate of this process for the control plane (mutual TLS with --tls-key and "
            "--tls-ca: every gRPC server then requires a client certificate the CA signed, every "
            "channel presents this one). Re-read when the file changes",
            env_prefix + "TLS_CERT");
  f->String("tls-key", &tls->key_file, "PEM private key of --tls-cert", env_prefix + "TLS_KEY");
  f->String("tls-ca", &tls->ca_file, "PEM CA bundle peers' certificates must chain to",
            env_prefix + "TLS_CA");
  f->Bool("tls-required", &tls->required,
          "refuse to start without --tls-cert, --tls-key and --tls-ca (no plaintext control plane)",
          env_prefix + "TLS_REQUIRED");
  f->String("tls-server-name", &tls->server_name,
            "name the servers this process dials must have in their certificates (default: the "
            "host dialled); lets one certificate name serve pods with changing addresses",
            env_prefix + "TLS_SERVER_NAME");
}

}  // namespace tandem::security
