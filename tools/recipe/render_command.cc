// `tandem-recipe render`: placeholder until the renderer lands.
#include <cstdio>

#include "commands.h"

int RunRender(int /*argc*/, char** /*argv*/) {
  std::fprintf(stderr, "tandem-recipe render: not implemented yet\n");
  return 2;
}
