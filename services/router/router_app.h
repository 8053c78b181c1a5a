#pragma once

namespace tandem::router {

// The life of the tandem-router process: flags, tokenizer, servers, port file, and a graceful
// stop on SIGINT/SIGTERM.
int RunRouterMain(int argc, char** argv);

}  // namespace tandem::router
