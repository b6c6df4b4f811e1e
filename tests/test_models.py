"""Seq2Seq: every decoder's step-by-step decoding equals teacher forcing, padding invariance,
gradients reach every weight, config validation and round trip."""

import os
from unittest import mock

import keras
import numpy as np
import pytest
import tensorflow as tf
from absl.testing import parameterized

from nmt_tf.layers import kernels
from nmt_tf.layers import GRUCell
from nmt_tf.models import ConfigError, ModelConfig, Seq2Seq
from nmt_tf.models import factory
from nmt_tf.models import losses
from tests import numpy_reference as ref
from tests.model_fixtures import QUICK_VARIANTS, TINY, VARIANTS, batch, op_types, tiny_config
from tests.training_fixtures import recipe

# Every decoder type plus hard attention; the encoder variants share the cgru training path.
OVERFIT_VARIANTS = ("encdec", "rnnsearch", "cgru", "luong", "self_attentive_residual",
                    "memory_rnn", "self_attentive_rnn", "cgru_hard", "luong_lstm_dot",
                    "self_attentive_residual_cavg")


def _batches_like(first, count, src_vocab, tgt_vocab, seed=0):
  """`first`, then count - 1 batches of its shapes and padding with random tokens (ids >= 4,
  the special tokens kept), target_out the shifted target_in."""
  rng = np.random.default_rng(seed)
  out = [first]
  for _ in range(count - 1):
    source, target_in = (np.where(first[k].numpy() > 3,
                                  rng.integers(4, vocab, first[k].shape), first[k].numpy())
                         for k, vocab in (("source", src_vocab), ("target_in", tgt_vocab)))
    target_out = first["target_out"].numpy().copy()
    target_out[:, :-1] = np.where(target_out[:, :-1] > 3, target_in[:, 1:], target_out[:, :-1])
    out.append({"source": tf.constant(source, tf.int32),
                "target_in": tf.constant(target_in, tf.int32),
                "target_out": tf.constant(target_out, tf.int32)})
  return out


def _stepwise(model, source, target_in):
  """Runs model.step over target_in; returns logits [batch, tgt_len, V], attention."""
  context = model.encode(source)
  length = target_in.shape[1]
  state = model.initial_state(context, length)
  logits, attention = [], []
  for t in range(length):
    step_logits, step_attention, state = model.step(target_in[:, t], state, context,
                                                    tf.constant(t))
    logits.append(step_logits)
    attention.append(step_attention)
  return tf.stack(logits, 1), tf.stack(attention, 1)


def _variants(quick):
  """named_parameters of the model variants in (quick=True) or out of QUICK_VARIANTS."""
  return [(name, kw) for name, kw in VARIANTS.items() if (name in QUICK_VARIANTS) == quick]


class ModelInvariants:
  """Per model variant: step == call, padding invariance, a gradient for every weight."""

  def check_invariants(self, overrides):
    keras.utils.set_random_seed(1)
    model = Seq2Seq(tiny_config(**overrides))
    b = batch()
    out = model(b)
    self.assertEqual(out["logits"].shape, (3, 4, 19))
    self.assertEqual(out["attention"].shape, (3, 4, 5))
    with self.subTest("step-by-step decoding equals teacher forcing"):
      logits, attention = _stepwise(model, b["source"], b["target_in"])
      self.assertAllClose(out["logits"], logits, atol=1e-5, rtol=1e-5)
      self.assertAllClose(out["attention"], attention, atol=1e-5, rtol=1e-5)
    with self.subTest("padding invariance"):
      self._check_padding_invariance(model, b, out)
    with self.subTest("every weight gets a gradient"):
      self._check_gradients(model, b)

  def _check_padding_invariance(self, model, b, out):
    padded = {k: tf.pad(v, [[0, 0], [0, 3]]) for k, v in b.items()}
    out_padded = model(padded)
    real = b["target_out"] != 0
    self.assertAllClose(tf.boolean_mask(out["logits"], real),
                        tf.boolean_mask(out_padded["logits"][:, :4], real), atol=1e-5)
    att = out_padded["attention"].numpy()
    src_pad = (padded["source"] == 0).numpy()
    self.assertEqual(float(np.abs(att * src_pad[:, None, :]).max()), 0.0)
    self.assertAllClose(out["attention"], att[:, :4, :5], atol=1e-5)
    # A sentence alone gives the same logits as inside the padded batch.
    src_len, tgt_len = 3, 2
    alone = model({"source": b["source"][1:2, :src_len], "target_in": b["target_in"][1:2, :tgt_len]})
    self.assertAllClose(alone["logits"][0], out["logits"][1, :tgt_len], atol=1e-5)

  def _check_gradients(self, model, b):
    with tf.GradientTape() as tape:
      out = model(b, training=True)
      loss = mean_token_nll(out["logits"], b["target_out"])
      if model.model_config.attention_mode == "hard":
        reward = losses.sentence_log_likelihood(out["logits"], b["target_out"])
        loss += losses.reinforce_loss(out["attention_log_prob"], reward, 0.0, b["target_out"])
    grads = tape.gradient(loss, model.trainable_variables)
    missing = [v.path for v, g in zip(model.trainable_variables, grads)
               if g is None or not np.any(tf.convert_to_tensor(g).numpy())]
    self.assertEqual(missing, [])


class ModelInvariantsTest(ModelInvariants, tf.test.TestCase, parameterized.TestCase):
  """ModelInvariants for QUICK_VARIANTS."""

  @parameterized.named_parameters(*_variants(quick=True))
  def test_invariants(self, overrides):
    self.check_invariants(overrides)


@pytest.mark.slow  # every other variant
@pytest.mark.variants
class ModelInvariantsOtherVariantsTest(ModelInvariants, tf.test.TestCase,
                                       parameterized.TestCase):
  """ModelInvariants for every other variant of the model fixtures."""

  @parameterized.named_parameters(*_variants(quick=False))
  def test_invariants(self, overrides):
    self.check_invariants(overrides)


class Checkpoints:
  """Every weight is in a tf.train.Checkpoint: a restored fresh model gives the same logits."""

  def saved_model(self, overrides):
    """(model, its logits on `batch()`, the path of its checkpoint)."""
    keras.utils.set_random_seed(5)
    model = Seq2Seq(tiny_config(**overrides))
    expected = model(batch())["logits"]
    path = tf.train.Checkpoint(model=model).save(os.path.join(self.get_temp_dir(), "ckpt"))
    return model, expected, path

  def check_restore_reproduces_outputs(self, overrides):
    b = batch()
    _, expected, path = self.saved_model(overrides)
    keras.utils.set_random_seed(6)
    fresh = Seq2Seq(tiny_config(**overrides))
    fresh.build_with_dummy_batch()
    tf.train.Checkpoint(model=fresh).restore(path).assert_consumed()
    self.assertAllClose(fresh(b)["logits"], expected, atol=1e-6)

  def check_one_decoding_step_builds_every_weight(self, overrides):
    # build_model(..., checkpoint=) builds a model to decode with by one step (faster to
    # start than the teacher-forced batch); it must leave no checkpoint value unrestored.
    b = batch()
    model, expected, path = self.saved_model(overrides)
    fresh = Seq2Seq(tiny_config(**overrides))
    self.assertNotEqual(factory.values_without_weights(path, fresh), [])  # nothing built yet
    fresh.build_for_decoding()
    self.assertEqual(factory.values_without_weights(path, fresh), [])
    tf.train.Checkpoint(model=fresh).restore(path).assert_consumed()
    self.assertAllClose(fresh(b)["logits"], expected, atol=1e-6)
    built = factory.build_model(tiny_config(**overrides), initialize=False, checkpoint=path)
    self.assertEqual(len(built.variables), len(model.variables))


# The decoders whose decoding step the quick tier builds from a checkpoint: the plain state,
# the summaries and the state memory (with every option's module), and hard attention.
CHECKPOINT_QUICK = ("cgru", "self_attentive_residual", "memory_rnn_deep_ln", "cgru_hard")


class CheckpointTest(Checkpoints, tf.test.TestCase, parameterized.TestCase):
  """Checkpoints for CHECKPOINT_QUICK: restored into a model built by one decoding step (which
  also restores the training outputs); a decoding step that misses weights."""

  @parameterized.named_parameters(*[(name, VARIANTS[name]) for name in CHECKPOINT_QUICK])
  def test_one_decoding_step_builds_every_weight(self, overrides):
    self.check_one_decoding_step_builds_every_weight(overrides)

  def test_a_step_that_misses_weights_falls_back_to_the_batch(self):
    model, _, path = self.saved_model(dict(decoder="cgru"))
    with mock.patch.object(Seq2Seq, "build_for_decoding", lambda self: None):
      built = factory.build_model(tiny_config(decoder="cgru"), initialize=False,
                                  checkpoint=path)
    self.assertEqual(factory.values_without_weights(path, built), [])
    tf.train.Checkpoint(model=built).restore(path).assert_consumed()
    damaged = os.path.join(self.get_temp_dir(), "damaged")
    with open(damaged + ".index", "wb") as f:
      f.write(b"not a checkpoint")
    # An unreadable checkpoint builds the whole model; restoring it reports the damage.
    built = factory.build_model(tiny_config(decoder="cgru"), initialize=False, checkpoint=damaged)
    self.assertEqual(len(built.variables), len(model.variables))


@pytest.mark.slow  # every variant restored into a model built by a batch; the other variants'
@pytest.mark.variants  # decoding steps
class CheckpointOtherVariantsTest(Checkpoints, tf.test.TestCase, parameterized.TestCase):
  """Checkpoints for every variant (restored into a model built by a batch) and for the
  decoding step of the variants outside CHECKPOINT_QUICK."""

  @parameterized.named_parameters(*VARIANTS.items())
  def test_restore_reproduces_outputs(self, overrides):
    self.check_restore_reproduces_outputs(overrides)

  @parameterized.named_parameters(*[(name, kw) for name, kw in VARIANTS.items()
                                    if name not in CHECKPOINT_QUICK])
  def test_one_decoding_step_builds_every_weight(self, overrides):
    self.check_one_decoding_step_builds_every_weight(overrides)


class WerlenAppendixTest(tf.test.TestCase, parameterized.TestCase):
  """The self-attentive decoders of Werlen et al. (2018) against a numpy transcription of
  appendix A.3.1 (d_t over y_1..y_{t-1}, d_1 = 0) and A.3.3 (the cgru recurrence; s~_t over
  s_1..s_{t-1} queried with s_t, s~_1 = 0), on a padded batch, with random non-zero biases:
  teacher-forced in inference and in training (the compiled cell) and step by step."""

  @parameterized.named_parameters(
      ("residual_avg", dict(decoder="self_attentive_residual", summary="avg")),
      ("residual_cavg", dict(decoder="self_attentive_residual", summary="cavg")),
      ("self_attentive_rnn", dict(decoder="self_attentive_rnn")))
  def test_logits_follow_the_appendix(self, overrides):
    keras.utils.set_random_seed(11)
    model = Seq2Seq(tiny_config(**overrides))
    b = batch()
    model(b)
    rng = np.random.default_rng(3)
    for variable in model.decoder.weights:
      if "bias" in variable.path or variable.path.endswith("/v"):
        variable.assign(rng.normal(0.0, 0.5, variable.shape).astype(np.float32))
    dec = model.decoder
    context = model.encode(b["source"])
    memory, mask = context["memory"].numpy(), context["mask"].numpy()
    emb = model.tgt_embedding(b["target_in"]).numpy()  # rows E y_0 (BOS) .. E y_{n-1}
    att = dec.cgru.attention
    att_weights = (att.query_dense.kernel.numpy(), att.key_dense.kernel.numpy(),
                   att.key_dense.bias.numpy(), att.v.numpy())
    s = ref.bridge(memory, mask, dec.bridge.dense.kernel.numpy(), dec.bridge.dense.bias.numpy())
    states, contexts = [], []
    for t in range(emb.shape[1]):  # the plain cgru recurrence in both decoders
      s, c, _ = ref.cgru_step(emb[:, t], s, memory, mask, ref.gru_weights(dec.cgru.gru1),
                              att_weights, ref.gru_weights(dec.cgru.gru2))
      states.append(s)
      contexts.append(c)
    inputs = {"state": np.stack(states, 1), "context": np.stack(contexts, 1)}
    if dec.uses_summary:
      summary = dec.target_summary
      scores = (np.zeros(emb.shape[:2]) if summary.summary == "avg" else
                ref.cavg_scores(emb, summary.score_dense.kernel.numpy(),
                                summary.score_dense.bias.numpy(), summary.v.numpy()))
      inputs["summary"] = ref.target_summary(emb, scores)
      self.assertAllEqual(inputs["summary"][:, 0], np.zeros_like(emb[:, 0]))
    else:
      memory_layer = dec.state_attention
      inputs["prev_embedding"] = emb
      inputs["state_summary"] = ref.state_attention(
          inputs["state"], memory_layer.key_dense.kernel.numpy(),
          memory_layer.key_dense.bias.numpy(), memory_layer.query_dense.kernel.numpy(),
          memory_layer.v.numpy())
    out = dec.output_layer
    names = out.input_names
    expected = ref.deep_output([inputs[n] for n in names], [out.kernels[n].numpy() for n in names],
                               out.bias.numpy(), out.output_kernel.numpy(),
                               out.output_bias.numpy())
    for training in (False, True):
      self.assertAllClose(model(b, training=training)["logits"], expected, atol=1e-5,
                          msg=f"training={training}")
    self.assertAllClose(_stepwise(model, b["source"], b["target_in"])[0], expected, atol=1e-5)


@pytest.mark.slow  # traces two decoders twice; the quick tier compares them eagerly
class GraphModeStepTest(tf.test.TestCase, parameterized.TestCase):
  """The same equality inside tf.function (the decoding loop runs in graph mode)."""

  @parameterized.named_parameters(("cgru", "cgru"), ("self_attentive_rnn", "self_attentive_rnn"))
  def test_step_equals_call_in_graph(self, decoder):
    model = Seq2Seq(tiny_config(decoder=decoder))
    b = batch()
    full = tf.function(lambda x: model(x))(b)
    stepwise = tf.function(lambda s, t: _stepwise(model, s, t))(b["source"], b["target_in"])
    self.assertAllClose(full["logits"], stepwise[0], atol=1e-5, rtol=1e-5)


# The kernel options whose GRU steps run on plain ops in training too.
PLAIN_CELL = kernels.KernelOptions(compiled_cell="off")


def mean_token_nll(logits, targets, label_smoothing=0.0):
  """The mean cross-entropy of the real target tokens (the trainer's loss on one replica)."""
  total, count = losses.token_loss_sum(logits, targets, label_smoothing)
  return total / tf.maximum(count, 1.0)


def train_forward(model, b, kernel_options=None):
  """model(b, training=True) with `kernel_options` for this call only (None: the model's)."""
  if kernel_options is None:
    return model(b, training=True)
  previous = model.kernel_options
  model.kernel_options = kernel_options
  try:
    return model(b, training=True)
  finally:
    model.kernel_options = previous


def _loss_gradients(model, b, kernel_options=None):
  with tf.GradientTape() as tape:
    out = train_forward(model, b, kernel_options)
    loss = mean_token_nll(out["logits"], b["target_out"])
  return tape.gradient(loss, model.trainable_variables)


@pytest.mark.slow  # every decoder's gradients, twice
class DeferredGradientTest(tf.test.TestCase, parameterized.TestCase):
  """Weight gradients taken after the time loop (layers/kernels/deferred.py) equal the
  gradients accumulated step by step inside it, for every kind of per-step product, eager and
  graph (both against the eager step-by-step gradients)."""

  @parameterized.named_parameters(
      *[(name, name) for name in ("encdec_birnn_2layers", "rnnsearch", "rnnsearch_general",
                                  "cgru", "luong_lstm_dot", "luong_concat", "memory_rnn",
                                  "self_attentive_rnn", "self_attentive_residual_cavg",
                                  "cgru_rnn_reversed")])
  def test_same_gradients_as_in_loop_accumulation(self, variant):
    keras.utils.set_random_seed(3)
    model = Seq2Seq(tiny_config(**VARIANTS[variant]))
    b = batch()
    model(b)
    deferring, plain = (kernels.KernelOptions(defer_gradients=defer) for defer in (True, False))
    plain_grads = _loss_gradients(model, b, plain)  # eager: the reference of both modes
    for run in (lambda f: f(), lambda f: tf.function(f)()):
      deferred_grads = run(lambda: _loss_gradients(model, b, deferring))
      for v, g, h in zip(model.trainable_variables, deferred_grads, plain_grads):
        self.assertAllClose(tf.convert_to_tensor(g), tf.convert_to_tensor(h), atol=1e-6,
                            rtol=1e-5, msg=v.path)

  def test_products_outside_a_loop_are_plain(self):
    x, w = tf.random.normal([3, 4]), tf.random.normal([4, 5])
    m, q = tf.random.normal([3, 6, 4]), tf.random.normal([3, 4])
    a = tf.nn.softmax(tf.random.normal([3, 6]))
    self.assertAllClose(kernels.matmul(x, w), x @ w)
    self.assertAllClose(kernels.attend(a, m), tf.einsum("bn,bnd->bd", a, m))
    self.assertAllClose(kernels.score(m, q), tf.einsum("bnd,bd->bn", m, q))


# The papers' four decoders, in the quick tier; the other variants in the full suite.
PATCHED_QUICK = ("cgru", "rnnsearch")


class PatchedStep:
  """The layers' `step` is what trains: scaling GRUCell.step's output, or an attention's
  score, moves the training logits and loss of every model variant, as it moves the
  inference logits (there is no second copy of the equations for training)."""

  def check_patched_step(self, variant):
    keras.utils.set_random_seed(11)
    model = Seq2Seq(tiny_config(**VARIANTS[variant]))
    b = batch()
    model(b)
    generators = [layer.seed_generator for layer in model._flatten_layers()
                  if getattr(layer, "seed_generator", None) is not None]

    def training_loss():
      for generator in generators:  # the same dropout masks and samples every time
        generator.state.assign([7, 0])
      out = model(b, training=True)
      return out["logits"], mean_token_nll(out["logits"], b["target_out"])

    logits, loss = training_loss()
    patches = []
    if model.model_config.encoder in ("birnn", "rnn") or model.model_config.decoder != "luong" \
        or model.model_config.rnn_cell == "gru":
      original_step = GRUCell.step
      patches.append(mock.patch.object(
          GRUCell, "step", lambda cell, *a, **k: 0.5 * original_step(cell, *a, **k)))
    attention = model.decoder.attention_layer
    if attention is not None:
      original_score = type(attention).score
      patches.append(mock.patch.object(
          type(attention), "score", lambda layer, *a, **k: 3.0 * original_score(layer, *a, **k)))
    for patch in patches:
      with patch:
        patched_logits, patched_loss = training_loss()
      self.assertGreater(float(tf.reduce_max(tf.abs(patched_logits - logits))), 1e-3,
                         f"{variant}: {patch.attribute}")
      self.assertNotAllClose(patched_loss, loss, msg=f"{variant}: {patch.attribute}")


class OneImplementationTest(PatchedStep, tf.test.TestCase, parameterized.TestCase):
  """PatchedStep for the four decoders of the papers."""

  @parameterized.named_parameters(*[(name, name) for name in PATCHED_QUICK])
  def test_patched_step_changes_training(self, variant):
    self.check_patched_step(variant)


@pytest.mark.slow  # every other variant
class OneImplementationOtherVariantsTest(PatchedStep, tf.test.TestCase, parameterized.TestCase):
  """PatchedStep for every other variant of the model fixtures."""

  @parameterized.named_parameters(*[(name, name) for name in VARIANTS
                                    if name not in PATCHED_QUICK])
  def test_patched_step_changes_training(self, variant):
    self.check_patched_step(variant)


@pytest.mark.slow  # every decoder forward and backward, three times
class CompiledCellTest(tf.test.TestCase, parameterized.TestCase):
  """While training, the GRU steps take the compiled cell (layers/kernels/gru_cell.cc) where
  its library loads: the logits, attention and every gradient equal those of the plain ops
  (KernelOptions(compiled_cell="off")), eager and in graph mode, in float32 and with bfloat16
  products (plain and XLA score kernels); inference and export keep the plain ops."""

  @parameterized.named_parameters(
      # Each path of the cell once: reset-after (cgru) and reset-before (rnnsearch) GRUs, the
      # reversed and two-layer encoders, layer norm with a deep transition and dropout over
      # the state memory, hard attention, the self-attentive parts, an LSTM decoder.
      *[(name, name) for name in ("cgru", "rnnsearch", "cgru_rnn_reversed",
                                  "encdec_birnn_2layers", "memory_rnn_deep_ln", "cgru_hard",
                                  "self_attentive_rnn", "self_attentive_residual_cavg",
                                  "luong_lstm_dot")])
  def test_same_outputs_and_gradients_as_plain_ops(self, variant):
    keras.utils.set_random_seed(7)
    model = Seq2Seq(tiny_config(**VARIANTS[variant]))
    b = batch()
    model(b)
    # Dropout masks and hard attention's samples: the same seeds for both runs.
    generators = [layer.seed_generator for layer in model._flatten_layers()
                  if getattr(layer, "seed_generator", None) is not None]

    def outputs_and_gradients(kernel_options=None):
      for generator in generators:
        generator.state.assign([7, 0])
      with tf.GradientTape() as tape:
        out = train_forward(model, b, kernel_options)
        loss = mean_token_nll(out["logits"], b["target_out"])
        # The attention weights get a gradient too (as a guided-alignment loss would give).
        loss += 0.1 * tf.reduce_sum(out["attention"] * tf.range(5, dtype=tf.float32))
      return [out["logits"], out["attention"]] + tape.gradient(loss, model.trainable_variables)

    settings = [(None, None, "float32 eager"), (None, tf.function, "float32 graph"),
                ("bfloat16", tf.function, "bfloat16 products, XLA score")]
    for matmul_dtype, wrap, name in settings:
      model.matmul_dtype = matmul_dtype
      run = wrap(outputs_and_gradients) if wrap else outputs_and_gradients
      fused = run()
      plain = wrap(lambda: outputs_and_gradients(PLAIN_CELL))() if wrap else \
          outputs_and_gradients(PLAIN_CELL)
      names = ["logits", "attention"] + [v.path for v in model.trainable_variables]
      # The cell's tanh and logistic differ from TensorFlow's by float32 rounding, which the
      # bfloat16 operands of the products' gradients can round up to bfloat16's precision.
      tolerance = 1e-5 if matmul_dtype is None else 1e-2
      for label, got, want in zip(names, fused, plain):
        got, want = tf.convert_to_tensor(got), tf.convert_to_tensor(want)
        scale = float(tf.reduce_max(tf.abs(want))) + 1e-6
        self.assertAllClose(got / scale, want / scale, atol=tolerance, msg=f"{name} {label}")
    model.matmul_dtype = None
    cell_ops = {op for op in op_types(lambda: train_forward(model, b)) if op.startswith("Nmt")}
    if kernels.compiled.library() is not None:  # the encoder's GRUs at least
      self.assertNotEmpty(cell_ops)
    else:
      self.assertEmpty(cell_ops)
    self.assertEmpty({op for op in op_types(lambda: model(b)) if op.startswith("Nmt")})
    self.assertEmpty({op for op in op_types(lambda: train_forward(model, b, PLAIN_CELL))
                      if op.startswith("Nmt")})

  @parameterized.named_parameters(("cgru", "cgru"), ("rnnsearch", "rnnsearch"),
                                  ("luong", "luong"))
  def test_mixed_bfloat16(self, variant):
    # bfloat16 states and gates: the cell is float32 only, so the plain ops run.
    previous = keras.mixed_precision.global_policy()
    keras.mixed_precision.set_global_policy("mixed_bfloat16")
    try:
      keras.utils.set_random_seed(5)
      model = Seq2Seq(tiny_config(**VARIANTS[variant]))
      b = batch()
      model(b)
    finally:
      keras.mixed_precision.set_global_policy(previous)
    self.assertFalse(model.decoder.loops.choice.compiled_cell)
    out = train_forward(model, b)
    self.assertEqual(out["logits"].dtype, tf.bfloat16)
    self.assertEmpty({op for op in op_types(lambda: train_forward(model, b))
                      if op.startswith("Nmt")})

  def test_xla_compiled_training(self):
    # train.jit_compile=True compiles the whole train step: XLA cannot compile the custom op,
    # so the TrainStep takes the plain ops (training/train_step.py).
    for variant in ("cgru", "luong", "self_attentive_rnn"):
      keras.utils.set_random_seed(5)
      model = Seq2Seq(tiny_config(**VARIANTS[variant]))
      b = batch()
      model(b)

      def loss_and_gradients(kernel_options=None):
        with tf.GradientTape() as tape:
          out = train_forward(model, b, kernel_options)
          loss = mean_token_nll(out["logits"], b["target_out"])
        return [loss] + tape.gradient(loss, model.trainable_variables)

      compiled = tf.function(lambda: loss_and_gradients(PLAIN_CELL), jit_compile=True)()
      plain = tf.function(loss_and_gradients)()
      for got, want in zip(compiled, plain):
        self.assertAllClose(tf.convert_to_tensor(got), tf.convert_to_tensor(want), atol=1e-5,
                            msg=variant)


@pytest.mark.slow  # trains under each precision
class PrecisionTest(tf.test.TestCase):
  """layers/kernels/precision.py: bfloat16 matrix products in a float32 model, casts cached per
  pass."""

  def test_bf16_matmul_model_is_close_to_float32(self):
    keras.utils.set_random_seed(4)
    model = Seq2Seq(tiny_config(decoder="cgru"))
    b = batch()
    expected = model(b)["logits"]
    model.matmul_dtype = "bfloat16"
    out = model(b)
    self.assertEqual(out["logits"].dtype, tf.float32)
    self.assertAllClose(out["logits"], expected, atol=0.05, rtol=0.05)
    self.assertNotAllClose(out["logits"], expected, atol=1e-6, rtol=1e-6)  # really bf16
    logits, _ = _stepwise(model, b["source"], b["target_in"])
    self.assertAllClose(out["logits"], logits, atol=1e-5, rtol=1e-5)
    grads = _loss_gradients(model, b)
    self.assertTrue(all(g.dtype == tf.float32 for g in grads))
    self.assertTrue(all(np.all(np.isfinite(tf.convert_to_tensor(g))) for g in grads))

  def test_weight_cast_once_per_scope(self):
    v = tf.Variable(tf.ones([2, 3]))
    with kernels.precision_scope("bfloat16"):
      first = kernels.weight(v, tf.float32)
      self.assertEqual(first.dtype, tf.bfloat16)
      self.assertIs(kernels.weight(v, tf.float32), first)
      with kernels.precision_scope("bfloat16"):  # nested: the same pass
        self.assertIs(kernels.weight(v, tf.float32), first)
    with kernels.precision_scope(None):
      self.assertEqual(kernels.weight(v, tf.float32).dtype, tf.float32)
    # Column slices (the reset-before GRU's U_zr, U_h) are cached per pass too.
    w = tf.Variable(tf.reshape(tf.range(12.0), [2, 6]))
    for dtype in ("bfloat16", None):
      with kernels.precision_scope(dtype):
        part = kernels.weight(w, tf.float32, (2, 6))
        self.assertIs(kernels.weight(w, tf.float32, (2, 6)), part)
        self.assertAllEqual(tf.cast(part, tf.float32), w[:, 2:6])
        self.assertAllEqual(tf.cast(kernels.weight(w, tf.float32, (0, 2)), tf.float32),
                            w[:, :2])
    self.assertAllEqual(kernels.weight(w, tf.float32, (0, 2)), w[:, :2])  # no scope
    # A graph cannot use a cast made in a sibling graph: it is made anew there.
    with kernels.precision_scope(None):
      tf.function(lambda: kernels.weight(v, tf.float32))()
      self.assertAllEqual(tf.function(lambda: kernels.weight(v, tf.float32) * 2.0)(),
                          tf.fill([2, 3], 2.0))

  def test_bf16_matmul_training_takes_the_compiled_scores(self):
    # With bfloat16 products, training computes every tanh score (source attention, and the
    # memory RNN's attention over previous states) in the compiled cell; the gradients equal
    # those of the plain ops up to float rounding.
    for variant in ("cgru", "memory_rnn", "luong_concat"):
      keras.utils.set_random_seed(6)
      model = Seq2Seq(tiny_config(**VARIANTS[variant]))
      model.matmul_dtype = "bfloat16"
      b = batch()
      model(b)
      if kernels.compiled.library() is not None:
        self.assertIn("NmtAdditiveScore", op_types(lambda: _loss_gradients(model, b)))
      self.assertNotIn("NmtAdditiveScore",
                       op_types(lambda: _loss_gradients(model, b, PLAIN_CELL)))
      compiled = _loss_gradients(model, b)
      plain = _loss_gradients(model, b, PLAIN_CELL)
      for v, g, h in zip(model.trainable_variables, compiled, plain):
        g, h = tf.convert_to_tensor(g), tf.convert_to_tensor(h)
        scale = float(tf.reduce_max(tf.abs(h))) + 1e-6
        self.assertAllClose(g / scale, h / scale, atol=1e-2, msg=f"{variant} {v.path}")

  def test_mixed_bfloat16_loops_defer_with_the_same_gradients(self):
    import keras  # pylint: disable=g-import-not-at-top
    previous = keras.mixed_precision.global_policy()
    keras.mixed_precision.set_global_policy("mixed_bfloat16")
    try:
      keras.utils.set_random_seed(5)
      model = Seq2Seq(tiny_config(decoder="cgru"))
      b = batch()
      model(b)
    finally:
      keras.mixed_precision.set_global_policy(previous)
    auto = _loss_gradients(model, b)
    plain = _loss_gradients(model, b, kernels.KernelOptions(defer_gradients=False))
    for v, g, h in zip(model.trainable_variables, auto, plain):
      g, h = tf.convert_to_tensor(g), tf.convert_to_tensor(h)
      scale = float(tf.reduce_max(tf.abs(h))) + 1e-6
      self.assertAllClose(g / scale, h / scale, atol=0.03, msg=v.path)


@pytest.mark.slow  # trains each decoder
class OverfitTest(tf.test.TestCase, parameterized.TestCase):

  @parameterized.named_parameters(*[(name, kw) for name, kw in VARIANTS.items()
                                    if name in OVERFIT_VARIANTS])
  def test_loss_falls_on_a_tiny_batch(self, overrides):
    keras.utils.set_random_seed(4)
    model = Seq2Seq(tiny_config(**overrides))
    optimizer = tf.keras.optimizers.Adam(0.03)
    b = batch()

    @tf.function
    def train_step():
      with tf.GradientTape() as tape:
        out = model(b, training=True)
        loss = mean_token_nll(out["logits"], b["target_out"])
      grads = tape.gradient(loss, model.trainable_variables)
      optimizer.apply_gradients(zip(grads, model.trainable_variables))
      return loss

    first = float(train_step())
    for _ in range(40):
      last = float(train_step())
    self.assertLess(last, 0.25 * first)


class InitialisationTest(tf.test.TestCase, parameterized.TestCase):
  """Regression test of the Multi30k plateau (docs/DESIGN.md, "Initialisation"): with Keras'
  uniform(+-0.05) embeddings every activation started near zero and Adam learnt the unigram
  distribution through a saturated deep output, where the training loss then stayed."""

  def test_default_embeddings_give_unit_scale_gru_inputs(self):
    keras.utils.set_random_seed(0)
    self.assertEqual(recipe("multi30k").model.embedding_init_std, 1.0)
    model = Seq2Seq(tiny_config(src_vocab_size=90, tgt_vocab_size=90, embedding_dim=32,
                                encoder_units=32, decoder_units=32))  # the default: N(0, 1)
    model.build_with_dummy_batch()
    for table in (model.src_embedding, model.tgt_embedding):
      self.assertBetween(float(tf.math.reduce_std(table.embeddings)), 0.9, 1.1)
    ids = tf.range(4, 90)[None, :]  # [1, 86]
    projected = model.decoder.cgru.project_inputs(model.tgt_embedding(ids))  # [1, 86, 96]
    self.assertBetween(float(tf.math.reduce_std(projected)), 0.3, 3.0)

  def test_std_is_configurable(self):
    keras.utils.set_random_seed(0)
    model = Seq2Seq(tiny_config(src_vocab_size=90, embedding_dim=32, embedding_init_std=0.1))
    model.build_with_dummy_batch()
    self.assertBetween(float(tf.math.reduce_std(model.src_embedding.embeddings)), 0.09, 0.11)
    # None: Keras' uniform(-0.05, 0.05), std 0.05 / sqrt(3).
    model = Seq2Seq(tiny_config(src_vocab_size=90, embedding_dim=32, embedding_init_std=None))
    model.build_with_dummy_batch()
    table = model.src_embedding.embeddings
    self.assertLessEqual(float(tf.reduce_max(tf.abs(table))), 0.05)
    self.assertBetween(float(tf.math.reduce_std(table)), 0.026, 0.032)


  @parameterized.named_parameters(("untied", "none"), ("target", "target"), ("all", "all"))
  def test_scaled_embeddings_compute_the_same_function(self, tie):
    # E = sqrt(e) E': a model storing E' gives the logits of the model storing E = sqrt(e) E'
    # (layers/embedding.py), tied output projections included; only the stored scale differs.
    keras.utils.set_random_seed(1)
    overrides = dict(tie_embeddings=tie, src_vocab_size=19 if tie == "all" else 23)
    plain = Seq2Seq(tiny_config(**overrides))
    scaled = Seq2Seq(tiny_config(scale_embeddings=True, **overrides))
    b = batch()
    plain(b)
    scaled(b)
    root_e = float(TINY["embedding_dim"]) ** 0.5
    for table in {id(t): t for t in (scaled.src_embedding, scaled.tgt_embedding)}.values():
      self.assertBetween(float(tf.math.reduce_std(table.embeddings)) * root_e, 0.7, 1.3)
    for source, target in zip(plain.weights, scaled.weights):
      self.assertEqual(source.path.split("/", 1)[1], target.path.split("/", 1)[1])
      factor = 1.0 / root_e if source.path.endswith("embedding/embeddings") else 1.0
      target.assign(source * factor)
    self.assertAllClose(scaled(b)["logits"], plain(b)["logits"], atol=1e-5)
    self.assertAllClose(scaled.step(b["target_in"][:, 0], scaled.initial_state(
        scaled.encode(b["source"]), 4), scaled.encode(b["source"]), 0)[0],
                        plain.step(b["target_in"][:, 0], plain.initial_state(
                            plain.encode(b["source"]), 4), plain.encode(b["source"]), 0)[0],
                        atol=1e-5)
    self.assertEqual(Seq2Seq.from_config(scaled.get_config()).model_config.scale_embeddings,
                     True)


class ConfigTest(tf.test.TestCase):

  def test_round_trip(self):
    model = Seq2Seq(tiny_config(decoder="self_attentive_residual", summary="cavg"))
    b = batch()
    out = model(b)
    clone = Seq2Seq.from_config(model.get_config())
    self.assertEqual(clone.model_config, model.model_config)
    clone(b)
    clone.set_weights(model.get_weights())
    self.assertAllClose(clone(b)["logits"], out["logits"])

  def test_every_decoder_config_round_trips(self):
    for name, overrides in VARIANTS.items():
      with self.subTest(name):
        decoder = Seq2Seq(tiny_config(**overrides)).decoder
        config = decoder.get_config()
        clone = type(decoder).from_config(config)
        self.assertEqual(clone.get_config(), config)
        if hasattr(clone, "attention_config"):  # the attention decoders
          self.assertEqual(config["attention_mode"], overrides.get("attention_mode", "soft"))

  def test_unknown_key(self):
    with self.assertRaisesRegex(ConfigError, r"Unknown model config key\(s\) \['decodr'\]"):
      ModelConfig.from_dict({"decodr": "cgru"})

  def test_bad_values(self):
    cases = {
        "decoder='transformer'": dict(decoder="transformer"),
        "encoder_units=0": dict(encoder_units=0),
        "dropout=1.5": dict(dropout=1.5),
        "dropout=False": dict(dropout=False),
        "reverse_source=True with encoder='birnn'": dict(reverse_source=True),
        "attention='dot' needs the annotation size \\(16\\) to equal decoder_units \\(12\\)":
            dict(attention="dot", decoder="luong", decoder_units=12),
        "rnn_cell='lstm' with decoder='cgru'": dict(rnn_cell="lstm"),
        "attention_mode='hard' with decoder='encdec'": dict(attention_mode="hard",
                                                            decoder="encdec"),
        "gru_reset='middle'": dict(gru_reset="middle"),
        "conv_kernel_size=4": dict(conv_kernel_size=4, encoder="conv"),
        "embedding_init_std=0": dict(embedding_init_std=0.0),
        "embedding_init_std=True": dict(embedding_init_std=True),
        "tie_embeddings='input'": dict(tie_embeddings="input"),
        "source_word_dropout=1.0": dict(source_word_dropout=1.0),
        "target_word_dropout=-0.1": dict(target_word_dropout=-0.1),
        "tie_embeddings='target' with output_units=12 and embedding_dim=8; .* set "
        "output_units=8": dict(tie_embeddings="target", output_units=12),
        "tie_embeddings='target' with decoder_units=16 and embedding_dim=8; .* set "
        "decoder_units=8": dict(tie_embeddings="target", decoder="luong"),
        "tie_embeddings='all' with vocabularies of 23 and 19 words": dict(tie_embeddings="all"),
        "layer_norm=1; expected a bool": dict(layer_norm=1),
        "layer_norm=True with decoder='rnnsearch'; the layer-normalized GRUs are those of the "
        "cgru-family": dict(layer_norm=True, decoder="rnnsearch"),
        "layer_norm=True with gru_reset='before'": dict(layer_norm=True, gru_reset="before"),
        "embedding_dropout=1; expected a rate": dict(embedding_dropout=1),
        "hidden_dropout=0.2 with decoder='luong'; recurrent dropout is that of the "
        "cgru-family": dict(hidden_dropout=0.2, decoder="luong"),
        "hidden_dropout with gru_reset='before'": dict(hidden_dropout=0.2, gru_reset="before"),
        "decoder_transition_depth=1 with decoder='cgru'; expected 2":
            dict(decoder_transition_depth=1),
        "decoder_transition_depth=3 with decoder='rnnsearch'":
            dict(decoder_transition_depth=3, decoder="rnnsearch"),
        "lexical_model=True with decoder='encdec', which has no attention":
            dict(lexical_model=True, decoder="encdec"),
        "lexical_model=1; expected a bool": dict(lexical_model=1),
    }
    for message, overrides in cases.items():
      with self.subTest(message), self.assertRaisesRegex(ConfigError, message):
        tiny_config(**overrides)

  def test_tied_embeddings_share_their_weights(self):
    b = batch()
    untied = Seq2Seq(tiny_config())
    untied(b)
    target = Seq2Seq(tiny_config(tie_embeddings="target"))
    target(b)
    every = Seq2Seq(tiny_config(tie_embeddings="all", src_vocab_size=19))
    every(b)
    names = lambda m: sorted(w.path.split("/", 1)[1] for w in m.trainable_variables)
    self.assertEqual(names(target), [n for n in names(untied) if not n.endswith("/W_o")])
    self.assertEqual(names(every), [n for n in names(target) if "src_embedding" not in n])
    self.assertIs(every.src_embedding, every.tgt_embedding)
    # One table, one gradient: the source, the target inputs and the output all reach it.
    with tf.GradientTape() as tape:
      logits = every(b)["logits"]
    self.assertIsNotNone(tape.gradient(logits, every.tgt_embedding.embeddings))

  def test_word_dropout_drops_whole_tokens(self):
    keras.utils.set_random_seed(2)
    model = Seq2Seq(tiny_config(source_word_dropout=0.5, target_word_dropout=0.25))
    b = batch()
    model(b)
    for side, ids, rate in (("source", b["source"], 0.5), ("target", b["target_in"], 0.25)):
      table = (model.src_embedding if side == "source" else model.tgt_embedding)(ids).numpy()
      self.assertAllClose(model.embed(ids, side), table)  # not while decoding
      dropped = model.embed(ids, side, training=True).numpy()  # [batch, len, e]
      zero = np.all(dropped == 0.0, axis=-1)  # [batch, len]
      self.assertTrue(zero.any() and not zero.all(), side)
      self.assertAllClose(dropped[~zero], table[~zero] / (1.0 - rate), atol=1e-6)
    # Off by default, with no random stream of its own (checkpoints of older runs fit).
    plain = Seq2Seq(tiny_config())
    self.assertFalse(hasattr(plain, "source_word_dropout"))

  def test_variational_dropout_masks_are_one_per_sentence(self):
    keras.utils.set_random_seed(4)
    model = Seq2Seq(tiny_config(embedding_dropout=0.5, hidden_dropout=0.4))
    b = batch()
    model(b)
    ids = b["source"]
    table = model.src_embedding(ids).numpy()  # [batch, len, e]
    self.assertAllClose(model.embed(ids, "source"), table)  # not while decoding
    kept = model.embed(ids, "source", training=True).numpy() != 0.0  # [batch, len, e]
    # The same dimensions at every position of a sentence, other ones in another sentence.
    self.assertTrue(np.all(kept == kept[:, :1]))
    self.assertFalse(np.all(kept[0] == kept[1]))
    context = model.decoder.with_dropout_masks(model.encode(ids, training=True))
    m1, m2 = (m.numpy() for m in context["drops"])  # [batch, units] each
    self.assertEqual(m1.shape, (3, 16))
    self.assertAllClose(np.unique(np.concatenate([m1, m2])), [0.0, 1.0 / 0.6])
    self.assertNotAllClose(m1, m2)
    # Off by default, with no random stream of its own.
    plain = Seq2Seq(tiny_config())
    self.assertFalse(hasattr(plain.decoder, "state_dropout"))
    self.assertFalse(hasattr(plain.encoder, "state_dropout"))
    self.assertFalse(hasattr(plain, "variational_dropout"))

  def test_paper_reset_defaults(self):
    self.assertFalse(tiny_config(decoder="rnnsearch").reset_after)
    self.assertFalse(tiny_config(decoder="encdec").reset_after)
    self.assertTrue(tiny_config(decoder="cgru").reset_after)
    self.assertTrue(tiny_config(decoder="rnnsearch", gru_reset="after").reset_after)


class LossTest(tf.test.TestCase):

  def test_loss_ignores_padding(self):
    logits = tf.random.normal([2, 3, 7], seed=0)
    targets = tf.constant([[1, 2, 3], [4, 0, 0]])
    expected = -np.mean([tf.nn.log_softmax(logits[0, j])[t] for j, t in
                         [(0, 1), (1, 2), (2, 3)]] + [tf.nn.log_softmax(logits[1, 0])[4]])
    self.assertAllClose(mean_token_nll(logits, targets), expected, atol=1e-5)

  def test_label_smoothing(self):
    logits = tf.random.normal([1, 2, 5], seed=1)
    targets = tf.constant([[1, 2]])
    logp = tf.nn.log_softmax(logits).numpy()[0]
    q = np.full([2, 5], 0.1 / 5)
    q[0, 1] += 0.9
    q[1, 2] += 0.9
    self.assertAllClose(mean_token_nll(logits, targets, 0.1), -np.mean(np.sum(q * logp, -1)),
                        atol=1e-5)
    with self.assertRaisesRegex(ValueError, "label_smoothing=1.0"):
      mean_token_nll(logits, targets, 1.0)

  def test_label_smoothing_matches_the_dense_labels_with_gradients(self):
    """The sparse form's loss and gradient equal softmax_cross_entropy_with_logits(q, z)."""
    logits = tf.random.normal([3, 4, 11], seed=2) * 3.0
    targets = tf.constant([[1, 2, 3, 10], [4, 4, 0, 0], [0, 0, 0, 0]])
    mask = losses.target_mask(targets)
    weights = tf.random.uniform([3, 4], seed=3)  # a non-uniform upstream gradient

    def dense(z):
      q = tf.one_hot(targets, 11) * 0.8 + 0.2 / 11
      return tf.reduce_sum(tf.nn.softmax_cross_entropy_with_logits(q, z) * mask * weights)

    def sparse(z):
      return tf.reduce_sum(losses.smoothed_cross_entropy(z, targets, 0.2) * mask * weights)

    for function in (lambda f: f, tf.function):
      values, grads = [], []
      for loss_fn in (dense, sparse):
        with tf.GradientTape() as tape:
          tape.watch(logits)
          value = function(loss_fn)(logits)
        values.append(value)
        grads.append(tape.gradient(value, logits))
      self.assertAllClose(values[0], values[1], rtol=1e-5)
      self.assertAllClose(grads[0], grads[1], atol=1e-6)
      self.assertAllEqual(grads[1][2], tf.zeros([4, 11]))  # padding rows get no gradient
    total, count = losses.token_loss_sum(logits, targets, 0.2)
    dense_total, _ = losses.token_loss_sum(logits, targets, 0.2, smoothing_labels="dense")
    self.assertAllClose(total, tf.reduce_sum(
        tf.nn.softmax_cross_entropy_with_logits(tf.one_hot(targets, 11) * 0.8 + 0.2 / 11, logits)
        * mask), rtol=1e-5)
    self.assertAllClose(dense_total, total, rtol=1e-5)
    self.assertEqual(count, 6.0)
    with self.assertRaisesRegex(ValueError, "smoothing_labels='one_hot'"):
      losses.token_loss_sum(logits, targets, 0.2, smoothing_labels="one_hot")


if __name__ == "__main__":
  tf.test.main()
