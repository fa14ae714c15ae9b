"""The CMake build behind `pip install .` (pyproject.toml): configures pelab against the torch
of the Python running pip (torch.utils.cmake_prefix_path, or Debian's LibTorch where torch has
no CMake files), builds the `pelab` command and the extension module, and puts both in the
package (pelab/_pelab*.so, pelab/bin/pelab).

PELAB_CMAKE_BUILD_DIR: the CMake build folder (default: build/pip-<python tag>); one already
configured for this Python and torch is built incrementally (tests/pip_install.sh reuses the
suite's). CMAKE_ARGS: extra configure arguments; JOBS: parallel jobs (default: every core).
"""
import glob
import os
import shutil
import subprocess
import sys
import sysconfig

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = os.path.dirname(os.path.abspath(__file__))


def configured_python(build_dir):
    """The Python3_EXECUTABLE a CMake build folder was configured with, or None."""
    cache = os.path.join(build_dir, "CMakeCache.txt")
    if not os.path.isfile(cache):
        return None
    found = {}
    for line in open(cache, encoding="utf-8", errors="replace"):
        for key in ("Python3_EXECUTABLE:", "_Python3_EXECUTABLE:"):  # set, or what FindPython3 chose
            if line.startswith(key):
                found[key] = line.split("=", 1)[1].strip()
    return found.get("Python3_EXECUTABLE:") or found.get("_Python3_EXECUTABLE:")


class CMakeBuild(build_ext):
    def build_extension(self, ext):
        try:
            import torch
        except ImportError:
            sys.exit("pelab: pip install needs torch in this environment first (pip install --no-build-isolation .)")
        tag = sysconfig.get_config_var("SOABI") or "python"
        build_dir = os.path.abspath(os.environ.get("PELAB_CMAKE_BUILD_DIR", os.path.join(ROOT, "build", f"pip-{tag}")))
        configured = configured_python(build_dir)
        same_python = configured and os.path.realpath(configured) == os.path.realpath(sys.executable)
        if not same_python:
            arguments = ["cmake", "-S", ROOT, "-B", build_dir, "-DCMAKE_BUILD_TYPE=Release",
                         f"-DPython3_EXECUTABLE={sys.executable}"]
            prefix = torch.utils.cmake_prefix_path
            if os.path.isdir(os.path.join(prefix, "Torch")):  # pip's torch; Debian's has none (libtorch-dev's)
                arguments.append(f"-DCMAKE_PREFIX_PATH={prefix}")
            arguments += os.environ.get("CMAKE_ARGS", "").split()
            subprocess.check_call(arguments)
        jobs = os.environ.get("JOBS", str(os.cpu_count() or 1))
        subprocess.check_call(["cmake", "--build", build_dir, "-j", jobs, "--target", "pelab", "pelab_python"])
        built = glob.glob(os.path.join(build_dir, "python", "_pelab*.so"))
        if not built:
            sys.exit(f"pelab: the build in {build_dir} made no extension module (python3-dev and pybind11-dev?)")
        target = self.get_ext_fullpath(ext.name)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        shutil.copy2(built[0], target)
        binary = os.path.join(os.path.dirname(target), "bin")
        os.makedirs(binary, exist_ok=True)
        shutil.copy2(os.path.join(build_dir, "pelab"), os.path.join(binary, "pelab"))


os.makedirs(os.path.join(ROOT, "build", "setuptools"), exist_ok=True)
setup(ext_modules=[Extension("pelab._pelab", sources=[])], cmdclass={"build_ext": CMakeBuild},
      options={"build": {"build_base": os.path.join("build", "setuptools")},
               "egg_info": {"egg_base": os.path.join("build", "setuptools")}})
