"""The run-file reader for the analysis scripts run from a checkout: it is pelab.runfile
(python/pelab/runfile.py, part of `import pelab`; h5py only, no torch)."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
from pelab.runfile import *  # noqa: E402,F401,F403
