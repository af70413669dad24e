# The sources of cact_quant, listed once: quant/CMakeLists.txt and the libFuzzer projects
# (tests/fuzz, tests/fuzz/torch) include this file. A file not listed is not built.
set(CACT_QUANT_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/build.cc
  ${CMAKE_CURRENT_LIST_DIR}/cact_diff.cc
  ${CMAKE_CURRENT_LIST_DIR}/codebook.cc
  ${CMAKE_CURRENT_LIST_DIR}/cq.cc
  ${CMAKE_CURRENT_LIST_DIR}/cq_batch.cc
  ${CMAKE_CURRENT_LIST_DIR}/dequant_export.cc
  ${CMAKE_CURRENT_LIST_DIR}/flax_checkpoint.cc
  ${CMAKE_CURRENT_LIST_DIR}/fp16.cc
  ${CMAKE_CURRENT_LIST_DIR}/fwht.cc
  ${CMAKE_CURRENT_LIST_DIR}/lora.cc
  ${CMAKE_CURRENT_LIST_DIR}/numpy_random.cc
  ${CMAKE_CURRENT_LIST_DIR}/rebuild_report.cc
  ${CMAKE_CURRENT_LIST_DIR}/requant.cc
  ${CMAKE_CURRENT_LIST_DIR}/scheme.cc
  ${CMAKE_CURRENT_LIST_DIR}/scheme_inference.cc
  ${CMAKE_CURRENT_LIST_DIR}/scheme_presets.cc
  ${CMAKE_CURRENT_LIST_DIR}/selective.cc
  ${CMAKE_CURRENT_LIST_DIR}/synthetic.cc
  ${CMAKE_CURRENT_LIST_DIR}/tensor_values.cc
  ${CMAKE_CURRENT_LIST_DIR}/weights_geometry.cc
)
# quant/synthetic.cc links these committed tokenizer models in with .incbin.
set(CACT_QUANT_INCBIN_DATA
  ${CMAKE_CURRENT_LIST_DIR}/data/needle2_tokenizer.model
  ${CMAKE_CURRENT_LIST_DIR}/data/small_tokenizer.model
)
