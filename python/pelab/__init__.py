"""pelab from Python: the registries, configs, training, trained models and results of the C++
core, through its extension module (docs/python.md). Nothing here re-implements a scheme, a
task or a metric: every call goes to the code the `pelab` command runs.

    import pelab
    cfg = pelab.config("configs/quickstart.yaml", **{"encoding.name": "alibi", "train.steps": 300})
    path = pelab.train(cfg, out="runs/py_alibi")
    run = pelab.load(path)
    run.evaluate(lengths=[20, 40])                   # a pandas DataFrame, as `pelab eval`
    out = run(run.examples(40, 2)["tokens"])         # logits, attentions, hidden states
    pelab.results(["runs/py_alibi", "runs/sweeps/quickstart"])

`pelab.runfile` reads run files with h5py alone (no torch): the analysis scripts use it.
"""
import collections
import json
import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))
_REPO = os.path.dirname(os.path.dirname(_HERE))
_core = None


def _build_dir():
    return os.path.abspath(os.environ.get("PELAB_BUILD_DIR", os.path.join(_REPO, "build")))


def _command():
    """The pelab command: the one a pip install put in the package, else the build's."""
    installed = os.path.join(_HERE, "bin", "pelab")
    return installed if os.path.isfile(installed) else os.path.join(_build_dir(), "pelab")


def _use_the_clis_blas_kernels():
    """The CLI re-executes itself with OPENBLAS_CORETYPE set when OpenBLAS would run kernels
    below the CPU's (core/kernels/blas_core.h): the kernels' rounding differs, so Python loads
    the same ones, asked of the CLI before numpy or torch loads OpenBLAS. Returns the kernels'
    name, or None when they cannot be matched (a user's OPENBLAS_CORETYPE is kept)."""
    if "OPENBLAS_CORETYPE" in os.environ:
        return os.environ["OPENBLAS_CORETYPE"]
    if "numpy" in sys.modules or "torch" in sys.modules:
        return None
    try:
        import subprocess
        version = subprocess.run([_command(), "--version"], capture_output=True, text=True,
                                 timeout=60).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    for line in version.splitlines():
        if line.startswith("OpenBLAS kernels: "):
            os.environ["OPENBLAS_CORETYPE"] = line.split(": ", 1)[1].strip()
            return os.environ["OPENBLAS_CORETYPE"]
    return None


_CLI_BLAS_KERNELS = _use_the_clis_blas_kernels()
# The extension module (_pelab) is built into <build>/python (CMakeLists.txt): $PELAB_BUILD_DIR,
# else the repository's build/.
__path__.append(os.path.join(_build_dir(), "python"))


def _c():
    """The extension module, loaded on first use (torch first: its types are the tensors')."""
    global _core
    if _core is None:
        try:
            import torch  # noqa: F401
        except ImportError as error:
            raise ImportError(f"pelab needs torch, which {sys.executable} lacks: use Debian's /usr/bin/python3 "
                              "with python3-torch (scripts/setup-deps.sh installs it)") from error
        try:
            from . import _pelab
        except ImportError as error:
            raise ImportError(f"pelab's extension module is not built or not loadable ({error}): in Debian's "
                              "/usr/bin/python3 run scripts/dev build; in a venv or conda environment with torch "
                              "run pip install --no-build-isolation . from the repository") from error
        _pelab.configure()
        loaded = _pelab.openblas_core()
        if loaded and loaded != _CLI_BLAS_KERNELS and _pelab.better_openblas_core(loaded):
            import warnings
            warnings.warn(f"OpenBLAS runs its {loaded} kernels here, the CLI its {_pelab.better_openblas_core(loaded)} "
                          "ones: numbers differ from the CLI's in the last bits. Import pelab before numpy and "
                          "torch, or set OPENBLAS_CORETYPE", stacklevel=3)
        _core = _pelab
    return _core


_SCHEME_API = ("Scheme", "option", "Option", "Context", "Positions", "Attention", "INPUT_LAYER", "offsets", "rows", "OffsetTable")


def __getattr__(name):
    # pelab.ConfigError: the CLI's config errors (a ValueError), from the extension module
    if name == "ConfigError":
        return _c().ConfigError
    # pelab.Scheme and its helpers (python/pelab/scheme.py), imported on first use: torch is
    # loaded only then (pelab.runfile and the analysis scripts need no torch)
    if name in _SCHEME_API:
        from . import scheme
        return getattr(scheme, name)
    raise AttributeError(f"module 'pelab' has no attribute '{name}'")


def _catalog(kind):
    return {entry["name"]: dict(entry, options={o["name"]: o for o in entry["options"]})
            for entry in _c().catalogs()[kind]}


def schemes():
    """The position-encoding registry: name -> {description, options: name -> {kind, default,
    help, choices, range}, causal_only} (what `pelab list` prints)."""
    return _catalog("schemes")


def load_schemes(*files):
    """Registers the pelab.Scheme classes of Python files, as a config's `schemes:` does, so that
    schemes() lists them; returns how many were registered. A config that names the files needs
    no call."""
    return _c().load_scheme_files([os.path.abspath(f) for f in files])


def check_scheme(name, schemes=(), causal=None, randomized=True, **options):
    """`pelab check-scheme` from Python: the registry-wide properties (finite forward and backward,
    padding invariance, no leak from the future, a gradient for every parameter, save/load, shift
    invariance when declared, score terms adding up, float32 against bf16 on a GPU) of scheme
    `name` with `options`, loading the Python files `schemes` first. causal: None checks both
    modes (only causal for a causal-only scheme). A DataFrame: causal, randomized, property,
    measured, passed, skipped, note."""
    import pandas as pd
    files = [os.path.abspath(f) for f in schemes]
    overrides = [f"encoding.name={name}"] + _override_list({f"encoding.{k}": v for k, v in options.items()})
    if files:
        _c().load_scheme_files(files)
    modes = [causal] if causal is not None else ([True] if _c().causal_only(name) else [False, True])
    rows = []
    for mode in modes:
        for random_positions in ([False, True] if randomized else [False]):
            for row in _c().check_scheme(overrides + [f"model.causal={'true' if mode else 'false'}"], files, mode,
                                         random_positions):
                rows.append(dict(causal=mode, randomized=random_positions, **row))
    return pd.DataFrame(rows)


def tasks():
    """The task registry: name -> {description, formats, options} (what `pelab list` prints)."""
    return _catalog("tasks")


class Config:
    """A validated run config, every default filled in. `config["train.steps"]` reads a key,
    `to_dict()` gives the nested dict, `yaml` the text a run file stores."""

    def __init__(self, yaml_text):
        self.yaml = yaml_text
        self._tree = _c().yaml_to_python(yaml_text)

    def to_dict(self):
        return json.loads(json.dumps(self._tree))

    def __getitem__(self, key):
        node = self._tree
        for part in key.split("."):
            node = node[part]
        return node

    def __repr__(self):
        return f"pelab.Config(name={self['name']!r}, task={self['task.name']!r}, encoding={self['encoding.name']!r})"


def _override_list(overrides):
    """`key.path=value` entries; `a__b=` is `a.b=`; values as YAML (JSON is YAML)."""
    return [f"{key.replace('__', '.')}={value if isinstance(value, str) else json.dumps(value)}"
            for key, value in overrides.items()]


def config(source, **overrides):
    """A run config from a YAML file's path, a dict (as the YAML would be) or a Config, with
    `overrides` as `pelab train --set` (`**{"train.steps": 100}` or `train__steps=100`).
    Raises pelab.ConfigError with the CLI's message."""
    entries = _override_list(overrides)
    if isinstance(source, Config):
        return Config(_c().resolve_config("", source.yaml, "<config>", entries))
    if isinstance(source, dict):
        return Config(_c().resolve_config("", json.dumps(source) or "{}", "<dict>", entries))
    return Config(_c().resolve_config(os.fspath(source), "", "", entries))


def train(source, out=None, resume=False, quiet=False, **overrides):
    """Trains a run (`source`: as config()) into `out` (else the config's output.dir) and returns
    its run file's path. Its log goes to standard output unless `quiet`. Ctrl-C stops it as in
    the CLI: a checkpoint, then KeyboardInterrupt; `resume=True` continues it."""
    cfg = config(source, **overrides)
    entries = [f"output.dir={os.fspath(out)}"] if out is not None else []
    sys.stdout.flush()
    return _c().train(cfg.yaml, entries, resume, quiet)


class Run:
    """A trained run loaded from its run file (pelab.load)."""

    def __init__(self, path, device="cpu", threads=0, step=None):
        self.path = os.fspath(path)
        self._run = _c().Run(self.path, device, threads, -1 if step is None else step)
        self.config = Config(self._run.config_yaml)
        self.step = self._run.step

    def __repr__(self):
        return f"pelab.Run({self.path!r}, step={self.step}, {self.config!r})"

    def __call__(self, tokens, positions=None, method="none", segments=None, padding=None, attentions=True,
                 hidden_states=True, score_terms=False):
        """The forward pass as evaluation makes it. tokens: (B, T) int64 (0 is padding);
        positions: (B, T) int64 or float64, default 0..T-1; method: the extrapolation method.
        Returns a dict: logits (B, T, C); attentions: per layer (B, H, T, T) probabilities;
        hidden_states: the embedding output and each layer's (B, T, D); score_terms (when asked):
        per layer, term name -> (B|1, H|1, T, T), adding up to the scores before the mask."""
        import torch
        tokens = _integer_tensor(tokens, "tokens")
        if tokens.dim() != 2:
            raise ValueError(f"tokens: expected (batch, length) token ids, got shape {tuple(tokens.shape)}")
        if tokens.numel() and (int(tokens.min()) < 0 or int(tokens.max()) >= self._run.vocab_size):
            raise ValueError(f"tokens: ids must be in [0, {self._run.vocab_size - 1}] (this run's vocabulary; 0 is "
                             f"padding), got {int(tokens.min())}..{int(tokens.max())}")
        if positions is not None and not isinstance(positions, torch.Tensor):
            positions = torch.as_tensor(positions)
        if segments is not None:
            segments = _integer_tensor(segments, "segments")
        if padding is not None and not isinstance(padding, torch.Tensor):
            padding = torch.as_tensor(padding)
        return self._run.forward(tokens, positions, method, segments, padding, attentions, hidden_states,
                                 score_terms)

    def examples(self, length, count=4):
        """The first `count` examples of the evaluation set at task length `length` (the ones
        `pelab eval` scores and the attention maps show): tokens, positions (those evaluation
        gives them), targets, scored, padding, segments."""
        return self._run.examples(length, count)

    def evaluate(self, lengths=None, samples=None, method="none"):
        """`pelab eval` at `lengths` (default: the run's eval.lengths) on `samples` sequences each,
        under the extrapolation `method`: a DataFrame, one row per length."""
        import pandas as pd
        rows = self._run.evaluate(_lengths(lengths), samples or 0, method)
        frame = pd.DataFrame(rows)
        frame["beyond_training"] = frame["length"] > self.config["train.max_length"]
        return frame

    def attention_maps(self, length, examples=4, method="none"):
        """What `pelab eval --attention-lengths` stores: probs (N, layers, H, T, T) float32, the
        tokens, the key positions, and the score-term statistics (term_names, term_mean_abs,
        term_correlation: (layers, H, terms))."""
        length = _lengths(length, "length")[0]
        T = self._run.sequence_length(length)
        layers, heads = self.config["model.num_layers"], self.config["model.num_heads"]
        needed = 3 * examples * layers * heads * T * T * 4  # the maps, the scores behind them, a copy
        available = _available_memory()
        if available is not None and needed > available / 2:
            raise MemoryError(f"attention_maps({length}, examples={examples}): {examples} x {layers} layers x {heads} "
                              f"heads x {T}^2 tokens needs about {needed / 2**30:.1f} GiB, and {available / 2**30:.1f} "
                              "GiB are free: ask for fewer examples or a shorter length")
        return self._run.attention_maps(length, examples, method)

    def probes(self, length, method="none"):
        """Position probes of every layer at `length` (as `pelab eval --probes`): a DataFrame."""
        import pandas as pd
        return pd.DataFrame(self._run.probes(_lengths(length, "length")[0], method))

    def state_dict(self):
        """The parameters and buffers: an OrderedDict of name -> CPU tensor (copies)."""
        return collections.OrderedDict(self._run.state_dict())


def _integer_tensor(values, name):
    """A tensor, list or numpy array of integers as an int64 tensor; floats and bools refused."""
    import torch
    tensor = values if isinstance(values, torch.Tensor) else torch.as_tensor(values)
    if tensor.dtype.is_floating_point or tensor.dtype.is_complex or tensor.dtype == torch.bool:
        raise TypeError(f"{name}: expected integer ids, got {tensor.dtype} (a float or bool is not a token id)")
    return tensor.to(torch.int64)


def _lengths(lengths, name="lengths"):
    """An int or a sequence of ints (task lengths, at least 1) as a list; None or empty: []."""
    if lengths is None:
        return []
    items = [lengths] if isinstance(lengths, int) or hasattr(lengths, "__index__") else list(lengths)
    for length in items:
        if isinstance(length, bool) or not hasattr(length, "__index__") or int(length) < 1:
            raise ValueError(f"{name}: task lengths are integers of at least 1, got {length!r}")
    return [int(length) for length in items]


def _available_memory():
    """Bytes of memory available (MemAvailable of /proc/meminfo), or None where unknown."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def load(path, device="cpu", threads=0, step=None):
    """The trained run of a run file (a run's folder works too): its config and model.
    `step`: a snapshot kept with output.keep_checkpoints (default: the final parameters)."""
    path = os.fspath(path)
    if os.path.isdir(path):
        path = os.path.join(path, "run.h5")
    folder = os.path.dirname(path) or "."
    if not os.path.exists(path) and os.path.exists(os.path.join(folder, "checkpoint.h5")):
        raise FileNotFoundError(_unfinished(folder))
    return Run(path, device, threads, step)


def _flatten(tree, prefix=""):
    flat = {}
    for key, value in tree.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict) and value:
            flat.update(_flatten(value, name + "."))
        else:
            flat[name] = json.dumps(value) if isinstance(value, (list, dict)) else value
    return flat


def _run_files(path):
    """(run file, sweep id or None) of a run file, a run's folder, a sweep or a folder of them."""
    path = os.fspath(path)
    if os.path.isfile(path):
        return [(path, None)]
    if os.path.exists(os.path.join(path, "sweep.h5")):
        return [(r["path"], r["id"]) for r in runfile.sweep_runs(path, load_runs=False) if r["status"] == "complete"]
    if os.path.exists(os.path.join(path, "run.h5")):
        return [(os.path.join(path, "run.h5"), None)]
    if os.path.exists(os.path.join(path, "checkpoint.h5")):  # a run still training, or stopped
        print(f"note: {_unfinished(path)}; left out", file=sys.stderr)
        return []
    if os.path.isdir(path):
        found = []
        for entry in sorted(os.listdir(path)):
            found += _run_files(os.path.join(path, entry)) if os.path.isdir(os.path.join(path, entry)) else []
        return found
    raise FileNotFoundError(f"{path}: not a run file, a run's folder or a sweep")


def _unfinished(folder):
    """What a run folder without its run file holds: its checkpoint's step and how to continue."""
    step = "?"
    try:
        import h5py
        with h5py.File(os.path.join(folder, "checkpoint.h5"), "r") as f:
            step = int(f.attrs["step"])
    except (OSError, KeyError):
        pass
    live = " (training now: curve.json is being written)" if os.path.exists(os.path.join(folder, "curve.json")) else ""
    return (f"{folder} has no run file yet: its run is unfinished{live}, with a checkpoint at step {step}; "
            f"pelab train CONFIG --resume --out {folder} continues it")


def results(paths):
    """Run files, run folders and sweeps (a path or a list) as one pandas DataFrame: one row per
    run and evaluation row, with the run file, the sweep run id, the training range, whether the
    length is beyond it, the evaluation condition (condition, condition_value, and a column named
    by it: passkey rows have `depth`, NaN elsewhere), and every config key as a column (`train.steps`, `encoding.name`, ...).
    A run file that cannot be read, and a run folder without its run file yet (still training or
    stopped: its checkpoint), are named on stderr and left out."""
    import pandas as pd
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    rows = []
    for path in paths:
        for run_file, run_id in _run_files(path):
            try:
                run = runfile.load(run_file)
            except (OSError, KeyError, runfile.SchemaError) as error:
                print(f"warning: {run_file}: cannot be read ({error}); left out", file=sys.stderr)
                continue
            keys = _flatten(_c().yaml_to_python(run["config"]))
            for row in runfile.table_rows(run["evaluation"]):
                row.pop("row", None)
                # the evaluation condition as a column of its own name (passkey: depth)
                if row["condition"]:
                    row[row["condition"]] = row["condition_value"]
                rows.append(dict(run_file=run_file, run_id=run_id, run_name=run["run_name"],
                                 train_min_length=run["train_min_length"], train_max_length=run["train_max_length"],
                                 beyond_training=row["length"] > run["train_max_length"], **row,
                                 **{f"config.{k}" if k in row else k: v for k, v in keys.items()}))
    return pd.DataFrame(rows)


from . import runfile  # noqa: E402  (h5py only: importable without torch)
