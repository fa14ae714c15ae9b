#include "core/encodings/fox.h"

namespace pelab {

FoxImpl::FoxImpl(const EncodingContext& context, const OptionValues& options) : PositionEncodingImpl(context) {
  const double init_std = options.get_float("init_std");
  gates_ = register_module("gates", torch::nn::ModuleList());
  for (int64_t l = 0; l < context.num_layers; ++l) {
    auto gate = linear_if(context.serves(l), context.d_model, context.num_heads);
    if (auto* linear = gate->as<torch::nn::Linear>()) {
      torch::NoGradGuard no_grad;
      linear->weight.normal_(0.0, init_std);
      linear->bias.zero_();
    }
    gates_->push_back(gate);
  }
}

std::string FoxImpl::description() {
  return "Forgetting Transformer (Lin et al. 2025): sum of log sigmoid(w_h . x_t + b_h) over the tokens "
         "between key and query, data-dependent, per head and block";
}

std::vector<OptionSpec> FoxImpl::options() {
  return {OptionSpec::real("init_std", 0.02, "std of the gate weights at initialization (biases 0)", 0.0, 10.0)};
}

torch::Tensor FoxImpl::log_forget_gates(const torch::Tensor& x, int64_t layer) {
  auto* gate = gates_[layer]->as<torch::nn::Linear>();
  TORCH_CHECK(gate, "fox: block ", layer, " is not one this scheme serves");
  return torch::log_sigmoid(gate->forward(x).to(torch::kFloat32)).transpose(1, 2);  // (B, H, T)
}

torch::Tensor FoxImpl::score_bias(const torch::Tensor& q, const torch::Tensor& k, const AttentionContext& attention) {
  TORCH_CHECK(attention.input, "fox: the forget gates read the block's input, which this caller does not give");
  TORCH_CHECK(q.size(2) == k.size(2), "fox: queries and keys must be the same tokens, got ", q.size(2), " and ",
              k.size(2));
  const auto cumulative = log_forget_gates(*attention.input, attention.layer).cumsum(-1);  // L: (B, H, T)
  const auto difference = cumulative.unsqueeze(-1) - cumulative.unsqueeze(-2);  // L_i - L_j: (B, H, T, T)
  // causal: the keys after the query are masked, whatever their value here
  return (context().causal ? difference : -difference.abs()).to(q.scalar_type());
}

std::vector<ScoreTerm> FoxImpl::score_terms(const torch::Tensor& q, const torch::Tensor& k,
                                            const AttentionContext& attention) {
  return {{"forget bias", score_bias(q, k, attention)}};
}

}  // namespace pelab
