#include "core/encodings/position_encoding.h"

#include <algorithm>
#include <cmath>

#include "core/encodings/host_to_device.h"

namespace pelab {

std::shared_ptr<torch::nn::Module> linear_if(bool served, int64_t in, int64_t out, bool bias) {
  if (served) return torch::nn::Linear(torch::nn::LinearOptions(in, out).bias(bias)).ptr();
  return torch::nn::Identity().ptr();
}

Positions contiguous_positions(int64_t batch, int64_t length, torch::Device device) {
  auto row = torch::arange(length, torch::TensorOptions().dtype(torch::kInt64).device(device));
  auto positions = row.unsqueeze(0).expand({batch, length});
  Positions out{positions, positions};
  out.facts = {/*contiguous=*/true, 0, std::max<int64_t>(length - 1, 0), /*offset_bound=*/std::max<int64_t>(length - 1, 0),
               positions, positions};
  return out;
}

void require_integer_positions(const Positions& positions, const std::string& scheme) {
  TORCH_CHECK(!real_positions(positions), scheme, ": real-valued positions cannot index its tables; use an integer "
              "position sampler (contiguous, random_offset, randomized), not a continuous one (cape, random_float)");
}

Positions shared_row_positions(const torch::Tensor& row_on_host, int64_t batch, torch::Device device,
                               int64_t position_range) {
  const bool real = row_on_host.scalar_type() == torch::kFloat64;
  TORCH_CHECK(row_on_host.dim() == 1 && (real || row_on_host.scalar_type() == torch::kInt64) &&
                  row_on_host.device().is_cpu(),
              "shared_row_positions: a (T) int64 or float64 row on the host, got ", row_on_host.sizes(), " ",
              row_on_host.dtype());
  const int64_t T = row_on_host.size(0);
  auto positions = host_to_device(row_on_host, device).unsqueeze(0).expand({batch, T});
  Positions out{positions, positions};
  out.facts.query = out.facts.key = positions;
  if (real && T > 0) {  // never contiguous; bounds rounded outwards
    out.facts.smallest = static_cast<int64_t>(std::floor(row_on_host.min().item<double>()));
    out.facts.largest = static_cast<int64_t>(std::ceil(row_on_host.max().item<double>()));
  } else if (T > 0) {
    const auto row = row_on_host.contiguous();
    const int64_t* p = row.data_ptr<int64_t>();
    out.facts.smallest = *std::min_element(p, p + T);
    out.facts.largest = *std::max_element(p, p + T);
    out.facts.contiguous = true;
    for (int64_t i = 1; i < T && out.facts.contiguous; ++i) out.facts.contiguous = p[i] == p[0] + i;
    if (position_range > 0) {
      TORCH_CHECK(out.facts.smallest >= 0 && out.facts.largest < position_range, "shared_row_positions: positions ",
                  out.facts.smallest, "..", out.facts.largest, " outside the stated range [0, ", position_range, ")");
      out.facts.offset_bound = position_range - 1;
    }
  }
  return out;
}

PositionBounds position_bounds(const Positions& positions) {
  if (const PositionFacts* facts = positions.known_facts())  // query and key are one tensor
    return {facts->smallest, facts->largest, facts->smallest, facts->largest};
  const auto bounds = torch::stack({positions.query.min(), positions.query.max(), positions.key.min(),
                                    positions.key.max()})
                          .to(torch::kCPU, torch::kFloat64);
  const double* b = bounds.data_ptr<double>();  // real positions: rounded outwards
  return {static_cast<int64_t>(std::floor(b[0])), static_cast<int64_t>(std::ceil(b[1])),
          static_cast<int64_t>(std::floor(b[2])), static_cast<int64_t>(std::ceil(b[3]))};
}

torch::Tensor collapse_broadcast_rows(const torch::Tensor& positions) {
  return positions.size(0) > 1 && positions.stride(0) == 0 ? positions.narrow(0, 0, 1) : positions;
}

RelativeRows PositionEncodingImpl::checked_relative_rows(const torch::Tensor& q, const torch::Tensor& k,
                                                         const AttentionContext& attention) {
  RelativeRows rows = relative_rows(q, k, attention);
  if (!rows.defined()) return rows;
  const std::string who = (context_.scheme.empty() ? "a position encoding" : context_.scheme) + ": relative_rows";
  TORCH_CHECK(rows.value.defined() || !has_value_term_at(attention.layer), who,
              ": a scheme with a value term must return value rows");
  check_relative_rows(rows, who, q.sizes(), k.size(2));
  return rows;
}

std::vector<ScoreTerm> PositionEncodingImpl::score_terms(const torch::Tensor& q, const torch::Tensor& k,
                                                        const AttentionContext& attention) {
  auto bias = score_bias(q, k, attention);
  if (!bias.defined()) return {};
  return {{"position bias", bias}};
}

double PositionEncodingImpl::attention_scale() const {
  return 1.0 / std::sqrt(static_cast<double>(context_.head_dim()));
}

}  // namespace pelab
