# The sources of the libtorch room (the only code that includes libtorch), listed once:
# libtorch/CMakeLists.txt and the libFuzzer project tests/fuzz/torch include this file.
# A file not listed is not built.
# cact_torchscript: .cact <-> TorchScript and safetensors; libtorch's thread and BLAS rule.
set(CACT_TORCHSCRIPT_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/archive_check.cc
  ${CMAKE_CURRENT_LIST_DIR}/blas_threads.cc
  ${CMAKE_CURRENT_LIST_DIR}/bridge.cc
  ${CMAKE_CURRENT_LIST_DIR}/needle_script.cc
  ${CMAKE_CURRENT_LIST_DIR}/origin.cc
  ${CMAKE_CURRENT_LIST_DIR}/return_plan.cc
  ${CMAKE_CURRENT_LIST_DIR}/tensor_bounds.cc
  ${CMAKE_CURRENT_LIST_DIR}/torch_export.cc
  ${CMAKE_CURRENT_LIST_DIR}/torch_load.cc
)
# Its headers: tests/fuzz/torch compiles the files that include libtorch by a custom
# command, which depends on these.
set(CACT_TORCHSCRIPT_HEADERS
  ${CMAKE_CURRENT_LIST_DIR}/archive_check.h
  ${CMAKE_CURRENT_LIST_DIR}/blas_threads.h
  ${CMAKE_CURRENT_LIST_DIR}/bridge.h
  ${CMAKE_CURRENT_LIST_DIR}/needle_script.h
  ${CMAKE_CURRENT_LIST_DIR}/origin.h
  ${CMAKE_CURRENT_LIST_DIR}/return_plan.h
  ${CMAKE_CURRENT_LIST_DIR}/tensor_bounds.h
  ${CMAKE_CURRENT_LIST_DIR}/torch_module.h
)
# cact_train: the Needle forward in eager libtorch, CQ fake quantization, the trainer, LoRA.
set(CACT_TRAIN_TORCH_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/fake_quant.cc
  ${CMAKE_CURRENT_LIST_DIR}/finetune.cc
  ${CMAKE_CURRENT_LIST_DIR}/needle_net.cc
  ${CMAKE_CURRENT_LIST_DIR}/trainer.cc
)
