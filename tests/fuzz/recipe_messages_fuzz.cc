// A messages request body as the router receives it (see recipe_request.h).
#include "fuzz_util.h"
#include "recipe_request.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  tandem::fuzz::FuzzProtocolRequest(tandem::recipe::Protocol::kMessages, tandem::fuzz::AsText(data, size));
  return 0;
}
