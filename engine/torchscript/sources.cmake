# The sources of cact_torchscript (the only code that includes libtorch), listed once:
# engine/torchscript/CMakeLists.txt and the libFuzzer project tests/fuzz/torch include this
# file. A file not listed is not built.
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
