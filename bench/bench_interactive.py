"""Terminology constraints, target prefixes and word confidence, measured on Multi30k test_2016.

Usage: .venv/bin/python bench/bench_interactive.py --run_dir=RUN [--parts constraints,prefix,
           confidence,latency] [--limit N] [--beam 5] [--seed 0]
RUN is a trained run on Multi30k (its best checkpoint); its pair's test_2016_flickr split
(1,000 sentences) is decoded.
  constraints  As Post and Vilar (2018): for n = 1, 2, 3, n phrases of 1-3 consecutive words
               drawn at random (fixed --seed) from each reference, without overlap and
               spelled by the target vocabulary. Reports the share of sentences whose output
               holds every phrase, corpus BLEU against the references (sacrebleu) beside the
               unconstrained beam's, and sentences/s of constrained and plain beam --beam.
  prefix       For k = 1..5 reference words given as the prefix (greedy search): BLEU of the
               completions (the output after the prefix) against the rest of the reference,
               and next-word accuracy (the first word after the prefix is the reference's).
  confidence   Pearson's r, over sentences, between sentence chrF (sacrebleu) of the beam
               output and (a) its mean piece log-probability (Fomicheva et al., 2020),
               (b) the beam's score.
  latency      One client completing a prefix through `nmt-tf serve` (signature `prefix`,
               greedy): for sentences of at least 20 words, the prefix grows one typed
               character at a time over the reference's first words; p50/p99 in ms.
Prints one JSON object, the CPU first.
"""

import http.client
import json
import os
import sys
import time

from absl import app
from absl import flags
import numpy as np
import sacrebleu

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# pylint: disable=g-import-not-at-top,wrong-import-position
from bench import common
from tests import server_fixtures

import nmt_tf
from nmt_tf import data
from nmt_tf.special_tokens import UNK_ID

flags.DEFINE_string("run_dir", None, "A run trained on Multi30k.", required=True)
flags.DEFINE_list("parts", ["constraints", "prefix", "confidence", "latency"], "What to measure.")
flags.DEFINE_integer("limit", 0, "Only the first N test sentences (0 = all).")
flags.DEFINE_integer("beam", 5, "Beam size of the constrained and plain searches.")
flags.DEFINE_integer("seed", 0, "Seed of the phrases drawn from the references.")
flags.DEFINE_integer("latency_sentences", 10, "Sentences typed in the latency part.")

FLAGS = flags.FLAGS


def _test_split(model):
  corpus = model.config.data
  pair = f"{corpus.source_lang}-{corpus.target_lang}"
  test = data.load_corpus(f"multi30k/{pair}")["test"]
  sources, references = list(test.sources), list(test.targets)
  if FLAGS.limit:
    sources, references = sources[:FLAGS.limit], references[:FLAGS.limit]
  return sources, references


def _spelled(tokenizer, phrase):
  return UNK_ID not in tokenizer.encode(phrase)


def draw_phrases(references, count, tokenizer, rng):
  """`count` phrases of 1-3 consecutive words per reference, without overlap ([] where the
  reference has too few words)."""
  out = []
  for reference in references:
    words = reference.split()
    taken, phrases = set(), []
    for _ in range(20 * count):
      if len(phrases) == count:
        break
      length = int(rng.integers(1, 4))
      if len(words) < length:
        continue
      start = int(rng.integers(0, len(words) - length + 1))
      span = set(range(start, start + length))
      phrase = " ".join(words[start:start + length])
      if span & taken or not _spelled(tokenizer, phrase):
        continue
      taken |= span
      phrases.append(phrase)
    out.append(phrases if len(phrases) == count else [])
  return out


def _timed(model, sources, **kwargs):
  start = time.perf_counter()
  out = model.translate(sources, **kwargs)
  return out, time.perf_counter() - start


def _bleu(hypotheses, references):
  return round(sacrebleu.corpus_bleu(hypotheses, [references]).score, 2)


def constraints_part(model, sources, references):
  tokenizer = model.translator.target_tokenizer
  model.translate(sources[:8], beam_size=FLAGS.beam)  # traces the searches
  plain, plain_seconds = _timed(model, sources, beam_size=FLAGS.beam)
  report = {"plain": {"bleu": _bleu([t.text for t in plain], references),
                      "sentences_per_s": round(len(sources) / plain_seconds, 2)}}
  rng = np.random.default_rng(FLAGS.seed)
  for count in (1, 2, 3):
    phrases = draw_phrases(references, count, tokenizer, rng)
    model.translate(sources[:8], beam_size=FLAGS.beam, constraints=phrases[:8])
    out, seconds = _timed(model, sources, beam_size=FLAGS.beam, constraints=phrases)
    kept = [i for i, p in enumerate(phrases) if p]
    met = sum(all(p in out[i].text for p in phrases[i]) for i in kept)
    report[f"{count} phrases"] = {
        "sentences": len(kept), "all_met": round(met / max(len(kept), 1), 4),
        "bleu": _bleu([t.text for t in out], references),
        "sentences_per_s": round(len(sources) / seconds, 2)}
  return report


def prefix_part(model, sources, references):
  report = {}
  for k in range(1, 6):
    rows = [i for i, r in enumerate(references) if len(r.split()) > k]
    prefixes = [" ".join(references[i].split()[:k]) + " " for i in rows]
    out = model.translate([sources[i] for i in rows], beam_size=1, prefix=prefixes)
    completions, rests, hits = [], [], 0
    for t, prefix, i in zip(out, prefixes, rows):
      completion = t.text[len(prefix.strip()):].strip()
      rest = references[i].split()[k:]
      completions.append(completion)
      rests.append(" ".join(rest))
      hits += bool(completion.split()) and completion.split()[0] == rest[0]
    report[f"k={k}"] = {"sentences": len(rows), "completion_bleu": _bleu(completions, rests),
                        "next_word_accuracy": round(hits / max(len(rows), 1), 4)}
  return report


def confidence_part(model, sources, references):
  out = model.translate(sources, beam_size=FLAGS.beam)
  chrf = np.array([sacrebleu.sentence_chrf(t.text, [r]).score for t, r in zip(out, references)])
  mean_lp = np.array([np.mean(t.piece_log_probs) if t.piece_log_probs else 0.0 for t in out])
  scores = np.array([t.score for t in out])
  return {"sentences": len(out),
          "pearson_mean_piece_log_prob_chrf": round(float(np.corrcoef(mean_lp, chrf)[0, 1]), 4),
          "pearson_beam_score_chrf": round(float(np.corrcoef(scores, chrf)[0, 1]), 4)}


def latency_part(sources, references):
  rows = [i for i, r in enumerate(references) if len(r.split()) >= 20][:FLAGS.latency_sentences]
  process, url = server_fixtures.serve_process([f"--run_dir={FLAGS.run_dir}"])
  port = int(url.rsplit(":", 1)[1])
  connection = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
  latencies = []

  def complete(source, prefix):
    body = json.dumps({"signature_name": "prefix",
                       "instances": [{"text": source, "prefix": prefix}]})
    start = time.perf_counter()
    connection.request("POST", "/v1/models/nmt:predict", body,
                       {"Content-Type": "application/json"})
    answer = connection.getresponse()
    answer.read()
    if answer.status != 200:
      raise RuntimeError(f"HTTP {answer.status}")
    return time.perf_counter() - start

  try:
    complete(sources[rows[0]] if rows else "a", "a")  # warm-up
    for i in rows:
      typed = " ".join(references[i].split()[:5])
      for end in range(1, len(typed) + 1):
        latencies.append(complete(sources[i], typed[:end]))
  finally:
    connection.close()
    process.terminate()
  ms = np.asarray(latencies) * 1000
  return {"sentences": len(rows), "requests": len(ms),
          "source_words": round(float(np.mean([len(sources[i].split()) for i in rows])), 1)
          if rows else 0,
          "p50_ms": round(float(np.percentile(ms, 50)), 1) if len(ms) else None,
          "p99_ms": round(float(np.percentile(ms, 99)), 1) if len(ms) else None}


def main(argv):
  del argv
  model = nmt_tf.load(FLAGS.run_dir)
  sources, references = _test_split(model)
  report = {"cpu": common.device_info(), "run_dir": FLAGS.run_dir, "sentences": len(sources),
            "beam": FLAGS.beam}
  parts = {"constraints": lambda: constraints_part(model, sources, references),
           "prefix": lambda: prefix_part(model, sources, references),
           "confidence": lambda: confidence_part(model, sources, references),
           "latency": lambda: latency_part(sources, references)}
  for name in FLAGS.parts:
    report[name] = parts[name]()
  common.print_json(report)


if __name__ == "__main__":
  app.run(main)
