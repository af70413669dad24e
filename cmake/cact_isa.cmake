# Per-ISA compile flags for the run-time dispatched kernels. A source file's name says which
# instruction set it is written for (`*_avx2.cc`, `*_avxvnni.cc`, `*_avx512.cc`,
# `*_avx512vbmi.cc`, `*_amx.cc`: AVX-512 VBMI plus the AMX tile and int8 instructions);
# everything else builds for the baseline x86-64 target, and the
# dispatcher checks the CPU before it calls into a file built with these flags.
# Used by the main build and by both libFuzzer projects (tests/fuzz, tests/fuzz/torch).

set(CACT_ISA_AVX2 -mavx2 -mfma -mf16c -mbmi2)
set(CACT_ISA_AVXVNNI ${CACT_ISA_AVX2} -mavxvnni)
set(CACT_ISA_AVX512 ${CACT_ISA_AVX2} -mavx512f -mavx512bw -mavx512vl -mavx512vnni)
set(CACT_ISA_AVX512VBMI ${CACT_ISA_AVX512} -mavx512vbmi)
set(CACT_ISA_AMX ${CACT_ISA_AVX512VBMI} -mamx-tile -mamx-int8)

# cact_isa_flags(<source>...): give each source the flags its name asks for.
function(cact_isa_flags)
  foreach(src ${ARGN})
    get_filename_component(stem "${src}" NAME_WE)
    if(stem MATCHES "_amx$")
      set(flags ${CACT_ISA_AMX})
    elseif(stem MATCHES "_avx512vbmi$")
      set(flags ${CACT_ISA_AVX512VBMI})
    elseif(stem MATCHES "_avx512$")
      set(flags ${CACT_ISA_AVX512})
    elseif(stem MATCHES "_avxvnni$")
      set(flags ${CACT_ISA_AVXVNNI})
    elseif(stem MATCHES "_avx2$")
      set(flags ${CACT_ISA_AVX2})
    else()
      continue()
    endif()
    set_source_files_properties("${src}" PROPERTIES COMPILE_OPTIONS "${flags}")
  endforeach()
endfunction()
