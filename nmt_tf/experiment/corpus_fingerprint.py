"""What the run was trained on: a fingerprint of each corpus split, kept in `RUN/corpus.json`.

A split read from files (in memory or streamed) is recorded per file (path, size, modification
time and the SHA-256 of its bytes); a split made in memory (the generated pair) by the SHA-256
of its sentences; a TFDS split by its name only, since hashing it would mean reading it all
(so two such records never count as a change). A resumed
run compares the corpus it loads with the record: its vocabulary and its best BLEU belong to
the recorded corpus, so a change is refused (`accept_changed=True` goes on knowingly and
records the new fingerprint). Size and time alone never count as a change: a file copied or
touched with the same bytes is the same corpus. The files of a streamed split
(`data.ParallelShards`) are recorded with their line counts, which a resumed run whose files
have the recorded SHA-256 takes instead of reading the files again (`assume_lines`).
"""

import hashlib
import json
import os

from nmt_tf.write_path import write_json
from nmt_tf.data.shards import ParallelShards
from nmt_tf.data.text_files import ParallelText
from nmt_tf.experiment.run_dir import CORPUS_FILE, RunDirError

FILE_NAME = CORPUS_FILE
_CHUNK = 1 << 20


def _file_record(path):
  digest = hashlib.sha256()
  with open(path, "rb") as f:
    for chunk in iter(lambda: f.read(_CHUNK), b""):
      digest.update(chunk)
  stat = os.stat(path)
  return {"path": os.path.abspath(path), "size": stat.st_size, "mtime": int(stat.st_mtime),
          "sha256": digest.hexdigest()}


def _text_digest(split):
  digest = hashlib.sha256()
  for source, target in zip(split.sources, split.targets):
    digest.update(source.encode("utf-8") + b"\t" + target.encode("utf-8") + b"\n")
  return digest.hexdigest()


def fingerprint(corpus):
  """{split: {"files": [file records]} | {"pairs", "sha256"} | {"dataset"}} of a corpus
  (`check` adds the line counts of a streamed split's files, `_add_lines`)."""
  record = {}
  for split, data in sorted(corpus.items()):
    if isinstance(data, (ParallelText, ParallelShards)) and data.paths:
      record[split] = {"files": [_file_record(p) for p in data.paths]}
    elif isinstance(data, ParallelText):
      record[split] = {"pairs": len(data), "sha256": _text_digest(data)}
    elif isinstance(data, ParallelShards):
      record[split] = {"dataset": data.name}
    else:
      record[split] = {"dataset": type(data).__name__}
  return record


def _add_lines(record, corpus):
  """Adds each file's line count to the file records of the streamed splits."""
  for split, data in corpus.items():
    if isinstance(data, ParallelShards) and data.paths:
      for i, shard in enumerate(data.shards):
        for file_record in record[split]["files"][2 * i:2 * i + 2]:
          file_record["lines"] = shard.lines
  return record


def _changes(saved, current):
  """One phrase per difference between two fingerprints."""
  changes = []
  for split in sorted(set(saved) | set(current)):
    old, new = saved.get(split), current.get(split)
    if old is None or new is None:
      changes.append(f"the {split} split {'appeared' if old is None else 'is gone'}")
    elif "files" in old and "files" in new:
      for a, b in zip(old["files"], new["files"]):
        if a["sha256"] != b["sha256"]:
          changes.append(f"{b['path']} changed (size {a['size']:,} -> {b['size']:,} bytes)")
      if len(old["files"]) != len(new["files"]):
        changes.append(f"the {split} split has other files")
    elif "sha256" in old and "sha256" in new:
      if old["sha256"] != new["sha256"]:
        changes.append(f"the {split} split changed ({old['pairs']:,} -> {new['pairs']:,} "
                       "pairs)")
    elif "dataset" in old and "dataset" in new:
      continue  # recorded by name only: nothing to compare
    elif old != new:
      changes.append(f"the {split} split comes from another kind of source")
  return changes


def check(run_path, corpus, accept_changed=False, report=print):
  """Records the corpus's fingerprint, or compares it with the one recorded.

  Args:
    run_path: the run directory.
    corpus: {split: ParallelText | ParallelShards | tf.data.Dataset} as loaded for this run.
    accept_changed: go on with a changed corpus (recording it) instead of refusing.
    report: called with a one-line warning when a change is accepted.

  Raises:
    RunDirError: the corpus differs from the recorded one and accept_changed is False.
  """
  path = os.path.join(run_path, FILE_NAME)
  current, saved = fingerprint(corpus), None
  if os.path.exists(path):
    try:
      with open(path, encoding="utf-8") as f:
        saved = json.load(f)
    except (OSError, ValueError) as error:
      raise RunDirError(f"{path} is unreadable ({type(error).__name__}); restore it, or delete "
                        "it to record the corpus as it is now.") from None
    changes = _changes(saved, current)
    if changes and not accept_changed:
      raise RunDirError(
          f"The corpus changed since this run began: {'; '.join(changes[:3])}; its vocabulary "
          "and scores belong to the old corpus. Restore the files, train in a new --run_dir, "
          "or pass --accept_changed_corpus to go on with the run's vocabulary.")
    if changes:
      report(f"WARNING: going on with a changed corpus (--accept_changed_corpus): "
             f"{'; '.join(changes[:3])}; the vocabulary is the run's own.")
    else:
      _assume_recorded_lines(corpus, saved)
  current = _add_lines(current, corpus)
  if saved == current:
    return
  write_json(path, current)


def _assume_recorded_lines(corpus, saved):
  """Gives the streamed splits of an unchanged corpus their recorded line counts."""
  for split, data in corpus.items():
    files = saved.get(split, {}).get("files", [])
    if (isinstance(data, ParallelShards) and not data.counted and len(files) == len(data.paths)
        and all("lines" in f for f in files)):
      data.assume_lines([f["lines"] for f in files[0::2]])
