"""Loads the model(s) a decoding command uses: one checkpoint or an ensemble.

`--checkpoints=a,b,c` entries are checkpoint prefixes of `--run_dir` (or "best"/"last"), or
other run directories (their `--checkpoint`, default best). Members must share the run's
tokenizers (the vocabulary files are compared byte for byte).
"""

import filecmp
import os

from nmt_tf.experiment import RunDir, RunDirError
from nmt_tf.inference.ensemble import ModelEnsemble


def _same_vocab(dir_a, dir_b):
  names = sorted(os.listdir(dir_a))
  if names != sorted(os.listdir(dir_b)):
    return False
  _, mismatch, errors = filecmp.cmpfiles(dir_a, dir_b, names, shallow=False)
  return not mismatch and not errors


def load_models(run_dir, checkpoint="best", checkpoints=None, hard_inference=None):
  """The model to decode with and the run's config and tokenizers.

  Args:
    run_dir: path of the main run (config, tokenizers; default checkpoint owner).
    checkpoint: "best", "last" or a prefix, used when `checkpoints` is empty and for run
      directories listed in `checkpoints`.
    checkpoints: optional sequence of entries (see module docstring); two or more give a
      `ModelEnsemble`.
    hard_inference: optional "expectation" or "argmax" in place of each model's
      model.hard_inference (hard-attention runs only; RunDir.load_model).

  Returns:
    (model or ModelEnsemble, ExperimentConfig of run_dir, source tokenizer, target tokenizer,
    list of the checkpoint paths used).

  Raises:
    RunDirError: a missing run or checkpoint, or members with different vocabularies.
  """
  run = RunDir(run_dir)
  entries = [e.strip() for e in (checkpoints or []) if e.strip()]
  if not entries:
    model, config, src_tok, tgt_tok = run.load_model(checkpoint, hard_inference)
    return model, config, src_tok, tgt_tok, [run.checkpoint_path(checkpoint)]
  models, paths, first = [], [], None
  for entry in entries:
    if os.path.isdir(entry) and os.path.isfile(os.path.join(entry, "config.json")):
      member_run, which = RunDir(entry), checkpoint
    else:
      member_run, which = run, entry
    loaded = member_run.load_model(which, hard_inference)
    if first is None:
      first = (member_run,) + loaded[1:]
    elif not _same_vocab(first[0].vocab_dir, member_run.vocab_dir):
      raise RunDirError(f"Ensemble member {entry!r} uses other vocabularies than "
                        f"{first[0].path}; ensemble only runs trained with the same "
                        "vocab/ files.")
    models.append(loaded[0])
    paths.append(member_run.checkpoint_path(which))
  _, config, src_tok, tgt_tok = first
  model = models[0] if len(models) == 1 else ModelEnsemble(models)
  return model, config, src_tok, tgt_tok, paths
