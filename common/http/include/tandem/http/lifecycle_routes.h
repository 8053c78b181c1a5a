#pragma once

#include <functional>
#include <optional>
#include <string>

#include "tandem/http/router.h"

namespace tandem::http {

// A worker process's lifecycle endpoints, as Kubernetes probes and drains it:
//   GET /live, /health  200 whenever the process answers (during a drain too: a process
//                       finishing its work must not be restarted); /health is the older name;
//   GET /ready          200 "ready", or 503 with the reason `not_ready` returns;
//   GET, POST /drain    calls `drain`, then 200 "draining" (GET too: a Kubernetes httpGet
//                       preStop hook can only GET). Idempotent as `drain` is.
void AddLifecycleRoutes(Router& routes, std::function<std::optional<std::string>()> not_ready,
                        std::function<void()> drain);

}  // namespace tandem::http
