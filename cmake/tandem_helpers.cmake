# tandem_test(NAME SOURCES... LIBS ... [LABELS ...])
function(tandem_test name)
  cmake_parse_arguments(T "" "" "SOURCES;LIBS;LABELS" ${ARGN})
  add_executable(${name} ${T_SOURCES})
  target_link_libraries(${name} PRIVATE ${T_LIBS} GTest::gtest GTest::gtest_main GTest::gmock)
  target_compile_definitions(${name} PRIVATE
    TANDEM_SHARED_DIR="${TANDEM_SHARED_DIR}"
    TANDEM_SOURCE_DIR="${TANDEM_SOURCE_DIR}")
  include(GoogleTest)
  gtest_discover_tests(${name} DISCOVERY_TIMEOUT 60 PROPERTIES LABELS "${T_LABELS};unit" TIMEOUT 300)
endfunction()
