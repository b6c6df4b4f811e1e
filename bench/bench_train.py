"""Training speed: target tokens/s of the real train step on Multi30k batches, and model
FLOPs/s as a fraction of this machine's measured matmul peak.

Usage: .venv/bin/python bench/bench_train.py [--precisions float32,mixed_bfloat16]
           [--jit false,true] [--bucket_widths 2,5]
           [--optimizers fused,keras] [--smoothing_labels sparse,dense]
           [--compiled_cell auto,off]
           [--defer_gradients auto,true,false]
           [--decoders cgru,rnnsearch,luong,encdec,sar_avg,sar_cavg,...]
           [--models ,layer_norm=True,hidden_dropout=0.2+embedding_dropout=0.2]
           [--moving_average_decays 0,0.999] [--loops trainer,fit] [--interleave]
           [--batches 30] [--batch_tokens 2000] [--peak]
For each (decoder, precision, jit_compile, bucket width, Adam,
smoothed-loss form, GRU cell, deferred gradients) setting the
reference model
(recipe multi30k:cgru: emb 256, BiGRU 2x512, cGRU 512, deep output, SentencePiece 8k,
dropout 0.2, Adam, clipping, label smoothing 0.1; with --decoders another decoder, or a model
preset of nmt_tf/experiment/presets.py such as sar_cavg, in place of the cGRU; with --models
ModelConfig fields set over it) is built and
`nmt_tf.training.train_step.TrainStep` (the Trainer's step; with --loops fit, Keras'
`train_on_batch` of the model compiled as `nmt-tf train` trains it) runs, with the model's
KernelOptions (nmt_tf/layers/kernels/options.py) and TrainStep's smoothing_labels set from the
flags, over `--batches` real training
batches of the bucketed pipeline twice: the first pass is the warm-up (tracing, and XLA
compiling each batch shape), the second is timed, step by step, with the loss fetched to the
host after every step as the Trainer does. The batches are materialized before timing, so
tf.data is not measured here (bench/bench_data.py measures it). With --interleave every setting
is built and warmed up first, then the timed pass runs batch i of every setting in turn before
batch i + 1: on a VM whose speed drifts (other guests) this is the fair A/B; without it the
settings are timed one after the other.
Prints one JSON object: median and overall target tokens/s (real target tokens incl. EOS),
and with --peak the analytic model FLOPs/s (forward + backward = 3 x forward, see
common.forward_flops) over the matmul peak of bench_peak.py.
"""

import ast
import collections
import dataclasses
import itertools
import os
import sys

from absl import app
from absl import flags

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
# pylint: disable=g-import-not-at-top,wrong-import-position
import keras
import numpy as np
import tensorflow as tf

import bench_peak
import common
from nmt_tf import data
from nmt_tf.experiment import TrainConfig
from nmt_tf.layers.kernels import KernelOptions
from nmt_tf.models import ModelConfig
from nmt_tf.models import losses
from nmt_tf.training import objectives
from nmt_tf.experiment import presets
from nmt_tf.training.optimizers import FusedAdam
from nmt_tf.training.train_step import TrainStep
from nmt_tf.training.weight_average import WeightAverage
from nmt_tf.models import build_model

flags.DEFINE_string("pair", "de-en", "Multi30k language pair.")
flags.DEFINE_list("precisions", ["float32", "mixed_bfloat16"], "Precisions to time.")
flags.DEFINE_list("jit", ["false"], "jit_compile settings to time (false, true).")
flags.DEFINE_integer("batches", 30, "Distinct training batches (warm-up pass + timed pass).")
flags.DEFINE_integer("batch_tokens", 2000, "Padded token budget per batch.")
flags.DEFINE_list("optimizers", ["fused"], "Adam implementations to time: fused "
                  "(training/optimizers.py FusedAdam, the Trainer's) and keras "
                  "(keras.optimizers.Adam).")
flags.DEFINE_list("smoothing_labels", ["sparse"], "Label-smoothed loss forms to time "
                  "(TrainStep's smoothing_labels): sparse (models/losses.py "
                  "smoothed_cross_entropy, the Trainer's) and dense (one-hot label tensor and "
                  "softmax_cross_entropy_with_logits).")
flags.DEFINE_list("compiled_cell", ["auto"], "The GRU steps' elementwise work to time "
                  "(KernelOptions.compiled_cell, layers/kernels/cells.py): auto (the compiled "
                  "cell of gru_cell.cc for float32 activations, the default), off (plain ops).")
flags.DEFINE_list("defer_gradients", ["auto"], "Gradients of the loop-invariant operands of "
                  "the scan_time loops to time (KernelOptions.defer_gradients, "
                  "layers/kernels/deferred.py): auto (after the loop for loops with bfloat16 "
                  "inputs, the default), true (after every loop), false (step by step).")
flags.DEFINE_list("decoders", ["cgru"], "Decoders of the timed model (the reference model with "
                  "its decoder replaced, the presets' paper defaults otherwise): ModelConfig "
                  "decoders or the model presets of experiment/presets.py (sar_avg, sar_cavg, "
                  "...); model FLOPs are counted for cgru only.")
flags.DEFINE_list("bucket_widths", [], "Length ranges of a bucket of the pipeline to time; "
                  "default: PipelineConfig's.")
flags.DEFINE_list("moving_average_decays", ["0"], "train.moving_average_decay settings to "
                  "time (0: no average of the weights; training/weight_average.py).")
flags.DEFINE_list("loops", ["trainer"], "Training loops to time: trainer (TrainStep), fit "
                  "(Keras' train_on_batch, the step of model.fit).")
flags.DEFINE_bool("interleave", False, "Time batch i of every setting before batch i + 1.")
flags.DEFINE_bool("peak", True, "Also measure the matmul peak and report FLOPs utilization.")
FLAGS = flags.FLAGS


def make_batches(corpus, src_tok, tgt_tok, count, batch_tokens, bucket_width=None):
  config = data.PipelineConfig(max_source_len=50, max_target_len=50, batch_tokens=batch_tokens)
  if bucket_width:
    config = dataclasses.replace(config, bucket_width=bucket_width)
  ds = data.make_train_dataset(corpus["train"], src_tok, tgt_tok, config)
  return [{k: tf.constant(v) for k, v in b.items()} for b in ds.take(count).as_numpy_iterator()]


flags.DEFINE_list("models", [""], "Model variants to time, each a '+'-joined list of ModelConfig "
                  "fields over the reference model (an empty item: none), e.g. "
                  "',layer_norm=True,hidden_dropout=0.2,decoder_transition_depth=4'.")


def _overrides(text):
  """"layer_norm=True+hidden_dropout=0.2" -> {"layer_norm": True, "hidden_dropout": 0.2}."""
  fields = {}
  for item in filter(None, text.split("+")):
    key, _, value = item.partition("=")
    try:
      fields[key] = ast.literal_eval(value)
    except (ValueError, SyntaxError):
      fields[key] = value
  return fields


def _bools(values):
  return [v.lower() in ("1", "true", "yes") for v in values]


# One timed configuration: precision, jit_compile, bucket width, Adam implementation, form of the
# label-smoothed loss (--smoothing_labels), the model's KernelOptions (--compiled_cell,
# --defer_gradients) and decoder (--decoders).
Setting = collections.namedtuple(
    "Setting", "name precision jit width optimizer labels options decoder overrides average "
    "loop")
OPTIMIZERS = {"fused": FusedAdam, "keras": keras.optimizers.Adam}
# --defer_gradients value -> KernelOptions.defer_gradients
DEFER_GRADIENTS = {"auto": None, "true": True, "false": False}


def _choice(flag, value, choices):
  if value not in choices:
    raise ValueError(f"Received --{flag}={value!r}; expected some of {sorted(choices)}.")
  return choices[value]


def build_step(vocab, setting):
  """The Trainer's TrainStep for the reference model (traced on its first call)."""
  keras.utils.set_random_seed(0)
  strategy = tf.distribute.get_strategy()
  train_cfg = TrainConfig(precision=setting.precision, jit_compile=setting.jit, clip_norm=1.0,
                          label_smoothing=0.1, learning_rate=5e-4)
  model_cfg = {**common.reference_model_config(*vocab),
               **(presets.model_fields(setting.decoder) if setting.decoder in presets.MODELS
                  else {"decoder": setting.decoder}), **_overrides(setting.overrides)}
  model = build_model(ModelConfig(**model_cfg), setting.precision,
                      kernel_options=setting.options)
  optimizer = OPTIMIZERS[setting.optimizer](learning_rate=5e-4)
  optimizer.build(model.trainable_variables)
  average = (WeightAverage(model.trainable_variables, setting.average) if setting.average
             else None)
  objective = objectives.CrossEntropy(train_cfg.label_smoothing, setting.labels)
  if setting.loop == "fit":
    if average is not None:
      raise ValueError("--loops=fit times no weight average; pass --moving_average_decays=0.")
    model.compile(optimizer=optimizer, objective=objective, clip_norm=train_cfg.clip_norm,
                  jit_compile=setting.jit)
    return lambda batch: fit_step(model, batch)
  return TrainStep(model, optimizer, strategy, train_cfg, objective, weight_average=average)


def fit_step(model, batch):
  """One step of model.fit (Keras' train_on_batch) -> the TrainStep's keys that timed reads."""
  logs = model.train_on_batch(batch, return_dict=True)
  tokens = tf.reduce_sum(tf.cast(batch["target_out"] != 0, tf.float32))
  return {"loss": logs["loss"], "tokens": tokens}


def timed(step, batch, name):
  """(target tokens, source tokens, seconds, loss) of one step, the loss fetched as the
  Trainer does."""
  with common.Timer() as t:
    out = step(batch)
    loss = float(out["loss"])
  if not np.isfinite(loss):
    raise RuntimeError(f"Non-finite loss {loss} with {name}.")
  src = int(tf.reduce_sum(tf.cast(batch["source"] != 0, tf.int32)))
  return float(out["tokens"]), src, t.seconds, loss


def time_settings(settings, batch_sets, vocab, interleave):
  """{name: [(target tokens, source tokens, seconds, loss)] of the timed pass}."""
  steps = {}
  records = {s.name: [] for s in settings}
  for s in settings:
    steps[s.name] = build_step(vocab, s)
    for batch in batch_sets[s.width]:  # warm-up: tracing (and XLA compilations)
      float(steps[s.name](batch)["loss"])
    if not interleave:
      records[s.name] = [timed(steps[s.name], b, s.name) for b in batch_sets[s.width]]
  if interleave:
    for i in range(min(len(b) for b in batch_sets.values())):
      for s in settings:
        records[s.name].append(timed(steps[s.name], batch_sets[s.width][i], s.name))
  return records


def main(argv):
  del argv
  corpus, src_tok, tgt_tok = common.load_multi30k(FLAGS.pair)
  vocab = (src_tok.vocab_size, tgt_tok.vocab_size)
  widths = [int(w) for w in FLAGS.bucket_widths] or [data.PipelineConfig().bucket_width]
  batch_sets = {w: make_batches(corpus, src_tok, tgt_tok, FLAGS.batches, FLAGS.batch_tokens, w)
                for w in widths}
  settings = []
  for (decoder, overrides, precision, jit, width, optimizer, labels, cell,
       defer, average, loop) in itertools.product(
      FLAGS.decoders, FLAGS.models, FLAGS.precisions, _bools(FLAGS.jit),
      widths, FLAGS.optimizers, FLAGS.smoothing_labels, FLAGS.compiled_cell,
      [d.lower() for d in FLAGS.defer_gradients],
      [float(d) for d in FLAGS.moving_average_decays], FLAGS.loops):
    name = (f"{'' if decoder == 'cgru' else decoder + '_'}"
            f"{overrides.replace('+', '_') + '_' if overrides else ''}"
            f"{precision}{'_xla' if jit else ''}"
            f"{f'_bucket{width}' if len(widths) > 1 else ''}"
            f"{'' if optimizer == 'fused' else '_' + optimizer + '_adam'}"
            f"{'' if labels == 'sparse' else '_dense_labels'}"
            f"{'' if cell == 'auto' else '_cell_' + cell}"
            f"{'' if defer == 'auto' else '_defer_' + defer}"
            f"{f'_average{average:g}' if average else ''}"
            f"{'' if loop == 'trainer' else '_' + _choice('loops', loop, {'fit': 'fit'})}")
    _choice("smoothing_labels", labels, {form: form for form in losses.SMOOTHING_LABELS})
    options = KernelOptions(compiled_cell=cell,
                            defer_gradients=_choice("defer_gradients", defer, DEFER_GRADIENTS))
    settings.append(Setting(name, precision, jit, width, optimizer, labels, options, decoder,
                            overrides, average, loop))
  tgt_per_batch = [int(tf.reduce_sum(tf.cast(b["target_out"] != 0, tf.int32)))
                   for b in batch_sets[widths[0]]]
  report = {"model": ("emb256 birnn 2x512 dec512, dropout 0.2 (each setting's name adds its "
                      "--models fields); decoders " + ",".join(FLAGS.decoders)),
            "vocab": list(vocab), "batch_tokens": FLAGS.batch_tokens, "bucket_widths": widths,
            "batches": FLAGS.batches, "interleaved": FLAGS.interleave,
            "mean_target_tokens_per_batch": round(float(np.mean(tgt_per_batch)), 1),
            **common.device_info(), "settings": {}}
  peak = bench_peak.measure(seconds=2.0) if FLAGS.peak else None
  all_records = time_settings(settings, batch_sets, vocab, FLAGS.interleave)
  for name, precision, *_, decoder, overrides, _, _ in settings:  # Setting fields
    records = all_records[name]
    tgt = sum(r[0] for r in records)
    src = sum(r[1] for r in records)
    seconds = sum(r[2] for r in records)
    entry = {"target_tokens_per_s_median": round(common.median(
                 [r[0] / r[2] for r in records]), 1),
             "target_tokens_per_s_overall": round(tgt / seconds, 1),
             "step_ms_median": round(1000 * common.median([r[2] for r in records]), 1),
             "last_loss": round(records[-1][3], 3)}
    if peak and decoder == "cgru" and not overrides:
      flops = 3.0 * common.forward_flops(src, tgt, vocab=vocab[1])
      achieved = flops / seconds / 1e9
      ref = peak["bfloat16" if "bf" in precision else "float32"]
      entry.update({"model_gflops_per_s": round(achieved, 1), "peak_gflops_per_s": ref,
                    "flops_utilization": round(achieved / ref, 3),
                    "train_flops_per_target_token": round(flops / tgt)})
    report["settings"][name] = entry
  if peak:
    report["matmul_peak_gflops"] = peak
  common.print_json(report)


if __name__ == "__main__":
  app.run(main)
