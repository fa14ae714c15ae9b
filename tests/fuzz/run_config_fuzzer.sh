#!/usr/bin/env bash
# Builds the config fuzzer (libFuzzer + ASan + UBSan, with Debian's clang and
# libclang-rt-dev) from the torch-free config sources and runs it for SECONDS, starting from
# every shipped config. Exit 0: no finding; 1: a finding (its input is saved in WORK as
# crash-*, timeout-* or oom-*; reproduce with: PELAB_CATALOG=WORK/catalog.yaml WORK/fuzz_config FILE);
# 77: no clang (skipped).
#   tests/fuzz/run_config_fuzzer.sh SOURCE_DIR WORK_DIR PELAB [SECONDS]
set -euo pipefail
source_dir="$(cd "$1" && pwd)"; work="$2"; pelab="$3"; seconds="${4:-30}"
if ! command -v clang++ > /dev/null; then
  echo "clang++ not found (apt-get install clang libclang-rt-dev): skipped"
  exit 77
fi
mkdir -p "$work/corpus"
cd "$work"
sources=(core/config/options.cpp core/config/config.cpp core/config/yaml_reader.cpp core/config/catalog_yaml.cpp tests/fuzz/fuzz_config.cpp)
stale=0
[[ -x fuzz_config ]] || stale=1
for s in "${sources[@]}" core/config/options.h core/config/config.h core/config/yaml_reader.h core/config/catalog_yaml.h; do
  [[ "$source_dir/$s" -nt fuzz_config ]] && stale=1
done
if [[ $stale = 1 ]]; then
  echo "building fuzz_config with $(clang++ --version | head -1)"
  clang++ -std=c++17 -O1 -g -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
    -I"$source_dir" "${sources[@]/#/$source_dir/}" -lyaml-cpp -lfmt -o fuzz_config
fi
"$pelab" list --yaml > catalog.yaml
# seeds: every shipped and fixture config; a dictionary of the config's keys and values
find "$source_dir/configs" "$source_dir/tests/fixtures" -maxdepth 1 -name '*.yaml' -exec cp {} corpus/ \;
cp "$source_dir"/configs/*/*.yaml corpus/ 2>/dev/null || true
grep -ohE '[a-z_]+:' "$source_dir"/configs -r | sort -u | sed 's/.*/"&"/' > config.dict
printf '%s\n' '"["' '"]"' '"{"' '"}"' '"- "' '": "' '"null"' '"true"' '"1e400"' '"-1"' '"!!binary"' '"&a"' '"*a"' >> config.dict
echo "fuzzing the config loader for ${seconds}s"
PELAB_CATALOG=catalog.yaml ASAN_OPTIONS=detect_leaks=1 ./fuzz_config corpus -dict=config.dict \
  -max_total_time="$seconds" -max_len=4096 -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 2> fuzz.log || {
  tail -40 fuzz.log
  echo "config fuzzer: FINDING (inputs: $(ls -1 crash-* timeout-* oom-* 2>/dev/null | tr '\n' ' '))"
  exit 1
}
grep -E "stat::number_of_executed_units|cov:" fuzz.log | tail -2
echo "config fuzzer: no finding"
