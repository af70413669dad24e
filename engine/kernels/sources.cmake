# The sources of cact_kernels, listed once: engine/kernels/CMakeLists.txt and the libFuzzer
# project tests/fuzz include this file. Each file's name says its instruction set
# (cmake/cact_isa.cmake). A file not listed is not built.
set(CACT_KERNELS_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/amx_tiles.cc
  ${CMAKE_CURRENT_LIST_DIR}/cq_amx.cc
  ${CMAKE_CURRENT_LIST_DIR}/cq_amx_emu_avx512vbmi.cc
  ${CMAKE_CURRENT_LIST_DIR}/cq_avx2.cc
  ${CMAKE_CURRENT_LIST_DIR}/cq_avx512.cc
  ${CMAKE_CURRENT_LIST_DIR}/cq_avx512vbmi.cc
  ${CMAKE_CURRENT_LIST_DIR}/cq_avxvnni.cc
  ${CMAKE_CURRENT_LIST_DIR}/cq_kernels.cc
  ${CMAKE_CURRENT_LIST_DIR}/cq_scalar.cc
  ${CMAKE_CURRENT_LIST_DIR}/fast_ops.cc
  ${CMAKE_CURRENT_LIST_DIR}/fast_ops_avx2.cc
  ${CMAKE_CURRENT_LIST_DIR}/fast_ops_avx512.cc
  ${CMAKE_CURRENT_LIST_DIR}/isa.cc
  ${CMAKE_CURRENT_LIST_DIR}/team.cc
)
