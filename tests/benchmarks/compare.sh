#!/usr/bin/env bash
# pelab against PyTorch eager (Debian's python3-torch, the same LibTorch 1.13) on the same
# model, batch and training step: prints, per shape and scheme, both step times and the
# speed-up (eager ms / pelab ms; above 1 means pelab is faster).
#   tests/benchmarks/compare.sh [small|large|all] [THREADS]
# Shapes: small = the Ruoss et al. model (d_model 64, 5 layers, 8 heads, d_ff 256, batch 128,
# T 80); large = d_model 256, 4 layers, 8 heads, d_ff 1024, batch 8, T 512.
# Installs python3-torch when missing (apt, as scripts/setup-deps.sh does). A benchmark, not a test.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
which="${1:-all}"; threads="${2:-$(nproc)}"
pelab="${PELAB:-$root/build/pelab}"
if ! /usr/bin/python3 -c "import torch" 2> /dev/null; then
  sudo_cmd=(); [[ $(id -u) -ne 0 ]] && sudo_cmd=(sudo)
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -q --no-install-recommends python3-torch
fi
schemes="none,sinusoidal,learned,alibi,t5_bias,rope,relative_key,kerple,fire"
out="$(mktemp -d)"
run_shape() {  # name d_model layers heads d_ff batch T repeats
  local name=$1 d=$2 layers=$3 heads=$4 ff=$5 batch=$6 T=$7 repeats=$8
  local shape=(--d-model "$d" --layers "$layers" --heads "$heads" --d-ff "$ff" --batch "$batch" --warmup 2
               --repeats "$repeats" --threads "$threads")
  "$pelab" bench --schemes "$schemes" --lengths "$T" "${shape[@]}" --csv "$out/$name.pelab.csv" > "$out/$name.pelab.txt"
  /usr/bin/python3 "$root/tests/benchmarks/torch_eager.py" --schemes "$schemes" --lengths "$T" "${shape[@]}" \
    > "$out/$name.eager.txt"
  grep "^matmul peak" "$out/$name.pelab.txt" | sed "s/^/[$name] /"
  /usr/bin/python3 - "$name" "$out/$name.pelab.csv" "$out/$name.eager.txt" <<'PY'
import csv, sys
name, pelab_csv, eager_txt = sys.argv[1:]
pelab = {r["scheme"]: r for r in csv.DictReader(open(pelab_csv))}
eager = {}
for line in open(eager_txt):
    parts = line.split()
    if parts and parts[0] == "RESULT":
        eager[parts[1]] = float(parts[3])
print(f"| shape | scheme | pelab ms | eager ms | speed-up | pelab % of matmul peak |")
print(f"|---|---|---:|---:|---:|---:|")
for scheme, r in pelab.items():
    e = eager.get(scheme)
    ms = float(r["median_ms"])
    print(f"| {name} | {scheme} | {ms:.1f} | {e:.1f} | {e / ms:.2f}x | {100 * float(r['fraction_of_peak']):.0f}% |"
          if e else f"| {name} | {scheme} | {ms:.1f} | - | - | |")
PY
}
[[ "$which" == small || "$which" == all ]] && run_shape small 64 5 8 256 128 80 5
[[ "$which" == large || "$which" == all ]] && run_shape large 256 4 8 1024 8 512 3
rm -rf "$out"
