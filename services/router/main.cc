#include "router_app.h"
#include "tandem/base/process.h"

int main(int argc, char** argv) {
  tandem::base::ConfigureServingProcess();
  return tandem::router::RunRouterMain(argc, argv);
}
