#pragma once

// A gRPC server on an ephemeral loopback port for in-process tests of the worker's client side
// (fake RouterControl services).

#include <chrono>
#include <memory>
#include <string>

#include "grpcpp/server.h"
#include "grpcpp/server_builder.h"

namespace tandem::testing {

struct InProcessServer {
  explicit InProcessServer(grpc::Service* service) {
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    builder.RegisterService(service);
    server = builder.BuildAndStart();
  }
  ~InProcessServer() {
    server->Shutdown(std::chrono::system_clock::now() + std::chrono::milliseconds(200));
  }
  std::string address() const { return "127.0.0.1:" + std::to_string(port); }
  int port = 0;
  std::unique_ptr<grpc::Server> server;
};

}  // namespace tandem::testing
