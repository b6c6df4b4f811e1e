"""SentencePiece subwords (Kudo & Richardson, 2018), trained with the ``sentencepiece``
package and applied in-graph with tensorflow-text's SentencePiece ops (sentencepiece_ops.py)."""

import hashlib
import io
import os
from typing import Iterable, List, Optional, Sequence

import sentencepiece as spm
from sentencepiece import sentencepiece_model_pb2
import tensorflow as tf

from nmt_tf import special_tokens
from nmt_tf import write_path
from nmt_tf.data import segmentation_draws
from nmt_tf.data import sentencepiece_ops
from nmt_tf.data.errors import DataError
from nmt_tf.data.tokenizer import Tokenizer

MODEL_TYPES = ("unigram", "bpe")


def train_sentencepiece(texts: Iterable[str], vocab_size: int = 8000,
                        model_type: str = "unigram", character_coverage: float = 1.0,
                        max_sentences: int = 1_000_000,
                        symbols: Sequence[str] = ()) -> bytes:
  """Trains a SentencePiece model whose first ids are PAD=0, UNK=1, BOS=2, EOS=3.

  Args:
    texts: training sentences (raw, untokenized).
    vocab_size: number of pieces including the 4 reserved ones; a soft limit, so small
      corpora get a smaller vocabulary instead of an error.
    model_type: "unigram" (Kudo, 2018) or "bpe" (Sennrich et al., 2016).
    character_coverage: share of characters covered by the pieces (1.0 for small alphabets).
    max_sentences: at most this many sentences are sampled for training (by SentencePiece,
      without a seed).
    symbols: pieces that are always one piece wherever they appear (user-defined
      symbols, e.g. the target-language tags "<2fr>"), after the reserved ids.

  Returns:
    The serialized model proto.
  """
  if model_type not in MODEL_TYPES:
    raise DataError(f"Received model_type={model_type!r}; expected one of {MODEL_TYPES}.")
  if vocab_size <= len(special_tokens.SPECIAL_TOKENS):
    raise DataError(f"Received vocab_size={vocab_size}; expected more than the "
                    f"{len(special_tokens.SPECIAL_TOKENS)} reserved tokens.")
  texts = [t for t in texts if t]
  if not texts:
    raise DataError("No text to train SentencePiece on; the training split is empty.")
  model = io.BytesIO()
  spm.SentencePieceTrainer.train(
      sentence_iterator=iter(texts), model_writer=model, vocab_size=vocab_size,
      model_type=model_type, character_coverage=character_coverage,
      input_sentence_size=max_sentences, shuffle_input_sentence=True,
      hard_vocab_limit=False, num_threads=2, minloglevel=2,
      pad_id=special_tokens.PAD_ID, unk_id=special_tokens.UNK_ID,
      bos_id=special_tokens.BOS_ID, eos_id=special_tokens.EOS_ID,
      pad_piece=special_tokens.PAD, unk_piece=special_tokens.UNK,
      bos_piece=special_tokens.BOS, eos_piece=special_tokens.EOS,
      **({"user_defined_symbols": list(symbols)} if symbols else {}))
  return model.getvalue()


class SentencePieceTokenizer(Tokenizer):
  """Subword tokenizer from a SentencePiece model proto.

  Args:
    model_proto: serialized SentencePiece model (see ``train_sentencepiece``).
    name: tf.Module name.
  """

  kind = "sentencepiece"
  file_keys = ("model",)

  def __init__(self, model_proto: bytes, name: Optional[str] = None):
    super().__init__(name=name)
    self._proto = model_proto
    self._processor = spm.SentencePieceProcessor(model_proto=model_proto)
    self._draws = None  # SegmentationDraws, made at the first `sample`
    expected = special_tokens.SPECIAL_TOKENS
    found = tuple(self._processor.id_to_piece(i) for i in range(len(expected)))
    if found != expected:
      raise DataError(f"SentencePiece model has reserved pieces {found}; expected "
                      f"{expected} (train it with train_sentencepiece).")
    digest = hashlib.sha1(model_proto).hexdigest()[:16]
    # A shared name (see ModelResource): survives tf.random.set_seed and SavedModel loading.
    self._model_resource = sentencepiece_ops.ModelResource(
        model_proto, f"sentencepiece_{digest}", f"nmt_tf_sentencepiece_{digest}")

  @classmethod
  def train(cls, texts: Iterable[str], vocab_size: int = 8000, model_type: str = "unigram",
            **kwargs) -> "SentencePieceTokenizer":
    """Trains on ``texts``; ``kwargs`` go to ``train_sentencepiece``."""
    return cls(train_sentencepiece(texts, vocab_size, model_type, **kwargs))

  def tokenize(self, strings: tf.Tensor) -> tf.RaggedTensor:
    return sentencepiece_ops.tokenize(self._model_resource, strings)  # [batch, (pieces)]

  def _detokenize_real(self, ids: tf.RaggedTensor) -> tf.Tensor:
    return sentencepiece_ops.detokenize(self._model_resource, ids)  # [batch]

  def id_to_token(self, ids: tf.Tensor) -> tf.Tensor:
    return sentencepiece_ops.id_to_string(self._model_resource, ids)

  @property
  def vocab_size(self) -> int:
    return self._processor.get_piece_size()

  @property
  def vocab(self) -> List[str]:
    return [self._processor.id_to_piece(i) for i in range(self.vocab_size)]

  def extended(self, other: "SentencePieceTokenizer") -> "SentencePieceTokenizer":
    """The model with the pieces of `other` it lacks appended, each with its score in
    `other`: segmentation picks among the pieces of both by their scores (log-probabilities
    of a unigram model, merge ranks of BPE), with this model's normalization."""
    model = sentencepiece_model_pb2.ModelProto.FromString(self._proto)
    known = {piece.piece for piece in model.pieces}
    for piece in sentencepiece_model_pb2.ModelProto.FromString(other._proto).pieces:  # pylint: disable=protected-access
      if piece.piece not in known:
        model.pieces.append(piece)
    model.trainer_spec.vocab_size = len(model.pieces)
    return SentencePieceTokenizer(model.SerializeToString())

  def encode(self, text: str) -> List[int]:
    return self._processor.encode(text, out_type=int)

  def sample(self, texts: Sequence[str], seed: int, alpha: float,
             nbest: int = -1) -> List[List[int]]:
    """One segmentation of each text drawn from P(x)^alpha over its `nbest` best
    segmentations (all when -1) of a unigram model (Kudo 2018), or by BPE-dropout with
    probability alpha for a BPE model (``segmentation_draws.py``). The same arguments give
    the same segmentations in every process."""
    if self._draws is None:
      self._draws = segmentation_draws.SegmentationDraws(self._proto, self._processor)
    return self._draws.sample(texts, seed, alpha, nbest)

  def _decode_real(self, ids: List[int]) -> str:
    return self._processor.decode(ids)

  def _save_files(self, directory: str, prefix: str) -> dict:
    write_path.write_bytes(os.path.join(directory, f"{prefix}.model"), self._proto)
    return {"model": f"{prefix}.model"}

  @classmethod
  def _from_files(cls, directory: str, meta: dict) -> "SentencePieceTokenizer":
    with open(os.path.join(directory, meta["model"]), "rb") as f:
      return cls(f.read())
