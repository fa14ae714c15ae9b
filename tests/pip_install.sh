#!/usr/bin/env bash
# `pip install .` as PyTorch extensions are installed (docs/python.md, "Installing with pip"):
# into a fresh `python3 -m venv --system-site-packages` (Debian's torch visible) with
# --no-build-isolation, building against the torch there. The suite's build folder is reused
# (PELAB_CMAKE_BUILD_DIR; configured for this same Python, so nothing recompiles). Then the
# installed `import pelab` (not the repository's) passes the Python API test (its registry,
# config, trained-run and mistakes parts; the sweep, Ctrl-C and docs-example parts, which do not
# depend on how pelab was installed, run in the python_api test), and the installed
# `pelab` command runs a Python scheme with the venv's Python.
set -euo pipefail
source_dir="$1"; work="$2"; build_dir="$3"
rm -rf "$work"; mkdir -p "$work"; cd "$work"
/usr/bin/python3 -m venv --system-site-packages venv
# PELAB_KEEP_VERSION_HEADER: a tree edited since the suite's build (git describe --dirty)
# would otherwise relink the pelab the tests beside this one are running
PELAB_KEEP_VERSION_HEADER=1 PELAB_CMAKE_BUILD_DIR="$build_dir" venv/bin/pip install --no-build-isolation --no-deps --no-index -q "$source_dir"
where=$(venv/bin/python -c 'import pelab, os; print(os.path.dirname(pelab.__file__))')
echo "import pelab: $where"
case "$where" in "$work"/venv/*) ;; *) echo "not the installed package"; exit 1 ;; esac
test -x venv/bin/pelab
venv/bin/pelab --version
venv/bin/pelab list --schemes "$source_dir/examples/schemes/alibi.py" | grep -q "  py_alibi "
env -u PYTHONPATH -u PELAB_BUILD_DIR OMP_NUM_THREADS=1 venv/bin/python "$source_dir/tests/python_api.py" \
    "$work/venv/bin/pelab" "$work/python_api" \
    --skip test_the_worked_example_of_docs_python_md,test_results_of_a_sweep_and_run_files,test_ctrl_c_stops_with_a_checkpoint \
    | tail -3
echo "pip install: ok"
