# The sources of cact_quant, listed once by room: quant/CMakeLists.txt and the libFuzzer
# projects (tests/fuzz, tests/fuzz/torch) include this file. A file not listed is not built.
# quant/cq: the CQ maths (FP16, numpy's RandomState, Lloyd-Max codebooks, FWHT, CQ).
set(CACT_CQ_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/cq/codebook.cc
  ${CMAKE_CURRENT_LIST_DIR}/cq/cq.cc
  ${CMAKE_CURRENT_LIST_DIR}/cq/cq_batch.cc
  ${CMAKE_CURRENT_LIST_DIR}/cq/fp16.cc
  ${CMAKE_CURRENT_LIST_DIR}/cq/fwht.cc
  ${CMAKE_CURRENT_LIST_DIR}/cq/numpy_random.cc
  ${CMAKE_CURRENT_LIST_DIR}/cq/reencode.cc
)
# quant/: building (float weights to .cact, geometry from weights), requantizing, comparing
# and exporting .cact files.
set(CACT_QUANT_PIPELINE_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/build.cc
  ${CMAKE_CURRENT_LIST_DIR}/cact_diff.cc
  ${CMAKE_CURRENT_LIST_DIR}/dequant_export.cc
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
# quant/import: the official training checkpoints and adapters (read, and adapters written),
# the LoRA merge.
set(CACT_QUANT_IMPORT_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/import/flax_adapter_writer.cc
  ${CMAKE_CURRENT_LIST_DIR}/import/flax_checkpoint.cc
  ${CMAKE_CURRENT_LIST_DIR}/import/lora.cc
)
set(CACT_QUANT_SOURCES ${CACT_CQ_SOURCES} ${CACT_QUANT_PIPELINE_SOURCES} ${CACT_QUANT_IMPORT_SOURCES})
# quant/synthetic.cc links these committed tokenizer models in with .incbin.
set(CACT_QUANT_INCBIN_DATA
  ${CMAKE_CURRENT_LIST_DIR}/data/needle2_tokenizer.model
  ${CMAKE_CURRENT_LIST_DIR}/data/small_tokenizer.model
)
