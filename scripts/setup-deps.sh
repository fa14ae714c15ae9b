#!/usr/bin/env bash
# Installs pelab's Debian dependencies when any is missing; a no-op (well under a second)
# when all are present. Runs unattended (no terminal, no stdin), as root or through sudo.
#   scripts/setup-deps.sh run    what building and running pelab need (scripts/dev quickstart)
#   scripts/setup-deps.sh test   that, plus what the test suite needs (scripts/dev test)
set -euo pipefail
run_packages=(
  build-essential cmake ninja-build pkg-config git  # Ninja: adding a source rebuilds only what depends on it
  libtorch-dev libopenblas0-openmp  # OpenBLAS: Debian's LibTorch calls the system BLAS
  libyaml-cpp-dev libhdf5-dev libcli11-dev libfmt-dev
  python3 python3-h5py python3-numpy python3-matplotlib python3-yaml  # analysis/
  python3-dev pybind11-dev python3-torch python3-pandas  # import pelab: the same LibTorch 1.13 as libtorch-dev
)
test_packages=(
  catch2
  fortunes  # English text for the text task's tests and configs/text/ (/usr/share/games/fortunes)
  slurmctld slurmd slurm-client munge  # the test suite's one-node Slurm cluster (tests/slurm_sweep.sh)
  clang libclang-rt-dev  # the config fuzzer (libFuzzer, tests/fuzz/run_config_fuzzer.sh)
  python3-venv python3-setuptools python3-wheel  # pip install . into a fresh venv (tests/pip_install.sh)
)
case "${1:-}" in
  run) packages=("${run_packages[@]}") ;;
  test) packages=("${run_packages[@]}" "${test_packages[@]}") ;;
  *) echo "usage: scripts/setup-deps.sh {run|test}" >&2; exit 2 ;;
esac
missing=()
for p in "${packages[@]}"; do
  status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
  [[ "$status" == "install ok installed" ]] || missing+=("$p")
done
if ((${#missing[@]} == 0)); then
  exit 0
fi
echo "pelab setup: installing ${missing[*]}"
sudo_cmd=()
if [[ $(id -u) -ne 0 ]]; then sudo_cmd=(sudo); fi
export DEBIAN_FRONTEND=noninteractive
"${sudo_cmd[@]}" apt-get update -q
"${sudo_cmd[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}"
