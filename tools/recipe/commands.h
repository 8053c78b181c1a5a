#pragma once

// The subcommands of `tandem-recipe`; each takes the arguments after its name (argv[0] is the
// subcommand) and returns the process exit status: 0 success, 1 a request or input the protocol
// rejects (its error body on stdout, the HTTP status on stderr), 2 a usage error.

int RunRender(int argc, char** argv);
int RunParse(int argc, char** argv);
int RunImage(int argc, char** argv);
