#include "core/analysis/probes.h"

#include <random>

namespace pelab {

namespace {

torch::Tensor with_bias(const torch::Tensor& x) {
  return torch::cat({x, torch::ones({x.size(0), 1}, x.options())}, 1);
}

// 1 - SSE / SST over the test targets (k = 1)
double r_squared(const torch::Tensor& predicted, const torch::Tensor& target) {
  const double sse = (predicted - target).pow(2).sum().item<double>();
  const double sst = (target - target.mean()).pow(2).sum().item<double>();
  return sst > 0 ? 1.0 - sse / sst : 0.0;
}

double argmax_accuracy(const torch::Tensor& scores, const torch::Tensor& labels) {
  return (scores.argmax(1) == labels).to(torch::kFloat64).mean().item<double>();
}

}  // namespace

torch::Tensor ridge_predict(const torch::Tensor& x_fit, const torch::Tensor& y_fit, const torch::Tensor& x_test,
                            double ridge) {
  auto x = with_bias(x_fit.to(torch::kFloat64));
  auto y = y_fit.to(torch::kFloat64);
  auto gram = x.t().mm(x);  // (d + 1, d + 1)
  const int64_t d = gram.size(0);
  const double lambda = ridge * gram.trace().item<double>() / d;
  auto weights = at::linalg_solve(gram + lambda * torch::eye(d, gram.options()), x.t().mm(y), /*left=*/true);
  return with_bias(x_test.to(torch::kFloat64)).mm(weights);
}

torch::Tensor one_hot_ridge_predict(const torch::Tensor& tokens_fit, const torch::Tensor& y_fit,
                                    const torch::Tensor& tokens_test, int64_t vocab_size, double ridge) {
  const auto f64 = torch::TensorOptions().dtype(torch::kFloat64);
  const auto y = y_fit.to(torch::kFloat64);                                      // (n, k)
  const auto ids = tokens_fit.to(torch::kInt64).flatten();
  const auto counts = torch::zeros({vocab_size}, f64).index_add_(0, ids, torch::ones({ids.size(0)}, f64));  // (V)
  const auto sums = torch::zeros({vocab_size, y.size(1)}, f64).index_add_(0, ids, y);                       // (V, k)
  const double n = static_cast<double>(ids.size(0));
  const double lambda = ridge * (2.0 * n) / static_cast<double>(vocab_size + 1);  // trace: the counts' n + the bias' n
  // [diag(counts) + lambda, counts; counts^T, n + lambda] [W; b] = [sums; sum of y]
  const auto inverse = 1.0 / (counts + lambda);                                               // (V)
  const auto bias = (y.sum(0) - (counts * inverse).unsqueeze(0).mm(sums).squeeze(0)) /
                    (n + lambda - (counts * counts * inverse).sum());                            // (k)
  const auto weights = inverse.unsqueeze(1) * (sums - counts.unsqueeze(1) * bias.unsqueeze(0));  // (V, k)
  return weights.index_select(0, tokens_test.to(torch::kInt64).flatten()) + bias.unsqueeze(0);
}

std::vector<ProbeResult> position_probes(const std::vector<torch::Tensor>& hidden, const torch::Tensor& tokens,
                                         int64_t vocab_size, int64_t length, double ridge, uint64_t seed) {
  const int64_t N = tokens.size(0), T = tokens.size(1), n_fit = N / 2;
  TORCH_CHECK(n_fit >= 1 && N - n_fit >= 1, "position probes need at least 2 sequences");
  auto positions = torch::arange(T, torch::kInt64).repeat({N, 1});  // (N, T)
  auto fit_rows = [&](const torch::Tensor& t) { return t.narrow(0, 0, n_fit).reshape({n_fit * T, -1}); };
  auto test_rows = [&](const torch::Tensor& t) { return t.narrow(0, n_fit, N - n_fit).reshape({(N - n_fit) * T, -1}); };
  auto position_fit = fit_rows(positions).squeeze(1), position_test = test_rows(positions).squeeze(1);
  auto one_hot_fit = torch::one_hot(position_fit, T).to(torch::kFloat64);

  // what the token ids alone reveal of position
  const auto token_ids = tokens.cpu().unsqueeze(-1);  // (N, T, 1)
  const double chance = argmax_accuracy(
      one_hot_ridge_predict(fit_rows(token_ids), one_hot_fit, test_rows(token_ids), vocab_size, ridge), position_test);

  // pairs (i, j), i != j: T per sequence
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int64_t> any(0, T - 1);
  std::vector<int64_t> first(N * T), second(N * T);
  for (int64_t k = 0; k < N * T; ++k) {
    first[k] = any(rng);
    do second[k] = any(rng); while (T > 1 && second[k] == first[k]);
  }
  auto i = torch::tensor(first).view({N, T}), j = torch::tensor(second).view({N, T});
  auto order = torch::where(i < j, torch::ones({N, T}, torch::kFloat64), -torch::ones({N, T}, torch::kFloat64));
  auto distance = (i - j).abs().to(torch::kFloat64);

  // targets, the same for every layer
  auto scaled = (positions.to(torch::kFloat64) / std::max<int64_t>(1, T - 1)).unsqueeze(-1);
  auto scaled_fit = fit_rows(scaled), scaled_test = test_rows(scaled);
  auto order_fit = fit_rows(order.unsqueeze(-1)), order_test = test_rows(order.unsqueeze(-1));
  auto distance_fit = fit_rows(distance.unsqueeze(-1)), distance_test = test_rows(distance.unsqueeze(-1));

  std::vector<ProbeResult> results;
  for (size_t layer = 0; layer < hidden.size(); ++layer) {
    auto h = hidden[layer].detach().cpu().to(torch::kFloat64);  // (N, T, D)
    const int64_t D = h.size(2);
    auto h_fit = fit_rows(h), h_test = test_rows(h);
    ProbeResult r;
    r.length = length;
    r.layer = static_cast<int64_t>(layer);
    r.position_chance = chance;
    // one solve per feature set: ridge regression is separable across target columns
    auto position_predicted = ridge_predict(h_fit, torch::cat({one_hot_fit, scaled_fit}, 1), h_test, ridge);
    r.position_accuracy = argmax_accuracy(position_predicted.narrow(1, 0, T), position_test);
    r.position_r2 = r_squared(position_predicted.narrow(1, T, 1), scaled_test);
    auto hi = h.gather(1, i.unsqueeze(-1).expand({N, T, D})), hj = h.gather(1, j.unsqueeze(-1).expand({N, T, D}));
    auto pair = torch::cat({hi, hj}, -1);  // (N, T, 2D)
    auto pair_fit = fit_rows(pair), pair_test = test_rows(pair);
    auto pair_predicted = ridge_predict(pair_fit, torch::cat({order_fit, distance_fit}, 1), pair_test, ridge);
    r.order_accuracy = (pair_predicted.narrow(1, 0, 1).sign() == order_test).to(torch::kFloat64).mean().item<double>();
    r.distance_r2 = r_squared(pair_predicted.narrow(1, 1, 1), distance_test);
    results.push_back(r);
  }
  return results;
}

}  // namespace pelab
