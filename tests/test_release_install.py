"""Release tier: what `pip install .` gives, used as the README and docs say.

The wheel is built as `pip install .` builds it and installed into a new virtualenv (no
editable install) whose dependencies are the suite's own pinned ones (requirements.txt),
which `pip check` finds complete; DependencyTest checks that pyproject.toml declares every
package nmt_tf imports. From a directory outside the checkout: `nmt-tf --help`, a short
`nmt-tf main`, the README's Python example, the export loaded in a process with only
tensorflow and tensorflow_text, the LiteRT export run by its client in a Python without
TensorFlow. Then every command of the shell blocks of README.md and
docs/*.md runs as written in that directory, set up as a checkout whose .venv holds the wheel
(scripts/, run.py, configs/ and export/ copied), with the step counts made small; the
commands it does not run are listed in NOT_RUN with the reason."""

import ast
import glob
import importlib.metadata
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import time
import tomllib
import urllib.request
import zipfile

import pytest
import tensorflow as tf

from tests import server_fixtures
from tests.release_fixtures import ExportLoader, litert_translate, ROOT
from tests.test_python_api import readme_example
from tests.waits import SAFETY_NET

MAIN_STEPS = 30  # the README's main job trains 1,500 steps
# The captioning quick start at smoke size: a few images, steps and a validation.
SHAPES_SMOKE = ("--config.train.steps=4 --config.train.eval_every=4 "
                "--config.train.checkpoint_every=4 --config.data.train_size=24 "
                "--config.data.valid_size=4 --config.data.test_size=4")
SENTENCES = ["the boy helps the quick small king that meets the lion", "",
             "some tall men see the farmer"]

# The typed starts and terminology of the doc commands that use them, one line per sentence.
WRITE_GUIDES = ("printf 'la k\\n\\nla \\n' | tee starts.txt > starts.en && "
                "printf '[\"knabo\"]\\n[]\\n[\"la\", \"viro\"]\\n' > terms.jsonl")

# Doc commands not run here, and why.
NOT_RUN = {
    "bash scripts/run_tests.sh": "the test suite itself",
    ".venv/bin/nmt-tf serve": "a server that runs until stopped (tests/test_server.py starts "
                              "it and sends it the README's curl line)",
    ".venv/bin/nmt-tf serve --export_dir=runs/quickstart/export --version_labels=stable=1":
        "a server that runs until stopped (tests/test_server.py serves exports)",
    "sed \"s|/models/|$PWD/runs/quickstart/export/|\" export/models.config > models.config":
        "the config of the server below (tests/test_server_models.py rewrites export/"
        "models.config alike)",
    ".venv/bin/nmt-tf serve --model_config_file=models.config --grpc_port=8500 --port=8501":
        "a server that runs until stopped (tests/test_server_models.py serves "
        "export/models.config)",
    "python export/client.py --server=localhost:8500 --version_label=canary \"the boy helps\"":
        "a client of the server above (tests/test_server_models.py runs it for each label)",
    ".venv/bin/nmt-tf serve --export_dir=runs/quickstart/export --grpc_port=8500 "
    "--rest_api_port=8501": "a server that runs until stopped (tests/test_server.py serves "
                            "with --grpc_port and talks to it with export/client.py)",
    ".venv/bin/nmt-tf train --config=multi30k:cgru --run_dir=runs/cgru_de_en":
        "Multi30k, which CI does not have (tests/test_release_recipes.py trains every "
        "Multi30k recipe on a slice)",
    "docker run --rm -p 8501:8501 -v \"$PWD/runs/quickstart/export/nmt:/models/nmt\" -e "
    "MODEL_NAME=nmt tensorflow/serving": "TF Serving's model server (no Docker engine here)",
    "curl -X POST localhost:8501/v1/models/nmt:predict -d '{\"signature_name\": "
    "\"beam_search\", \"inputs\": {\"text\": [\"the boy helps the king\"]}}'":
        "needs the running model server",
    "zcat train.en.gz | split -l 500000 -d -a 3 --additional-suffix=.en --filter='gzip > "
    "$FILE.gz' - wmt/train.": "the WMT'14 corpus (a download)",
    "zcat train.de.gz | split -l 500000 -d -a 3 --additional-suffix=.de --filter='gzip > "
    "$FILE.gz' - wmt/train.": "the WMT'14 corpus (a download)",
    "nmt-tf train --config=wmt14:cgru --run_dir=runs/wmt14_en_de":
        "the WMT'14 corpus (a download)",
    "nmt-tf train --config=wmt14:cgru --run_dir=runs/wmt14_en_de --config.data.name=files "
    "--config.data.train_src='wmt/train.*.en.gz' --config.data.train_tgt='wmt/train.*.de.gz' "
    "--config.data.valid_src=wmt/newstest2013.en --config.data.valid_tgt=wmt/newstest2013.de "
    "--config.data.test_src=wmt/newstest2014.en --config.data.test_tgt=wmt/newstest2014.de":
        "the WMT'14 corpus (a download)",
    "TF_CONFIG='{\"cluster\":{\"worker\":[\"10.0.0.1:2222\",\"10.0.0.2:2222\"]},\"task\":"
    "{\"type\":\"worker\",\"index\":0}}' nmt-tf train --config=wmt14:cgru "
    "--run_dir=/shared/runs/wmt14_en_de --config.train.strategy=multi_worker <the data "
    "flags above, if any>": "two machines (tests/test_training_processes.py runs two "
                            "workers on one)",
    "TF_CONFIG='{\"cluster\":{\"worker\":[\"10.0.0.1:2222\",\"10.0.0.2:2222\"]},\"task\":"
    "{\"type\":\"worker\",\"index\":1}}' nmt-tf train --config=wmt14:cgru "
    "--run_dir=/shared/runs/wmt14_en_de --config.train.strategy=multi_worker <the same "
    "flags>": "two machines (tests/test_training_processes.py runs two workers on one)",
    "nmt-tf translate --run_dir=runs/cgru_de_en --input_file=test.de > test.hyp.en":
        "a trained Multi30k run (hours; tests/test_release_recipes.py translates with every "
        "recipe)",
    "python run.py export --run_dir=runs/a --checkpoints=runs/a,runs/b,runs/c":
        "three trained runs (tests/test_export.py exports an ensemble)",
    "docker run --rm -p 8500:8500 -p 8501:8501 -v $PWD/runs/quickstart/export:/models -v "
    "$PWD/export/models.config:/models/models.config:ro tensorflow/serving "
    "--model_config_file=/models/models.config":
        "TF Serving's model server (no Docker engine here)",
    "python export/client.py --server=localhost:8500 \"the boy helps the king\"":
        "needs the running model server (tests/test_export.py runs the client's requests)",
    "python export/client.py --rest=http://localhost:8501 --signature=beam_search \"the boy "
    "helps\"": "needs the running model server (tests/test_export.py runs the client's "
               "requests)",
    "python export/client.py --server=localhost:8500 --signature=score --target=\"la knabo\" "
    "\"the boy\"": "needs the running model server (tests/test_export.py runs the client's "
                   "requests)",
    "tensorboard --logdir runs/x/tensorboard": "a server that runs until stopped",
    "nmt-tf train --config=multi30k:cgru --run_dir=runs/cgru_de_en_domain "
    "--init_from=runs/cgru_de_en --config.data.name=files --config.data.train_src=domain.de "
    "--config.data.train_tgt=domain.en --config.data.valid_src=domain_dev.de "
    "--config.data.valid_tgt=domain_dev.en": "a trained Multi30k run and in-domain files "
                                             "(tests/test_training_init_from.py fine-tunes "
                                             "a tiny run)",
    "nmt-tf train --config=multi30k:cgru --run_dir=runs/multi30k_cgru":
        "Multi30k, which CI does not have (tests/test_release_recipes.py trains every "
        "Multi30k recipe on a slice)",
    "nmt-tf train --config=multi30k_lowres --run_dir=runs/fr_en_child "
    "--init_from=runs/multi30k_cgru --update_vocab=merge": "a trained Multi30k run "
        "(tests/test_training_init_from.py fine-tunes a tiny run with --update_vocab)",
    "nmt-tf train --config=multi30k_multilingual --run_dir=runs/multi30k_de_enfr":
        "Multi30k, which CI does not have (tests/test_release_recipes.py trains every "
        "Multi30k recipe on a slice)",
    "echo \"Ein Hund rennt.\" | nmt-tf translate --run_dir=runs/multi30k_de_enfr "
    "--target_lang=fr": "a trained multilingual Multi30k run (tests/test_target_tags.py "
                        "translates with a tiny one)",
    "nmt-tf evaluate --run_dir=runs/multi30k_de_enfr": "a trained multilingual Multi30k run "
        "(tests/test_target_tags.py evaluates a tiny one pair by pair)",
    "python run.py train --config=multi30k:cgru --run_dir=/tmp/e "
    "--config.train.steps=300 --config.train.eval_every=300 "
    "--config.train.checkpoint_every=300 --config.model.dropout=0.0 "
    "--config.train.label_smoothing=0.0 --config.model.embedding_dim=128 "
    "--config.model.encoder_units=256 --config.model.decoder_units=256 "
    "--config.pipeline.batch_tokens=2048 --config.train.learning_rate=1e-3 "
    "--config.train.warmup_steps=0 --config.train.schedule=constant "
    "--config.train.eval_max_sentences=200 --config.train.precision=float32":
        "Multi30k, which CI does not have (tests/test_release_recipes.py trains every "
        "Multi30k recipe on a slice)",
    ".venv/bin/python run.py train --config=multi30k:rnnsearch --run_dir=runs/rnnsearch_de_en": "Multi30k, which CI does not have "
                                      "(tests/test_release_recipes.py trains every recipe)",
}
BENCHMARKS = "benchmarks: minutes to hours each, on a quiet machine"
# Doc commands run here, in order, each with the substitutions made first.
RUN = {
    "bash scripts/run_main.sh": [("run_main.sh", f"run_main.sh --config.train.steps="
                                                  f"{MAIN_STEPS}")],
    "echo \"the boy helps the quick small king that meets the lion\" | .venv/bin/nmt-tf "
    "translate": [],
    ".venv/bin/nmt-tf translate --beam_size=5 --nbest=3 --alignments=hard --input_file=in.txt":
        [],
    ".venv/bin/nmt-tf translate --prefix_file=starts.txt --constraints_file=terms.jsonl "
    "--output_format=jsonl --input_file=in.txt": [(".venv/bin/nmt-tf", WRITE_GUIDES +
                                                   " && .venv/bin/nmt-tf")],
    "nmt-tf translate --input_file=test.de --prefix_file=starts.en": [
        ("nmt-tf", WRITE_GUIDES + " && .venv/bin/nmt-tf")],
    "nmt-tf translate --input_file=test.de --constraints_file=terms.jsonl": [
        ("nmt-tf", WRITE_GUIDES + " && .venv/bin/nmt-tf")],
    "nmt-tf translate --input_file=test.de --output_format=jsonl": [],
    ".venv/bin/nmt-tf evaluate --eval_split=test": [],
    ".venv/bin/nmt-tf score --source_file=in.txt --target_file=out.txt": [],
    ".venv/bin/nmt-tf export --beam_size=5": [],
    ".venv/bin/nmt-tf main --config=shapes --run_dir=runs/shapes": [
        ("runs/shapes", "runs/shapes " + SHAPES_SMOKE)],
    ".venv/bin/nmt-tf caption --run_dir=runs/shapes --attention_dir=maps "
    "--input_file=runs/shapes/shapes/images/test_00000.png": [],
    "nmt-tf caption --run_dir=runs/shapes --input_file=photo.png": [
        ("photo.png", "runs/shapes/shapes/images/test_00001.png")],
    "nmt-tf caption --run_dir=runs/shapes --input_file=photos/ --beam_size=5 "
    "--attention_dir=maps": [("photos/", "runs/shapes/shapes/images/")],
    "nmt-tf evaluate --run_dir=runs/shapes --eval_split=test": [],
    "echo \"the boy helps the quick small king\" | nmt-tf translate --beam_size=10": [],
    "python run.py evaluate --run_dir=runs/quickstart": [],
    "python run.py evaluate --run_dir=R --source_file=s.de --reference_file=r.en "
    "--plot_sentences=0,5,17 --length_bucket_width=10": [("=R ", "=runs/quickstart ")],
    "python run.py score --run_dir=R --source_file=s.de --target_file=hyp.en > scores.tsv":
        [("=R ", "=runs/quickstart ")],
    "python run.py average --run_dir=R --average_last=5": [("=R ", "=runs/quickstart ")],
    "python run.py translate --run_dir=R --checkpoint=R/averaged/ckpt-avg < test.de":
        [("=R", "=runs/quickstart")],
    "python run.py export --run_dir=runs/quickstart": [],
    "python run.py export --run_dir=runs/quickstart --beam_size=8 --export_nbest=4 "
    "--checkpoint=last --export_dir=/srv/models --export_model_name=nmt_de_en":
        [("=/srv/models", "=srv/models")],
    "python run.py export --run_dir=runs/quickstart --format=litert": [],
    "python run.py export --run_dir=runs/quickstart --format=litert "
    "--export_quantization=int8": [],
    "python runs/quickstart/export/nmt_litert/1/nmt_litert.py "
    "runs/quickstart/export/nmt_litert/1 < test.de": [],
    ".venv/bin/saved_model_cli show --all --dir runs/quickstart/export/nmt/1": [],
    ".venv/bin/saved_model_cli run --dir runs/quickstart/export/nmt/1 --tag_set serve "
    "--signature_def serving_default --input_exprs 'text=[\"the boy helps the king\"]'": [],
    ".venv/bin/python run.py train --run_dir=runs/x --config.train.steps=3000 "
    "--config.model.dropout=0.2": [("steps=3000", "steps=3")],
}
# Files the doc commands read, as a user would have them.
INPUT_FILES = ("in.txt", "out.txt", "s.de", "r.en", "test.de", "hyp.en")


def doc_commands():
  """[(file, command)] of the shell blocks of README.md and docs/*.md, in order: lines ending
  with a backslash joined, comments and blank lines left out, spaces collapsed."""
  commands = []
  for path in ["README.md"] + sorted(os.path.relpath(p, ROOT) for p in
                                     glob.glob(os.path.join(ROOT, "docs", "*.md"))):
    with open(os.path.join(ROOT, path), encoding="utf-8") as f:
      text = f.read()
    for lang, body in re.findall(r"```(\w*)\n(.*?)```", text, re.DOTALL):
      if lang not in ("", "bash", "sh", "shell"):
        continue
      for line in body.replace("\\\n", " ").splitlines():
        line = re.sub(r"\s+#\s.*$", "", line).strip()
        if line and not line.startswith("#"):
          commands.append((path, " ".join(line.split())))
  return commands


def _is_benchmark(command):
  return (" bench/" in f" {command}" or "bench/anchor" in command
          or command.startswith("nice -n 19"))


def _copy_console_scripts(source_bin, target_bin, python):
  """Copies the console scripts of the dependencies (saved_model_cli, tensorboard, ...) from
  `source_bin` into `target_bin`, run by `python`, as installing them there would."""
  for name in sorted(os.listdir(source_bin)):
    path = os.path.join(source_bin, name)
    if name == "nmt-tf" or name.startswith(("pip", "python", "activate", "Activate")):
      continue
    with open(path, "rb") as f:
      first, rest = f.readline(), f.read()
    if first.startswith(b"#!") and b"python" in first:
      target = os.path.join(target_bin, name)
      with open(target, "wb") as f:
        f.write(b"#!" + python.encode() + b"\n" + rest)
      os.chmod(target, 0o755)


def third_party_imports():
  """{top-level module} that nmt_tf/ imports from outside itself and the standard library."""
  modules = set()
  for path in glob.glob(os.path.join(ROOT, "nmt_tf", "**", "*.py"), recursive=True):
    with open(path, encoding="utf-8") as f:
      tree = ast.parse(f.read())
    for node in ast.walk(tree):
      if isinstance(node, ast.Import):
        modules.update(alias.name.split(".")[0] for alias in node.names)
      elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
        modules.add(node.module.split(".")[0])
  return {m for m in modules if m not in sys.stdlib_module_names and m != "nmt_tf"}


def _normalized(name):
  return re.sub(r"[-_.]+", "-", name).lower()


class DependencyTest(tf.test.TestCase):
  """What the wheel declares is what nmt_tf imports, and requirements.txt pins it."""

  def test_every_imported_package_is_a_declared_dependency(self):
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
      project = tomllib.load(f)["project"]
    # The extras other than the tests' (litert: the interpreter of the LiteRT export's client).
    extras = [d for name, deps in project["optional-dependencies"].items() if name != "test"
              for d in deps]
    declared = {_normalized(re.match(r"[A-Za-z0-9_.-]+", d).group(0))
                for d in project["dependencies"] + extras}
    providers = importlib.metadata.packages_distributions()
    undeclared = {module: providers.get(module) for module in third_party_imports()
                  if not declared & {_normalized(d) for d in providers.get(module, [])}}
    self.assertEqual(undeclared, {}, "imported by nmt_tf but not in pyproject.toml's "
                     "dependencies (only installed because another package needs it)")
    with open(os.path.join(ROOT, "requirements.txt"), encoding="utf-8") as f:
      pinned = {_normalized(line.split("==")[0]) for line in f if "==" in line}
    self.assertEqual(sorted(declared - pinned), [])


@pytest.mark.slow
class InstalledWheelTest(tf.test.TestCase):
  """One virtualenv with the wheel, one user directory with a short main job in it."""

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.tmp = tempfile.mkdtemp()
    wheels = os.path.join(cls.tmp, "wheel")
    cls.pip([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", ROOT, "-w", wheels])
    cls.wheel = glob.glob(os.path.join(wheels, "*.whl"))[0]
    venv = os.path.join(cls.tmp, "venv")
    cls.process([sys.executable, "-m", "venv", venv])
    cls.bin = os.path.join(venv, "bin")
    cls.python = os.path.join(cls.bin, "python")
    # The dependencies: those of the suite's environment (the pinned requirements.txt), seen
    # through a .pth line, which puts their directory on sys.path after the venv's own
    # site-packages without running its .pth files (so not the editable nmt_tf).
    site = cls.process([cls.python, "-c", "import sysconfig; print(sysconfig.get_paths()"
                        "['purelib'])"]).stdout.strip()
    with open(os.path.join(site, "dependencies.pth"), "w", encoding="utf-8") as f:
      f.write(sysconfig.get_paths()["purelib"] + "\n")
    cls.pip([cls.python, "-m", "pip", "install", "-q", "--no-deps", cls.wheel])
    cls.process([cls.python, "-m", "pip", "check"])  # the dependencies are complete
    _copy_console_scripts(os.path.dirname(sys.executable), cls.bin, cls.python)
    cls.home = os.path.join(cls.tmp, "user")  # outside the checkout
    os.makedirs(cls.home)
    cls.env = {k: v for k, v in os.environ.items()
               if k not in ("PYTHONPATH", "VIRTUAL_ENV", "TF_CPP_MIN_LOG_LEVEL")}
    cls.env["PATH"] = cls.bin + os.pathsep + os.environ.get("PATH", "")
    cls.main = cls.process(["nmt-tf", "main", f"--config.train.steps={MAIN_STEPS}"],
                       cwd=cls.home, env=cls.env)

  @classmethod
  def pip(cls, args):
    """Runs pip: a package index that fails for a moment is asked again."""
    for attempt in range(3):
      try:
        return cls.process(args)
      except AssertionError:
        if attempt == 2:
          raise
        time.sleep(30 * (attempt + 1))

  @classmethod
  def process(cls, args, **kwargs):
    """Runs a process; its CompletedProcess, or AssertionError with its output."""
    out = subprocess.run(args, capture_output=True, text=True, timeout=SAFETY_NET, check=False,
                         **kwargs)
    if out.returncode:
      raise AssertionError(f"{args} exited with {out.returncode}:\n{out.stdout[-2000:]}\n"
                           f"{out.stderr[-3000:]}")
    return out

  def test_the_installed_wheel_builds_its_compiled_cell(self):
    # From the wheel's own source, into an empty cache: one progress line, then it loads.
    out = self.process([self.python, "-c", "from nmt_tf.layers.kernels import compiled; "
                        "print(compiled.library() is not None, compiled.SOURCE)"],
                       cwd=self.home, env={**self.env, "NMT_TF_CACHE_DIR": self.tmp + "/cache"})
    built, source = out.stdout.split()
    self.assertEqual(built, "True", out.stderr[-2000:])
    self.assertStartsWith(source, os.path.join(self.tmp, "venv"))
    self.assertIn("nmt_tf: compiling the GRU cell", out.stderr)

  def test_wheel_holds_every_module(self):
    names = set(zipfile.ZipFile(self.wheel).namelist())
    tracked = subprocess.run(["git", "ls-files", "nmt_tf/*.py", "nmt_tf/server/static",
                              "nmt_tf/*.cc"], cwd=ROOT,
                             capture_output=True, text=True, check=True).stdout.split()
    self.assertIn("nmt_tf/layers/kernels/gru_cell.cc", tracked)
    self.assertNotEmpty(tracked)
    self.assertEqual([path for path in tracked if path not in names], [])
    out = self.process([self.python, "-c", "import nmt_tf.cli.app, nmt_tf; print(nmt_tf.__file__)"],
                   cwd=self.home, env=self.env)
    self.assertStartsWith(out.stdout.strip(), os.path.join(self.tmp, "venv"))

  def test_serve_answers_and_shows_its_page(self):
    process, url = server_fixtures.serve_process([], python=self.python, cwd=self.home,
                                                 env=self.env)
    try:
      with urllib.request.urlopen(url + "/", timeout=SAFETY_NET) as page:
        self.assertIn("/static/page.js", page.read().decode())
      with urllib.request.urlopen(url + "/static/page.js", timeout=SAFETY_NET) as script:
        self.assertIn("heatmap", script.read().decode())
      status, answer = server_fixtures.request(url + "/v1/models/nmt:predict",
                                               {"instances": [SENTENCES[0]]})
      self.assertEqual(status, 200, answer)
      self.assertNotEmpty(answer["predictions"][0]["translation"])
    finally:
      process.terminate()
      process.wait(SAFETY_NET)

  def test_help_and_main_job(self):
    out = self.process(["nmt-tf", "--help"], cwd=self.home, env=self.env)
    self.assertIn("usage: nmt-tf COMMAND", out.stdout)
    for command in ("train", "translate", "evaluate", "export", "main"):
      self.assertIn(f"\n  {command} ", out.stdout)
    self.assertEqual(self.main.stderr, "")  # quiet: no TensorFlow start-up lines
    for stage in ("train", "evaluate", "export"):
      self.assertIn(f"=== {stage} done in", self.main.stdout)
    self.assertIn(f"validation at step {MAIN_STEPS}:", self.main.stdout)
    self.assertTrue(os.path.isdir(os.path.join(self.home, "runs", "quickstart", "export",
                                               "nmt", "1")))

  def test_readme_python_example(self):
    out = self.process([self.python, "-c", readme_example()], cwd=self.home, env=self.env)
    lines = out.stdout.splitlines()
    self.assertLen(lines, 5)
    self.assertRegex(lines[1], r"^\(\d+, \d+\)$")

  def test_export_loads_with_only_tensorflow(self):
    served = ExportLoader.answer(
        os.path.join(self.home, "runs", "quickstart", "export", "nmt", "1"), SENTENCES,
        python=self.python)
    self.assertNotIn("error", served, served.get("error"))
    self.assertEqual(served["modules"], [])
    self.assertEqual(served["greedy"][1], "")
    self.assertLen(served["beam"], len(SENTENCES))
    # Word vocabularies: the score of the greedy translation is its search log-probability.
    self.assertAllClose([served["score"][0], served["score"][2]],
                        [served["greedy_log_prob"][0], served["greedy_log_prob"][2]],
                        rtol=1e-3, atol=1e-3)

  def test_litert_export_translates_without_tensorflow(self):
    out = self.process(["nmt-tf", "export", "--run_dir=runs/quickstart", "--format=litert"],
                       cwd=self.home, env=self.env)
    path = out.stdout.strip().splitlines()[-1]
    self.assertEqual(path, os.path.join(self.home, "runs", "quickstart", "export", "nmt_litert",
                                        "1"))
    answer = litert_translate(path, SENTENCES)
    self.assertNotIn("error", answer, answer.get("error"))
    self.assertFalse(answer["tensorflow"])
    served = ExportLoader.answer(
        os.path.join(self.home, "runs", "quickstart", "export", "nmt", "1"), SENTENCES,
        python=self.python)
    self.assertEqual([t["target_tokens"] for t in answer["translations"]],
                     served["greedy_tokens"])
    self.assertEqual([t["text"] for t in answer["translations"]], served["greedy"])

  def test_doc_commands_run_as_written(self):
    """Three minutes on 2 cores: 29 commands of the docs, each its own process as a user
    types it (3-4 s of start-up each), among them three SavedModel and two LiteRT exports and
    three short trainings; a command run any other way would not be the one the docs show."""
    commands = doc_commands()
    known = set(RUN) | set(NOT_RUN)
    unknown = [f"{path}: {command}" for path, command in commands
               if command not in known and not _is_benchmark(command)]
    self.assertEqual(unknown, [], "a command of the docs that this test neither runs nor "
                     "lists in NOT_RUN with its reason")
    listed = {command for _, command in commands}
    self.assertEqual(sorted(known - listed), [], "commands no longer in the docs")
    checkout = os.path.join(self.tmp, "checkout")  # a checkout whose .venv holds the wheel
    shutil.copytree(self.home, checkout, symlinks=True)
    for name in ("scripts", "export"):
      shutil.copytree(os.path.join(ROOT, name), os.path.join(checkout, name))
    shutil.copytree(os.path.join(ROOT, "nmt_tf", "configs"), os.path.join(checkout, "configs"))
    for name in ("run.py", "requirements.txt", "pyproject.toml"):
      shutil.copy(os.path.join(ROOT, name), checkout)
    os.symlink(os.path.join(self.tmp, "venv"), os.path.join(checkout, ".venv"))
    stamp = subprocess.run("cat requirements.txt pyproject.toml | sha256sum | cut -d' ' -f1",
                           shell=True, cwd=checkout, capture_output=True, text=True,
                           check=True).stdout
    with open(os.path.join(checkout, ".venv", ".requirements.sha256"), "w",
              encoding="utf-8") as f:
      f.write(stamp)  # scripts/setup_env.sh: the environment is up to date
    for name in INPUT_FILES:
      with open(os.path.join(checkout, name), "w", encoding="utf-8") as f:
        f.writelines(line + "\n" for line in SENTENCES)
    for path, command in commands:
      if command not in RUN:
        continue
      for old, new in RUN[command]:
        self.assertIn(old, command)
        command = command.replace(old, new)
      with self.subTest(f"{path}: {command}"):
        out = subprocess.run(["bash", "-c", command], cwd=checkout, env=self.env,
                             capture_output=True, text=True, timeout=SAFETY_NET, check=False)
        self.assertEqual(out.returncode, 0, f"{out.stdout[-1500:]}\n{out.stderr[-3000:]}")
        self.assertNotIn("Traceback", out.stderr)


if __name__ == "__main__":
  tf.test.main()
