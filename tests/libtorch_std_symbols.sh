#!/usr/bin/env bash
# pelab's binaries must not import the libstdc++ symbols that Python torch's LibTorch (2.4 on)
# also exports, from the copy of libstdc++ it was linked with (PyTorch issue 133437):
# std::filesystem's recursive_directory_iterator, and remove_all, which builds one. Under
# LibTorch 2.11 (Ubuntu 24.04) the system libstdc++'s remove_all then ran on torch's copy of
# the iterator, and every test that removed a temporary folder crashed. Prints how many of
# these symbols the LibTorch in use exports (Debian's: none).
# Usage: libtorch_std_symbols.sh SOURCE_DIR WORK_DIR [BINARY...], with $PELAB set.
set -euo pipefail
shift 2
pattern='std::filesystem::(__cxx11::)?(recursive_directory_iterator|remove_all)'
status=0
for binary in "$PELAB" "$@"; do
  imported=$(nm -D --undefined-only "$binary" | c++filt | grep -E "$pattern" || true)
  if [[ -n "$imported" ]]; then
    echo "$(basename "$binary") imports libstdc++ symbols that Python torch's LibTorch also exports" \
         "(PyTorch issue 133437); remove folders with nftw (tests/support.cpp) instead:"
    echo "$imported"
    status=1
  fi
done
torch_cpu=$(ldd "$PELAB" | awk '/libtorch_cpu/ {print $3}')
if [[ -n "$torch_cpu" ]]; then
  exported=$(nm -D --defined-only "$torch_cpu" | c++filt | grep -cE "$pattern" || true)
  echo "$torch_cpu exports $exported of them"
fi
exit $status
