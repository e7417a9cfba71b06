# Script of the `package_consumer` ctest (cmake -P): installs the emergent build tree into a
# scratch prefix, then configures, builds and runs tests/package_consumer against it: the
# consumer, and the README's "Using the library" program (checked to be the README's text
# verbatim) training 20 steps.
# Inputs: EMERGENT_BINARY_DIR, CONSUMER_SOURCE_DIR, WORK_DIR, CONFIG, GENERATOR, CXX_COMPILER.
cmake_minimum_required(VERSION 3.25)

set(prefix "${WORK_DIR}/prefix")
set(build "${WORK_DIR}/build")
file(REMOVE_RECURSE "${WORK_DIR}")

function(step)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "package_consumer: step failed (${rc}): ${ARGN}")
  endif()
endfunction()

set(config_args)
if(CONFIG)
  set(config_args --config "${CONFIG}")
endif()

step("${CMAKE_COMMAND}" --install "${EMERGENT_BINARY_DIR}" --prefix "${prefix}" ${config_args})
step("${CMAKE_COMMAND}" -S "${CONSUMER_SOURCE_DIR}" -B "${build}" -G "${GENERATOR}"
     "-DCMAKE_CXX_COMPILER=${CXX_COMPILER}" "-DCMAKE_PREFIX_PATH=${prefix}"
     "-DCMAKE_BUILD_TYPE=${CONFIG}")
step("${CMAKE_COMMAND}" --build "${build}" ${config_args})

find_program(consumer consumer PATHS "${build}" "${build}/${CONFIG}" NO_DEFAULT_PATH)
if(NOT consumer)
  message(FATAL_ERROR "package_consumer: the consumer executable was not built")
endif()
step("${consumer}")
message(STATUS "package_consumer: find_package(emergent) works from ${prefix}")

# The README's program is readme_example.cpp, to the letter.
file(READ "${CONSUMER_SOURCE_DIR}/../../README.md" readme)
file(READ "${CONSUMER_SOURCE_DIR}/readme_example.cpp" example)
string(FIND "${readme}" "## Using the library\n\n```cpp\n${example}```" at)
if(at EQUAL -1)
  message(FATAL_ERROR "package_consumer: README.md's \"Using the library\" program is not "
                      "tests/package_consumer/readme_example.cpp verbatim")
endif()
find_program(example_program readme_example PATHS "${build}" "${build}/${CONFIG}" NO_DEFAULT_PATH)
execute_process(COMMAND "${example_program}" "${WORK_DIR}/readme_run" 20
                RESULT_VARIABLE rc OUTPUT_VARIABLE out)
if(NOT rc EQUAL 0 OR NOT out MATCHES "^steps 20  x1 loss [0-9.]+")
  message(FATAL_ERROR "package_consumer: the README's program failed (${rc}): ${out}")
endif()
message(STATUS "package_consumer: the README's program trained: ${out}")
