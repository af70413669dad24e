# COST (seconds, Release build on the 2-core machine) of the tests that take 1 s or more, so
# that ctest -j starts them first in a fresh build directory (no
# Testing/Temporary/CTestCostData.txt yet) instead of in definition order, where the torch
# and reliability tests come last and make the tail; the same order serves the sanitizer
# subset (build-asan), whose long tests are long in Release too. Included by ctest after the
# gtest_discover_tests lists (tests/CMakeLists.txt); names not in the build (the torch tests
# without CACT_WITH_TORCH) are ignored; quality.measure_quality is added after this file
# runs (its COST is in tests/CMakeLists.txt). Refresh from a build's
# Testing/Temporary/LastTest.log when the suite changes: a stale entry only changes the order.
set(cact_test_costs
  40 [=[ToolCallRunner.SampledAnswersAreValidOverAThousandSeeds]=]
  20 [=[ToolCallRunner.GreedyAnswersAreValidForEveryCatalogueOnFixturesAndNeedle2]=]
  8 [=[ToolCallGrammar.RandomWalksCompleteToValidAnswers]=]
  5 [=[ToolCallRunner.PromptIdsMatchTheOfficialRenderingOnNeedle2]=]
  29 [=[TorchSynthetic.Needle2MatchesEngineAndRoundTrips]=]
  24 [=[TorchImportDamage.DamagedArchivesExitCleanly]=]
  14 [=[Fixtures/PythonEditAndReturn.LoadRunEditImport/"odd"]=]
  14 [=[Fixtures/PythonEditAndReturn.LoadRunEditImport/"tiny"]=]
  9 [=[TorchBlas.CactTorchInfoFollowsTheRule]=]
  9 [=[CactTorchCli.ExportImportRoundTripAndRun]=]
  8 [=[FastForward.TwentyThreadsWithALaggingMemberGiveOneThreadsBits]=]
  8 [=[CactTorchCli.BadInputsExitTwoWithOneLine]=]
  8 [=[Fixtures/CorruptionSweep.SeededBitFlipsAreCleanErrorsOrReadableFiles/"tiny"]=]
  8 [=[TrainCli.SameSeedSameWeights]=]
  7 [=[ToolAtomicWrites.CactTorchImportKilledOrOnASizeLimitKeepsThePreviousOutput]=]
  7 [=[TorchImportRegression.RunRefusesDamagedArchivesToo]=]
  7 [=[FinetuneCli.AdapterTrainsAndMerges]=]
  6 [=[Fixtures/CorruptionSweep.SeededBitFlipsAreCleanErrorsOrReadableFiles/"odd"]=]
  5 [=[FastNeedle2.MatchesReferencePastTheWindow]=]
  5 [=[TrainCli.TrainsWritesAndScoresLikeTheEngine]=]
  4 [=[TorchImportRegression.RecordShorterThanItsTensor]=]
  4 [=[Fixtures/CorruptionSweep.EveryTruncationLengthIsACleanError/"tiny"]=]
  4 [=[TrainCli.BadInputFailsCleanly]=]
  3 [=[TorchBlas.ReferenceBlasIsNamedAndWarnedAbout]=]
  3 [=[TorchModule.ProbeHeadsMatchEngine]=]
  3 [=[TorchImportRegression.UntypedClassAttributeInCode]=]
  3 [=[Fixtures/TorchForward.MatchesEngineReferencePath/"odd"]=]
  2 [=[Fixtures/TorchForward.MatchesEngineReferencePath/"tiny"]=]
  2 [=[TorchSynthetic.SmallMatchesEngineAndRoundTrips]=]
  2 [=[Fixtures/CorruptionSweep.EveryTruncationLengthIsACleanError/"odd"]=]
  2 [=[TorchImportRegression.PickleMemoIdFarAhead]=]
  2 [=[TorchImportRegression.DamagedMemberFailsItsCrc]=]
  2 [=[Fixtures/TorchForward.MatchesOfficialLogitsAndHidden/"odd"]=]
  2 [=[NeedleNet.GradientsMatchFiniteDifferences]=]
  2 [=[CactTorchCli.VersionIsOneLine]=]
  2 [=[ToolAtomicWrites.CactQuantKilledAtAnyMomentNeverLeavesAPartialFile]=]
  2 [=[Fixtures/TorchForward.MatchesOfficialLogitsAndHidden/"tiny"]=]
  2 [=[Return.ForceRequantizeRebuildsEveryCqTensorFromItsValues]=]
  2 [=[InspectNeedle2.AccountingMatchesTheReleasedFile]=]
  2 [=[PresetsCli.NeedleSizeIsTheSizeOfTheSyntheticNeedle2File]=]
  2 [=[TorchModule.BatchRowsAreIndependent]=]
  2 [=[TorchModule.WindowArgumentIsHonoured]=]
  2 [=[Fp16.RandomFloatsEncodeLikeNumpy]=]
  1 [=[Return.OfficialFloatWeightsReproduceTheExportersFile]=]
  1 [=[Return.ForeignInputsAreClearErrors]=]
  1 [=[TorchBlas.ThreadRuleInThisProcess]=]
  1 [=[Return.EditedFp16VectorIsRounded]=]
  1 [=[Fixtures/CheckpointCli.BuildFromTheCheckpointIsTheExportersFileInEveryProtocol/"tiny"]=]
  1 [=[Fixtures/CheckpointCli.ConvertGivesTheCanonicalWeightsAndBuildAgreesWithThem/"tiny"]=]
  1 [=[Fixtures/RoundTrip.UneditedTorchScriptIsByteIdentical/"odd"]=]
  1 [=[QuantCli.CodebookEqualsCodebooksJson]=]
  1 [=[QuantCli.SyntheticNeedle2HasTheReleasedAccounting]=]
  1 [=[Fixtures/CheckpointCli.BuildFromTheCheckpointIsTheExportersFileInEveryProtocol/"odd"]=]
  1 [=[Return.MissingOrReshapedTensorsAreClearErrors]=]
  1 [=[NeedleNet.InitialWeightsFollowTheOfficialInit]=]
  1 [=[Compare.MeasuresTheFastPathAgainstTheReferenceOfOneModel]=]
  1 [=[Fixtures/NeedleNetFixture.MatchesOfficialLogits/"tiny"]=]
  1 [=[Fixtures/CheckpointCase.ArtifactsGivenInTheWrongPlaceAreNamed/"odd"]=]
  1 [=[Fixtures/NeedleNetFixture.MatchesOfficialLogits/"odd"]=]
  1 [=[Fixtures/RoundTrip.UneditedTorchScriptIsByteIdentical/"tiny"]=]
  1 [=[Return.SchemeChangesWidthsOfMatchingTensorsOnly]=]
  1 [=[Return.EditedMatrixIsRequantizedAtItsWidthAndNothingElseChanges]=]
  1 [=[Fixtures/RoundTrip.UneditedSafetensorsIsByteIdentical/"odd"]=]
  1 [=[Tokenizer.DebianTextMatchesSentencePieceWithFixtureModels]=]
)
while(cact_test_costs)
  list(POP_FRONT cact_test_costs cost name)
  set_tests_properties("${name}" PROPERTIES COST ${cost})
endwhile()
