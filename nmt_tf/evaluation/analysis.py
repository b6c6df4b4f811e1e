"""The two analyses of Bahdanau et al. (2015) on a translated test set.

* BLEU by source-sentence length (their Fig. 2): sentences are grouped by their number of
  source words (whitespace tokens of the raw source) in buckets of `width` words, and corpus
  BLEU is computed per bucket.
* BLEU on all sentences and on the sentences without unknown words (their Table 1,
  "All" vs "No UNK"): a sentence has an UNK when a token of its source or of its reference
  is out of the word vocabulary (tokenizer.encode gives UNK; for subword vocabularies
  almost never).
"""

import dataclasses
from typing import List, Sequence

from nmt_tf import special_tokens
from nmt_tf.evaluation.scoring import corpus_bleu


@dataclasses.dataclass(frozen=True)
class LengthBucket:
  """Corpus BLEU of the sentences with low <= source words <= high."""

  low: int
  high: int
  count: int
  bleu: float

  @property
  def label(self):
    return f"{self.low}-{self.high}"


def source_length(text):
  return len(text.split())


def bleu_by_length(sources: Sequence[str], hypotheses: Sequence[str],
                   references: Sequence[str], width: int = 10) -> List[LengthBucket]:
  """BLEU per source-length bucket [k*width, (k+1)*width - 1]; empty buckets are left out.

  Raises:
    ValueError: a non-positive width or lists of different lengths.
  """
  if width < 1:
    raise ValueError(f"Received width={width}; expected a positive number of words.")
  if not len(sources) == len(hypotheses) == len(references):
    raise ValueError(f"Received {len(sources)} sources, {len(hypotheses)} hypotheses and "
                     f"{len(references)} references; expected equal counts.")
  groups = {}
  for src, hyp, ref in zip(sources, hypotheses, references):
    groups.setdefault(source_length(src) // width, []).append((hyp, ref))
  buckets = []
  for key in sorted(groups):
    hyps, refs = zip(*groups[key])
    buckets.append(LengthBucket(key * width, (key + 1) * width - 1, len(hyps),
                                corpus_bleu(hyps, refs).score))
  return buckets


def has_unknown(text, tokenizer):
  return special_tokens.UNK_ID in tokenizer.encode(text)


def unk_mask(sources, references, source_tokenizer, target_tokenizer):
  """[bool]: the source or the reference of sentence i has a token out of the vocabulary."""
  return [has_unknown(s, source_tokenizer) or has_unknown(r, target_tokenizer)
          for s, r in zip(sources, references)]


def bleu_all_and_no_unk(hypotheses, references, mask):
  """{"all": Score, "no_unk": Score or None, "sentences", "no_unk_sentences"} (Table 1)."""
  keep = [i for i, unk in enumerate(mask) if not unk]
  no_unk = corpus_bleu([hypotheses[i] for i in keep],
                       [references[i] for i in keep]) if keep else None
  return {"all": corpus_bleu(hypotheses, references), "no_unk": no_unk,
          "sentences": len(hypotheses), "no_unk_sentences": len(keep)}
