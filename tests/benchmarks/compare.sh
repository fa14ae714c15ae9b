#!/usr/bin/env bash
# pelab against PyTorch eager (Debian's python3-torch, the same LibTorch 1.13) on the same
# model, batch and training step, interleaved over rounds (tests/benchmarks/compare.py).
#   tests/benchmarks/compare.sh [small|large|all] [THREADS] [ROUNDS]
# Installs python3-torch when missing (apt, as scripts/setup-deps.sh does). A benchmark, not a test.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
which="${1:-all}"; threads="${2:-$(nproc)}"; rounds="${3:-3}"
if ! /usr/bin/python3 -c "import torch" 2> /dev/null; then
  sudo_cmd=(); [[ $(id -u) -ne 0 ]] && sudo_cmd=(sudo)
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -q --no-install-recommends python3-torch
fi
for shape in small large; do
  if [[ "$which" == "$shape" || "$which" == all ]]; then
    /usr/bin/python3 "$root/tests/benchmarks/compare.py" --shape "$shape" --threads "$threads" --rounds "$rounds"
  fi
done
