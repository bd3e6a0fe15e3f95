# Shared build helpers: one library target per module, one test binary per module.

set(INGOT_WARNINGS -Wall -Wextra -Wno-unused-parameter -Wno-missing-field-initializers)
if(INGOT_WERROR)
  list(APPEND INGOT_WARNINGS -Werror)
endif()

if(INGOT_SANITIZE)
  # Any finding stops the test that hit it (no report-and-continue).
  add_compile_options(-fsanitize=${INGOT_SANITIZE} -fno-omit-frame-pointer -fno-sanitize-recover=all)
  add_link_options(-fsanitize=${INGOT_SANITIZE} -fno-sanitize-recover=all)
endif()
# Sanitizer builds run at -O0 to halve their build on two cores; these modules' tests
# spend minutes in tight loops there (vocabulary masks, tokenizer corpora, Whisper
# decoding), so they build at -O1, where ASan and UBSan check exactly as much.
set(INGOT_SANITIZE_O1_MODULES grammar tokenizer template speech backend_cpu)
if(INGOT_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID MATCHES "Clang")
    message(FATAL_ERROR "INGOT_FUZZ needs clang (libFuzzer)")
  endif()
  # Coverage for the fuzzer in every library; only fuzz/ targets link its main().
  add_compile_options(-fsanitize=fuzzer-no-link)
endif()

# ingot_module(NAME SOURCES a.cpp b.cpp DEPS other_module ...)
function(ingot_module name)
  cmake_parse_arguments(M "" "" "SOURCES;DEPS;PRIVATE_DEPS" ${ARGN})
  add_library(ingot_${name} STATIC ${M_SOURCES})
  target_include_directories(ingot_${name} PUBLIC ${CMAKE_SOURCE_DIR}/src ${CMAKE_SOURCE_DIR}/include)
  target_compile_options(ingot_${name} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:${INGOT_WARNINGS}>)
  target_link_libraries(ingot_${name} PUBLIC ${M_DEPS} PRIVATE ${M_PRIVATE_DEPS})
  if(INGOT_SANITIZE AND name IN_LIST INGOT_SANITIZE_O1_MODULES)
    target_compile_options(ingot_${name} PRIVATE -O1)
  endif()
endfunction()

# ingot_test(NAME SOURCES t.cpp DEPS ingot_x [LABELS gpu])
function(ingot_test name)
  cmake_parse_arguments(T "" "" "SOURCES;DEPS;LABELS" ${ARGN})
  add_executable(test_${name} ${T_SOURCES})
  target_compile_options(test_${name} PRIVATE ${INGOT_WARNINGS})
  target_compile_definitions(test_${name} PRIVATE
    INGOT_SHARED_DIR="${INGOT_SHARED_DIR}" INGOT_SOURCE_DIR="${CMAKE_SOURCE_DIR}"
    INGOT_BINARY_DIR="${CMAKE_BINARY_DIR}")
  target_link_libraries(test_${name} PRIVATE ${T_DEPS} ingot_test_main GTest::gtest Threads::Threads)
  add_test(NAME ${name} COMMAND test_${name})
  set_tests_properties(${name} PROPERTIES TIMEOUT 900)
  if(T_LABELS)
    set_tests_properties(${name} PROPERTIES LABELS "${T_LABELS}")
  endif()
endfunction()
