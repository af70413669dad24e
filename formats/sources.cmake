# The sources of cact_formats, listed once: formats/CMakeLists.txt and the libFuzzer
# projects (tests/fuzz, tests/fuzz/torch) include this file. A file not listed is not built.
set(CACT_FORMATS_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/cact/accounting.cc
  ${CMAKE_CURRENT_LIST_DIR}/cact/any_generation.cc
  ${CMAKE_CURRENT_LIST_DIR}/cact/cact3_file.cc
  ${CMAKE_CURRENT_LIST_DIR}/cact/cact_file.cc
  ${CMAKE_CURRENT_LIST_DIR}/cact/cq_types.cc
  ${CMAKE_CURRENT_LIST_DIR}/cact/finite_check.cc
  ${CMAKE_CURRENT_LIST_DIR}/cact/generation.cc
  ${CMAKE_CURRENT_LIST_DIR}/cact/geometry3_json.cc
  ${CMAKE_CURRENT_LIST_DIR}/cact/geometry_json.cc
  ${CMAKE_CURRENT_LIST_DIR}/cact/header.cc
  ${CMAKE_CURRENT_LIST_DIR}/cact/header3.cc
  ${CMAKE_CURRENT_LIST_DIR}/cact/record_checks.cc
  ${CMAKE_CURRENT_LIST_DIR}/cact/writer.cc
  ${CMAKE_CURRENT_LIST_DIR}/needle/geometry.cc
  ${CMAKE_CURRENT_LIST_DIR}/needle/named_geometries.cc
  ${CMAKE_CURRENT_LIST_DIR}/needle/tensor_table.cc
  ${CMAKE_CURRENT_LIST_DIR}/needle/tensor_table3.cc
  ${CMAKE_CURRENT_LIST_DIR}/pickle.cc
  ${CMAKE_CURRENT_LIST_DIR}/pickle_writer.cc
  ${CMAKE_CURRENT_LIST_DIR}/protobuf_wire.cc
  ${CMAKE_CURRENT_LIST_DIR}/safetensors.cc
  ${CMAKE_CURRENT_LIST_DIR}/sentencepiece_model.cc
  ${CMAKE_CURRENT_LIST_DIR}/tokenizer_blob.cc
)
