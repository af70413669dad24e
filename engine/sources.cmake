# The sources of cact_engine, listed once: engine/CMakeLists.txt and the libFuzzer project
# tests/fuzz include this file. A file not listed is not built.
# The tokenizer apart: the fuzz projects link it without the forward passes.
set(CACT_TOKENIZER_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/tokenizer.cc
)
set(CACT_ENGINE_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/chat_template.cc
  ${CMAKE_CURRENT_LIST_DIR}/fast_forward.cc
  ${CMAKE_CURRENT_LIST_DIR}/fast_path_limits.cc
  ${CMAKE_CURRENT_LIST_DIR}/forward.cc
  ${CMAKE_CURRENT_LIST_DIR}/forward_paths.cc
  ${CMAKE_CURRENT_LIST_DIR}/kv_cache.cc
  ${CMAKE_CURRENT_LIST_DIR}/logit_stats.cc
  ${CMAKE_CURRENT_LIST_DIR}/model.cc
  ${CMAKE_CURRENT_LIST_DIR}/ops.cc
  ${CMAKE_CURRENT_LIST_DIR}/perplexity.cc
  ${CMAKE_CURRENT_LIST_DIR}/perplexity_report.cc
  ${CMAKE_CURRENT_LIST_DIR}/probe_heads.cc
  ${CMAKE_CURRENT_LIST_DIR}/python_json.cc
  ${CMAKE_CURRENT_LIST_DIR}/reference_forward.cc
  ${CMAKE_CURRENT_LIST_DIR}/row_decode.cc
  ${CMAKE_CURRENT_LIST_DIR}/runner.cc
  ${CMAKE_CURRENT_LIST_DIR}/sampler.cc
  ${CMAKE_CURRENT_LIST_DIR}/token_mask.cc
  ${CMAKE_CURRENT_LIST_DIR}/tool_call_decoder.cc
  ${CMAKE_CURRENT_LIST_DIR}/tool_call_grammar.cc
  ${CMAKE_CURRENT_LIST_DIR}/tool_call_runner.cc
  ${CMAKE_CURRENT_LIST_DIR}/tool_schema.cc
  ${CMAKE_CURRENT_LIST_DIR}/tool_retrieval.cc
  ${CMAKE_CURRENT_LIST_DIR}/validate.cc
)
