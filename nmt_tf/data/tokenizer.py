"""The tokenizer interface shared by the SentencePiece and word-level tokenizers.

A ``Tokenizer`` is a ``tf.Module``: its tables and models are tracked, so an exporter can
keep it as an attribute of the exported module and call ``tokenize``/``detokenize`` inside
a serving ``tf.function`` (raw strings in, raw strings out, no ``tf.py_function``).
"""

import json
import os
from typing import Dict, List, Sequence, Type, Union

import tensorflow as tf

from nmt_tf import special_tokens
from nmt_tf import write_path
from nmt_tf.data.errors import DataError

NUM_SPECIAL = len(special_tokens.SPECIAL_TOKENS)
_REGISTRY: Dict[str, Type["Tokenizer"]] = {}
LOAD_FIX = "restore it from a backup or train the tokenizer again"
# What reading a damaged model or vocabulary file raises (the SentencePiece parser: RuntimeError).
_LOAD_ERRORS = (DataError, OSError, ValueError, LookupError, TypeError, RuntimeError)


def read_json_file(path: str, fix: str) -> dict:
  """The JSON object stored in ``path``.

  Raises:
    DataError: one line naming ``path`` and ``fix`` when the file cannot be read, is empty,
      is not valid JSON (or UTF-8) or holds something else than an object.
  """
  try:
    with open(path, "rb") as f:
      content = f.read()
  except OSError as e:
    raise DataError(f"{path}: cannot read ({e.strerror or e}); {fix}.") from None
  try:
    value = json.loads(content) if content.strip() else None
  except ValueError as e:  # json.JSONDecodeError and UnicodeDecodeError
    value = e
  if not isinstance(value, dict):
    reason = ("the file has no content" if value is None else
              " ".join(str(value).split()) if isinstance(value, ValueError) else
              f"a JSON {type(value).__name__} instead of an object")
    raise DataError(f"{path} is empty or not valid JSON ({reason}); {fix}.")
  return value


def strip_special(ids: Union[tf.Tensor, tf.RaggedTensor]) -> tf.RaggedTensor:
  """Keeps the real tokens of each row: cut at the first EOS, drop PAD and BOS.

  Args:
    ids: int ids, ragged ``[batch, (len)]`` or dense padded ``[batch, len]``.

  Returns:
    int32 ragged ``[batch, (real_len)]``.
  """
  # Dense masks: ragged elementwise ops take seconds to trace (export, validation).
  if isinstance(ids, tf.RaggedTensor):
    ids = ids.to_tensor(default_value=special_tokens.PAD_ID)  # [batch, max_len]
  ids = tf.cast(tf.convert_to_tensor(ids), tf.int32)  # [batch, len]
  is_eos = tf.cast(tf.equal(ids, special_tokens.EOS_ID), tf.int32)
  before_eos = tf.equal(tf.cumsum(is_eos, axis=1), 0)  # [batch, len]
  padding = tf.logical_or(tf.equal(ids, special_tokens.PAD_ID),
                          tf.equal(ids, special_tokens.BOS_ID))
  keep = tf.logical_and(before_eos, tf.logical_not(padding))
  return tf.ragged.boolean_mask(ids, keep)  # [batch, (real_len)]


def strip_special_list(ids: Sequence[int]) -> List[int]:
  """Python twin of ``strip_special`` for one sentence."""
  out = []
  for i in ids:
    i = int(i)
    if i == special_tokens.EOS_ID:
      break
    if i not in (special_tokens.PAD_ID, special_tokens.BOS_ID):
      out.append(i)
  return out


class Tokenizer(tf.Module):
  """Raw strings <-> int32 ids, in-graph and in Python, with the reserved ids of
  ``special_tokens`` (PAD=0, UNK=1, BOS=2, EOS=3) first in the vocabulary.

  Subclasses implement ``tokenize``, ``_detokenize_real``, ``id_to_token``, ``vocab_size``,
  ``encode``, ``_decode_real``, ``_save_files`` and ``_from_files``, and set ``kind``.
  """

  kind = ""
  # Whether pieces join into words (a word starts at a piece marked as its start), as
  # SentencePiece's; False where each token is a word.
  joins_pieces = True
  # Keys of the ``<prefix>.json`` entries that name the model files (see ``_save_files``).
  file_keys = ()

  def __init_subclass__(cls, **kwargs):
    super().__init_subclass__(**kwargs)
    if cls.kind:
      _REGISTRY[cls.kind] = cls

  # In-graph.
  def tokenize(self, strings: tf.Tensor) -> tf.RaggedTensor:
    """tf.string ``[batch]`` -> int32 ragged ``[batch, (tokens)]``, no BOS/EOS added."""
    raise NotImplementedError

  def detokenize(self, ids: Union[tf.Tensor, tf.RaggedTensor]) -> tf.Tensor:
    """Ids (ragged, or dense padded) -> tf.string ``[batch]``; stops at the first EOS and
    drops PAD/BOS."""
    return self._detokenize_real(strip_special(ids))

  def _detokenize_real(self, ids: tf.RaggedTensor) -> tf.Tensor:
    raise NotImplementedError

  def id_to_token(self, ids: tf.Tensor) -> tf.Tensor:
    """int ids of any shape -> tf.string tokens of the same shape."""
    raise NotImplementedError

  def pieces(self, strings: tf.Tensor) -> tf.RaggedTensor:
    """tf.string ``[batch]`` -> tf.string ragged ``[batch, (tokens)]``: the surface string of
    each token of ``tokenize`` (as ``id_to_token`` spells it; a word tokenizer gives the
    words as typed, so that an unknown word keeps its characters)."""
    return tf.ragged.map_flat_values(self.id_to_token, self.tokenize(strings))

  @property
  def vocab_size(self) -> int:
    raise NotImplementedError

  @property
  def vocab(self) -> List[str]:
    """The tokens by id, spelt as ``id_to_token`` spells them."""
    raise NotImplementedError

  def extended(self, other: "Tokenizer") -> "Tokenizer":
    """This tokenizer with the tokens of ``other`` (of the same kind) that it lacks appended:
    every token keeps its id, ``other``'s new tokens follow in ``other``'s order."""
    raise NotImplementedError

  # Python.
  def encode(self, text: str) -> List[int]:
    """One sentence -> ids, equal to ``tokenize`` on it."""
    raise NotImplementedError

  def decode(self, ids: Sequence[int]) -> str:
    """Ids -> one sentence, equal to ``detokenize`` on them."""
    return self._decode_real(strip_special_list(ids))

  def _decode_real(self, ids: List[int]) -> str:
    raise NotImplementedError

  # Files.
  def save(self, directory: str, prefix: str = "tokenizer") -> None:
    """Writes ``<directory>/<prefix>.json`` (kind and options) and the model files."""
    os.makedirs(directory, exist_ok=True)
    meta = {"kind": self.kind, **self._save_files(directory, prefix)}
    write_path.write_json(os.path.join(directory, f"{prefix}.json"), meta)

  def _save_files(self, directory: str, prefix: str) -> dict:
    raise NotImplementedError

  @classmethod
  def _from_files(cls, directory: str, meta: dict) -> "Tokenizer":
    raise NotImplementedError

  @staticmethod
  def load(directory: str, prefix: str = "tokenizer", fix: str = LOAD_FIX) -> "Tokenizer":
    """Loads what ``save`` wrote, whatever the tokenizer kind.

    Args:
      directory: where ``save`` wrote the files.
      prefix: their prefix.
      fix: what the user can do about a damaged file, for error messages.

    Raises:
      DataError: one line naming the missing, empty or corrupt file and ``fix``.
    """
    path = os.path.join(directory, f"{prefix}.json")
    if not os.path.isfile(path):
      raise DataError(f"Tokenizer file not found: {path!r}; train the tokenizers first "
                      f"(they are saved in the run directory) or fix the directory.")
    meta = read_json_file(path, fix)
    if meta.get("kind") not in _REGISTRY:
      raise DataError(f"{path}: unknown tokenizer kind {meta.get('kind')!r}; expected "
                      f"one of {sorted(_REGISTRY)}; {fix}.")
    cls = _REGISTRY[meta["kind"]]
    files = []
    for key in cls.file_keys:
      if not isinstance(meta.get(key), str) or not meta[key]:
        raise DataError(f"{path} names no {key} file ({key!r}: {meta.get(key)!r}); {fix}.")
      files.append(os.path.join(directory, meta[key]))
      if not os.path.isfile(files[-1]):
        raise DataError(f"{files[-1]} not found (the {key} file of {path}); {fix}.")
      if os.path.getsize(files[-1]) == 0:
        raise DataError(f"{files[-1]} is empty (the {key} file of {path}); {fix}.")
    try:
      return cls._from_files(directory, meta)
    except KeyError as e:  # an entry of the .json file
      raise DataError(f"{path} lacks the entry {e}; {fix}.") from None
    except _LOAD_ERRORS as e:
      reason = str(e) if isinstance(e, DataError) else f"{type(e).__name__}: {e}"
      reason = " ".join(reason.split())[:200]
      raise DataError(f"{', '.join(files) or path} is not a valid {cls.kind} tokenizer file "
                      f"({reason}); {fix}.") from None
