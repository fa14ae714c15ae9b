// The position-encoding interface. A scheme overrides only the hooks it needs; this base
// class is NoPE (every hook is the identity / adds nothing). Attention calls the hooks in
// a fixed order (see core/model/attention.cpp):
//   project -> rotate -> q k^T * attention_scale + score_bias + mask -> softmax
//           -> probs v + value_term
// A scheme is one module shared by all layers: the `layer` argument lets it keep
// per-layer parameters or share them, as its paper does.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/encodings/relative_rows.h"

namespace pelab {

// What the host knows of a Positions' values without reading them back, recorded where they
// are made (contiguous_positions, the samplers). Schemes consult it before inspecting the
// tensors: on a GPU such an inspection waits for the device, and a CUDA graph cannot hold it.
struct PositionFacts {
  bool contiguous = false;            // query == key, every row start, start + 1, ..., start + T - 1
  int64_t smallest = 0, largest = 0;  // over query and key (real positions: floor and ceiling)
  // Every |query - key| is at most this: a constant of the maker for this length (a sampler's
  // range), not of the draw, so a captured CUDA graph may bake it in; -1: unknown.
  int64_t offset_bound = -1;
  torch::Tensor query, key;           // the tensors described (facts of others do not apply)
};

// Positions are explicit so that tests and samplers can shift or randomize them. They are
// int64, or float64 from the continuous samplers (cape, random_float): schemes defined on
// real positions use them as they are, schemes indexing tables refuse them (real_positions).
struct Positions {
  Positions() = default;
  Positions(torch::Tensor query, torch::Tensor key) : query(std::move(query)), key(std::move(key)) {}

  torch::Tensor query;  // (B, Tq) int64, or float64 (real-valued)
  torch::Tensor key;    // (B, Tk) int64, or float64
  PositionFacts facts;  // set by their maker; see known_facts

  // The facts when they describe these very tensors (replacing query or key, as shifting
  // does, leaves none), else nullptr.
  const PositionFacts* known_facts() const {
    return facts.query.defined() && facts.query.is_same(query) && facts.key.is_same(key) ? &facts : nullptr;
  }
};

// The smallest and largest query and key positions (of non-empty positions): from the facts
// when known, else read back from the device in one transfer. For the schemes' checks.
struct PositionBounds {
  int64_t query_min, query_max, key_min, key_max;
};
PositionBounds position_bounds(const Positions& positions);

// Whether positions are real-valued (float64, from a continuous sampler).
inline bool real_positions(const Positions& positions) { return positions.query.is_floating_point(); }

// For the check_positions of a scheme whose tables are indexed by integer positions, offsets
// or buckets: refuses real-valued positions, naming `scheme`.
void require_integer_positions(const Positions& positions, const std::string& scheme);

// Positions of one (T) int64 or float64 row `row_on_host` shared by `batch` rows, on `device`,
// with their facts (computed on the host). `position_range` > 0: the maker draws integer
// positions from [0, position_range) (the facts' offset_bound); 0: unknown.
Positions shared_row_positions(const torch::Tensor& row_on_host, int64_t batch, torch::Device device,
                               int64_t position_range = 0);

// 0, 1, ..., T-1 for every row: positions (B, T) on `device`.
Positions contiguous_positions(int64_t batch, int64_t length, torch::Device device = torch::kCPU);

// Positions (B, T) whose rows are one broadcast row (contiguous_positions, a sampler's
// per-batch draw) -> that row as (1, T), so schemes compute once per batch; else unchanged.
torch::Tensor collapse_broadcast_rows(const torch::Tensor& positions);

// What a scheme knows of the model it is plugged into.
struct EncodingContext {
  int64_t d_model = 64;
  int64_t num_heads = 4;
  int64_t num_layers = 2;
  bool causal = false;
  std::string scheme;  // the registered name (the registry sets it), for messages
  // Under encoding_mix, per block whether this scheme serves it; empty: every block. A scheme
  // makes per-block parameters only for the blocks it serves (the others could never train).
  std::vector<bool> served;
  // Under encoding_heads (core/encodings/head_groups.h) the model's heads, of which this
  // scheme serves num_heads; 0: num_heads (every head)
  int64_t model_heads = 0;
  int64_t head_dim() const { return d_model / (model_heads > 0 ? model_heads : num_heads); }
  // The width of the scheme's heads together, num_heads x head_dim (d_model, the residual
  // width, unless under encoding_heads): the rows of each of q, k, v in qkv_weight
  int64_t attention_width() const { return num_heads * head_dim(); }
  bool serves(int64_t layer) const { return served.empty() || served.at(layer); }
};

// A parameter of a scheme whose rows are looked up by position, offset or bucket: the
// trainer records which rows training updated, and evaluation flags rows it uses that none
// did (docs/analysis.md, "Untrained parameters").
struct PositionTable {
  std::string parameter;        // registered name in the scheme, e.g. "table"
  std::string row_kind;         // position | offset | bucket
  int64_t first_row_value = 0;  // the position, offset or bucket of row 0
};

// A named part of a scheme's score bias, for the attention-term analysis
// (core/analysis/score_terms.h). value: (B|1, H|1, Tq, Tk).
struct ScoreTerm {
  std::string name;
  torch::Tensor value;
};

// A Linear(in, out) for a ModuleList of per-block layers, or, for a block the scheme does not
// serve (EncodingContext::served), a placeholder without parameters that keeps the indices.
std::shared_ptr<torch::nn::Module> linear_if(bool served, int64_t in, int64_t out, bool bias = true);

// `layer` value of the embed hook at the token embeddings (before the embedding LayerNorm).
constexpr int64_t kInputLayer = -1;

// Evaluation-time extrapolation of rotary schemes (core/encodings/rotary.h) and t5_bias (clamp).
struct Extrapolation {
  std::string method = "none";  // none | interpolation | ntk | yarn | dynamic_ntk | rerope | leaky_rerope | clamp
  double factor = 1.0;          // s: test / training sequence length, in tokens
  int64_t training_length = 0;  // the longest training sequence, in tokens (YaRN's and dynamic NTK's L)
};

// What one attention layer hands to the attention hooks besides q and k.
struct AttentionContext {
  const Positions& positions;
  int64_t layer;                    // 0-based block index
  const torch::Tensor& qkv_weight;  // (3D, D): the layer's fused projection, rows [W_q; W_k; W_v]
  const torch::Tensor& qkv_bias;    // (3D)
  // (B, T, D): what the layer projected (after a pre-LN), for data-dependent schemes (FoX's
  // forget gates); nullptr where a caller has no layer input (a scheme needing it refuses)
  const torch::Tensor* input = nullptr;
};

class PositionEncodingImpl : public torch::nn::Module {
 public:
  explicit PositionEncodingImpl(const EncodingContext& context) : context_(context) {}
  ~PositionEncodingImpl() override = default;

  // Called once per forward pass before any hook (through validate_positions): reject
  // positions the scheme cannot encode.
  virtual void check_positions(const Positions& positions) const {}
  // What callers use: refuses real-valued positions for a scheme with position tables
  // (require_integer_positions), then check_positions.
  void validate_positions(const Positions& positions) const {
    if (real_positions(positions) && !position_tables().empty()) require_integer_positions(positions, context_.scheme);
    check_positions(positions);
  }

  // Additive input encodings. x: (B, T, D) -> (B, T, D). Called with layer = kInputLayer
  // on the token embeddings and with layer = l on the residual stream before block l.
  virtual torch::Tensor embed(torch::Tensor x, const Positions& positions, int64_t layer) { return x; }

  // Rotary encodings. q, k: (B, H, T, Dh) -> same shapes.
  virtual std::pair<torch::Tensor, torch::Tensor> rotate(torch::Tensor q, torch::Tensor k,
                                                         const AttentionContext& attention) {
    return {std::move(q), std::move(k)};
  }

  // Relative and bias encodings: added to the scaled scores q k^T * attention_scale().
  // q: (B, H, Tq, Dh), k: (B, H, Tk, Dh) -> (B|1, H|1, Tq, Tk), or undefined for none.
  virtual torch::Tensor score_bias(const torch::Tensor& q, const torch::Tensor& k,
                                   const AttentionContext& attention) {
    return {};
  }

  // The parts of score_bias that the scheme's paper names, whose sum is score_bias, for the
  // attention-term analysis (docs/analysis.md, "Attention terms"): e.g. DeBERTa's c2p and
  // p2c. Names follow the four-term vocabulary where they fit (content-position: query
  // against a position vector; position-content: key against one; position-position).
  // By default one part, "position bias", or none when score_bias adds nothing.
  virtual std::vector<ScoreTerm> score_terms(const torch::Tensor& q, const torch::Tensor& k,
                                             const AttentionContext& attention);

  // Relative value terms (Shaw). probs: (B, H, Tq, Tk) -> (B, H, Tq, Dh), or undefined for none.
  virtual torch::Tensor value_term(const torch::Tensor& probs, const AttentionContext& attention) {
    return {};
  }
  // Optional, for speed only: a relative scheme whose terms are products with one row per
  // offset may return those rows (relative_rows.h) for the fused CPU attention, which adds
  // them row by row instead of calling score_bias / value_term for (B, H, T, T) tensors.
  // Called only when that kernel runs (float32 on the CPU, no attention maps, no dropout);
  // return rows only for contiguous positions (RelativeGeometry::contiguous), else nothing
  // (the default), and attention calls score_bias and value_term. The registry-wide tests
  // check the rows against score_bias / value_term. q, k: (B, H, T, Dh).
  virtual RelativeRows relative_rows(const torch::Tensor& q, const torch::Tensor& k,
                                     const AttentionContext& attention) {
    return {};
  }
  // What attention calls: relative_rows, checked against the rules of relative_rows.h (and,
  // with a value term, for value rows), in errors naming the scheme.
  RelativeRows checked_relative_rows(const torch::Tensor& q, const torch::Tensor& k, const AttentionContext& attention);

  // Optional, for speed and memory: the whole attention output computed by the scheme's own
  // fused kernel (stick-breaking's and CoPE's on the CPU), without (B, H, T, T) tensors; asked
  // before the other hooks, which attention then does not call. q, k, v: (B, H,
  // T, Dh) after rotate; key_mask: what is masked besides the causal rule (context().causal),
  // additive (B|1, 1, T|1, T) with -inf at masked keys, or undefined -> (B, H, T, Dh), or
  // undefined (the default) to let attention compute it from the hooks. Called only where
  // attention keeps no maps and applies no logit scaling and no attention dropout; the
  // registry-wide tests compare it with the hooks' result.
  virtual torch::Tensor attend(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                               const torch::Tensor& key_mask, const AttentionContext& attention) {
    return {};
  }

  // True when value_term adds something (attention then keeps the probabilities as a tensor).
  virtual bool has_value_term() const { return false; }
  // The same for block `layer` (encoding_mix: the scheme of that block).
  virtual bool has_value_term_at(int64_t layer) const { return has_value_term(); }

  // Multiplies q k^T; 1/sqrt(Dh) unless a scheme's options say otherwise (t5_bias scale: none gives 1).
  virtual double attention_scale() const;

  // Schemes that turn scores into attention weights otherwise than by a softmax (stick-breaking
  // attention) return true here and implement attention_weights: scores (B, H, Tq, Tk), scaled,
  // with any bias, before the mask; masked: (B|1, 1, Tq|1, Tk) bool, true at the keys a query
  // may not see, or undefined -> weights (B, H, Tq, Tk), 0 at masked keys. Attention then runs
  // unfused (the fused kernel and SDPA compute a softmax).
  virtual bool replaces_softmax() const { return false; }
  // The same for block `layer` (encoding_mix: the scheme of that block).
  virtual bool replaces_softmax_at(int64_t layer) const { return replaces_softmax(); }
  virtual torch::Tensor attention_weights(const torch::Tensor& scores, const torch::Tensor& masked,
                                          const AttentionContext& attention) {
    TORCH_CHECK(false, context_.scheme, " does not replace the softmax");
  }

  // Evaluation-time extrapolation of rotary schemes (position interpolation, NTK-aware base
  // scaling, YaRN, dynamic NTK) and of t5_bias (clamp); other schemes support only "none".
  virtual bool supports_extrapolation() const { return false; }
  virtual void set_extrapolation(const Extrapolation& extrapolation) {
    TORCH_CHECK(extrapolation.method == "none", "this position encoding has no extrapolation method '",
                extrapolation.method, "'");
  }

  // Whether embed adds position vectors to the residual stream (the additive absolute
  // schemes): the attention-term analysis then splits q.k into its four terms.
  virtual bool adds_to_residual() const { return false; }

  // Whether the scheme sees positions only through offsets query - key, so that shifting
  // every position changes nothing (the registry-wide tests check it, both ways). True for
  // NoPE and the relative schemes (FIRE while queries stay below its threshold L); absolute
  // encodings (additive.h) return false.
  virtual bool shift_invariant() const { return true; }

  // The scheme's tables indexed by position, offset or bucket (none by default).
  virtual std::vector<PositionTable> position_tables() const { return {}; }

  // A scheme defined for causal attention only hides this with `return true`.
  static bool causal_only() { return false; }

  const EncodingContext& context() const { return context_; }

 protected:
  EncodingContext context_;
};
TORCH_MODULE(PositionEncoding);

}  // namespace pelab
