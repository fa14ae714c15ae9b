// The training checkpoint, <output.dir>/checkpoint.h5: everything Trainer needs to go on
// from a step as if it had never stopped (on the CPU, bit for bit): parameters, optimizer
// state, the data and position RNG streams, LibTorch's generators (dropout: the CPU's, and on
// a GPU the device's), and the training curve with its window in progress. Written
// atomically (atomic_file.h); removed once the run file is complete. Layout:
// docs/run-files.md, "The checkpoint file".
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/train/trainer.h"

namespace pelab {

constexpr const char* kCheckpointFileName = "checkpoint.h5";
constexpr int kCheckpointVersion = 2;  // 2: evaluation curve, snapshots, trained rows, optimizer tensors

struct TrainingCheckpoint {
  std::string config_yaml;          // the resolved config of the run that wrote it
  int64_t threads = 0;              // intra-op threads it trained with
  TrainerProgress progress;         // step, curve, window in progress, counters
  std::string data_rng, position_rng;  // std::mt19937_64 states, as text
  torch::Tensor torch_rng;          // LibTorch's default CPU generator state (uint8)
  torch::Tensor cuda_rng;           // the training GPU's default generator state (uint8), which
                                    // draws dropout there; undefined for a run on the CPU
  std::vector<std::pair<std::string, torch::Tensor>> model;  // parameters and buffers (CPU)
  std::vector<std::pair<std::string, torch::Tensor>> optimizer;  // AdamStep::state (CPU)
  std::vector<TrainedRows> trained_rows;  // position tables' rows updated so far
  std::vector<uint8_t> gradient_seen;     // per parameter, in the first train.unused_parameters_steps
                                          //   steps: 0 no gradient, 1 only exactly zero ones, 2 a nonzero one
};

// Writes `path` atomically; throws std::runtime_error naming the file and the cause.
void write_training_checkpoint(const std::string& path, const TrainingCheckpoint& checkpoint);
// Throws std::runtime_error naming the file when it is missing, truncated or of another version.
TrainingCheckpoint read_training_checkpoint(const std::string& path);

}  // namespace pelab
