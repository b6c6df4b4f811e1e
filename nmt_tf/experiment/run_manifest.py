"""The manifest of a run directory (nmt_tf/manifest.py): what a run's models are loaded with.

  RUN/manifest.json
    files        every file of vocab/ (tokenizers.json, the SentencePiece models or word
                 lists and their .json) with its SHA-256
    sizes        source_vocab_size, target_vocab_size: the tokenizers' sizes at training
    config       the SHA-256 of config.json's model, data and tokenizer sections, those that
                 fix what the checkpoints mean (train, pipeline and decode may change)
    checkpoints  {"checkpoints/ckpt-20": SHA-256 of its .index, "best/ckpt-20": ...}: the
                 checkpoints saved by training and `average`, pruned as they are deleted

Training writes it when it prepares the run (and so for a run made before manifests: its
files are checked as before, then recorded), and adds each checkpoint it saves. Every loader
(`RunDir.load_model`: the Python API, translate, evaluate, score, caption, export, average)
verifies it before the model is built, so a vocabulary reshuffled, replaced or cut, a config
whose model section was edited, or a checkpoint swapped for another is refused with one line.
A checkpoint the manifest does not list (saved by a process killed before recording it, or
copied in) is restored as before: its tensors' own checksums still guard it.
"""

import json
import os

from nmt_tf import manifest
from nmt_tf import write_path
from nmt_tf.experiment import upgrade

FIXED_SECTIONS = ("model", "data", "tokenizer")
# Fields added to those sections after runs were recorded stay out of the digest at the
# value those runs trained with (upgrade.py), so the runs keep theirs.
LATER_FIELDS = upgrade.LATER_FIELDS


def config_digest(config):
  """SHA-256 of the sections of an ExperimentConfig that fix what its checkpoints mean."""
  values = json.loads(config.to_json())
  for (section, field), default in LATER_FIELDS.items():
    if values[section].get(field) == default:
      del values[section][field]
  return manifest.digest_of({section: values[section] for section in FIXED_SECTIONS})


def _fix(run):
  return (f"restore {run.path} from a backup of the run, or train a new run with "
          "`nmt-tf train --run_dir=NEW`")


def vocab_sizes(src_tok, tgt_tok):
  """The manifest's `sizes` of a pair of tokenizers (also a LiteRT export's)."""
  return {"source_vocab_size": src_tok.vocab_size, "target_vocab_size": tgt_tok.vocab_size}


def _update(run, change):
  """Rewrites RUN/manifest.json as change(the manifest or None) returns it (None: leave it),
  holding the run's lock; checkpoint entries no longer on disk are dropped."""
  with run.writing():
    rec = change(manifest.read(run.path))
    if rec is None:
      return
    rec["checkpoints"] = {
        name: digest for name, digest in sorted(rec.get("checkpoints", {}).items())
        if os.path.exists(os.path.join(run.path, name) + ".index")}
    write_path.write_json(run.manifest_path, rec)


def write(run, config, src_tok, tgt_tok, parent=None):
  """Writes RUN/manifest.json from the run's vocab/ files and config, in the current run
  format (upgrade.py), keeping the checkpoint entries whose checkpoints are still on disk
  and the parent a fine-tuned run started from (`parent`, or the one recorded before)."""
  def rewrite(old):
    extra = {"parent": parent or (old or {}).get("parent")}
    return manifest.record(
        run.path, manifest.files_below(run.path, os.path.basename(run.vocab_dir)),
        vocab_sizes(src_tok, tgt_tok), config=config_digest(config),
        checkpoints=(old or {}).get("checkpoints", {}), run_format=upgrade.FORMAT,
        **{k: v for k, v in extra.items() if v is not None})
  _update(run, rewrite)


def add_checkpoint(run, path):
  """Records checkpoint `path` (a prefix inside the run) in the manifest; nothing for a run
  without one, or a checkpoint outside the run."""
  name = os.path.relpath(os.path.abspath(path), run.path)
  if name.startswith(os.pardir):
    return

  def add(rec):
    if rec is not None:
      rec.setdefault("checkpoints", {})[name] = manifest.sha256(path + ".index")
    return rec

  _update(run, add)


def verify(run, config, src_tok, tgt_tok):
  """Checks the run's vocab/ files, fixed config sections and tokenizer sizes against its
  manifest.

  Returns:
    The manifest, or None for a run without one (said once; the caller checks the sizes).

  Raises:
    manifest.ManifestError: one line naming the file that differs and the fix.
  """
  rec = manifest.verify(run.path, _fix(run), only=(os.path.basename(run.vocab_dir) + os.sep,))
  if rec is None:
    manifest.note_once(run.path)
    return None
  if rec.get("config") not in (None, config_digest(config)):
    raise manifest.ManifestError(
        f"{run.config_path}: its model, data or tokenizer section differs from the one the "
        f"run was trained with ({run.manifest_path}); {_fix(run)}.")
  manifest.check_sizes(run.path, rec, vocab_sizes(src_tok, tgt_tok), _fix(run))
  return rec


def best_checkpoints_listed(run):
  """The best/ checkpoints the run's manifest lists (sorted names; [] without a manifest)."""
  rec = manifest.read(run.path)
  names = (rec or {}).get("checkpoints", {})
  best = os.path.basename(run.best_dir)
  return sorted(name for name in names if name.split(os.sep, 1)[0] == best)


def verify_checkpoint(run, path):
  """ManifestError when checkpoint `path` of the run is listed with another .index."""
  rec = manifest.read(run.path)
  if rec is None:
    return
  name = os.path.relpath(os.path.abspath(path), run.path)
  expected = rec.get("checkpoints", {}).get(name)
  if expected is not None and os.path.exists(path + ".index") and \
      manifest.sha256(path + ".index") != expected:
    raise manifest.ManifestError(
        f"{path}.index differs from the checkpoint the run saved there (its checksum in "
        f"{run.manifest_path}): it was replaced by another checkpoint; "
        "restore it from a backup, or pass another --checkpoint.")
