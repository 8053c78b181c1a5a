// `tandem-recipe parse`: generated text on stdin -> the protocol's final response or SSE events.
// First version: the parser is not wired in yet; it reports that plainly instead of guessing.

#include <cstdio>

int RunParse(int argc, char** argv);

int RunParse(int /*argc*/, char** /*argv*/) {
  std::fprintf(stderr, "tandem-recipe parse: not implemented yet\n");
  return 2;
}
