// tandem-generate: offline generation from the command line. Wiring only; see generate.h.
#include <iostream>

#include "generate.h"
#include "generate_options.h"

int main(int argc, char** argv) {
  auto parsed = tandem::generate::ParseCommandLine(argc, argv, tandem::config::ProcessEnv());
  if (!parsed.ok()) {
    std::cerr << "tandem-generate: " << parsed.status().message() << "\n";
    return 2;
  }
  if (parsed->help) {
    std::cout << parsed->help_text;
    return 0;
  }
  if (absl::Status st = tandem::generate::RunGenerate(parsed->options, std::cout); !st.ok()) {
    std::cerr << "tandem-generate: " << st << "\n";
    return 1;
  }
  return 0;
}
