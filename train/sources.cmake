# The sources of the training libraries, listed once: train/CMakeLists.txt and the libFuzzer
# project tests/fuzz include this file. A file not listed is not built.
# cact_train_data: no libtorch (corpus, fine-tuning examples, PEFT adapters, loss curves);
# the libtorch trainer is in libtorch/.
set(CACT_TRAIN_DATA_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/corpus.cc
  ${CMAKE_CURRENT_LIST_DIR}/corpus_manifest.cc
  ${CMAKE_CURRENT_LIST_DIR}/corpus_tokens.cc
  ${CMAKE_CURRENT_LIST_DIR}/finetune_data.cc
  ${CMAKE_CURRENT_LIST_DIR}/finetune_example.cc
  ${CMAKE_CURRENT_LIST_DIR}/geometry_spec.cc
  ${CMAKE_CURRENT_LIST_DIR}/loss_curve.cc
  ${CMAKE_CURRENT_LIST_DIR}/official_adapter.cc
  ${CMAKE_CURRENT_LIST_DIR}/peft_adapter.cc
  ${CMAKE_CURRENT_LIST_DIR}/trained_model.cc
  ${CMAKE_CURRENT_LIST_DIR}/training_data.cc
)
