#pragma once

#include <ostream>

#include "absl/status/status.h"
#include "generate_options.h"

namespace tandem::generate {

// Loads the model and its tokenizer, generates one continuation and writes the text (prompt +
// continuation) and, with print_ids, the lines "prompt_ids: <ids>" and "output_ids: <ids>".
// The token that stopped generation (BOS for llama2.c, a stop id) is not part of output_ids,
// matching llama2.c's run.
absl::Status RunGenerate(const GenerateOptions& options, std::ostream& out);

}  // namespace tandem::generate
