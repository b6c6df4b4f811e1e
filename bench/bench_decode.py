"""Decoding speed (sentences/s) on Multi30k val (1,014 sentences), greedy and beam 5.

Usage: .venv/bin/python bench/bench_decode.py [--pair de-en] [--batch_size 64] [--beams 1,5]
           [--length_a 2.0 --length_b 10] [--jit false,true] [--decoders cgru,rnnsearch]
           [--compact false,true] [--shortlists 0,20] [--run_dir RUN]
Model: the reference cgru (embedding 256, BiGRU 2x512 encoder, cGRU decoder 512; --decoders
times other decoders of the same size, each model's keys prefixed "<decoder>/") with
SentencePiece 8k vocabularies trained on Multi30k train, UNTRAINED (random weights): speed
does not depend on the weights, but a random model rarely emits EOS, so the output length
is capped per sentence at 2 * source length + 10 tokens (decode.max_length_a/b) and the
figures are a lower bound for a trained model, which stops earlier; --length_a 1 --length_b 0
caps the output near the reference length (Multi30k de-en pieces: about 1 target per source
token), the figure to compare with a trained model's. With --jit true the search is
XLA-compiled; XLA compiles once per batch shape, and the last, smaller batch is one more
shape (its compile time is inside the timed pass). The first batch of each
setting is a warm-up (tracing) and is not timed. --compact times greedy search with and
without dropping finished sentences from the batch (decode.compact_batch); it only matters when
the sentences of a batch end at different steps, as a trained model's do: --run_dir times the
trained model of a run (its best checkpoint and vocabularies) instead of the untrained one.
--shortlists times the search over a vocabulary shortlist (decode.shortlist) and reports the
table's counting time and the mean shortlist size of the file-order batches.
--work joey does Joey NMT's work (bench/anchor/run.py): batches of --batch_size sentences in
file order, every output capped at the batch's longest source (EOS included, at most 128),
no compaction; with --length_a 1 --length_b 0 and --split test the same work as the anchor's
figure. --work own (the default) sorts by length and caps each sentence by its own source.
Prints one JSON object.
"""

import json
import os
import sys
import time

from absl import app
from absl import flags

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# pylint: disable=g-import-not-at-top,wrong-import-position
import tensorflow as tf

import nmt_tf
from nmt_tf import data
from nmt_tf.decoding import constraints
from nmt_tf.experiment import DecodeConfig
from nmt_tf.inference import CompiledTranslator, shortlist, translate_lines, Translator
from nmt_tf.inference.batch_translate import Hypothesis, SentenceResult
from nmt_tf.models import build_model, ModelConfig

flags.DEFINE_string("pair", "de-en", "Multi30k language pair.")
flags.DEFINE_integer("batch_size", 64, "Sentences per search call.")
flags.DEFINE_list("beams", ["1", "5"], "Beam sizes to time (1 = greedy).")
flags.DEFINE_integer("vocab_size", 8000, "SentencePiece vocabulary size per side.")
flags.DEFINE_integer("limit", 0, "Only the first N sentences (0 = all).")
flags.DEFINE_enum("split", "valid", ["valid", "test"], "Multi30k split to decode (valid: "
                  "1,014 sentences; test: test_2016_flickr, 1,000).")
flags.DEFINE_enum("work", "own", ["own", "joey"], "own: batches sorted by length, each "
                  "output capped by its source; joey: Joey NMT's (see the docstring).")
flags.DEFINE_string("run_dir", None, "Time the trained model of this run instead.")
flags.DEFINE_list("compact", ["true"], "decode.compact_batch settings to time (false, true).")
flags.DEFINE_float("length_a", 2.0, "Output cap a * source length + b (decode.max_length_a).")
flags.DEFINE_float("length_b", 10.0, "Output cap a * source length + b (decode.max_length_b).")
flags.DEFINE_list("jit", ["false"], "jit_compile settings of the search to time (false, true).")
flags.DEFINE_list("decoders", ["cgru"], "Decoders to time (ModelConfig.decoder); every model "
                  "has the same embedding, encoder and decoder sizes.")
flags.DEFINE_list("matmul_dtypes", ["float32"], "Matrix-product dtypes to time (float32, "
                  "bfloat16: Seq2Seq.matmul_dtype, layers/kernels/precision.py).")
flags.DEFINE_list("shortlists", ["0"], "decode.shortlist settings to time: translations per "
                  "source word (0 = the whole vocabulary; inference/shortlist.py, built from "
                  "Multi30k train).")
FLAGS = flags.FLAGS


def main(argv):
  del argv
  start = time.perf_counter()
  corpus = data.load_corpus(f"multi30k/{FLAGS.pair}")
  train, valid = corpus["train"], corpus[FLAGS.split]
  src_proto = data.train_sentencepiece(train.sources, FLAGS.vocab_size)
  tgt_proto = data.train_sentencepiece(train.targets, FLAGS.vocab_size)
  setup = time.perf_counter() - start
  tf.random.set_seed(0)
  src_tok = data.SentencePieceTokenizer(src_proto)
  tgt_tok = data.SentencePieceTokenizer(tgt_proto)
  sources = list(valid.sources[:FLAGS.limit or None])
  if FLAGS.work == "joey":
    constraints.sentence_max_lengths = _batch_max_lengths
  report = {"sentences": len(sources), "split": FLAGS.split, "work": FLAGS.work,
            "batch_size": FLAGS.batch_size,
            "model": f"{'/'.join(FLAGS.decoders)} emb256 birnn 2x512 dec512, untrained",
            "vocab": [src_tok.vocab_size, tgt_tok.vocab_size],
            "max_length": f"min(128, {FLAGS.length_a:g} * src_len + {FLAGS.length_b:g})",
            "setup_s": round(setup, 1),
            "threads": os.cpu_count()}
  truth = lambda values: [v.lower() in ("1", "true", "yes") for v in values]
  settings = [(beam, jit, dtype, compact, int(k)) for beam in (int(b) for b in FLAGS.beams)
              for jit in truth(FLAGS.jit) for dtype in FLAGS.matmul_dtypes
              for compact in truth(FLAGS.compact) for k in FLAGS.shortlists]
  if FLAGS.run_dir:
    translator = nmt_tf.load(FLAGS.run_dir).translator
    report["model"] = f"{FLAGS.run_dir}, trained"
    report["vocab"] = [translator.source_tokenizer.vocab_size,
                       translator.target_tokenizer.vocab_size]
    tables = _tables(report, train, translator.source_tokenizer,
                     translator.target_tokenizer)
    for setting in settings:
      _time_setting(report, translator.model, translator.source_tokenizer,
                    translator.target_tokenizer, sources, tables, *setting, "")
    print(json.dumps(report, indent=2))
    return
  tables = _tables(report, train, src_tok, tgt_tok)
  for decoder in FLAGS.decoders:
    model = build_model(ModelConfig(src_vocab_size=src_tok.vocab_size,
                                    tgt_vocab_size=tgt_tok.vocab_size, embedding_dim=256,
                                    encoder="birnn", encoder_units=512, decoder=decoder,
                                    decoder_units=512))
    prefix = "" if FLAGS.decoders == ["cgru"] else f"{decoder}/"
    for setting in settings:
      _time_setting(report, model, src_tok, tgt_tok, sources, tables, *setting, prefix)
  print(json.dumps(report, indent=2))


def _tables(report, train, src_tok, tgt_tok):
  """The shortlist table of Multi30k train, when --shortlists asks for one; its counting
  time goes into the report."""
  if all(int(k) == 0 for k in FLAGS.shortlists):
    return None
  start = time.perf_counter()
  tables = shortlist.build_from_split(train, src_tok, tgt_tok)
  report["shortlist_table_s"] = round(time.perf_counter() - start, 1)
  return tables


_SENTENCE_MAX_LENGTHS = constraints.sentence_max_lengths


def _batch_max_lengths(batch_size, max_length, src_length=None, max_length_a=None,
                       max_length_b=0.0):
  """--work joey: every sentence gets the batch's largest cap (Joey NMT's one cap per
  batch), int32 [batch]."""
  limits = _SENTENCE_MAX_LENGTHS(batch_size, max_length, src_length, max_length_a,
                                 max_length_b)  # [batch]
  return tf.fill([batch_size], tf.reduce_max(limits))


def _file_order(compiled, lines, batch_size):
  """--work joey: batches of `lines` in file order, no compaction; SentenceResults whose
  hypotheses hold only the ids (what the figures count)."""
  results = []
  for start in range(0, len(lines), batch_size):
    out = compiled(tf.constant(lines[start:start + batch_size], tf.string))
    for b, length in enumerate(out["lengths"][:, 0]):
      ids = [int(x) for x in out["ids"][b, 0, :int(length)]]
      results.append(SentenceResult(start + b, "", [], 0, False, [Hypothesis(
          text="", ids=ids, log_prob=0.0, score=0.0, attention=None)]))
  return results


def _time_setting(report, model, src_tok, tgt_tok, sources, tables, beam, jit, dtype, compact,
                  k, prefix):
  """Times one search setting of `model` on `sources` into report[prefix + name]."""
  model.matmul_dtype = None if dtype == "float32" else dtype
  compact = compact and FLAGS.work == "own"
  decode = DecodeConfig(beam_size=beam, nbest=1, compact_batch=compact,
                        length_penalty=0.6 if beam > 1 else 0.0, max_length=128,
                        max_length_a=FLAGS.length_a, max_length_b=FLAGS.length_b,
                        batch_size=FLAGS.batch_size, shortlist=k)
  short = shortlist.Shortlist(*tables, k, decode.shortlist_frequent) if k else None
  compiled = CompiledTranslator(Translator(model, src_tok, tgt_tok, decode, shortlist=short),
                                jit_compile=jit)
  decode_all = translate_lines if FLAGS.work == "own" else _file_order
  decode_all(compiled, sources[:FLAGS.batch_size], FLAGS.batch_size)  # warm-up
  start = time.perf_counter()
  results = decode_all(compiled, sources, FLAGS.batch_size)
  seconds = time.perf_counter() - start
  tokens = sum(len(r.hypotheses[0].ids) for r in results if r.hypotheses)
  name = prefix + (("greedy" if beam == 1 else f"beam{beam}") + ("_xla" if jit else "")
                   + ("" if dtype == "float32" else f"_{dtype}_matmul")
                   + ("" if compact or len(FLAGS.compact) == 1 else "_no_compact")
                   + (f"_shortlist{k}" if k else ""))
  report[name] = {"sentences_per_s": round(len(sources) / seconds, 2),
                  "seconds": round(seconds, 1),
                  "output_tokens_per_sentence": round(tokens / len(sources), 1)}
  if short is not None:  # |V'| of the file-order batches of --batch_size sentences
    translator = compiled.translator
    sizes = [int(tf.shape(short.vocabulary(translator.source_ids(tf.constant(
        sources[i:i + FLAGS.batch_size]))[0]))[0]) for i in range(0, len(sources),
                                                               FLAGS.batch_size)]
    report[name]["shortlist_words_per_batch"] = round(sum(sizes) / len(sizes), 1)


if __name__ == "__main__":
  app.run(main)
