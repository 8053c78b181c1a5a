#pragma once

// A real in-process gRPC Encoder server for router tests: EncodeImage answers a lease for
// `rows` rows and counts its calls; the rows themselves are never fetched by the router.
#include <atomic>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "grpcpp/server.h"
#include "grpcpp/server_builder.h"
#include "tandem/v1/encoder.grpc.pb.h"
#include "tandem/v1/router_control.pb.h"

namespace tandem::router::testing {

class FakeEncoder final : public v1::Encoder::Service {
 public:
  FakeEncoder(std::string id, std::uint32_t rows) : id_(std::move(id)), rows_(rows) {
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port_);
    builder.RegisterService(this);
    server_ = builder.BuildAndStart();
  }
  ~FakeEncoder() override { server_->Shutdown(std::chrono::system_clock::now()); }

  v1::WorkerInfo Info() const {
    v1::WorkerInfo info;
    info.set_worker_id(id_);
    info.set_role(v1::WORKER_ROLE_ENCODER);
    info.set_model("fake-model");
    info.set_grpc_endpoint(absl::StrCat("127.0.0.1:", port_));
    info.set_incarnation(1);
    return info;
  }
  int encode_calls() const { return encode_calls_.load(); }

  grpc::Status EncodeImage(grpc::ServerContext*, const v1::EncodeImageRequest*,
                           v1::EncodeImageResponse* response) override {
    const int n = ++encode_calls_;
    response->set_content_key("fake-key");
    response->set_lease_id(absl::StrCat(id_, "-lease-", n));
    response->set_rows(rows_);
    return grpc::Status::OK;
  }

 private:
  const std::string id_;
  const std::uint32_t rows_;
  int port_ = 0;
  std::unique_ptr<grpc::Server> server_;
  std::atomic<int> encode_calls_{0};
};

}  // namespace tandem::router::testing
