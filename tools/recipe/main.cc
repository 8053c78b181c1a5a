// tandem-recipe: the protocol layer (deepseek-recipe's behaviour in C++) on the command line, for
// inspection and for the differential tests against the Python package.
//
//   tandem-recipe render --encoding v4|v4.1 --protocol chat|responses|messages [--ids --tokenizer F]
//   tandem-recipe parse  --encoding v4|v4.1 --protocol ... --request FILE [--stream] ...
#include <cstdio>
#include <cstring>

#include "commands.h"

int main(int argc, char** argv) {
  if (argc >= 2 && std::strcmp(argv[1], "render") == 0) return RunRender(argc - 1, argv + 1);
  if (argc >= 2 && std::strcmp(argv[1], "parse") == 0) return RunParse(argc - 1, argv + 1);
  std::fprintf(stderr,
               "usage: tandem-recipe render --encoding v4|v4.1 --protocol chat|responses|messages "
               "[--jsonl] [--ids --tokenizer FILE]\n"
               "       tandem-recipe parse --encoding v4|v4.1 --protocol chat|responses|messages "
               "--request FILE [--stream] [--id ID] [--created N]\n");
  return 2;
}
