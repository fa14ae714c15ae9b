#include "core/encodings/dape.h"

#include "core/encodings/registry.h"

namespace pelab {

DapeImpl::DapeImpl(const EncodingContext& context, const OptionValues& options) : PositionEncodingImpl(context) {
  const std::string bias = options.get_string("bias");
  EncodingContext static_context = context;
  static_context.scheme = bias;
  for (const auto& entry : scheme_registry())
    if (entry.info.name == bias)
      static_bias_ = entry.factory(static_context, OptionValues::defaults(entry.info.options));
  TORCH_CHECK(!static_bias_.is_empty(), "dape: no scheme '", bias, "'");
  register_module("static_bias", static_bias_);
  const int64_t H = context.num_heads, width = options.get_int("mlp_width");
  mlp_in_ = register_module("mlp_in", torch::nn::ModuleList());
  mlp_out_ = register_module("mlp_out", torch::nn::ModuleList());
  for (int64_t l = 0; l < context.num_layers; ++l) {
    mlp_in_->push_back(linear_if(context.serves(l), 2 * H, width));
    mlp_out_->push_back(linear_if(context.serves(l), width, H));
  }
}

std::string DapeImpl::description() {
  return "DAPE (Zheng et al. 2024): a static bias (ALiBi, KERPLE, FIRE) plus a per-block MLP over the heads of "
         "[logits, static bias]";
}

std::vector<OptionSpec> DapeImpl::options() {
  return {OptionSpec::choice("bias", "kerple", {"alibi", "kerple", "fire"},
                             "the static bias B, that scheme at its defaults (the paper's main results: kerple)"),
          OptionSpec::integer("mlp_width", 32, "the MLP's hidden width (the reference: 32)", 1, 1 << 16)};
}

std::vector<ScoreTerm> DapeImpl::score_terms(const torch::Tensor& q, const torch::Tensor& k,
                                             const AttentionContext& attention) {
  // q: (B, H, Tq, Dh), k: (B, H, Tk, Dh)
  auto* in = mlp_in_[attention.layer]->as<torch::nn::Linear>();
  auto* out = mlp_out_[attention.layer]->as<torch::nn::Linear>();
  TORCH_CHECK(in && out, "dape: block ", attention.layer, " is not one this scheme serves");
  const auto logits = torch::matmul(q, k.transpose(-2, -1)) * attention_scale();     // A: (B, H, Tq, Tk)
  const auto fixed = static_bias_->score_bias(q, k, attention).to(logits.scalar_type());  // B: (B|1, H, Tq, Tk)
  const auto pairs = torch::cat({logits, fixed.expand_as(logits)}, 1).permute({0, 2, 3, 1});  // (B, Tq, Tk, 2H)
  const auto adaptive =
      out->forward(torch::leaky_relu(in->forward(pairs), 0.01)).permute({0, 3, 1, 2});  // f: (B, H, Tq, Tk)
  return {{"static bias", fixed}, {"adaptive bias", adaptive}};
}

torch::Tensor DapeImpl::score_bias(const torch::Tensor& q, const torch::Tensor& k, const AttentionContext& attention) {
  const auto terms = score_terms(q, k, attention);
  return terms[0].value + terms[1].value;
}

std::vector<PositionTable> DapeImpl::position_tables() const {
  std::vector<PositionTable> tables;
  for (auto t : static_bias_->position_tables()) {
    t.parameter = "static_bias." + t.parameter;
    tables.push_back(t);
  }
  return tables;
}

}  // namespace pelab
