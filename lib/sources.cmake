# The sources of cact_lib, listed once: lib/CMakeLists.txt and the libFuzzer projects
# (tests/fuzz, tests/fuzz/torch) include this file. A file not listed here is not built.
set(CACT_LIB_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/atomic_file.cc
  ${CMAKE_CURRENT_LIST_DIR}/byte_io.cc
  ${CMAKE_CURRENT_LIST_DIR}/cpu_features.cc
  ${CMAKE_CURRENT_LIST_DIR}/file_bytes.cc
  ${CMAKE_CURRENT_LIST_DIR}/file_identity.cc
  ${CMAKE_CURRENT_LIST_DIR}/float16.cc
  ${CMAKE_CURRENT_LIST_DIR}/heap_reserve.cc
  ${CMAKE_CURRENT_LIST_DIR}/huge_page_buffer.cc
  ${CMAKE_CURRENT_LIST_DIR}/npy.cc
  ${CMAKE_CURRENT_LIST_DIR}/progress.cc
  ${CMAKE_CURRENT_LIST_DIR}/resources.cc
  ${CMAKE_CURRENT_LIST_DIR}/sha256.cc
  ${CMAKE_CURRENT_LIST_DIR}/sha256_portable.cc
  ${CMAKE_CURRENT_LIST_DIR}/sha256_shani.cc
  ${CMAKE_CURRENT_LIST_DIR}/status.cc
  ${CMAKE_CURRENT_LIST_DIR}/utf8.cc
)
