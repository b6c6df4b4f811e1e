"""Seeded draws of SentencePiece segmentations that are the same in every process.

SentencePiece's own sampling encoder draws from an ``absl::BitGen``, which Abseil salts in
every process: under ``set_random_generator_seed`` it repeats its draws within one process
and draws others in the next (sentencepiece 0.2.3). A run resumed after a stop would then
train on other segmentations than the run that was not stopped. ``SegmentationDraws`` makes
the same draws from the model's own pieces and scores with Python's ``random.Random(seed)``,
whose sequence for a seed is fixed across processes, platforms and Python versions:

- Unigram model, l best (l > 1; Kudo 2018): the l best segmentations S_l(X) of the sentence
  X and their log-probabilities log P(x) = sum_i log p(x_i) (SentencePiece's n-best search),
  then one drawn with probability

    P(x | X) = exp(alpha log P(x)) / sum_{x' in S_l(X)} exp(alpha log P(x')),

  which is what SentencePiece's ``SampleEncode`` draws from (and what its author suggests for
  draws that depend on the input only: a choice among the n best).
- Unigram model, all segmentations (l = -1): forward filtering, backward sampling over the
  lattice of the normalized sentence s_1..s_n, whose arcs are the pieces y = s_{i+1..j}:

    A(0) = 0,  A(j) = log sum_{y = s_{i+1..j}} exp(A(i) + alpha log p(y)),

  then from j = n back to 0, the piece y = s_{i+1..j} is drawn with probability
  exp(A(i) + alpha log p(y) - A(j)), and j moves to i. The lattice is SentencePiece's: every
  normal piece that matches, a user-defined one scored 0.1 (length - 1), and an unknown
  character, where no piece of length 1 matches, scored min log p - 10.
- BPE model: BPE-dropout (Provilkov et al. 2020) as SentencePiece applies it: adjacent
  symbols merged best score first (ties: leftmost first), each merge popped skipped with
  probability alpha; merges to unused pieces are undone at the end.

The sentence is normalized by SentencePiece itself (``normalize``), and its unknown
characters become byte pieces when the model falls back to bytes.
"""

import contextlib
import gc
import heapq
import math
import random
from typing import Dict, List, Optional, Sequence, Tuple

import sentencepiece as spm
from sentencepiece import sentencepiece_model_pb2

from nmt_tf.data.errors import DataError

_NORMAL, _UNKNOWN, _USER_DEFINED, _UNUSED = 1, 2, 4, 5  # ModelProto.SentencePiece.Type
_UNIGRAM, _BPE = 1, 2  # TrainerSpec.ModelType
_UNKNOWN_PENALTY = 10.0  # SentencePiece's kUnkPenalty
_MAX_RESEGMENT_DEPTH = 100  # SentencePiece's kMaxBpeResegmentDepth
_NOT_A_PREFIX = object()


def _user_defined_score(length: int) -> float:
  return 0.1 * (length - 1)  # SentencePiece's GetUserDefinedScore


class SegmentationDraws:
  """Draws one segmentation of each text, seeded, as ids of a SentencePiece model.

  Args:
    model_proto: serialized SentencePiece model (unigram or BPE).
    processor: a ``SentencePieceProcessor`` of the same model (normalization, n-best).
  """

  def __init__(self, model_proto: bytes, processor: spm.SentencePieceProcessor):
    model = sentencepiece_model_pb2.ModelProto.FromString(model_proto)
    self._processor = processor
    self._model_type = model.trainer_spec.model_type
    if self._model_type not in (_UNIGRAM, _BPE):
      raise DataError("Subword regularization draws from unigram or BPE SentencePiece models, "
                      "not this one; set --config.pipeline.subword_alpha=0.")
    # The ids of the byte pieces <0x00>..<0xFF> when the model falls back to bytes.
    self._byte_ids = ([processor.piece_to_id(f"<0x{b:02X}>") for b in range(256)]
                      if model.trainer_spec.byte_fallback else None)
    self._unknown_id = next((i for i, p in enumerate(model.pieces) if p.type == _UNKNOWN), 0)
    normal = [p.score for p in model.pieces if p.type == _NORMAL]
    self._unknown_score = (min(normal) if normal else 0.0) - _UNKNOWN_PENALTY
    arcs: Dict[str, Tuple[int, float]] = {}  # unigram lattice: piece -> (id, log p), not UNUSED
    # BPE merges: piece -> (id, score, unused) of every piece a merge may make.
    self._merges: Dict[str, Tuple[int, float, bool]] = {}
    self._user_defined: List[str] = []
    score_of = [0.0] * len(model.pieces)  # by id: the score of the piece's lattice arc
    for i, p in enumerate(model.pieces):
      if p.type in (_NORMAL, _USER_DEFINED, _UNUSED):
        self._merges[p.piece] = (i, p.score, p.type == _UNUSED)
      if p.type == _NORMAL:
        score_of[i] = p.score
      elif p.type == _USER_DEFINED:
        score_of[i] = _user_defined_score(len(p.piece))
        self._user_defined.append(p.piece)
      if p.type in (_NORMAL, _USER_DEFINED):
        arcs[p.piece] = (i, score_of[i])
    score_of[self._unknown_id] = self._unknown_score
    self._score_of = score_of
    # Every prefix of a lattice piece: the piece's (id, log p), or None when no piece.
    self._lookup: Dict[str, Optional[Tuple[int, float]]] = {
        piece[:k]: None for piece in arcs for k in range(1, len(piece))}
    self._lookup.update(arcs)
    self._user_defined.sort(key=len, reverse=True)  # longest match first

  def sample(self, texts: Sequence[str], seed: int, alpha: float,
             nbest: int = -1) -> List[List[int]]:
    """One segmentation of each text, drawn in order from ``random.Random(seed)``: the same
    ids for the same arguments in every process (module docstring). ``nbest`` plays no part
    for a BPE model."""
    rng = random.Random(seed)
    with _collector_paused():
      if self._model_type == _BPE:
        return [self._bpe_dropout(s, alpha, rng) for s in self._normalize(texts)]
      if nbest > 1:
        candidates = self._processor.nbest_encode(list(texts), nbest_size=nbest, out_type=int)
        return [self._from_nbest(c, alpha, rng) for c in candidates]
      return [self._from_lattice(s, alpha, rng) for s in self._normalize(texts)]

  def _normalize(self, texts: Sequence[str]) -> List[str]:
    return self._processor.normalize(list(texts)) if texts else []

  def _from_nbest(self, candidates: List[List[int]], alpha: float,
                  rng: random.Random) -> List[int]:
    """P(x | X) over the n best: their weights exp(alpha (log P(x) - max log P))."""
    if len(candidates) == 1:
      return candidates[0]
    log_probs = [alpha * sum(map(self._score_of.__getitem__, ids)) for ids in candidates]
    top = max(log_probs)
    return rng.choices(candidates, [math.exp(v - top) for v in log_probs])[0]

  def _from_lattice(self, s: str, alpha: float, rng: random.Random) -> List[int]:
    """Forward filtering, backward sampling over the lattice of ``s`` (module docstring)."""
    n = len(s)
    arcs: List[List[Tuple[int, int, float]]] = [[] for _ in range(n + 1)]  # by end j: (i, id, w)
    lookup = self._lookup
    for i in range(n):
      single = False
      for j in range(i + 1, n + 1):
        entry = lookup.get(s[i:j], _NOT_A_PREFIX)
        if entry is _NOT_A_PREFIX:
          break
        if entry is not None:
          arcs[j].append((i, entry[0], alpha * entry[1]))
          single = single or j == i + 1
      if not single:
        arcs[i + 1].append((i, self._unknown_id, alpha * self._unknown_score))
    forward = [0.0] * (n + 1)  # A(j)
    exp = math.exp
    for j in range(1, n + 1):
      ends = arcs[j]
      if len(ends) == 1:
        forward[j] = forward[ends[0][0]] + ends[0][2]
        continue
      terms = [forward[i] + w for i, _, w in ends]
      top = max(terms)
      forward[j] = top + math.log(sum([exp(t - top) for t in terms]))
    drawn = []  # (i, id), last piece first
    j = n
    while j > 0:
      ends = arcs[j]
      if len(ends) > 1:
        end = forward[j]
        ends = rng.choices(ends, [exp(forward[i] + w - end) for i, _, w in ends])
      drawn.append(ends[0][:2])
      j = ends[0][0]
    drawn.reverse()  # (start, id) of the pieces, in order
    ends = [i for i, _ in drawn[1:]] + [n]
    ids = []
    for (i, piece_id), end in zip(drawn, ends):
      ids.extend(self._unknown(s[i:end]) if piece_id == self._unknown_id else [piece_id])
    return ids

  def _bpe_dropout(self, s: str, alpha: float, rng: random.Random) -> List[int]:
    """BPE-dropout over the symbols of ``s`` (module docstring)."""
    symbols, frozen = self._initial_symbols(s)
    count = len(symbols)
    prev = list(range(-1, count - 1))
    nxt = list(range(1, count + 1))
    if count:
      nxt[-1] = -1
    agenda = []  # (-score, left, right, length): best score, then leftmost, first
    unmerged: Dict[str, Tuple[str, str]] = {}

    def push(left, right):
      if left < 0 or right < 0 or frozen[left] or frozen[right]:
        return
      piece = symbols[left] + symbols[right]
      entry = self._merges.get(piece)
      if entry is not None:
        heapq.heappush(agenda, (-entry[1], left, right, len(piece)))
        if entry[2]:  # an unused piece: undone at the end
          unmerged[piece] = (symbols[left], symbols[right])

    for left in range(count - 1):
      push(left, left + 1)
    while agenda and alpha < 1.0:
      _, left, right, length = heapq.heappop(agenda)
      if (not symbols[left] or not symbols[right]
          or len(symbols[left]) + len(symbols[right]) != length):
        continue  # stale: one of its symbols was merged since
      if alpha > 0.0 and rng.random() < alpha:
        continue  # dropped
      symbols[left] += symbols[right]
      symbols[right] = ""
      nxt[left] = nxt[right]
      if nxt[right] >= 0:
        prev[nxt[right]] = left
      push(prev[left], left)
      push(left, nxt[left])
    ids = []
    index = 0 if count else -1
    while index != -1:
      self._resegment(symbols[index], unmerged, ids, 0)
      index = nxt[index]
    return ids

  def _initial_symbols(self, s: str) -> Tuple[List[str], List[bool]]:
    """Characters, except user-defined pieces, matched longest first and never merged."""
    symbols, frozen = [], []
    i = 0
    while i < len(s):
      match = next((p for p in self._user_defined if s.startswith(p, i)), None)
      symbols.append(match or s[i])
      frozen.append(match is not None)
      i += len(match) if match else 1
    return symbols, frozen

  def _resegment(self, piece: str, unmerged: Dict[str, Tuple[str, str]], ids: List[int],
                 depth: int):
    """A symbol's ids: its piece's, the pieces an unused piece was merged from, or unknown."""
    entry = self._merges.get(piece)
    if entry is not None and (not entry[2] or depth > _MAX_RESEGMENT_DEPTH):
      ids.append(entry[0])
    elif entry is not None and piece in unmerged:
      for part in unmerged[piece]:
        self._resegment(part, unmerged, ids, depth + 1)
    else:
      ids.extend(self._unknown(piece))

  def _unknown(self, surface: str) -> List[int]:
    """An unknown piece: its UTF-8 bytes when the model falls back to bytes, else unknown."""
    if self._byte_ids is None:
      return [self._unknown_id]
    return [self._byte_ids[b] for b in surface.encode("utf-8")]


@contextlib.contextmanager
def _collector_paused():
  """Pauses Python's cyclic garbage collector: the n best of every sentence are millions of
  small lists, which would start collections over all the objects of the process (TensorFlow
  holds many) while none of them can be freed by one."""
  enabled = gc.isenabled()
  gc.disable()
  try:
    yield
  finally:
    if enabled:
      gc.enable()

