"""How time to first step, vocabulary building and memory grow with the corpus size.

Usage: nice -n 19 .venv/bin/python bench/bench_scale.py --sizes=100000,1000000,5000000
           [--scratch_dir=$TMPDIR/nmt_tf_scale] [--model=small] [--measure=sp,word,ready,resume]
           [--code_dir=OLD_CHECKOUT,. --label=before,after]

Corpora: line-aligned gzipped de-en files of N pairs, a perturbed repetition of Multi30k train
(from $NMT_TF_MULTI30K_DIR, default ../shared/data/multi30k): copy r of the 29,000 captions
has 15% of its words replaced by a word drawn from the same side (by frequency) and 10% given
one of 24 suffixes (a long tail of word types, as in WMT), seeded by r, so sentence lengths stay
those of Multi30k and the Multi30k figures compare. Written once into
`<scratch_dir>/corpus_<N>/train.{de,en}.gz` and reused; `multi30k` is the original 29,000.

Every measurement is a fresh child process (`--child`), which trains through `Trainer` with no
validation split and reports, from its launch (Python and TensorFlow imports included):
  sp      fresh run directory, SentencePiece 8k unigram per side trained: time to the end of
          the first step, steady target tokens/s over the next `--steps` steps, peak RSS;
  word    fresh run directory, word vocabularies (30,000) counted: the same;
  ready   fresh run directory given the `sp` vocabularies: the same without vocabulary
          building; saves a checkpoint after `--steps` steps;
  resume  `ready`'s run directory again: time until the resumed run's first step.
Peak RSS is the child's own maximum resident set (os.wait4). `--model=small` (embeddings 64,
BiGRU 2 x 128, cGRU 128) keeps the steps short; what is measured is the data path (reading,
vocabularies, shuffling, resume), which the model size does not change, and the tokens/s of
a small model is the more sensitive to an input pipeline that does not keep up.
`--model=reference` is the Multi30k reference model (bench/common.py). `--code_dir` runs the
children on other copies of the package; with several (`--code_dir=OLD,NEW
--label=before,after`) every measurement runs on each in turn, so that a slower or faster
moment of a shared machine hits both. Prints one JSON object per corpus and code directory,
one line each.
"""

import gzip
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

from absl import app
from absl import flags
import numpy as np

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

flags.DEFINE_list("sizes", ["100000", "1000000"], "Corpus sizes in pairs; 'multi30k' is the "
                  "original train split.")
flags.DEFINE_list("measure", ["sp", "word", "ready", "resume"], "Measurements per corpus, in "
                  "this order (ready needs sp's vocabularies, resume needs ready's run).")
flags.DEFINE_string("scratch_dir", os.path.join(tempfile.gettempdir(), "nmt_tf_scale"),
                    "Corpora and run directories (outside the repository; 2 GB at 5,000,000 "
                    "pairs).")
flags.DEFINE_list("code_dir", [_ROOT], "Directories holding the nmt_tf package the children "
                  "run; with several, each measurement runs on each in turn (interleaved).")
flags.DEFINE_enum("model", "small", ["small", "reference"], "Model of the training steps.")
flags.DEFINE_integer("steps", 50, "Steps after the first one over which tokens/s is measured.")
flags.DEFINE_integer("vocab_size", 8000, "SentencePiece pieces per side.")
flags.DEFINE_list("label", [], "One label per --code_dir (e.g. before,after), written into "
                  "its JSON objects and naming its run directories.")
flags.DEFINE_string("vocab_from", None, "Run directory group "
                    "(<scratch_dir>/runs/<label>_<size>) "
                    "whose sp/vocab `ready` uses, instead of the same code's (when sp is not "
                    "measured).")
flags.DEFINE_string("extra", "{}", "JSON {section: {field: value}} applied to every child's "
                    "config (e.g. pipeline options).")
flags.DEFINE_string("child", None, "Internal: run one measurement from this JSON spec.")
FLAGS = flags.FLAGS

MODELS = {
    "small": dict(embedding_dim=64, encoder="birnn", encoder_units=128, decoder="cgru",
                  decoder_units=128, dropout=0.0),
    "reference": dict(embedding_dim=256, encoder="birnn", encoder_units=512, decoder="cgru",
                      decoder_units=512, dropout=0.2),
}
SUFFIXES = ("a", "e", "i", "o", "u", "s", "n", "en", "er", "es", "st", "te", "ly", "ed", "ing",
            "ung", "lich", "heit", "chen", "ion", "al", "ig", "ern", "um")


def multi30k_dir():
  return os.environ.get("NMT_TF_MULTI30K_DIR") or os.path.normpath(
      os.path.join(_ROOT, "..", "shared", "data", "multi30k"))


def _read_gz(path):
  with gzip.open(path, "rt", encoding="utf-8") as f:
    return [line.rstrip("\n") for line in f]


def _perturbed_side(lines, copy, rng_seed):
  """Copy `copy` of the sentences `lines`: word replacements and suffixes, seeded."""
  words = [line.split() for line in lines]
  lengths = np.array([len(w) for w in words])
  flat = [w for ws in words for w in ws]
  types = sorted(set(flat))
  index = {w: i for i, w in enumerate(types)}
  ids = np.array([index[w] for w in flat])
  rng = np.random.default_rng([rng_seed, copy])
  replace = rng.random(len(ids)) < 0.15
  ids = np.where(replace, ids[rng.integers(0, len(ids), len(ids))], ids)
  suffix = np.where(rng.random(len(ids)) < 0.10, rng.integers(1, len(SUFFIXES) + 1, len(ids)), 0)
  table = np.array(types, dtype=object)
  tokens = table[ids]
  suffixed = suffix > 0
  tokens[suffixed] = tokens[suffixed] + np.array(SUFFIXES, dtype=object)[suffix[suffixed] - 1]
  ends = np.cumsum(lengths)
  return [" ".join(tokens[e - n:e]) for e, n in zip(ends, lengths)]


def build_corpus(size, scratch_dir):
  """`<scratch_dir>/corpus_<size>/train.{de,en}.gz` (written once), or Multi30k's files."""
  if size == "multi30k":
    return {lang: os.path.join(multi30k_dir(), f"train.{lang}.gz") for lang in ("de", "en")}
  size = int(size)
  directory = os.path.join(scratch_dir, f"corpus_{size}")
  paths = {lang: os.path.join(directory, f"train.{lang}.gz") for lang in ("de", "en")}
  if os.path.exists(os.path.join(directory, "done")):
    return paths
  os.makedirs(directory, exist_ok=True)
  source = {lang: _read_gz(os.path.join(multi30k_dir(), f"train.{lang}.gz"))
            for lang in ("de", "en")}
  for seed, lang in enumerate(("de", "en")):
    with gzip.open(paths[lang], "wt", encoding="utf-8", compresslevel=6) as f:
      written, copy = 0, 0
      while written < size:
        lines = _perturbed_side(source[lang], copy, seed)[:size - written]
        f.writelines(line + "\n" for line in lines)
        written, copy = written + len(lines), copy + 1
  with open(os.path.join(directory, "done"), "w", encoding="utf-8") as f:
    f.write(f"{size}\n")
  return paths


def child_config(spec):
  """The ExperimentConfig dict of one measurement."""
  kind = "word" if spec["measure"] == "word" else "sentencepiece"
  config = {
      "data": dict(name="files", train_src=spec["src"], train_tgt=spec["tgt"]),
      "tokenizer": dict(kind=kind, vocab_size=30000 if kind == "word" else spec["vocab_size"]),
      "model": MODELS[spec["model"]],
      "pipeline": dict(max_source_len=50, max_target_len=50, batch_tokens=4096),
      # Only `ready` saves, after the timed steps (resume restores that checkpoint).
      "train": dict(steps=10_000, eval_every=10_000,
                    checkpoint_every=spec["steps"] + 2 if spec["measure"] == "ready" else 10_000,
                    log_every=10_000, learning_rate=1e-3, alignment_images=0),
      "decode": dict(beam_size=1),
  }
  for section, values in json.loads(spec.get("extra", "{}")).items():
    config.setdefault(section, {}).update(values)
  return config


def run_child(spec):
  """One measurement in this (fresh) process; prints a JSON line of timestamps."""
  sys.path.insert(0, spec["code_dir"])
  # pylint: disable=g-import-not-at-top
  import io
  from nmt_tf.experiment import ExperimentConfig
  from nmt_tf.training.trainer import Trainer
  imported = time.time()
  config = ExperimentConfig.from_dict(child_config(spec))
  calls, tokens = [], []
  resume = spec["measure"] == "resume"
  stop = 2 if resume else spec["steps"] + 3

  class Enough(Exception):
    """Raised once the child has timed its steps (no validation, no final save)."""

  def timed(step_fn):
    def call(batch):
      if len(calls) == stop:
        raise Enough()
      calls.append(time.time())
      out = step_fn(batch)
      tokens.append(float(out["tokens"]))
      return out
    call.trace = step_fn.trace  # the trainer traces the step once before the first batch
    return call

  trainer = Trainer(config, spec["run_dir"], stream=io.StringIO())
  built = time.time()
  trainer.train_step = timed(trainer.train_step)
  step = int(trainer.state["step"].numpy())
  try:
    trainer.train()
  except Enough:
    pass
  calls.append(time.time())
  print("CHILD " + json.dumps({"imported": imported, "built": built, "calls": calls,
                               "tokens": tokens, "start_step": step}), flush=True)


def measure(spec):
  """Runs one child; returns its figures (seconds from its launch, tokens/s, peak RSS)."""
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
  env.pop("TF_CONFIG", None)
  log = os.path.join(spec["run_dir"] + f".{spec['measure']}.log")
  start = time.time()
  with open(log, "w", encoding="utf-8") as f:
    proc = subprocess.Popen([sys.executable, os.path.abspath(__file__),
                             f"--child={json.dumps(spec)}"], stdout=f, stderr=subprocess.STDOUT,
                            env=env, cwd=spec["code_dir"])
    _, status, usage = os.wait4(proc.pid, 0)  # the child's own peak RSS
  proc.returncode = os.waitstatus_to_exitcode(status)
  with open(log, encoding="utf-8") as f:
    out = f.read()
  lines = [l for l in out.splitlines() if l.startswith("CHILD ")]
  if proc.returncode != 0 or not lines:
    return {"error": out[-1500:]}
  report = json.loads(lines[-1][len("CHILD "):])
  calls, tokens = report["calls"], report["tokens"]
  result = {"import_s": round(report["imported"] - start, 1),
            "setup_s": round(report["built"] - start, 1),
            "first_step_s": round(calls[1] - start, 1)}
  if len(calls) > spec["steps"] + 1:
    steady = calls[spec["steps"] + 1] - calls[1]
    result["tokens_per_s"] = round(sum(tokens[1:spec["steps"] + 1]) / steady)
  result["peak_rss_mb"] = round(usage.ru_maxrss / 1024)
  return result


def main(argv):
  del argv
  if FLAGS.child:
    run_child(json.loads(FLAGS.child))
    return
  code_dirs = FLAGS.code_dir
  labels = FLAGS.label or [f"code{i}" for i in range(len(code_dirs))]
  if len(labels) != len(code_dirs):
    raise app.UsageError(f"Received {len(code_dirs)} --code_dir and {len(labels)} --label; "
                         "pass one label per code directory.")
  sys.path.insert(0, code_dirs[0])
  from nmt_tf import cpu  # pylint: disable=g-import-not-at-top
  info = cpu.cpu_info()
  machine = (f"{info.get('model_name', 'unknown CPU')} (family {info.get('family')}, model "
             f"{info.get('model')}), {os.cpu_count()} cores")
  for size in FLAGS.sizes:
    paths = build_corpus(size, FLAGS.scratch_dir)
    reports = {}
    for label in labels:
      runs = os.path.join(FLAGS.scratch_dir, "runs", f"{label}_{size}")
      shutil.rmtree(runs, ignore_errors=True)
      os.makedirs(runs)
      reports[label] = {"corpus_pairs": size, "label": label, "model": FLAGS.model,
                        "machine": machine, "corpus_mb": round(sum(
                            os.path.getsize(p) for p in paths.values()) / 2**20, 1)}
    for what in FLAGS.measure:  # every code directory in turn, measurement by measurement
      for label, code_dir in zip(labels, code_dirs):
        runs = os.path.join(FLAGS.scratch_dir, "runs", f"{label}_{size}")
        run_dir = os.path.join(runs, "ready" if what == "resume" else what)
        if what == "ready":
          vocab = os.path.join(FLAGS.vocab_from or runs, "sp", "vocab")
          os.makedirs(run_dir)
          shutil.copytree(vocab, os.path.join(run_dir, "vocab"))
        spec = {"measure": what, "src": paths["de"], "tgt": paths["en"], "run_dir": run_dir,
                "code_dir": code_dir, "model": FLAGS.model, "steps": FLAGS.steps,
                "vocab_size": FLAGS.vocab_size, "extra": FLAGS.extra}
        reports[label][what] = measure(spec)
        print(json.dumps({"corpus_pairs": size, "label": label, what: reports[label][what]}),
              file=sys.stderr, flush=True)
    for label in labels:
      print(json.dumps(reports[label]), flush=True)


if __name__ == "__main__":
  app.run(main)
