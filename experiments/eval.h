// `pelab eval`: evaluates a finished run (or every complete run of a sweep) from its stored
// parameters at new settings (lengths, samples, position sampler, extrapolation, probes,
// attention maps) and adds the rows to its run file, each carrying the settings that made it.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

namespace pelab {

struct EvalArguments {
  std::string target;                    // a run.h5, or a sweep directory
  std::vector<int64_t> lengths;          // test lengths; empty: the run's eval.lengths, unless only
                                         //   probes or attention maps are asked for
  int64_t samples = 0;                   // sequences per length; 0: the run's eval.samples
  std::string sampler;                   // position sampler; empty: the run's
  int64_t sampler_max_length = 0;        // its max_length; 0: the run's positions.max_length
  std::vector<std::string> extrapolation;  // empty: the run's eval.extrapolation
  std::vector<double> depths, p_ignore;  // evaluation conditions (passkey, flip_flop); empty: the run's
  std::vector<int64_t> probes;           // probe lengths
  std::vector<int64_t> attention_lengths;  // lengths whose attention maps are stored
  int64_t attention_examples = 4;
  bool float32 = false;                  // attention maps in float32 (default float16)
  int64_t step = -1;                     // a kept snapshot (output.keep_checkpoints); -1: final
  std::string device = "cpu";            // cpu | cuda | auto
  int64_t threads = 0;                   // per run; 0: every core (a sweep: cores / jobs)
  int64_t jobs = 1;                      // a sweep: runs at once
  bool force = false;                    // recompute what the run file already has
};

// Exit codes: 0 done, 1 a run failed, 2 bad arguments, 75 stopped by a signal (the run files
// are unchanged but for the runs finished before it).
int command_eval(const EvalArguments& arguments, const std::string& pelab_executable, std::ostream& out,
                 std::ostream& err);

}  // namespace pelab
