# Shared by the two standalone libFuzzer projects (tests/fuzz, tests/fuzz/torch), included
# after their project() with CACT_ROOT set to the repository: the compiler check, the
# sanitizer flags, the packages, and the library sources as the main build lists them
# (<room>/sources.cmake), so both builds compile the same files.
set(CMAKE_CXX_STANDARD 20)
set(CMAKE_CXX_STANDARD_REQUIRED ON)
set(CMAKE_CXX_EXTENSIONS OFF)
if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
  message(FATAL_ERROR "libFuzzer needs clang (configure with -DCMAKE_CXX_COMPILER=clang++)")
endif()

set(SAN_FLAGS -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer -g -O1)
# The code under test: coverage for libFuzzer, and the main build's no-FMA numerics.
set(CACT_FUZZ_CODE_FLAGS ${SAN_FLAGS} -fsanitize=fuzzer-no-link -ffp-contract=off
    -Wno-unused-command-line-argument)

find_package(absl REQUIRED)
find_package(nlohmann_json REQUIRED)
find_package(zstd REQUIRED)
find_package(OpenMP REQUIRED COMPONENTS CXX)
set(CACT_FUZZ_PACKAGES
  absl::status absl::statusor absl::strings absl::str_format absl::flat_hash_set absl::hash
  nlohmann_json::nlohmann_json zstd::libzstd_shared OpenMP::OpenMP_CXX)

include(${CACT_ROOT}/cmake/cact_isa.cmake)
include(${CACT_ROOT}/lib/sources.cmake)
include(${CACT_ROOT}/formats/sources.cmake)
include(${CACT_ROOT}/quant/sources.cmake)
include(${CACT_ROOT}/engine/sources.cmake)
include(${CACT_ROOT}/train/sources.cmake)

# quant/cq/cq_batch.cc returns 64-byte GCC vectors from always-inline helpers called by its
# target_clones; clang 14 rejects that unless AVX-512 is on for the whole file (GCC accepts
# it). The fuzzers run on the machine that builds them, so use AVX-512 when it has it.
file(READ /proc/cpuinfo CPUINFO)
if(CPUINFO MATCHES "avx512f")
  set_source_files_properties(${CACT_ROOT}/quant/cq/cq_batch.cc PROPERTIES COMPILE_OPTIONS -mavx512f)
else()
  message(WARNING "quant/cq/cq_batch.cc needs AVX-512 to compile with clang; expect a build error")
endif()

# cact_fuzzer(<name> <source>...): a libFuzzer executable.
function(cact_fuzzer name)
  add_executable(${name} ${ARGN})
  target_compile_options(${name} PRIVATE ${SAN_FLAGS} -fsanitize=fuzzer)
  target_link_options(${name} PRIVATE -fsanitize=fuzzer,address,undefined)
endfunction()

# cact_fuzz_seed_writer(<name> <source>...): a sanitized helper that writes seed inputs.
function(cact_fuzz_seed_writer name)
  add_executable(${name} ${ARGN})
  target_compile_options(${name} PRIVATE ${SAN_FLAGS})
  target_link_options(${name} PRIVATE -fsanitize=address,undefined)
endfunction()
