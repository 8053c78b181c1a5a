// tandem-recipe: the protocol layer (deepseek-recipe's behaviour in C++) on the command line, for
// inspection and for the differential tests against the Python package.
//
//   tandem-recipe render --encoding v4|v4.1 --protocol chat|responses|messages [--ids --tokenizer F]
//   tandem-recipe parse  --encoding v4|v4.1 --protocol ... --request FILE [--stream] ...
//   tandem-recipe image  --encoding v4.1 --detail low|high|original|auto FILE...
#include <cstdio>
#include <cstring>

#include "commands.h"

int main(int argc, char** argv) {
  if (argc >= 2 && std::strcmp(argv[1], "render") == 0) return RunRender(argc - 1, argv + 1);
  if (argc >= 2 && std::strcmp(argv[1], "parse") == 0) return RunParse(argc - 1, argv + 1);
  if (argc >= 2 && std::strcmp(argv[1], "image") == 0) return RunImage(argc - 1, argv + 1);
  std::fprintf(stderr,
               "usage: tandem-recipe render --encoding v4|v4.1 --protocol chat|responses|messages "
               "[--jsonl] [--ids --tokenizer FILE]\n"
               "       tandem-recipe parse --encoding v4|v4.1 --protocol chat|responses|messages "
               "--request FILE [--stream] [--id ID] [--created N]\n"
               "       tandem-recipe image --encoding v4.1 --detail low|high|original|auto FILE...\n");
  return 2;
}
