#!/usr/bin/env python3
"""`import pelab` against the CLI (docs/python.md): the registries, config errors as the CLI's
text, training from a dict, a loaded run's forward pass and evaluation equal to `pelab eval`'s
rows and maps bit for bit, extrapolation methods reaching the forward pass, results() of a
sweep and run files, and Ctrl-C as in the CLI.

  tests/python_api.py PELAB WORKDIR [--skip TEST,...]   (PYTHONPATH: the repository's python/;
                                                       PELAB_BUILD_DIR: the build)
"""
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time

import pelab  # first: before numpy and torch load OpenBLAS, pelab has it run the CLI's kernels

import h5py  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402

PELAB, WORK = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
SKIPPED = set(sys.argv[4].split(",")) if len(sys.argv) > 4 and sys.argv[3] == "--skip" else set()
REPO = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
shutil.rmtree(WORK, ignore_errors=True)
os.makedirs(WORK)
os.chdir(WORK)

TINY = {"name": "tiny", "threads": 1, "task": {"name": "reverse_string"},
        "model": {"d_model": 32, "num_layers": 2, "num_heads": 4, "d_ff": 64},
        "encoding": {"name": "rope"},
        "train": {"steps": 40, "batch_size": 16, "min_length": 1, "max_length": 8, "log_every": 20},
        "eval": {"lengths": [4, 8], "samples": 32}, "analysis": {"probe_examples": 32}}


def cli(*args, check=True):
    result = subprocess.run([PELAB, *args], capture_output=True, text=True)
    if check and result.returncode != 0:
        raise AssertionError(f"pelab {' '.join(args)}: exit {result.returncode}\n{result.stderr}")
    return result


def test_registries():
    schemes, tasks = pelab.schemes(), pelab.tasks()
    listing = cli("list").stdout
    for name, entry in schemes.items():
        assert f"  {name} " in listing, name
        for option in entry["options"]:
            assert option in listing, (name, option)
    assert schemes["rope"]["options"]["base"]["default"] == 10000.0, schemes["rope"]["options"]["base"]
    assert tasks["reverse_string"]["formats"][0] == "encoder"
    assert schemes["xpos"]["causal_only"] and not schemes["rope"]["causal_only"]


def test_config_errors_carry_the_cli_text():
    with open("bad.yaml", "w") as f:
        f.write("encoding:\n  name: rope\n  bass: 10\n")
    stderr = cli("train", "bad.yaml", check=False).stderr
    try:
        pelab.config("bad.yaml")
    except pelab.ConfigError as error:
        assert stderr == f"error: {error}\n", (stderr, str(error))
        assert isinstance(error, ValueError)
    else:
        raise AssertionError("no ConfigError for encoding.bass")
    try:
        pelab.config(TINY, **{"train.steps": -3})
    except pelab.ConfigError as error:
        assert "train.steps" in str(error) and "override train.steps=-3" in str(error), str(error)
    else:
        raise AssertionError("no ConfigError for train.steps=-3")
    cfg = pelab.config(TINY, train__steps=12, **{"encoding.name": "alibi"})
    assert cfg["train.steps"] == 12 and cfg["encoding.name"] == "alibi" and cfg["model.causal"] is False
    assert pelab.config(cfg)["train.steps"] == 12  # a Config round-trips through its YAML


def test_trained_run_equals_the_cli():
    path = pelab.train(TINY, out="rope", quiet=True)
    assert path == "rope/run.h5" and os.path.exists(path)
    run = pelab.load("rope", threads=1)
    assert run.step == 40 and run.config["encoding.name"] == "rope"
    # the run's own evaluation rows, recomputed from the stored parameters
    with h5py.File(path) as f:
        stored_loss = f["evaluation/loss"][()]
    frame = run.evaluate()
    assert list(frame["length"]) == [4, 8] and not frame["beyond_training"].any()
    assert np.array_equal(frame["loss"].to_numpy(), stored_loss), (frame["loss"], stored_loss)
    # pelab eval at a new length and its maps, against the same from Python
    cli("eval", path, "--lengths", "16", "--attention-lengths", "16", "--float32", "--threads", "1",
        "--extrapolation", "yarn")
    with h5py.File(path) as f:
        evaluation = f["evaluation"]
        row = [i for i in range(len(evaluation["length"][()]))
               if evaluation["length"][i] == 16 and evaluation["method"][i] == b"yarn"]
        assert len(row) == 1
        cli_loss, cli_accuracy = evaluation["loss"][row[0]], evaluation["per_token_accuracy"][row[0]]
        cli_maps = f["attention/length_16/probs"][()]
    frame = run.evaluate(lengths=[16], method="yarn")
    assert frame["loss"][0] == cli_loss and frame["per_token_accuracy"][0] == cli_accuracy
    assert bool(frame["beyond_training"][0])
    maps = run.attention_maps(16, method="yarn")
    assert torch.equal(maps["probs"], torch.from_numpy(cli_maps)), "attention maps differ from pelab eval's"
    # the forward pass on the same examples gives the same maps; yarn changes them
    examples = run.examples(16, 4)
    out = run(examples["tokens"], examples["positions"], method="yarn", score_terms=True)
    assert torch.equal(torch.stack(out["attentions"], 1), maps["probs"])
    plain = run(examples["tokens"], examples["positions"])
    assert not torch.equal(torch.stack(plain["attentions"], 1), maps["probs"]), "yarn did not reach the forward pass"
    assert out["logits"].shape[:2] == examples["tokens"].shape == (4, 32)  # 16 bits, then 16 placeholders
    assert len(out["hidden_states"]) == 3 and out["hidden_states"][0].shape[-1] == 32
    # score terms add up to the scores: softmax of their sum over the keys is the map
    for layer, terms in enumerate(out["score_terms"]):
        scores = sum(terms.values())
        assert torch.allclose(torch.softmax(scores, -1), out["attentions"][layer], atol=1e-5), layer
    # the parameters as torch tensors, equal to the run file's checkpoint
    state = run.state_dict()
    with h5py.File(path) as f:
        for name, tensor in state.items():
            if f"checkpoint/{name}" in f:
                assert np.array_equal(tensor.numpy(), f[f"checkpoint/{name}"][()]), name
    probes = run.probes(8)
    assert list(probes["layer"]) == [0, 1, 2] and probes["position_accuracy"].between(0, 1).all()
    # a length the scheme cannot take: the CLI's error
    learned = pelab.train(TINY, out="learned", quiet=True, **{"encoding": {"name": "learned", "max_positions": 20}})
    try:
        pelab.load(learned).evaluate(lengths=[30])
    except pelab.ConfigError as error:
        assert "30" in str(error) and "max_positions" in str(error), str(error)
    else:
        raise AssertionError("no error for a length past the learned table")


def test_results_of_a_sweep_and_run_files():
    with open("sweep.yaml", "w") as f:
        f.write("name: pysweep\nbase: base.yaml\ngrid:\n  encoding.name: [none, alibi]\noutput: pysweep\n")
    with open("base.yaml", "w") as f:
        f.write(json.dumps(TINY))  # JSON is YAML
    cli("sweep", "sweep.yaml", "--jobs", "1")
    frame = pelab.results(["pysweep", "rope/run.h5"])
    assert len(frame) == 2 * 2 + 3, frame  # two sweep runs x 2 lengths; rope's 2 + its yarn row at 16
    assert set(frame["encoding.name"]) == {"none", "alibi", "rope"}
    assert sorted(set(frame["run_id"].dropna())) == ["encoding-alibi", "encoding-none"]
    assert frame[frame["run_id"].isna()]["run_file"].eq("rope/run.h5").all()
    assert list(frame[frame["encoding.name"] == "rope"]["beyond_training"]) == [False, False, True]
    assert (frame["train.steps"] == 40).all() and "per_sequence_accuracy" in frame
    assert frame.groupby("encoding.name").size()["rope"] == 3


def expect(error_type, call, *fragments):
    try:
        call()
    except error_type as error:
        text = str(error)
        assert "\n" not in text.strip(), f"not one line: {text}"
        for fragment in fragments:
            assert fragment in text, f"{fragment!r} not in {text!r}"
        return text
    raise AssertionError(f"no {error_type.__name__} for {fragments}")


def test_mistakes_are_one_clear_line():
    run = pelab.load("rope", threads=1)
    tokens = run.examples(8, 2)["tokens"]
    # lists and numpy arrays of ids work as tensors do; an int is one length
    assert torch.equal(run(tokens.tolist())["logits"], run(tokens.numpy())["logits"])
    assert list(run.evaluate(lengths=8)["length"]) == [8]
    expect(TypeError, lambda: run(tokens.float()), "tokens: expected integer ids, got torch.float32")
    expect(ValueError, lambda: run(tokens + 100), "tokens: ids must be in [0, ", "this run's vocabulary")
    expect(ValueError, lambda: run.evaluate(lengths=[-5]), "lengths: task lengths are integers of at least 1, got -5")
    expect(ValueError, lambda: run.evaluate(lengths=[2.5]), "got 2.5")
    expect(MemoryError, lambda: run.attention_maps(200000, examples=1), "needs about", "GiB", "fewer examples")
    # a key typo names the key it most likely meant
    expect(pelab.ConfigError, lambda: pelab.config(dict(TINY, train=dict(TINY["train"], learning_rte=0.1))),
           "unknown key 'train.learning_rte' in train (did you mean 'learning_rate'?)")
    # a length the trained scheme cannot encode: the same ConfigError from evaluate and run(...), with no
    # advice to change a config this run was trained with
    learned = pelab.load(pelab.train(dict(TINY, encoding={"name": "learned", "max_positions": 20},
                                          train=dict(TINY["train"], steps=2)), out="learned20", quiet=True))
    from_evaluate = expect(pelab.ConfigError, lambda: learned.evaluate(lengths=[30]), "does not fit",
                           "beyond what this trained run can encode")
    from_call = expect(pelab.ConfigError, lambda: learned(torch.ones(1, 60, dtype=torch.int64) * 2), "does not fit",
                       "beyond what this trained run can encode")
    assert "raise encoding" not in from_evaluate + from_call, (from_evaluate, from_call)


def test_ctrl_c_stops_with_a_checkpoint():
    script = ("import pelab, sys\n"
              "cfg = dict(" + repr(TINY) + ")\n"
              "cfg['train'] = dict(cfg['train'], steps=100000, log_every=1)\n"
              "try:\n    pelab.train(cfg, out='stopped')\n"
              "except KeyboardInterrupt as e:\n    print('KeyboardInterrupt:', e, flush=True); sys.exit(75)\n")
    child = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    seen = ""
    for line in child.stdout:  # training has started: then Ctrl-C
        seen += line
        if line.startswith("step"):
            break
    time.sleep(0.5)
    child.send_signal(signal.SIGINT)
    rest = seen + child.stdout.read()
    assert child.wait(60) == 75, rest
    assert "KeyboardInterrupt: stopped by SIGINT after step" in rest and "checkpoint stopped/checkpoint.h5" in rest, rest
    assert os.path.exists("stopped/checkpoint.h5")
    # an unfinished run: load and results say what is there and how to continue it
    message = expect(FileNotFoundError, lambda: pelab.load("stopped"), "stopped has no run file yet",
                     "a checkpoint at step", "--resume --out stopped continues it")
    assert pelab.results(["stopped"]).empty


def test_the_worked_example_of_docs_python_md():
    text = open(os.path.join(REPO, "docs", "python.md")).read()
    code = re.search(r"<!-- example: python -->\n```python\n(.*?)^```", text, re.MULTILINE | re.DOTALL).group(1)
    os.makedirs("example", exist_ok=True)
    os.symlink(os.path.join(REPO, "configs"), "example/configs")
    result = subprocess.run([sys.executable, "-c", code], cwd="example", capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert os.path.getsize("example/runs/python/maps_40.png") > 10000
    table = result.stdout
    assert "scheme" in table and "alibi" in table and "rope" in table and "60" in table, table
    assert "encoding.name" in table, table


TESTS = [test_registries, test_config_errors_carry_the_cli_text, test_trained_run_equals_the_cli,
         test_mistakes_are_one_clear_line, test_results_of_a_sweep_and_run_files, test_ctrl_c_stops_with_a_checkpoint,
         test_the_worked_example_of_docs_python_md]
for test in TESTS:
    if SKIPPED and test.__name__ in SKIPPED:
        continue
    test()
    print(f"ok {test.__name__}", flush=True)
print("python api: all passed")
