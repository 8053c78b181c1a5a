#include "router_app.h"

int main(int argc, char** argv) { return tandem::router::RunRouterMain(argc, argv); }
