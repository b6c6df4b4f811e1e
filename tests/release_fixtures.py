"""What the release tests share: the shipped recipes shrunk to test sizes, a small slice of
each recipe's own data, and a separate process that loads exports as TF Serving does."""

import atexit
import gzip
import json
import os
import subprocess
import sys

from nmt_tf import configs
from nmt_tf import data
from nmt_tf.data import multi30k

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Only the sizes shrink: the tokenizer, decoder, attention, precision, strategy and decode
# settings stay as the recipe ships them.
MODEL_SIZES = dict(embedding_dim=8, encoder_units=8, decoder_units=16)
UNIT_FIELDS = ("attention_units", "output_units", "summary_units")  # None: the model's default
# One alignment image per search: drawing them is the same code for every recipe.
TRAIN = dict(steps=3, eval_every=3, checkpoint_every=3, log_every=1, eval_max_sentences=8,
             alignment_images=1)
BATCH_TOKENS = 256
GENERATED_SIZES = dict(train_size=300, valid_size=8, test_size=8)
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
  config.train.update(TRAIN)
  if config.data.name == "generated":
    config.data.update(GENERATED_SIZES)
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
    process.stdin.write(json.dumps({"path": path, "text": sentences}) + "\n")
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
        process.wait(timeout=60)
