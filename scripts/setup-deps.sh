#!/usr/bin/env bash
# Installs pelab's Debian dependencies when any is missing; a no-op (well under a second)
# when all are present. Runs unattended (no terminal, no stdin), as root or through sudo.
set -euo pipefail
packages=(
  build-essential cmake pkg-config git
  libtorch-dev libopenblas0-openmp
  libyaml-cpp-dev libhdf5-dev libcli11-dev catch2
  libspdlog-dev libfmt-dev
  python3 python3-h5py python3-numpy python3-matplotlib
  fortunes  # English text for the text task's tests and configs/text/ (/usr/share/games/fortunes)
  slurmctld slurmd slurm-client munge  # the test suite's one-node Slurm cluster (tests/slurm_sweep.sh)
  clang libclang-rt-dev  # the config fuzzer (libFuzzer, tests/fuzz/run_config_fuzzer.sh)
)
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
