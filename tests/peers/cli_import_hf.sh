#!/usr/bin/env bash
# pelab import-hf from the command line, on the peers' tiny BertModels (the peers_fixtures
# test writes them): the run file works with pelab eval, export-attention, padding, report and
# import pelab; a second import is refused without --force; what pelab cannot express, and
# files that are not checkpoints, are refused by name.
#   bash tests/peers/cli_import_hf.sh SOURCE_DIR WORK_DIR FIXTURES_DIR   ($PELAB set)
set -euo pipefail
source_dir="$1"; work="$2"; fixtures="$3"
rm -rf "$work"; mkdir -p "$work"; cd "$work"
source "$source_dir/tests/cli_support.sh"  # fails_with

echo "== import, then the finished-run commands on it"
"$PELAB" import-hf "$fixtures/bert_relative_key" --out rk --lengths 10,20 --samples 8 | tee import.txt
grep -q "not imported: embeddings.position_embeddings.weight: relative_key does not use it" import.txt
grep -q "run file: rk/run.h5" import.txt
"$PELAB" eval rk/run.h5 | tee eval.txt  # the lengths of its config
grep -q "added 2 evaluation rows" eval.txt
"$PELAB" eval rk/run.h5 --probes 20 | grep -q "probes at 1 lengths"
"$PELAB" export-attention rk/run.h5 --lengths 10 | grep -q "1 attention maps"
"$PELAB" padding rk/run.h5 --length 10 --examples 4 | grep -q "zero       on"
"$PELAB" report rk/run.h5 --format csv | grep -q "hf-bert_relative_key"
PYTHONPATH="$source_dir/python" /usr/bin/python3 - <<'PY'
import numpy as np
import pelab
run = pelab.load("rk/run.h5")
assert run.config["encoding"]["name"] == "relative_key", run.config["encoding"]
out = run(np.array([[5, 6, 7, 8]]))
assert len(out["hidden_states"]) == 3 and out["hidden_states"][-1].shape == (1, 4, 32), out["hidden_states"][-1].shape
PY
echo "== a run file there is not replaced without --force"
fails_with 2 "rk/run.h5 exists; pass --force" "$PELAB" import-hf "$fixtures/bert_relative_key" --out rk
"$PELAB" import-hf "$fixtures/bert_relative_key" --out rk --force > /dev/null

echo "== what pelab cannot express is refused by name"
refused() {  # refused KEY VALUE PATTERN: config.json with KEY set to VALUE
  rm -rf changed && cp -r "$fixtures/bert_absolute" changed
  /usr/bin/python3 -c "import json, sys; c = json.load(open('changed/config.json')); c[sys.argv[1]] = json.loads(sys.argv[2]); json.dump(c, open('changed/config.json', 'w'))" "$1" "$2"
  fails_with 2 "$3" "$PELAB" import-hf changed --out changed-run
}
refused model_type '"roberta"' "model_type is 'roberta'; pelab import-hf reads BERT checkpoints"
refused position_embedding_type '"rotary"' "position_embedding_type is 'rotary'; pelab reads absolute, relative_key"
refused hidden_act '"gelu_new"' "hidden_act is 'gelu_new'"
refused is_decoder true "is_decoder is true"
refused type_vocab_size 1 "type_vocab_size is not 2"
refused pad_token_id 1 "pad_token_id is not 0"
refused num_hidden_layers 3 "encoder.layer.2.attention.self.query.weight is missing"
refused num_hidden_layers 1 "encoder.layer.1.* in changed: a tensor pelab's BERT encoder has no place for"

echo "== files that are not a checkpoint"
rm -rf broken && cp -r "$fixtures/bert_absolute" broken
head -c 100 "$fixtures/bert_absolute/model.safetensors" > broken/model.safetensors
fails_with 1 "not a safetensors file" "$PELAB" import-hf broken --out broken-run
rm broken/model.safetensors
fails_with 1 "neither model.safetensors nor pytorch_model.bin" "$PELAB" import-hf broken --out broken-run
echo "not json {" > broken/config.json
fails_with 1 "config.json: not JSON" "$PELAB" import-hf broken --out broken-run
echo "cli import-hf: ok"
