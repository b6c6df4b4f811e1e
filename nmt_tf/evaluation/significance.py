"""Paired bootstrap resampling (Koehn 2004) from sentence-level sufficient statistics.

For each metric (sacrebleu BLEU with 13a tokenization, chrF2) every test sentence has a
vector of match counts (BLEU: hypothesis and reference lengths and the matched / total
n-grams of orders 1-4; chrF: character and word n-gram counts), and the corpus score is a
function of their sum. Storing these vectors with a result row lets two rows be compared
later without the references (which stay out of git) or the texts:

  score(S) = metric(sum_{i in S} stats_i);  S_1 .. S_B: B resamples of the sentences
  d_b = |score_sys(S_b) - score_base(S_b)|;  p = (#{b: d_b - mean(d) > |d_real|} + 1) / (B + 1)

which is sacrebleu's `--paired-bs` (the same resamples: numpy default_rng seeded 12345,
1,000 resamples), so `sacrebleu ref -i base sys -m bleu chrf --paired-bs` gives the same p.
"""

import json
import os

import numpy as np
import sacrebleu

from nmt_tf.write_path import write_json
from nmt_tf.evaluation import scoring

STATS_FILE = "sentence_stats.json"
SEED = 12345  # sacrebleu's default (SACREBLEU_SEED)
SAMPLES = 1000


def metrics():
  """{name: sacrebleu metric} as nmt_tf.evaluation.scoring computes them."""
  return {"bleu": sacrebleu.metrics.BLEU(tokenize="13a"), "chrf": sacrebleu.metrics.CHRF()}


def sentence_statistics(hypotheses, references):
  """{"bleu": [[int]], "chrf": [[int]], "<name>_signature": str}: one vector per sentence."""
  if len(hypotheses) != len(references):
    raise ValueError(f"Received {len(hypotheses)} hypotheses and {len(references)} "
                     "references; expected one hypothesis per reference line.")
  out = {}
  for name, metric in metrics().items():
    # pylint: disable-next=protected-access
    stats = metric._extract_corpus_statistics(list(hypotheses), [list(references)])
    out[name] = [[int(x) for x in s] for s in stats]
    out[f"{name}_signature"] = str(metric.get_signature())
  return out


def write_statistics(path, statistics):
  """Writes sentence_statistics(...) as JSON text (counts derived from the references, not
  their text: they are published with a row's hypotheses)."""
  write_json(path, statistics, compact=True)


def read_statistics(path):
  """The statistics written by write_statistics, or None when path does not exist."""
  if not os.path.isfile(path):
    return None
  with open(path, encoding="utf-8") as f:
    return json.load(f)


def _corpus_result(statistics, name):
  """sacrebleu's corpus score object of one metric from its sentence statistics."""
  # pylint: disable-next=protected-access
  return metrics()[name]._compute_score_from_stats(
      np.asarray(statistics[name], dtype=np.float64).sum(0))


def corpus_score(statistics, name):
  """The corpus score of one metric from its sentence statistics."""
  return float(_corpus_result(statistics, name).score)


def length_ratio(statistics):
  """BLEU's length ratio of the corpus from its sentence statistics, as
  scoring.corpus_bleu reports it."""
  return float(scoring.bleu_length_ratio(_corpus_result(statistics, "bleu")))


def paired_bootstrap(baseline, system, samples=SAMPLES, seed=SEED):
  """{metric: {"baseline", "system", "p"}} for two rows' statistics on the same sentences.

  Raises:
    ValueError: statistics of different sentence counts or metric signatures.
  """
  out = {}
  rng = np.random.default_rng(seed)
  count = len(baseline["bleu"])
  if len(system["bleu"]) != count:
    raise ValueError(f"Received statistics of {count} and {len(system['bleu'])} sentences; "
                     "expected the same test set.")
  indices = rng.choice(count, size=(samples, count), replace=True)  # [samples, sentences]
  for name, metric in metrics().items():
    if baseline[f"{name}_signature"] != system[f"{name}_signature"]:
      raise ValueError(f"Received {name} statistics of different signatures "
                       f"({baseline[f'{name}_signature']} and {system[f'{name}_signature']}).")
    scores = []
    for stats in (baseline[name], system[name]):
      stats = np.asarray(stats, dtype=np.float32)  # [sentences, statistics], as sacrebleu
      # pylint: disable-next=protected-access
      scores.append(np.array([metric._compute_score_from_stats(stats[i].sum(0)).score
                              for i in indices]))  # [samples]
    real = {"baseline": corpus_score(baseline, name), "system": corpus_score(system, name)}
    diffs = np.abs(scores[1] - scores[0])
    threshold = abs(real["baseline"] - real["system"])
    out[name] = dict(real, p=(np.sum(diffs - diffs.mean() > threshold).item() + 1) /
                     (samples + 1))
  return out
