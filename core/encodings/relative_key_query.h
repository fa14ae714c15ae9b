// `relative_key_query`: HuggingFace BERT position_embedding_type="relative_key_query"
// (modeling_bert.py BertSelfAttention; Huang et al. 2020, method 4): relative_key's query
// term plus the key term with the same per-layer table and index (sign: query - key):
//   score[i, j] = (q_i . k_j + q_i . E[d(i, j)] + k_j . E[d(i, j)]) / sqrt(Dh)
#pragma once

#include "core/encodings/relative_key.h"

namespace pelab {

class RelativeKeyQueryImpl : public RelativeKeyImpl {
 public:
  RelativeKeyQueryImpl(const EncodingContext& context, const OptionValues& options)
      : RelativeKeyImpl(context, options, /*key_term=*/true) {}
  static std::string description() {
    return "HF BERT relative_key_query: q . E[query - key] + k . E[query - key] per layer, optional clipping";
  }
};

}  // namespace pelab
