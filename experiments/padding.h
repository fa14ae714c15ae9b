// `pelab padding`: does the padding token's embedding row matter? Evaluates a finished run on
// its evaluation examples with padding appended, the padding row set to zero (pelab's), random
// (the table's scale, as a BERT checkpoint's untrained row) or huge (1000x), with the attention
// mask and without it, and compares the logits at the real tokens with those of the unpadded
// examples (docs/studies/padding.md).
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>


namespace pelab {

struct PaddingArguments {
  std::string run_file;
  int64_t length = 0;     // input length of the examples; 0: the run's train.max_length
  int64_t pad = 0;        // padding tokens appended; 0: as many as the sequence has tokens
  int64_t examples = 64;
  std::string csv;        // also write the table here
};

// Exit codes: 0 done, 1 the run could not be evaluated, 2 bad arguments.
int command_padding(const PaddingArguments& arguments, std::ostream& out, std::ostream& err);

}  // namespace pelab
