"""Corpus BLEU and chrF with sacrebleu on detokenized text, with their signatures."""

import dataclasses
from typing import Optional

import sacrebleu


@dataclasses.dataclass(frozen=True)
class Score:
  """A corpus score and the sacrebleu signature that makes it reproducible.

  length_ratio (BLEU only): hypothesis / reference length in BLEU's tokens; below 1 the
  brevity penalty exp(1 - 1/ratio) scales the score.
  """

  name: str
  score: float
  signature: str
  length_ratio: Optional[float] = None

  def __str__(self):
    return f"{self.name} = {self.score:.2f}  ({self.signature})"


def _check(hypotheses, references):
  if len(hypotheses) != len(references):
    raise ValueError(f"Received {len(hypotheses)} hypotheses and {len(references)} references; "
                     "expected one hypothesis per reference line.")


def reference_streams(references):
  """sacrebleu's reference streams: one reference per hypothesis, or several (a list per
  hypothesis, as the captions of an image: stream k holds every hypothesis's k-th reference,
  None where it has fewer)."""
  if not any(isinstance(r, (list, tuple)) for r in references):
    return [list(references)]
  lists = [list(r) if isinstance(r, (list, tuple)) else [r] for r in references]
  most = max(len(r) for r in lists)
  return [[r[k] if k < len(r) else None for r in lists] for k in range(most)]


def corpus_bleu(hypotheses, references, tokenize="13a", lowercase=False):
  """sacrebleu corpus BLEU (default 13a tokenization) of detokenized strings against one
  reference each or a list each (reference_streams); `lowercase`
  scores lowercased text (case:lc in the signature), as papers that report BLEU on
  lowercased, tokenized text do."""
  _check(hypotheses, references)
  metric = sacrebleu.metrics.BLEU(tokenize=tokenize, lowercase=lowercase)
  result = metric.corpus_score(list(hypotheses), reference_streams(references))
  return Score("BLEU (lowercased)" if lowercase else "BLEU", float(result.score),
               str(metric.get_signature()), length_ratio=bleu_length_ratio(result))


def bleu_length_ratio(result):
  """Hypothesis / reference length of a sacrebleu BLEUScore, in BLEU's tokens."""
  return result.sys_len / max(result.ref_len, 1)


def corpus_chrf(hypotheses, references):
  """sacrebleu corpus chrF2 of detokenized strings."""
  _check(hypotheses, references)
  metric = sacrebleu.metrics.CHRF()
  result = metric.corpus_score(list(hypotheses), reference_streams(references))
  return Score("chrF2", float(result.score), str(metric.get_signature()))
