// Every group, dataset and attribute name of a pelab run file, in one place. The layout is
// documented in docs/run-files.md ("The run file"); bump kSchemaVersion on any change.
#pragma once

namespace pelab::schema {

constexpr int kSchemaVersion = 6;  // 2: evaluation/method; 3: chance levels, task format, protocol;
                                   // 4: attention statistics and maps, position probes;
                                   // 5: training/skipped_steps; 6: evaluation settings (step,
                                   // sampler, positions_max_length) and untrained, the
                                   // evaluation curve, snapshots, trained rows
constexpr const char* kRunFileName = "run.h5";

// root attributes
constexpr const char* kSchemaVersionAttr = "schema_version";
constexpr const char* kStatusAttr = "status";        // "complete" in a finished file
constexpr const char* kRunNameAttr = "run_name";
// root datasets
constexpr const char* kConfig = "config";            // string: the resolved YAML config

constexpr const char* kEnvironment = "environment";  // group; attributes:
constexpr const char* kPelabVersion = "pelab_version";
constexpr const char* kGitCommit = "git_commit";
constexpr const char* kTorchVersion = "torch_version";
constexpr const char* kDevice = "device";
constexpr const char* kThreads = "threads";
constexpr const char* kHostname = "hostname";
constexpr const char* kCreatedUtc = "created_utc";
constexpr const char* kCpuKernels = "cpu_kernels";  // optional (files before it lack it)
constexpr const char* kTrainingSeconds = "training_seconds";

constexpr const char* kParameterCounts = "parameter_counts";  // group; one int64 attribute per module + "total"
constexpr const char* kTotal = "total";

constexpr const char* kTraining = "training";        // group; 1-D datasets of equal length:
constexpr const char* kStep = "step";
constexpr const char* kLoss = "loss";
constexpr const char* kAccuracy = "accuracy";
constexpr const char* kLearningRate = "learning_rate";
constexpr const char* kTokensPerSecond = "tokens_per_second";
constexpr const char* kPhase = "phase";              // int64: the train.phases phase (0-based) of the row
constexpr const char* kSkippedSteps = "skipped_steps";  // training attribute (int64)
// training attribute (string, names joined by ", "; empty: none). Optional: absent in files
// written before it, which read as none, so the schema version stays.
constexpr const char* kZeroGradientParameters = "zero_gradient_parameters";

constexpr const char* kEvaluation = "evaluation";    // group; 1-D datasets, one row per test length:
constexpr const char* kMethod = "method";            // string: none | interpolation | ntk
constexpr const char* kLength = "length";
constexpr const char* kSequenceLength = "sequence_length";
constexpr const char* kSamples = "samples";
constexpr const char* kPerTokenAccuracy = "per_token_accuracy";
constexpr const char* kPerSequenceAccuracy = "per_sequence_accuracy";
constexpr const char* kChanceTokenAccuracy = "chance_token_accuracy";        // the best input-independent
constexpr const char* kChanceSequenceAccuracy = "chance_sequence_accuracy";  //   prediction on the same
constexpr const char* kChanceLoss = "chance_loss";                          //   examples (metrics.h)
// the position-free baseline on the same examples (NaN: the task has none; absent in files
// written before 2026-12-03, read as NaN)
constexpr const char* kPositionFreeTokenAccuracy = "position_free_token_accuracy";
constexpr const char* kPositionFreeSequenceAccuracy = "position_free_sequence_accuracy";
// (kLoss is also an evaluation dataset) and the settings a row was made under:
constexpr const char* kEvalStep = "step";                   // int64: the training step evaluated
constexpr const char* kEvalSampler = "sampler";             // string: the position sampler used
constexpr const char* kEvalPositionsMaxLength = "positions_max_length";  // int64: its max_length
constexpr const char* kCondition = "condition";             // string: the task's evaluation condition
constexpr const char* kConditionValue = "condition_value";  //   (passkey: depth, flip_flop: p_ignore) and
                                                            //   its value; "" and 0: as in training
                                                            //   (absent in files before 2026-12-02)
constexpr const char* kUntrained = "untrained";             // string: the position-table rows this row
                                                            //   used that no training step updated; "" none
constexpr const char* kTrainMinLength = "train_min_length";  // evaluation attributes
constexpr const char* kTrainMaxLength = "train_max_length";
constexpr const char* kTaskFormat = "task_format";            // encoder | causal_lm | masked_lm
constexpr const char* kProtocol = "protocol";                 // how examples were scored, one line
constexpr const char* kTrainSteps = "train_steps";            // the final step (train.steps)
constexpr const char* kRunSampler = "run_sampler";            // the sampler and max length evaluation
constexpr const char* kRunPositionsMaxLength = "run_positions_max_length";  //   uses by default

constexpr const char* kAttentionStatistics = "attention";  // evaluation subgroup; (rows, layers, heads)
constexpr const char* kMeanDistance = "mean_distance";     //   float64 datasets, rows as evaluation's:
constexpr const char* kEntropy = "entropy";                //   means over every non-padding query
constexpr const char* kDiagonal = "diagonal";
constexpr const char* kFirstToken = "first";
constexpr const char* kLastToken = "last";

constexpr const char* kAttention = "attention";            // group of length_<L> groups:
constexpr const char* kAttentionLengthPrefix = "length_";
constexpr const char* kProbs = "probs";                    // (N, layers, heads, T, T) float16|float32
constexpr const char* kTokens = "tokens";                  // (N, T) int64
constexpr const char* kPositions = "positions";            // (N, T) int64, key positions
constexpr const char* kExamples = "examples";              // attribute (and kLength)
constexpr const char* kTerms = "terms";                    // subgroup of length_<L>: the attention terms
constexpr const char* kTermNames = "names";                //   string (terms,)
constexpr const char* kTermMeanAbs = "mean_abs";           //   float32 (layers, heads, terms)
constexpr const char* kTermCorrelation = "correlation";    //   float32 (layers, heads, terms)
constexpr const char* kScoresMeanAbs = "scores_mean_abs";  //   float32 (layers, heads)

constexpr const char* kProbes = "probes";                  // group; 1-D datasets, one row per length x layer
                                                           //   (with kEvalStep, kEvalSampler, kEvalPositionsMaxLength):
constexpr const char* kProbeLayer = "layer";               // 0 = embedding output, l = block l's output
constexpr const char* kPositionAccuracy = "position_accuracy";
constexpr const char* kPositionChance = "position_chance";
constexpr const char* kPositionR2 = "position_r2";
constexpr const char* kOrderAccuracy = "order_accuracy";
constexpr const char* kDistanceR2 = "distance_r2";         // (and kLength)

constexpr const char* kCheckpoint = "checkpoint";    // group; one float32 dataset per named parameter

constexpr const char* kEvaluationCurve = "evaluation_curve";  // group; evaluation's datasets, one row
                                                              //   per step x method x length (eval.every)
constexpr const char* kSnapshots = "snapshots";      // group of step_<S> groups, as checkpoint
constexpr const char* kSnapshotPrefix = "step_";     //   (output.keep_checkpoints); attribute kEvalStep
constexpr const char* kTrainedRows = "trained_rows"; // group; uint8 (rows,) per position table: 1 where
                                                     //   some training step gave the row a nonzero gradient
constexpr const char* kRowKind = "row_kind";         //   attributes: position | offset | bucket,
constexpr const char* kFirstRowValue = "first_row_value";  // and the position/offset/bucket of row 0

// The sweep index, <sweep dir>/sweep.h5
constexpr const char* kSweepIndexFileName = "sweep.h5";
constexpr const char* kSweepNameAttr = "sweep_name";  // root attribute (and schema_version)
constexpr const char* kSweepRuns = "runs";            // group; external link per complete run: runs/<id> -> run.h5:/
constexpr const char* kSweepTable = "table";          // group; string datasets, one row per run:
constexpr const char* kSweepId = "id";
constexpr const char* kSweepStatus = "status";        // complete | failed | pending | outdated
constexpr const char* kSweepError = "error";          // the failed run's error line, else ""
constexpr const char* kSweepOverrides = "overrides";  // the run's axis values, "key=value key=value"

}  // namespace pelab::schema
