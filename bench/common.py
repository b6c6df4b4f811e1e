"""Shared setup of the speed benchmarks: Multi30k, cached SentencePiece 8k, the reference model.

The reference model (recipe multi30k:cgru): embeddings 256, BiGRU encoder
2 x 512, cGRU decoder 512 with Bahdanau attention and deep output, SentencePiece 8k per side.
The tokenizers are trained once and cached in `vocab_dir` (default /tmp/nmt_tf_bench_vocab),
so that repeated benchmark runs start in seconds.
"""

import collections
import importlib.util
import json
import os
import re
import sys
import time

if importlib.util.find_spec("nmt_tf") is None:  # run as bench/<script>.py from anywhere
  sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# pylint: disable=g-import-not-at-top,wrong-import-position
import tensorflow as tf

from nmt_tf import cpu, data

DEFAULT_VOCAB_DIR = "/tmp/nmt_tf_bench_vocab"


def load_multi30k(pair="de-en", vocab_size=8000, vocab_dir=DEFAULT_VOCAB_DIR):
  """(corpus splits, source tokenizer, target tokenizer), tokenizers cached in vocab_dir."""
  corpus = data.load_corpus(f"multi30k/{pair}")
  os.makedirs(vocab_dir, exist_ok=True)
  src_tok, tgt_tok = data.load_or_train_tokenizers(
      os.path.join(vocab_dir, f"{pair}_{vocab_size}"),
      data.TokenizerConfig(vocab_size=vocab_size), corpus["train"])
  return corpus, src_tok, tgt_tok


def reference_model_config(src_vocab_size, tgt_vocab_size, dropout=0.2):
  """The ModelConfig fields of recipe multi30k:cgru (the reference model)."""
  return dict(src_vocab_size=src_vocab_size, tgt_vocab_size=tgt_vocab_size, embedding_dim=256,
              encoder="birnn", encoder_units=512, decoder="cgru", decoder_units=512,
              dropout=dropout)


def forward_flops(src_tokens, tgt_tokens, emb=256, enc=512, dec=512, att=512, out=256,
                  vocab=8000):
  """Matmul FLOPs (2 per multiply-add) of one teacher-forced forward pass of the reference
  cgru model, counted analytically.

  Encoder, per source token and direction: input projection emb -> 3 enc, recurrent
  enc -> 3 enc. Decoder, per target token: GRU1 (emb -> 3d input, d -> 3d recurrent), the
  attention query d -> att plus the key projection of every source token once per sentence
  (2 enc -> att, counted per source token), the score v^T tanh(.) and the context sum over the
  source positions (att + 2 enc multiply-adds per source position; `src_per_tgt` source
  positions per target token), GRU2 (2 enc -> 3d input, d -> 3d recurrent), deep output
  (d + emb + 2 enc -> out) and the vocabulary projection out -> V. The bridge is negligible.

  Args:
    src_tokens, tgt_tokens: real tokens of the batch (with EOS / BOS counted once).
  Returns:
    float FLOPs of the forward pass (backward ~ 2x forward, so a training step ~ 3x).
  """
  mem = 2 * enc
  per_src = 2 * (emb * 3 * enc + enc * 3 * enc) + mem * att  # both directions + keys
  per_tgt = (emb * 3 * dec + dec * 3 * dec + dec * att + mem * 3 * dec + dec * 3 * dec
             + (dec + emb + mem) * out + out * vocab)
  per_pair = (att + mem)  # score + context multiply-adds per (target, source) pair
  src_per_tgt = src_tokens / max(tgt_tokens, 1)  # mean source length seen by a target token
  return 2.0 * (src_tokens * per_src + tgt_tokens * (per_tgt + per_pair * src_per_tgt))


def median(values):
  values = sorted(values)
  n = len(values)
  return values[n // 2] if n % 2 else 0.5 * (values[n // 2 - 1] + values[n // 2])


def print_json(report):
  print(json.dumps(report, indent=2))


class Timer:
  """with Timer() as t: ...; t.seconds."""

  def __enter__(self):
    self.start = time.perf_counter()
    return self

  def __exit__(self, *exc):
    self.seconds = time.perf_counter() - self.start


def device_info():
  """Threads, the CPU model (nmt_tf/cpu.py) and the CPU flags that decide the matmul kernels
  (AVX-512, AVX512_BF16, AMX)."""
  info = cpu.cpu_info()
  flags = info.get("flags") or set()
  machine = ", ".join(f"{key} {info[key]}" for key in ("family", "model") if info.get(key))
  return {"cpus": cpu.cores(), "tf": tf.__version__,
          "machine": f"{info.get('model_name', 'unknown CPU')} ({machine})",
          "avx512f": "avx512f" in flags, "avx512_bf16": "avx512_bf16" in flags,
          "amx_bf16": "amx_bf16" in flags,
          # TensorFlow reads TF_NUM_INTRAOP_THREADS itself; tf.config reports only its own
          # setting (0 = TensorFlow's choice).
          "intra_op_threads": (tf.config.threading.get_intra_op_parallelism_threads()
                               or int(os.environ.get("TF_NUM_INTRAOP_THREADS", 0)))}


# Events that contain other ops' events: the executor's, and ops that call functions.
_CONTAINERS = {"Process", "Run", "While", "StatelessWhile", "PartitionedCall",
               "StatefulPartitionedCall", "If", "StatelessIf"}


def op_times(xspace_path):
  """{(op type, op name): [milliseconds, count]} of the leaf TF ops of the host planes."""
  from tensorflow.tsl.profiler.protobuf import xplane_pb2  # pylint: disable=g-import-not-at-top
  space = xplane_pb2.XSpace()
  with open(xspace_path, "rb") as f:
    space.ParseFromString(f.read())
  times = collections.defaultdict(lambda: [0.0, 0])
  for plane in space.planes:
    if not plane.name.startswith("/host:CPU"):
      continue
    for line in plane.lines:
      for event in line.events:
        full = plane.event_metadata[event.metadata_id].name
        if ":" not in full:
          continue
        name, op_type = full.rsplit(":", 1)
        if op_type in _CONTAINERS or "__inference" in full or op_type.startswith((" ", "__")):
          continue
        scope, _, op = name.rpartition("/")  # scopes renumbered per trace: seq2_seq_1 -> seq2_seq
        entry = times[(op_type, re.sub(r"_\d+(?=/|$)", "", scope) + "/" + op)]
        entry[0] += event.duration_ps / 1e9
        entry[1] += 1
  return times


def op_type_totals(times):
  """{op type: [milliseconds, count]} summed over the op names of `op_times`."""
  by_type = collections.defaultdict(lambda: [0.0, 0])
  for (op_type, _), (ms, count) in times.items():
    by_type[op_type][0] += ms
    by_type[op_type][1] += count
  return by_type


def profile_summary(logdir, unit, per, per_count, top, detail, digits):
  """The op time of the tf.profiler trace in `logdir`, by op type, as report fields: total
  "op_ms_per_<unit>" (divided by `per`), "by_type" (the `top` types: ms per unit, share of the
  total, count per `per_count`) and "largest" (the 8 largest ops by name of each `detail`
  type), rounded to `digits`."""
  import glob  # pylint: disable=g-import-not-at-top
  times = op_times(sorted(glob.glob(f"{logdir}/plugins/profile/*/*.xplane.pb"))[-1])
  by_type = op_type_totals(times)
  total = sum(ms for ms, _ in by_type.values())
  ranked = sorted(by_type.items(), key=lambda kv: -kv[1][0])[:top]
  largest = {}
  for op_type in detail:
    named = sorted(((ms, name) for (t, name), (ms, _) in times.items() if t == op_type),
                   reverse=True)[:8]
    largest[op_type] = {name[-100:]: round(ms / per, digits) for ms, name in named}
  return {f"op_ms_per_{unit}": round(total / per, digits),
          "by_type": {t: {f"ms_per_{unit}": round(ms / per, digits),
                          "share": round(ms / total, 3),
                          "ops_per_step": round(count / per_count, 1)}
                      for t, (ms, count) in ranked},
          "largest": largest}
