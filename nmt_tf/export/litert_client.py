"""Translates with an nmt_tf LiteRT export, without TensorFlow (docs/EXPORT.md).

Needs only `ai-edge-litert`, `numpy` and, for SentencePiece models, `sentencepiece`. The
export copies this file next to its model as nmt_litert.py:

  from nmt_litert import LiteRTTranslator
  translator = LiteRTTranslator("runs/quickstart/export/nmt_litert/1")
  for t in translator.translate(["ein hund rennt .", "zwei katzen"]):
    print(t.text, t.log_prob)

  python nmt_litert.py runs/quickstart/export/nmt_litert/1 [--beam] < input.txt

Before it loads anything, the client checks the export's files against its manifest.json
(with nmt_manifest.py, the export's copy of nmt_tf/manifest.py): a model file or a vocabulary
changed, cut or replaced is one `error:` line naming the file. An export made before
manifests is checked by its vocabulary sizes.

The text is prepared as the SavedModel prepares it: invalid UTF-8 replaced by U+FFFD,
tokenized, cut to `max_source_length` tokens (flag `truncated`), reversed if the model was
trained on reversed sources, EOS appended. A sentence without any token gets the empty
translation with log_prob 0 and never reaches the model.
"""

import argparse
import dataclasses
import importlib.util
import json
import os
import re
import sys
from typing import List

import numpy as np

MODEL_FILE = "model.tflite"
METADATA_FILE = "nmt_litert.json"
MANIFEST_MODULE = "nmt_manifest.py"
DEFAULT_MAX_SOURCE_LENGTH = 200
PAD_ID, UNK_ID, BOS_ID, EOS_ID = 0, 1, 2, 3
NUM_SPECIAL = 4

# Word vocabularies: the splitting and joining of nmt_tf/data/word_tokenizer.py, in Python.
_SPACES = re.compile("[\t\n\x0b\f\r \u00a0\u2000-\u200a\u3000]+")
_PUNCT = re.compile(r"""([.,!?;:"()\[\]])""")
_ATTACH = ((r'" ([^"]*?) "', r'"\1"'), (r" ([.,!?;:)\]])", r"\1"), (r"([(\[]) ", r"\1"))


class ClientError(ValueError):
  """A missing or damaged export directory, or a bad argument."""


def _manifest_module():
  """The export's copy of nmt_tf/manifest.py beside this file, else nmt_tf's own."""
  beside = os.path.join(os.path.dirname(os.path.abspath(__file__)), MANIFEST_MODULE)
  if os.path.isfile(beside):
    spec = importlib.util.spec_from_file_location("nmt_manifest", beside)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
  from nmt_tf import manifest  # pylint: disable=import-outside-toplevel
  return manifest


AGAIN = "export the model again with `nmt-tf export --format=litert`"


@dataclasses.dataclass
class Translation:
  """One translation: text, score (after the search's penalties), log_prob, the tokens as the
  model read and wrote them (EOS last), alignment [target tokens, source tokens], the next
  best translations of a beam search, and whether the source was cut."""

  text: str
  score: float
  log_prob: float
  source_tokens: List[str]
  target_tokens: List[str]
  alignment: np.ndarray
  alternatives: List["Translation"] = dataclasses.field(default_factory=list)
  truncated: bool = False


def clean(text):
  """str or bytes -> str whose invalid UTF-8 bytes are U+FFFD each."""
  if isinstance(text, str):
    try:
      text = text.encode("utf-8", "surrogateescape")  # bytes read with surrogateescape
    except UnicodeEncodeError:
      text = text.encode("utf-8", "replace")
  return text.decode("utf-8", "replace")


class _SentencePiece:

  def __init__(self, path):
    import sentencepiece  # pylint: disable=import-outside-toplevel
    try:
      self._sp = sentencepiece.SentencePieceProcessor(model_file=path)
    except (OSError, RuntimeError) as error:
      reason = " ".join(str(error).split())[:120]
      raise ClientError(f"{path} is not a SentencePiece model ({reason}); {AGAIN}.") from None
    self.size = self._sp.get_piece_size()

  def encode(self, text):
    return self._sp.encode(text, out_type=int)

  def decode(self, ids):
    return self._sp.decode(ids)

  def token(self, i):
    return self._sp.id_to_piece(int(i))


class _Words:

  def __init__(self, path, split_punctuation):
    try:
      with open(path, encoding="utf-8") as f:
        self._vocab = [line.rstrip("\n") for line in f]
    except (OSError, UnicodeDecodeError) as error:
      raise ClientError(f"{path} is not a readable word list ({error}); {AGAIN}.") from None
    if len(self._vocab) <= NUM_SPECIAL:
      raise ClientError(f"{path} holds {len(self._vocab)} words, not even the {NUM_SPECIAL} "
                        f"reserved tokens; {AGAIN}.")
    self.size = len(self._vocab)
    self._index = {w: i for i, w in enumerate(self._vocab)}
    self._split = split_punctuation

  def encode(self, text):
    text = _SPACES.sub(" ", text)
    if self._split:
      text = _PUNCT.sub(r" \1 ", text)
    ids = (self._index.get(w, UNK_ID) for w in text.split(" ") if w)
    return [i if i >= NUM_SPECIAL else UNK_ID for i in ids]  # "<s>" in the text is a word

  def decode(self, ids):
    text = " ".join(self._vocab[i] for i in ids)
    if self._split:
      for pattern, replacement in _ATTACH:
        text = re.sub(pattern, replacement, text)
    return text

  def token(self, i):
    return self._vocab[int(i)]


def _read_json(path):
  try:
    with open(path, encoding="utf-8") as f:
      value = json.load(f)
  except FileNotFoundError:
    raise ClientError(f"{path} not found; pass the version directory that "
                      "`nmt-tf export --format=litert` wrote.") from None
  except (OSError, ValueError) as error:
    raise ClientError(f"{path} is not readable JSON ({error}); {AGAIN}.") from None
  if not isinstance(value, dict):
    raise ClientError(f"{path} holds no JSON object; {AGAIN}.")
  return value


def _entry(values, key, kind, path):
  """values[key], checked to be of type `kind`; ClientError naming the file otherwise."""
  value = values.get(key)
  if not isinstance(value, kind) or isinstance(value, bool) and kind is not bool:
    raise ClientError(f"{path} lacks a valid {key!r} entry (received {value!r}); {AGAIN}.")
  return value


def _tokenizer(vocab_dir, prefix):
  path = os.path.join(vocab_dir, f"{prefix}.json")
  meta = _read_json(path)
  if meta.get("kind") == "sentencepiece":
    return _SentencePiece(os.path.join(vocab_dir, _entry(meta, "model", str, path)))
  if meta.get("kind") == "word":
    return _Words(os.path.join(vocab_dir, _entry(meta, "vocab", str, path)),
                  _entry(meta, "split_punctuation", bool, path))
  raise ClientError(f"{path}: unknown tokenizer kind {meta.get('kind')!r}; {AGAIN}.")


def _strip(ids):
  """Real target tokens: up to the first EOS, without PAD and BOS."""
  out = []
  for i in ids:
    if i == EOS_ID:
      break
    if i not in (PAD_ID, BOS_ID):
      out.append(int(i))
  return out


class LiteRTTranslator:
  """The model of an nmt_tf LiteRT export with its tokenizers.

  Args:
    model_dir: the export's version directory (model.tflite, nmt_litert.json, vocab/).
    num_threads: interpreter threads; default LiteRT's.
  """

  def __init__(self, model_dir, num_threads=None):
    if num_threads is not None and (not isinstance(num_threads, int) or num_threads < 1):
      raise ClientError(f"Received num_threads={num_threads!r}; expected a positive integer "
                        "(or None for LiteRT's default).")
    if not os.path.isdir(model_dir):
      raise ClientError(f"{model_dir} is not a folder; pass the version directory that "
                        "`nmt-tf export --format=litert` wrote.")
    checks = _manifest_module()
    try:
      record = checks.verify(model_dir, AGAIN)
    except checks.ManifestError as error:
      raise ClientError(str(error)) from None
    meta_path = os.path.join(model_dir, METADATA_FILE)
    self.metadata = _read_json(meta_path)
    model_path = os.path.join(model_dir, MODEL_FILE)
    if not os.path.isfile(model_path):
      raise ClientError(f"{model_path} not found; {AGAIN}.")
    vocab_dir = os.path.join(model_dir, _entry(self.metadata, "vocab_dir", str, meta_path))
    tokenizers = os.path.join(vocab_dir, "tokenizers.json")
    prefixes = _read_json(tokenizers)
    self.source = _tokenizer(vocab_dir, _entry(prefixes, "source", str, tokenizers))
    self.target = _tokenizer(vocab_dir, _entry(prefixes, "target", str, tokenizers))
    sizes = {"source_vocab_size": self.source.size, "target_vocab_size": self.target.size}
    source = None
    if record is None:  # an export made before manifests: its config's sizes
      checks.note_once(model_dir)
      model = self.metadata.get("model") or {}
      record = {"sizes": {"source_vocab_size": model.get("src_vocab_size"),
                          "target_vocab_size": model.get("tgt_vocab_size")}}
      source = meta_path
    try:
      checks.check_sizes(model_dir, record, sizes, AGAIN, source)
    except checks.ManifestError as error:
      raise ClientError(str(error)) from None
    self.max_source_length = _entry(self.metadata, "max_source_length", int, meta_path)
    from ai_edge_litert.interpreter import Interpreter  # pylint: disable=import-outside-toplevel
    try:
      self._interpreter = Interpreter(model_path=model_path, num_threads=num_threads)
    except (ValueError, RuntimeError) as error:
      raise ClientError(f"{model_path} is not a LiteRT model that can be loaded "
                        f"({' '.join(str(error).split())[:160]}); {AGAIN}.") from None
    self._runners = {}

  def source_ids(self, text):
    """One sentence -> (ids ending in EOS, truncated)."""
    ids = self.source.encode(clean(text))
    truncated = len(ids) > self.max_source_length
    ids = ids[:self.max_source_length]
    return ids + [EOS_ID], truncated

  def translate(self, sentences, beam=False, batch_size=32):
    """Translates each sentence (str or bytes), in order: greedy, or the exported beam
    search with beam=True (its n-best list in `alternatives`)."""
    if not isinstance(batch_size, int) or batch_size < 1:
      raise ClientError(f"Received batch_size={batch_size!r}; expected a positive integer.")
    prepared = [self.source_ids(s) for s in sentences]
    results = [None] * len(prepared)
    todo = [i for i, (ids, _) in enumerate(prepared) if len(ids) > 1]
    for i, (ids, truncated) in enumerate(prepared):
      if len(ids) == 1:  # no token: the empty translation
        results[i] = Translation("", 0.0, 0.0, [self.source.token(EOS_ID)], [],
                                 np.zeros([0, 1], np.float32), truncated=truncated)
    for start in range(0, len(todo), batch_size):
      rows = todo[start:start + batch_size]
      width = max(len(prepared[i][0]) for i in rows)
      batch = np.zeros([len(rows), width], np.int32)
      for r, i in enumerate(rows):
        batch[r, :len(prepared[i][0])] = prepared[i][0]
      out = self._run("beam_search" if beam else "greedy", batch)
      for r, i in enumerate(rows):
        results[i] = self._result(out, r, prepared[i], beam)
    return results

  def _run(self, signature, batch):
    if signature not in self._runners:
      self._runners[signature] = self._interpreter.get_signature_runner(signature)
    return self._runners[signature](source_ids=batch)

  def _result(self, out, r, prepared, beam):
    ids, truncated = prepared
    source_tokens = [self.source.token(i) for i in ids]
    hypotheses = []
    for n in range(out["ids"].shape[1] if beam else 1):
      pick = (lambda key: out[key][r, n]) if beam else (lambda key: out[key][r])  # pylint: disable=cell-var-from-loop
      length = int(pick("length"))
      if beam and length == 0:  # a missing hypothesis (score -inf)
        continue
      target = [int(i) for i in pick("ids")[:length]]
      log_prob = float(pick("log_prob"))
      hypotheses.append(Translation(
          text=self.target.decode(_strip(target)),
          score=float(pick("score")) if beam else log_prob, log_prob=log_prob,
          source_tokens=source_tokens, target_tokens=[self.target.token(i) for i in target],
          alignment=np.asarray(pick("attention")[:length, :len(ids)], np.float32),
          truncated=truncated))
    best = hypotheses[0]
    best.alternatives = hypotheses[1:]
    return best


def main(argv=None):
  """python nmt_litert.py MODEL_DIR [--beam] [--threads N] < input > output"""
  parser = argparse.ArgumentParser(description="Translate stdin line by line with an nmt_tf "
                                   "LiteRT export.")
  parser.add_argument("model_dir")
  parser.add_argument("--beam", action="store_true", help="beam search instead of greedy")
  parser.add_argument("--threads", type=int, default=None)
  parser.add_argument("--batch_size", type=int, default=32)
  args = parser.parse_args(argv)
  try:
    if args.batch_size < 1:
      raise ClientError(f"Received --batch_size={args.batch_size}; expected a positive "
                        "integer.")
    if args.threads is not None and args.threads < 1:
      raise ClientError(f"Received --threads={args.threads}; expected a positive integer.")
    translator = LiteRTTranslator(args.model_dir, args.threads)
    lines = [line.rstrip(b"\r\n") for line in sys.stdin.buffer]
    for t in translator.translate(lines, beam=args.beam, batch_size=args.batch_size):
      sys.stdout.write(t.text + "\n")
  except ClientError as error:
    print(f"error: {error}", file=sys.stderr)
    return 2
  except KeyboardInterrupt:
    print("error: interrupted; rerun for the whole input.", file=sys.stderr)
    return 130
  return 0


if __name__ == "__main__":
  sys.exit(main())
