#pragma once

#include <string>

#include "tandem/config/flags.h"
#include "tandem/security/tls.h"

namespace tandem::encoder {

struct EncoderConfig {
  std::string model;               // the vision tower's directory (config.json + safetensors)
  std::string served_model_name;   // the text model it serves images for (the router's name)
  std::string listen = "0.0.0.0:0";
  std::string advertise_host = "127.0.0.1";
  std::string router;              // router control address; empty: standalone
  std::string worker_id;
  std::string metrics_listen;
  std::string port_file;
  int threads = 0;
  std::string cpu_isa = "auto";    // kernels::ParseCpuIsa
  int cache_mb = 2048;             // rows kept for reuse (byte-bounded LRU)
  int lease_ms = 30000;            // default pin time for a prefill to fetch the rows
  int max_concurrent_encodes = 1;  // tower runs at once (each uses every compute thread)
  int max_waiting_encodes = 64;    // past this, new images are refused so the router goes elsewhere
  int max_image_mb = 32;
  int heartbeat_ms = 1000;
  int drain_timeout_ms = 25000;
  std::string generation;
  security::TlsConfig tls;
};

void BindEncoderFlags(config::FlagSet* f, EncoderConfig* c);

}  // namespace tandem::encoder
