"""What the release tests share: the shipped recipes shrunk to test sizes, a small slice of
each recipe's own data, a separate process that loads exports as TF Serving does, the
export's client (export/client.py) as a module, and a Python without TensorFlow that runs
LiteRT exports with their own client."""

import atexit
import base64
import functools
import gzip
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import time

from nmt_tf import configs
from nmt_tf import data
from nmt_tf.data import multi30k
from tests.waits import SAFETY_NET

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def load_client():
  """export/client.py as a module (export/ is a deployment folder, not a package)."""
  spec = importlib.util.spec_from_file_location("nmt_serving_client",
                                                os.path.join(ROOT, "export", "client.py"))
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module


# Only the sizes shrink: the tokenizer, decoder, attention, precision, strategy and decode
# settings stay as the recipe ships them.
MODEL_SIZES = dict(embedding_dim=8, encoder_units=8, decoder_units=16)
UNIT_FIELDS = ("attention_units", "output_units", "summary_units")  # None: the model's default
# One alignment image per search: drawing them is the same code for every recipe.
TRAIN = dict(steps=3, eval_every=3, checkpoint_every=3, log_every=1, eval_max_sentences=8,
             alignment_images=1)
BATCH_TOKENS = 256
GENERATED_SIZES = dict(train_size=300, valid_size=8, test_size=8)
SHAPES_SIZES = dict(train_size=40, valid_size=8, test_size=8)  # images, two captions each
# Lines of each Multi30k file in the slice.
MULTI30K_LINES = {"train": 400, "val": 8, "test_2016_flickr": 8}


def shrunk_recipe(name, multi30k_dir):
  """Recipe `name` ("multi30k:luong") at test sizes (see MODEL_SIZES, TRAIN), on a slice of its
  own data: its generated corpus made smaller, the Multi30k slice in `multi30k_dir`, or for a
  TFDS corpus (which needs the network) that slice read as files in its languages' places."""
  config = configs.load(name)
  config.model.update(MODEL_SIZES)
  for field in UNIT_FIELDS:
    if config.model[field] is not None:
      config.model[field] = MODEL_SIZES["decoder_units"]
  config.pipeline.batch_tokens = BATCH_TOKENS
  if config.pipeline.batch_size:  # captioning batches images by number
    config.pipeline.batch_size = 8
  config.train.update(TRAIN)
  if config.data.name in ("generated", "shapes"):
    config.data.update(GENERATED_SIZES if config.data.name == "generated" else SHAPES_SIZES)
  elif config.data.name.startswith("multi30k"):
    config.data.data_dir = multi30k_dir
  elif config.data.name.startswith("tfds:"):
    languages = dict(zip((config.data.source_lang, config.data.target_lang), ("de", "en")))
    config.data.update(name="files", **{
        f"{split}_{side}": os.path.join(multi30k_dir, f"{prefix}.{languages[lang]}.gz")
        for split, prefix in (("train", "train"), ("valid", "val"), ("test", "test_2016_flickr"))
        for side, lang in (("src", config.data.source_lang), ("tgt", config.data.target_lang))})
  else:
    raise ValueError(f"recipe {name} uses data.name={config.data.name!r}, which the release "
                     "tests cannot slice; teach tests/release_fixtures.py its data")
  return config


def write_multi30k_slice(directory):
  """Writes a Multi30k slice (MULTI30K_LINES of each file) into `directory` and says what it
  holds: the first lines of the local copy (../shared/data/multi30k or
  $NMT_TF_MULTI30K_DIR) when there is one, else generated sentences in Multi30k's layout
  (the same files, gzipped, de/en/fr), so that the recipes still read through the Multi30k
  loader."""
  os.makedirs(directory, exist_ok=True)
  source = multi30k.default_dir()
  for prefix, count in MULTI30K_LINES.items():
    generated = None if source else data.generate_pairs(count, seed=0, split=prefix,
                                                        max_length=30)
    for lang in multi30k.LANGUAGES:
      if source:
        with gzip.open(os.path.join(source, f"{prefix}.{lang}.gz"), "rt",
                       encoding="utf-8") as f:
          lines = [next(f).rstrip("\n") for _ in range(count)]
      else:
        lines = generated.sources if lang == "de" else generated.targets
      with gzip.open(os.path.join(directory, f"{prefix}.{lang}.gz"), "wt",
                     encoding="utf-8") as f:
        f.writelines(line + "\n" for line in lines)
  return "Multi30k" if source else "generated sentences in Multi30k's layout"


class ExportLoader:
  """Processes of tests/load_exports.py (only tensorflow and tensorflow_text imported), one per
  Python interpreter, started on first use and kept for the later exports of this test
  process."""

  _processes = {}

  @classmethod
  def answer(cls, path, sentences, python=sys.executable):
    """The answer of tests/load_exports.py (run by `python`) for the export at `path`."""
    return cls.request({"path": path, "text": sentences}, python)

  @classmethod
  def request(cls, payload, python=sys.executable):
    """The answer of tests/load_exports.py (run by `python`) to the request `payload`."""
    path = payload["path"]
    process = cls._processes.get(python)
    if process is None or process.poll() is not None:
      env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
      env["TF_CPP_MIN_LOG_LEVEL"] = "3"
      process = cls._processes[python] = subprocess.Popen(
          [python, os.path.join(ROOT, "tests", "load_exports.py")], stdin=subprocess.PIPE,
          stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env,
          cwd=os.path.dirname(path))
      if len(cls._processes) == 1:
        atexit.register(cls.close)
    process.stdin.write(json.dumps(payload) + "\n")
    process.stdin.flush()
    line = process.stdout.readline()
    if not line:
      raise RuntimeError(f"tests/load_exports.py stopped (exit {process.wait()}) while "
                         f"loading {path}")
    return json.loads(line)

  @classmethod
  def close(cls):
    for process in cls._processes.values():
      if process.poll() is None:
        process.stdin.close()
        process.wait(timeout=SAFETY_NET)


# What a device that runs a LiteRT export has: the interpreter, numpy and sentencepiece.
LITERT_PACKAGES = ("ai-edge-litert", "numpy", "sentencepiece")


def _pinned(package):
  with open(os.path.join(ROOT, "requirements.txt"), encoding="utf-8") as f:
    for line in f:
      name, _, version = line.split("#")[0].strip().partition("==")
      if name == package:
        return f"{name}=={version}"
  raise ValueError(f"requirements.txt pins no {package}")


@functools.lru_cache(maxsize=None)
def litert_python():
  """The interpreter of a virtualenv holding only LITERT_PACKAGES (their pinned versions),
  made once per test process; a package index that fails for a moment is asked again."""
  venv = os.path.join(tempfile.mkdtemp(prefix="litert_venv_"), "venv")
  subprocess.run([sys.executable, "-m", "venv", venv], check=True, capture_output=True)
  python = os.path.join(venv, "bin", "python")
  for attempt in range(3):
    out = subprocess.run([python, "-m", "pip", "install", "-q", "--disable-pip-version-check"]
                         + [_pinned(p) for p in LITERT_PACKAGES], capture_output=True,
                         text=True, timeout=SAFETY_NET, check=False)
    if not out.returncode:
      return python
    if attempt == 2:
      raise RuntimeError(f"pip install {LITERT_PACKAGES} failed:\n{out.stderr[-3000:]}")
    time.sleep(30 * (attempt + 1))


def encoded(sentences):
  """str or bytes sentences -> base64 strings, the JSON form of bytes that may not be UTF-8."""
  return [base64.b64encode(s.encode("utf-8") if isinstance(s, str) else s).decode("ascii")
          for s in sentences]


def litert_translate(model_dir, sentences, beam=False, threads=1):
  """tests/run_litert_client.py's answer for the LiteRT export in `model_dir`, run by
  `litert_python()` (no TensorFlow)."""
  request = {"model_dir": model_dir, "text_base64": encoded(sentences), "beam": beam,
             "threads": threads}
  env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
  out = subprocess.run([litert_python(), os.path.join(ROOT, "tests", "run_litert_client.py")],
                       input=json.dumps(request) + "\n", capture_output=True, text=True,
                       env=env, timeout=SAFETY_NET, check=False, cwd=tempfile.gettempdir())
  if out.returncode or not out.stdout.strip():
    raise RuntimeError(f"run_litert_client.py exited with {out.returncode}: "
                       f"{out.stderr[-3000:]}")
  return json.loads(out.stdout.strip().splitlines()[-1])
