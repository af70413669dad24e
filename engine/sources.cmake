# The sources of cact_engine, listed once by room: engine/CMakeLists.txt and the libFuzzer
# project tests/fuzz include this file. A file not listed is not built.
# The tokenizer apart: the fuzz projects link it without the forward passes.
set(CACT_TOKENIZER_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/text/tokenizer.cc
)
# engine/: the inference core (model view, forwards, KV cache, sampler, probe heads).
set(CACT_ENGINE_CORE_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/fast_forward.cc
  ${CMAKE_CURRENT_LIST_DIR}/fast_path_limits.cc
  ${CMAKE_CURRENT_LIST_DIR}/forward.cc
  ${CMAKE_CURRENT_LIST_DIR}/forward_state_bytes.cc
  ${CMAKE_CURRENT_LIST_DIR}/forward_paths.cc
  ${CMAKE_CURRENT_LIST_DIR}/kv_cache.cc
  ${CMAKE_CURRENT_LIST_DIR}/model.cc
  ${CMAKE_CURRENT_LIST_DIR}/needle_steps.cc
  ${CMAKE_CURRENT_LIST_DIR}/ops.cc
  ${CMAKE_CURRENT_LIST_DIR}/probe_heads.cc
  ${CMAKE_CURRENT_LIST_DIR}/reference_forward.cc
  ${CMAKE_CURRENT_LIST_DIR}/row_decode.cc
  ${CMAKE_CURRENT_LIST_DIR}/sampler.cc
)
# engine/text: the chat template and the Python-compatible JSON (the tokenizer above).
set(CACT_ENGINE_TEXT_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/text/chat_template.cc
  ${CMAKE_CURRENT_LIST_DIR}/text/python_json.cc
)
# engine/generate: a prompt through a model to text (RunModel).
set(CACT_ENGINE_GENERATE_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/generate/prefix_reuse.cc
  ${CMAKE_CURRENT_LIST_DIR}/generate/prompt_cache.cc
  ${CMAKE_CURRENT_LIST_DIR}/generate/runner.cc
)
# engine/toolcall: schemas, grammar, token masks, the decoder, the runner and retrieval.
set(CACT_ENGINE_TOOLCALL_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/toolcall/token_mask.cc
  ${CMAKE_CURRENT_LIST_DIR}/toolcall/tool_call_decoder.cc
  ${CMAKE_CURRENT_LIST_DIR}/toolcall/tool_call_eval.cc
  ${CMAKE_CURRENT_LIST_DIR}/toolcall/tool_call_grammar.cc
  ${CMAKE_CURRENT_LIST_DIR}/toolcall/tool_call_runner.cc
  ${CMAKE_CURRENT_LIST_DIR}/toolcall/tool_retrieval.cc
  ${CMAKE_CURRENT_LIST_DIR}/toolcall/tool_schema.cc
)
# engine/eval: perplexity and its report, validation, logit statistics.
set(CACT_ENGINE_EVAL_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/eval/logit_stats.cc
  ${CMAKE_CURRENT_LIST_DIR}/eval/perplexity.cc
  ${CMAKE_CURRENT_LIST_DIR}/eval/perplexity_report.cc
  ${CMAKE_CURRENT_LIST_DIR}/eval/validate.cc
)
set(CACT_ENGINE_SOURCES ${CACT_ENGINE_CORE_SOURCES} ${CACT_ENGINE_TEXT_SOURCES}
    ${CACT_ENGINE_GENERATE_SOURCES} ${CACT_ENGINE_TOOLCALL_SOURCES} ${CACT_ENGINE_EVAL_SOURCES})
