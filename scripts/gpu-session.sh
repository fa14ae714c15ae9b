# Sourced by the one-command GPU sessions (gpu-check.sh, gpu-ruoss.sh), from the project root
# with `out` set to their output folder (absolute, made):
#   gpu_session_begin NAME   start the clock ($start), OUT/summary.txt anew, the bundle's
#                            environment (.gpu-deps/env.sh), the machine in OUT/nvidia-smi.txt
#   note TEXT                a line to the terminal and OUT/summary.txt
#   gpu_build [ARGS]         build-cuda (configured once) with every core, `cmake --build` ARGS
#                            (--target pelab, or none: everything); the log in OUT/build.log;
#                            exits 1 with its tail if the build fails

note() { echo "$*" | tee -a "$summary"; }

gpu_session_begin() {
  start=$SECONDS
  summary="$out/summary.txt"
  : >"$summary"
  source .gpu-deps/env.sh
  nvidia-smi >"$out/nvidia-smi.txt" 2>&1
  { python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)'; nproc; } \
    >>"$out/nvidia-smi.txt" 2>&1
  note "$1 $(git rev-parse --short HEAD 2>/dev/null) on $(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1), $(date -u +%F)"
}

gpu_build() {
  export BUILD_DIR=build-cuda
  if ! { [ -f build-cuda/CMakeCache.txt ] || cmake -S . -B build-cuda -DCMAKE_BUILD_TYPE=Release ${CMAKE_ARGS:-}; } >"$out/build.log" 2>&1 ||
     ! cmake --build build-cuda -j "$(nproc)" "$@" >>"$out/build.log" 2>&1; then
    tail -n 60 "$out/build.log"
    note "build failed after $((SECONDS - start)) s"
    exit 1
  fi
  note "built after $((SECONDS - start)) s"
}
