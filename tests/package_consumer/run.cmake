# Script of the `package_consumer` ctest (cmake -P): installs the emergent build tree into a
# scratch prefix, then configures, builds and runs tests/package_consumer against it, and checks
# that the README's "Using the library" program is examples/attention_bias.cpp verbatim (the main
# build compiles that program as an example and ctest example_attention_bias runs it; compiling
# it a second time here against the installed headers cost ~25 s of every `make test`).
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

# The README's program is examples/attention_bias.cpp, to the letter.
file(READ "${CONSUMER_SOURCE_DIR}/../../README.md" readme)
file(READ "${CONSUMER_SOURCE_DIR}/../../examples/attention_bias.cpp" example)
string(FIND "${readme}" "## Using the library\n\n```cpp\n${example}```" at)
if(at EQUAL -1)
  message(FATAL_ERROR "package_consumer: README.md's \"Using the library\" program is not "
                      "examples/attention_bias.cpp verbatim")
endif()
message(STATUS "package_consumer: README.md's program is examples/attention_bias.cpp")
