// `pelab import-hf DIR`: an HF BERT-family checkpoint (config.json with model.safetensors or
// pytorch_model.bin, as save_pretrained writes them) as a pelab run file, so that `pelab
// eval`, export-attention, the position probes and `import pelab` work on a pretrained model
// (docs/import-hf.md). What pelab's encoder cannot express is refused by name.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/io/hdf5_store.h"

namespace pelab {

struct HfImportOptions {
  std::string name;            // the run name; empty: hf-<the folder's name>
  std::string output_dir;      // the run file's folder; empty: runs/<name>
  int64_t train_length = 0;    // tokens per sequence the checkpoint was trained at, [CLS] and [SEP]
                               //   included (train.max_length); 0: max_position_embeddings
  std::vector<int64_t> eval_lengths;  // eval.lengths: input lengths, without [CLS] and [SEP] (as
                                      //   pelab eval's); empty: 16, 32, ... tokens up to the table
  int64_t eval_samples = 64;          // eval.samples
};

struct HfImport {
  RunRecord record;                   // config, parameters; no evaluation rows yet
  std::string run_file;               // where write_hf_import puts it
  std::vector<std::string> imported;  // "hf name -> pelab name" per parameter
  std::vector<std::string> skipped;   // checkpoint tensors left out, each with why
};

// Reads `dir` and builds the run. pelab's padding token is id 0, as BERT's [PAD]; its row is
// imported as it is. ConfigError-like std::invalid_argument for what pelab cannot express
// (naming the config.json key or the tensor), std::runtime_error for unreadable files.
HfImport import_hf_checkpoint(const std::string& dir, const HfImportOptions& options);

}  // namespace pelab
