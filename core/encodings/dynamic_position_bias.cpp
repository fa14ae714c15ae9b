#include "core/encodings/dynamic_position_bias.h"

#include "core/encodings/relative.h"

namespace pelab {

DynamicPositionBiasImpl::DynamicPositionBiasImpl(const EncodingContext& context, const OptionValues& options)
    : PositionEncodingImpl(context), log_distance_(options.get_bool("log_distance")) {
  const int64_t width = options.get_int("width"), depth = options.get_int("depth");
  torch::nn::Sequential mlp;
  for (int64_t i = 0; i < depth; ++i) {
    mlp->push_back(torch::nn::Linear(i == 0 ? 1 : width, width));
    mlp->push_back(torch::nn::SiLU());
  }
  mlp->push_back(torch::nn::Linear(width, context.num_heads));
  mlp_ = register_module("mlp", mlp);
}

std::string DynamicPositionBiasImpl::description() {
  return "dynamic position bias (x-transformers DynamicPositionBias): an MLP of the offset query - key, one bias "
         "per head, shared by every block";
}

std::vector<OptionSpec> DynamicPositionBiasImpl::options() {
  return {OptionSpec::integer("width", 32, "hidden width of the MLP", 1, 4096),
          OptionSpec::integer("depth", 2, "hidden layers (Linear + SiLU), then a Linear to the heads", 1, 16),
          OptionSpec::boolean("log_distance", false, "feed sign(d) log(|d| + 1) instead of d")};
}

torch::Tensor DynamicPositionBiasImpl::bias_of_offsets(const torch::Tensor& offsets) {
  auto d = offsets.to(torch::kFloat32).unsqueeze(-1);  // (..., 1)
  if (log_distance_) d = d.sign() * (d.abs() + 1).log();
  return mlp_->forward(d);  // (..., H)
}

torch::Tensor DynamicPositionBiasImpl::score_bias(const torch::Tensor& q, const torch::Tensor& k,
                                                  const AttentionContext& attention) {
  const auto offsets = relative_offsets(attention.positions);  // (B'|1, Tq, Tk)
  // the MLP once per distinct offset
  const auto [distinct, index] = at::_unique(offsets, /*sorted=*/true, /*return_inverse=*/true);
  const auto per_offset = bias_of_offsets(distinct);  // (W, H)
  return per_offset.index_select(0, index.reshape(-1))
      .view({offsets.size(0), offsets.size(1), offsets.size(2), -1})
      .permute({0, 3, 1, 2})
      .to(q.scalar_type());  // (B'|1, H, Tq, Tk)
}

}  // namespace pelab
