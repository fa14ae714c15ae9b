#include "core/run/hf_import.h"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <stdexcept>

#include "core/config/config.h"
#include "core/encodings/registry.h"
#include "core/io/environment.h"
#include "core/io/safetensors.h"
#include "core/io/schema.h"
#include "core/run/run.h"
#include "core/train/evaluator.h"
#include "data/task_registry.h"

namespace pelab {

namespace {

namespace fs = std::filesystem;

// config.json, read as YAML (JSON is YAML), with refusals that name the key.
struct HfConfig {
  YAML::Node node;
  std::string path;

  bool has(const std::string& key) const { return node[key] && !node[key].IsNull(); }
  template <typename T>
  T get(const std::string& key) const {
    if (!has(key)) throw std::invalid_argument(path + ": no " + key);
    try {
      return node[key].as<T>();
    } catch (const YAML::Exception&) {
      throw std::invalid_argument(path + ": " + key + " is not what pelab expects there");
    }
  }
  template <typename T>
  T get(const std::string& key, const T& fallback) const { return has(key) ? get<T>(key) : fallback; }
  [[noreturn]] void refuse(const std::string& key, const std::string& why) const {
    throw std::invalid_argument(path + ": " + key + " " + why);
  }
};

// The ids pelab's token_ids task needs from vocab.txt: the first ordinary token (after [PAD],
// [unusedN], [UNK], [CLS], [SEP], [MASK]), [CLS] and [SEP]; -1 where vocab.txt lacks them.
struct VocabularyIds {
  int64_t first_ordinary = 1, cls = -1, sep = -1;
};

VocabularyIds vocabulary_ids(const fs::path& dir) {
  VocabularyIds ids;
  std::ifstream in(dir / "vocab.txt");
  if (!in) return ids;
  std::string token;
  bool ordinary_found = false;
  for (int64_t id = 0; std::getline(in, token); ++id) {
    if (token == "[CLS]") ids.cls = id;
    if (token == "[SEP]") ids.sep = id;
    const bool special = token.size() >= 2 && token.front() == '[' && token.back() == ']';
    if (!special && !ordinary_found && id > 0) {
      ids.first_ordinary = id;
      ordinary_found = true;
    }
  }
  return ids;
}

NamedTensors read_weights(const fs::path& dir) {
  if (fs::exists(dir / "model.safetensors")) return read_safetensors((dir / "model.safetensors").string());
  if (fs::exists(dir / "pytorch_model.bin")) return read_torch_state_dict((dir / "pytorch_model.bin").string());
  if (fs::exists(dir / "model.safetensors.index.json") || fs::exists(dir / "pytorch_model.bin.index.json"))
    throw std::invalid_argument(dir.string() + ": a sharded checkpoint, which pelab import-hf does not read yet");
  throw std::runtime_error(dir.string() + ": neither model.safetensors nor pytorch_model.bin");
}

std::string yaml_list(const std::vector<int64_t>& values) {
  std::string out = "[";
  for (size_t i = 0; i < values.size(); ++i) out += (i ? ", " : "") + std::to_string(values[i]);
  return out + "]";
}

}  // namespace

HfImport import_hf_checkpoint(const std::string& dir_name, const HfImportOptions& options) {
  const fs::path dir(dir_name);
  HfConfig hf{{}, (dir / "config.json").string()};
  if (!fs::exists(hf.path)) throw std::runtime_error(dir_name + ": no config.json (an HF checkpoint folder has one)");
  try {
    hf.node = YAML::LoadFile(hf.path);
  } catch (const YAML::Exception& e) {
    throw std::runtime_error(hf.path + ": not JSON (" + e.what() + ")");
  }
  if (!hf.node.IsMap()) throw std::runtime_error(hf.path + ": not JSON (not an object of keys and values)");
  const auto model_type = hf.get<std::string>("model_type", "");
  if (model_type != "bert")
    hf.refuse("model_type", "is '" + model_type + "'; pelab import-hf reads BERT checkpoints (model_type bert)");
  const auto position_type = hf.get<std::string>("position_embedding_type", "absolute");
  static const std::map<std::string, std::string> schemes = {
      {"absolute", "learned"}, {"relative_key", "relative_key"}, {"relative_key_query", "relative_key_query"}};
  if (!schemes.count(position_type))
    hf.refuse("position_embedding_type", "is '" + position_type + "'; pelab reads absolute, relative_key and relative_key_query");
  if (hf.get<bool>("is_decoder", false)) hf.refuse("is_decoder", "is true; pelab imports BERT encoders");
  if (hf.get<bool>("add_cross_attention", false)) hf.refuse("add_cross_attention", "is true; pelab has no cross-attention");
  const auto activation = hf.get<std::string>("hidden_act", "gelu");
  if (activation != "gelu" && activation != "relu")
    hf.refuse("hidden_act", "is '" + activation + "'; pelab has gelu (the exact erf form, as HF's \"gelu\") and relu");
  if (hf.get<int64_t>("type_vocab_size", 2) != 2)
    hf.refuse("type_vocab_size", "is not 2; pelab's segment embedding has two rows, as BERT's");
  if (hf.get<int64_t>("pad_token_id", 0) != 0) hf.refuse("pad_token_id", "is not 0; pelab's padding token is id 0");

  const auto d_model = hf.get<int64_t>("hidden_size"), layers = hf.get<int64_t>("num_hidden_layers"),
             heads = hf.get<int64_t>("num_attention_heads"), d_ff = hf.get<int64_t>("intermediate_size"),
             vocab = hf.get<int64_t>("vocab_size"), max_positions = hf.get<int64_t>("max_position_embeddings");
  const VocabularyIds ids = vocabulary_ids(dir);
  const int64_t wrap = (ids.cls >= 0 ? 1 : 0) + (ids.sep >= 0 ? 1 : 0);
  const int64_t train_tokens = options.train_length > 0 ? options.train_length : max_positions;
  if (train_tokens > max_positions)
    throw std::invalid_argument(fmt::format("--train-length {} is beyond the checkpoint's max_position_embeddings {}",
                                            train_tokens, max_positions));
  if (train_tokens <= wrap) throw std::invalid_argument("--train-length leaves no room besides [CLS] and [SEP]");
  // lengths are the task's input lengths (as pelab eval's): tokens without [CLS] and [SEP]
  std::vector<int64_t> eval_lengths = options.eval_lengths;
  if (eval_lengths.empty()) {
    for (int64_t tokens = 16; tokens < max_positions; tokens *= 2) eval_lengths.push_back(tokens - wrap);
    eval_lengths.push_back(max_positions - wrap);
  }

  // the head scores every token against the whole vocabulary: batches whose logits stay
  // within 256 MB at the longest sequence (BERT's 512 x 30522: 4 sequences)
  const int64_t eval_batch = std::clamp<int64_t>((int64_t(1) << 28) / (4 * max_positions * vocab), 1, 128);
  const std::string name = !options.name.empty() ? options.name : "hf-" + fs::absolute(dir).lexically_normal().filename().string();
  const std::string output_dir = !options.output_dir.empty() ? options.output_dir : "runs/" + name;
  const std::string yaml = fmt::format(
      "name: {name}\n"
      "task: {{name: token_ids, format: encoder, vocab_size: {vocab}, first_id: {first}, cls_id: {cls}, sep_id: {sep}}}\n"
      "model: {{d_model: {d}, num_layers: {layers}, num_heads: {heads}, d_ff: {ff}, activation: {act}, norm: post,\n"
      "  causal: false, segment_embeddings: true, embedding_layer_norm: true, layer_norm_eps: {eps},\n"
      "  dropout: {dropout}, attention_dropout: {attention_dropout}, embedding_init_std: {init}}}\n"
      "encoding: {{name: {scheme}, max_positions: {max_positions}}}\n"
      "train: {{steps: 0, min_length: {train}, max_length: {train}}}\n"
      "eval: {{lengths: {lengths}, samples: {samples}, batch_size: {eval_batch}}}\n"
      "output: {{dir: \"{out}\"}}\n",
      fmt::arg("name", name), fmt::arg("vocab", vocab), fmt::arg("first", ids.first_ordinary), fmt::arg("cls", ids.cls),
      fmt::arg("sep", ids.sep), fmt::arg("d", d_model), fmt::arg("layers", layers), fmt::arg("heads", heads),
      fmt::arg("ff", d_ff), fmt::arg("act", activation), fmt::arg("eps", hf.get<double>("layer_norm_eps", 1e-12)),
      fmt::arg("dropout", hf.get<double>("hidden_dropout_prob", 0.1)),
      fmt::arg("attention_dropout", hf.get<double>("attention_probs_dropout_prob", 0.1)),
      fmt::arg("init", hf.get<double>("initializer_range", 0.02)), fmt::arg("scheme", schemes.at(position_type)),
      fmt::arg("max_positions", max_positions), fmt::arg("train", train_tokens - wrap),
      fmt::arg("lengths", yaml_list(eval_lengths)), fmt::arg("samples", options.eval_samples),
      fmt::arg("eval_batch", eval_batch),
      fmt::arg("out", output_dir));
  const RunConfig config = parse_run_config(yaml, hf.path, {}, scheme_catalog(), task_catalog());

  HfImport result;
  PreparedRun prepared = prepare_run(config);
  // checkpoint name (without a "bert." prefix) -> pelab name; q, k, v go into one qkv
  std::map<std::string, std::string> names = {
      {"embeddings.word_embeddings.weight", "token_embedding.weight"},
      {"embeddings.token_type_embeddings.weight", "segment_embedding.weight"},
      {"embeddings.LayerNorm.weight", "embedding_norm.weight"},
      {"embeddings.LayerNorm.bias", "embedding_norm.bias"}};
  if (position_type == "absolute") names["embeddings.position_embeddings.weight"] = "position_encoding.table";
  for (int64_t l = 0; l < layers; ++l) {
    const std::string hf_layer = fmt::format("encoder.layer.{}.", l), block = fmt::format("blocks.{}.", l);
    for (const char* part : {"weight", "bias"}) {
      names[hf_layer + "attention.output.dense." + part] = block + "attention.out." + part;
      names[hf_layer + "attention.output.LayerNorm." + part] = block + "norm1." + part;
      names[hf_layer + "intermediate.dense." + part] = block + "ff_in." + part;
      names[hf_layer + "output.dense." + part] = block + "ff_out." + part;
      names[hf_layer + "output.LayerNorm." + part] = block + "norm2." + part;
    }
    if (position_type != "absolute")
      names[hf_layer + "attention.self.distance_embedding.weight"] = fmt::format("position_encoding.distance_embedding_{}", l);
  }
  std::map<std::string, torch::Tensor> stored;        // pelab name -> tensor
  std::map<std::string, torch::Tensor> projections;   // "blocks.l.{query,key,value}.{weight,bias}"
  static const std::regex projection(R"(encoder\.layer\.(\d+)\.attention\.self\.(query|key|value)\.(weight|bias))");
  static const std::regex gamma(R"(LayerNorm\.gamma$)"), beta(R"(LayerNorm\.beta$)");
  for (auto [hf_name, tensor] : read_weights(dir)) {
    std::string key = hf_name.rfind("bert.", 0) == 0 ? hf_name.substr(5) : hf_name;
    // checkpoints of the original BERT code name LayerNorm's parameters gamma and beta
    key = std::regex_replace(key, gamma, "LayerNorm.weight");
    key = std::regex_replace(key, beta, "LayerNorm.bias");
    std::smatch m;
    if (names.count(key)) {
      stored[names.at(key)] = tensor.to(torch::kFloat32);
      result.imported.push_back(hf_name + " -> " + names.at(key));
    } else if (std::regex_match(key, m, projection) && std::stoll(m[1]) < layers) {
      projections[fmt::format("blocks.{}.{}.{}", m[1].str(), m[2].str(), m[3].str())] = tensor.to(torch::kFloat32);
    } else if (key == "embeddings.position_ids") {
      result.skipped.push_back(hf_name + ": a buffer of 0, 1, ..., the positions pelab makes itself");
    } else if (key == "embeddings.position_embeddings.weight") {
      result.skipped.push_back(hf_name + ": " + position_type + " does not use it (HF BertEmbeddings makes and saves "
                               "the table for every position_embedding_type, and adds it only for absolute)");
    } else if (key.rfind("pooler.", 0) == 0 || key.rfind("cls.", 0) == 0) {
      result.skipped.push_back(hf_name + ": a head on top of the encoder (pelab's head: the token embeddings, below)");
    } else {
      throw std::invalid_argument(hf_name + " in " + dir_name + ": a tensor pelab's BERT encoder has no place for");
    }
  }
  for (int64_t l = 0; l < layers; ++l)
    for (const char* part : {"weight", "bias"}) {
      std::vector<torch::Tensor> qkv;
      for (const char* projection_name : {"query", "key", "value"}) {
        const std::string key = fmt::format("blocks.{}.{}.{}", l, projection_name, part);
        if (!projections.count(key))
          throw std::invalid_argument(fmt::format("{}: encoder.layer.{}.attention.self.{}.{} is missing", dir_name, l,
                                                  projection_name, part));
        qkv.push_back(projections.at(key));
      }
      stored[fmt::format("blocks.{}.attention.qkv.{}", l, part)] = torch::cat(qkv, 0);
      result.imported.push_back(fmt::format("encoder.layer.{}.attention.self.{{query,key,value}}.{} -> "
                                            "blocks.{}.attention.qkv.{}", l, part, l, part));
    }
  // the head: each position's output scored against the token embeddings (tied, no bias), so
  // that token_ids' "each token its own target" reads how far a layer keeps the token's identity
  stored["head.weight"] = stored.at("token_embedding.weight");
  stored["head.bias"] = torch::zeros({vocab});
  // in the model's order: what load_named_tensors takes, and the run file's checkpoint as is
  NamedTensors ordered;
  for (const auto& item : prepared.model->named_parameters()) {
    if (!stored.count(item.key()))
      throw std::invalid_argument(dir_name + ": nothing in the checkpoint for pelab's " + item.key());
    ordered.emplace_back(item.key(), stored.at(item.key()));
  }
  load_named_tensors(*prepared.model, ordered, dir_name);

  RunRecord& record = result.record;
  record.run_name = config.name;
  record.config_yaml = to_yaml(config);
  record.environment = current_environment("cpu");
  record.parameter_counts = count_parameters(*prepared.model);
  record.train_min_length = config.train.min_length;
  record.train_max_length = config.train.max_length;
  record.train_steps = 0;
  std::tie(record.run_sampler, record.run_positions_max_length) = evaluation_sampler(config.positions);
  record.task_format = "encoder";
  record.evaluation_protocol = prepared.task->evaluation_protocol();
  record.checkpoint = std::move(ordered);  // the tensors just loaded: no second copy of the model
  // pelab cannot see which rows the checkpoint's training updated: every row counts as trained
  Evaluator evaluator(config, prepared.model, *prepared.task, prepared.device);
  record.trained_rows = evaluator.trained_rows();
  for (auto& rows : record.trained_rows) std::fill(rows.trained.begin(), rows.trained.end(), 1);
  result.run_file = output_dir + "/" + schema::kRunFileName;
  return result;
}

}  // namespace pelab
