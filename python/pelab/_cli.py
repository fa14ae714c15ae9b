"""The `pelab` command of a pip-installed pelab (pyproject.toml): runs the binary the install put
in the package (pelab/bin/pelab), with this environment's Python for the schemes it embeds."""
import os
import sys


def main():
    binary = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bin", "pelab")
    if not os.path.isfile(binary):
        sys.exit(f"pelab: {binary} is missing: reinstall with pip install --no-build-isolation .")
    os.environ.setdefault("PELAB_PYTHON", sys.executable)
    os.execv(binary, [binary] + sys.argv[1:])


if __name__ == "__main__":
    main()
