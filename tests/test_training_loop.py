"""Trainer end to end in-process: BLEU rises, resume equals an uninterrupted run, NaN and
corrupt-checkpoint handling, TensorBoard contents, config presets."""

import dataclasses
import glob
import io
import os
import tempfile
import types
from unittest import mock

import keras
import numpy as np
import pytest
import tensorflow as tf

from nmt_tf import cpu
from nmt_tf.evaluation.alignment_plot import alignment_png
from nmt_tf.experiment.config import ConfigError, ExperimentConfig, ReinforceConfig, TrainConfig
from nmt_tf.models import Seq2Seq
from nmt_tf.models import losses, update
from nmt_tf.training import Trainer, TrainingError, hooks, objectives, train
from nmt_tf.training.schedules import WarmupSchedule
from nmt_tf.training.train_step import TrainStep
from nmt_tf.training.trainer import bf16_warning
from nmt_tf.training.validation import ValidationResult
from tests.model_fixtures import batch, tiny_config
from tests.run_fixtures import scalar, tensorboard_events
from tests.training_fixtures import nan_loss_at, sgd_update, tiny_train_config, train_until_killed


@pytest.mark.slow  # trains a tiny run
class TrainingTest(tf.test.TestCase):
  """One 200-step reference run shared by the tests below."""

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.root = tempfile.mkdtemp()
    config = tiny_train_config(steps=200, eval_every=50, checkpoint_every=20, seed=3)
    # With dropout, the resume test also checks that the masks' random streams are restored.
    cls.config = config.replace(model=config.model.replace(dropout=0.1))
    cls.run_dir = os.path.join(cls.root, "ref")
    cls.trainer = Trainer(cls.config, cls.run_dir, stream=io.StringIO())
    cls.summary = cls.trainer.train()

  def test_bleu_rises_and_best_kept(self):
    bleus = [scalar(v) for _, v in sorted(tensorboard_events(self.run_dir)["valid/bleu"],
                                           key=lambda x: x[0])]
    losses = [scalar(v) for _, v in sorted(tensorboard_events(self.run_dir)["valid/loss"],
                                            key=lambda x: x[0])]
    self.assertLen(bleus, 4)
    self.assertGreater(bleus[-1], bleus[0] + 3.0)
    self.assertLess(losses[-1], losses[0] - 0.3)
    self.assertAllClose(self.summary["best_bleu"], max(bleus))
    self.assertEqual(self.summary["steps"], 200)
    self.assertEndsWith(self.summary["checkpoint"], "ckpt-200")
    self.assertTrue(tf.io.gfile.exists(self.summary["best_checkpoint"] + ".index"))

  def test_validation_output_kept_per_validation(self):
    folder = os.path.join(self.run_dir, "validation")
    self.assertCountEqual(os.listdir(folder), [f"step_{s}.txt" for s in (50, 100, 150, 200)])
    for name in os.listdir(folder):
      with open(os.path.join(folder, name), encoding="utf-8") as f:
        self.assertLen(f.read().splitlines(), 16)  # one line per validation sentence
    self.assertIn("(length ratio ", self.trainer.stream.getvalue())

  def test_tensorboard_scalars_image_text(self):
    tags = tensorboard_events(self.run_dir)
    for tag in ("train/loss", "train/perplexity", "train/learning_rate", "train/grad_norm",
                "train/tokens_per_sec", "valid/loss", "valid/perplexity", "valid/bleu",
                "valid/length_ratio", "valid/samples", "valid/train_minutes", "config"):
      self.assertIn(tag, tags)
    ratios = [scalar(v) for _, v in tags["valid/length_ratio"]]
    self.assertLen(ratios, len(tags["valid/bleu"]))
    self.assertAllGreater(ratios, 0.0)
    self.assertLen(tags["train/loss"], 200 // 5)
    minutes = [scalar(v) for _, v in sorted(tags["valid/train_minutes"], key=lambda e: e[0])]
    self.assertLen(minutes, len(tags["valid/bleu"]))
    self.assertAllGreater(np.diff(minutes), 0.0)  # the budget clock at each validation
    self.assertLessEqual(minutes[-1], self.summary["train_seconds"] / 60.0)
    image = tags["valid/alignment/0"][0][1]
    png = tf.make_ndarray(image.tensor)[2]  # [width, height, png...]
    self.assertEqual(tf.io.decode_png(png).shape[-1], 3)
    self.assertTrue(any("hparams" in k for k in tags) or
                    any(v.metadata.plugin_data.plugin_name == "hparams"
                        for vs in tags.values() for _, v in vs))

  def test_resume_after_corrupt_checkpoint_gives_same_trajectory(self):
    run_dir = os.path.join(self.root, "resumed")
    # Same run (seed, data, schedule, dropout streams) cut at 60 steps: steps 1-60 equal the
    # reference's.
    config = self.config.replace(train=dataclasses.replace(self.config.train, steps=60,
                                                           eval_every=60))
    latest = train_until_killed(config, run_dir, 50, stream=io.StringIO())
    self.assertEndsWith(latest, "ckpt-40")  # steps 41-50 are lost, as on a kill
    data_file = glob.glob(os.path.join(run_dir, "checkpoints", "ckpt-40.data-*"))[0]
    with open(data_file, "r+b") as f:  # damage the newest checkpoint
      f.seek(os.path.getsize(data_file) // 2)
      f.write(b"\xff" * 64)
    stream = io.StringIO()
    resumed = train(config, run_dir, stream=stream)
    self.assertIn("ckpt-40 is corrupt or partial", stream.getvalue())
    self.assertIn("Resumed from", stream.getvalue())
    self.assertIn("at step 20", stream.getvalue())
    self.assertTrue(glob.glob(os.path.join(run_dir, "checkpoints", "corrupt", "ckpt-40.*")))
    self.assertEqual(resumed["steps"], 60)
    ref = dict((s, scalar(v)) for s, v in tensorboard_events(self.run_dir)["train/loss"])
    got = dict((s, scalar(v)) for s, v in tensorboard_events(run_dir)["train/loss"])
    for step in (55, 60):
      self.assertAllClose(got[step], ref[step], rtol=1e-3, msg=f"step {step}")

  def test_nan_loss_stops_and_keeps_checkpoint(self):
    run_dir = os.path.join(self.root, "nan")
    with self.assertRaisesRegex(TrainingError, r"Non-finite loss \(nan\) at step 25.*ckpt-20"):
      with nan_loss_at(25):
        train(self.config, run_dir, stream=io.StringIO())
    self.assertEndsWith(tf.train.latest_checkpoint(os.path.join(run_dir, "checkpoints")),
                        "ckpt-20")

  def test_train_step_not_retraced_per_bucket(self):
    self.assertLessEqual(self.trainer.train_step.function.experimental_get_tracing_count(), 3)


@pytest.mark.slow  # trains
class HardAttentionTest(tf.test.TestCase):

  def test_reinforce_baseline_trains_and_is_checkpointed(self):
    config = tiny_train_config(steps=10, eval_every=10, checkpoint_every=10)
    config = config.replace(model=dataclasses.replace(config.model, attention_mode="hard"))
    run_dir = tempfile.mkdtemp()
    trainer = Trainer(config, run_dir, stream=io.StringIO())
    summary = trainer.train()
    self.assertEqual(summary["steps"], 10)
    baseline = float(trainer.objective.baseline.numpy())
    self.assertLess(baseline, 0.0)  # a moving average of log-likelihoods
    reader = tf.train.load_checkpoint(summary["checkpoint"])
    names = [n for n in reader.get_variable_to_shape_map() if "reinforce_baseline/" in n]
    self.assertTrue(names)
    self.assertAllClose(reader.get_tensor(names[0]), baseline)
    # The position sampler's stream is checkpointed (no dropout here: it is the only one).
    rng = [n for n in reader.get_variable_to_shape_map() if n.startswith("rng/")]
    self.assertLen(rng, 1)
    # The estimate's diagnostics, every log_every (5) steps.
    events = tensorboard_events(run_dir)
    for name in ("baseline", "advantage_mean", "advantage_std", "attention_entropy",
                 "grad_norm_likelihood", "grad_norm_reinforce", "grad_norm_entropy",
                 "sampled_share", "baseline_error"):
      self.assertEqual([step for step, _ in events[f"reinforce/{name}"]], [5, 10], name)
    entropy = [scalar(v) for _, v in events["reinforce/attention_entropy"]]
    self.assertTrue(all(0.0 < e <= np.log(6.0) + 1e-5 for e in entropy), entropy)

  def test_learned_baseline_and_reward_scale_train_and_resume(self):
    """The learned baseline's head, its optimizer and sigma^2 are checkpointed and restored:
    a run resumed at step 10 ends as the uninterrupted one."""
    config = tiny_train_config(steps=20, eval_every=20, checkpoint_every=10)
    config = config.replace(
        model=dataclasses.replace(config.model, attention_mode="hard",
                                  hard_expectation_rate=0.5, hard_expectation_draw="batch"),
        reinforce=dataclasses.replace(config.reinforce, baseline="learned", normalize=True,
                                      reward="word", start=3))
    whole = Trainer(config, tempfile.mkdtemp(), stream=io.StringIO())
    whole.train()
    run_dir = tempfile.mkdtemp()
    first = Trainer(config.replace(train=dataclasses.replace(config.train, steps=10)), run_dir,
                    stream=io.StringIO())
    first.train()
    reader = tf.train.load_checkpoint(tf.train.latest_checkpoint(
        os.path.join(run_dir, "checkpoints")))
    names = reader.get_variable_to_shape_map()
    for prefix in ("reinforce_baseline_head/", "reinforce_baseline_optimizer/",
                   "reward_variance/"):
      self.assertTrue(any(n.startswith(prefix) for n in names), prefix)
    resumed = Trainer(config, run_dir, stream=io.StringIO())
    resumed.train()
    whole, resumed = whole.objective, resumed.objective
    self.assertGreater(float(whole.reward_variance.numpy()), 0.0)
    self.assertAllClose(resumed.reward_variance.numpy(), whole.reward_variance.numpy(), rtol=1e-4)
    for got, want in zip(resumed.head.weights, whole.head.weights):
      self.assertAllClose(got, want, rtol=1e-3, atol=1e-5)
    self.assertNotAllClose(whole.head.dense.kernel, tf.zeros_like(whole.head.dense.kernel))


class TrainStepUpdateTest(tf.test.TestCase):
  """One TrainStep update is its equations: g = d(mean token NLL)/dw over the batch's real
  tokens, g <- g * min(1, clip_norm / |g|) (Pascanu et al. 2013), then the optimizer's step:
  plain SGD at rate 1 here, so every weight moves by exactly -g."""

  def check_update(self, clip_norm):
    model, b, loss, norm, expected = sgd_update(clip_norm)
    optimizer = keras.optimizers.SGD(learning_rate=1.0)
    optimizer.build(model.trainable_variables)
    step = TrainStep(model, optimizer, tf.distribute.get_strategy(),
                     TrainConfig(clip_norm=clip_norm, label_smoothing=0.0))
    out = step(b)
    self.assertAllClose(float(out["loss"]), loss, rtol=1e-5)
    self.assertAllClose(float(out["grad_norm"]), norm, rtol=1e-4)
    for variable, want in zip(model.trainable_variables, expected):
      self.assertAllClose(variable.numpy(), want, atol=1e-5, msg=variable.path)
    return norm

  def test_a_clipped_update(self):
    norm = self.check_update(clip_norm=0.05)
    self.assertGreater(norm, 0.05)  # the clip was active

  def test_an_unclipped_update(self):
    self.assertLess(self.check_update(clip_norm=1e6), 1e6)
    self.check_update(clip_norm=0.0)  # off


class _RowModel:
  """Stands in for a hard-attention model: row r of the (repeated) batch gets the logits
  w * C[r], the sampled log alpha u * D[r] and the attention softmax(u * E[r]), so that each
  of a sentence's samples has its own reward and the gradient of the step has a closed form."""

  def __init__(self, c, d, e):
    self.c, self.d, self.e = tf.constant(c), tf.constant(d), tf.constant(e)
    self.w, self.u = tf.Variable(1.0), tf.Variable(0.5)
    self.trainable_variables = [self.w, self.u]

  def __call__(self, inputs, training=False, samples=1):
    return {"logits": self.w * self.c, "attention_log_prob": self.u * self.d,
            "attention": tf.nn.softmax(self.u * self.e)}


def _entropy_sum(u, e, mask):
  """numpy: mean over rows of sum_t H(softmax(u * E[r, t]))."""
  logits = u * e
  log_alpha = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
  return np.mean((-(np.exp(log_alpha) * log_alpha).sum(-1) * mask).sum(-1))


class ReinforceSamplesTest(tf.test.TestCase):
  """reinforce.samples = N: each sentence is decoded N times, and sample k's baseline is
  the mean reward of the sentence's other samples (leave-one-out)."""

  def test_leave_one_out_baseline(self):
    reward = tf.constant([1.0, 2.0, 6.0, -3.0, -3.0, 0.0])
    self.assertAllClose(losses.leave_one_out_baseline(reward, 3),
                        [4.0, 3.5, 1.5, -1.5, -1.5, -3.0])

  def test_reward_to_go_and_attention_entropy(self):
    logits = tf.math.log(tf.constant([[[0.5, 0.5], [0.25, 0.75], [0.1, 0.9]]]))
    targets = tf.constant([[1, 1, 0]])  # the last step is padding
    self.assertAllClose(losses.reward_to_go(logits, targets),
                        [[np.log(0.5 * 0.75), np.log(0.75), 0.0]])
    alpha = tf.constant([[[0.5, 0.5, 0.0], [1.0, 0.0, 0.0], [0.2, 0.8, 0.0]]])
    self.assertAllClose(losses.attention_entropy(alpha, targets), [np.log(2.0)])

  def _step(self, reward_kind, entropy_weight):
    """(loss_sum, reward_sum, grads) of a step and their numpy values."""
    samples, sentences, length, vocab, cells = 3, 2, 4, 5, 6
    rng = np.random.default_rng(0)
    c = rng.normal(size=[sentences * samples, length, vocab]).astype(np.float32)
    d = rng.normal(size=[sentences * samples, length]).astype(np.float32)
    e = rng.normal(size=[sentences * samples, length, cells]).astype(np.float32)
    target = np.array([[3, 4, 2, 0], [1, 2, 4, 2]], np.int32)  # [sentences, length], PAD = 0
    batch = {"source": tf.zeros([sentences, 3], tf.int32), "target_in": tf.constant(target),
             "target_out": tf.constant(target)}
    objective = objectives.Reinforce(ReinforceConfig(samples=samples, weight=0.7,
                                                     reward=reward_kind,
                                                     entropy_weight=entropy_weight))
    objective.baseline.assign(-100.0)
    objective.baseline_steps.assign(5.0)
    tokens = float((target != 0).sum())
    got = update.compute_gradients(_RowModel(c, d, e), None, objective, batch, tokens,
                                   float(sentences), objective.step_inputs())
    # numpy: per-row log-likelihood of the repeated targets, then the terms' gradients.
    rows = np.repeat(target, samples, axis=0)  # [rows, length]
    mask = (rows != 0).astype(np.float64)
    log_p = c - np.log(np.exp(c).sum(-1, keepdims=True))  # log softmax at w = 1
    picked = np.take_along_axis(log_p, rows[..., None], -1)[..., 0] * mask  # [rows, length]
    reward = picked.sum(-1)  # R [rows]
    step_reward = reward[:, None] if reward_kind == "sentence" else \
        np.cumsum(picked[:, ::-1], -1)[:, ::-1]  # [rows, 1] or [rows, length]
    grouped = step_reward.reshape(sentences, samples, -1)
    baseline = ((grouped.sum(1, keepdims=True) - grouped) / (samples - 1)).reshape(
        step_reward.shape)
    advantage = step_reward - baseline  # the -100 moving average is not used
    # d/du of -0.7 * mean_rows(sum_t A_rt u D[r, t]) - lambda_e * mean_rows(sum_t H_rt)
    expected_u = -0.7 * np.mean((advantage * d * mask).sum(-1))
    delta = 1e-3
    expected_u -= entropy_weight * (_entropy_sum(0.5 + delta, e, mask) -
                                    _entropy_sum(0.5 - delta, e, mask)) / (2 * delta)
    # d/dw of the mean token loss: -sum_r sum_t (C[r,t,y] - E_softmax[C[r,t]]) / N / tokens
    softmax = np.exp(log_p)
    target_c = np.take_along_axis(c, rows[..., None], -1)[..., 0]
    expected_w = -(((target_c - (softmax * c).sum(-1)) * mask).sum()) / samples / tokens
    return got, (-reward.sum() / samples, reward.sum() / samples, [expected_w, expected_u])

  def test_step_is_the_mean_over_samples_with_their_own_baselines(self):
    for reward_kind, entropy_weight in (("sentence", 0.0), ("to_go", 0.0), ("to_go", 0.3)):
      (loss_sum, stats, grads, _, _), expected = self._step(reward_kind, entropy_weight)
      reward_sum = stats["reward_sum"]
      self.assertAllClose(loss_sum, expected[0], rtol=1e-5)
      self.assertAllClose(reward_sum, expected[1], rtol=1e-5)
      self.assertAllClose(grads[0], expected[2][0], rtol=1e-4)
      self.assertAllClose(grads[1], expected[2][1], rtol=1e-3)

  def test_samples_need_hard_attention(self):
    base = {"model": {"attention_mode": "hard"}, "reinforce": {"samples": 4}}
    ExperimentConfig.from_dict(base)
    with self.assertRaisesRegex(ConfigError, "reinforce.samples=4 with model.attention_mode"):
      ExperimentConfig.from_dict({**base, "model": {"attention_mode": "soft"}})
    with self.assertRaisesRegex(ConfigError, "reinforce.entropy_weight=0.1 with model"):
      ExperimentConfig.from_dict({"reinforce": {"entropy_weight": 0.1}})
    with self.assertRaisesRegex(ConfigError, "reinforce.reward='all'; expected one of"):
      ExperimentConfig.from_dict({"model": {"attention_mode": "hard"},
                                  "reinforce": {"reward": "all"}})
    with self.assertRaisesRegex(ConfigError, "reinforce.samples=0; expected a positive"):
      ExperimentConfig.from_dict({"reinforce": {"samples": 0}})


@pytest.mark.slow  # trains under each precision and stop rule
class PrecisionAndStoppingTest(tf.test.TestCase):
  """The options the reference run does not use: bf16, label smoothing, warm-up, patience."""

  def test_mixed_bfloat16_with_label_smoothing_and_warmup_trains(self):
    config = tiny_train_config(steps=30, eval_every=30, checkpoint_every=30,
                               precision="mixed_bfloat16", label_smoothing=0.1,
                               schedule="inverse_sqrt", warmup_steps=5)
    run_dir = tempfile.mkdtemp()
    trainer = Trainer(config, run_dir, stream=io.StringIO())
    summary = trainer.train()
    self.assertEqual(summary["steps"], 30)
    self.assertEqual(trainer.model.compute_dtype, "bfloat16")
    self.assertTrue(all(v.dtype == tf.float32 for v in trainer.model.trainable_variables))
    losses = [scalar(v) for _, v in sorted(tensorboard_events(run_dir)["train/loss"], key=lambda x: x[0])]
    self.assertTrue(np.all(np.isfinite(losses)))
    self.assertLess(losses[-1], losses[0])
    rates = [scalar(v) for _, v in sorted(tensorboard_events(run_dir)["train/learning_rate"],
                                           key=lambda x: x[0])]
    self.assertLess(rates[-1], rates[1])  # inverse square-root decay after the warm-up

  def test_float32_bf16_matmul_trains_where_auto_picks_it(self):
    config = tiny_train_config(steps=30, eval_every=30, checkpoint_every=30, precision="auto")
    run_dir = tempfile.mkdtemp()
    stream = io.StringIO()
    with mock.patch.object(cpu, "cpu_info", return_value={"model_name": "AMD EPYC",
                                                          "flags": {"avx512_bf16"}}):
      trainer = Trainer(config, run_dir, stream=stream)
      summary = trainer.train()
    self.assertIn("Precision: float32_bf16_matmul (auto: this CPU has AVX512_BF16 or "
                  "AMX-BF16).", stream.getvalue())
    self.assertEqual(summary["precision"], "float32_bf16_matmul")
    self.assertEqual(trainer.model.compute_dtype, "float32")
    self.assertEqual(trainer.model.matmul_dtype, "bfloat16")
    losses = [scalar(v) for _, v in sorted(tensorboard_events(run_dir)["train/loss"], key=lambda x: x[0])]
    self.assertLess(losses[-1], losses[0])

  def test_patience_stops_early(self):
    # A learning rate too small to change BLEU: every validation after the first is no gain.
    config = tiny_train_config(steps=100, eval_every=5, checkpoint_every=5, patience=2,
                               learning_rate=1e-9)
    summary = Trainer(config, tempfile.mkdtemp(), stream=io.StringIO()).train()
    self.assertEqual(summary["stopped"], "early_stopping")
    self.assertEqual(summary["steps"], 15)

  def test_repeated_bleu_is_no_gain(self):
    # 0.30285582748 is not a float32: compared with its stored float32 rounding it looked
    # larger, so every validation was a "new best" and patience never ran out.
    trainer = Trainer(tiny_train_config(), tempfile.mkdtemp(), stream=io.StringIO())
    result = ValidationResult(loss=4.87, perplexity=130.6, bleu=0.30285582748240436,
                              samples=[], alignments=[])
    validator = types.SimpleNamespace(run=lambda: result)
    summaries = types.SimpleNamespace(validation=lambda result, step: None)
    messages = []
    progress = types.SimpleNamespace(message=messages.append)
    validation = hooks.Validation(validator, trainer.config.train, trainer.state, trainer.keeper,
                                  trainer.model, trainer.optimizer)
    for step in (5, 10, 15):
      validation.validate(summaries, progress, step)
    self.assertEqual(int(trainer.state["bad_evals"].numpy()), 2)
    self.assertIn("(new best)", messages[0])
    self.assertNotIn("new best", messages[1] + messages[2])
    self.assertEndsWith(trainer.keeper.best, "-5")

  def test_time_budget_validates_saves_and_counts_across_resumes(self):
    # 0.5 s of budget: the first step (tracing) alone spends it.
    config = tiny_train_config(steps=100, eval_every=50, checkpoint_every=50,
                               max_minutes=0.5 / 60)
    run_dir = tempfile.mkdtemp()
    summary = Trainer(config, run_dir, stream=io.StringIO()).train()
    self.assertEqual(summary["stopped"], "time_budget")
    self.assertLess(summary["steps"], 100)
    self.assertIsNotNone(summary["last_validation"])  # validated before stopping
    self.assertGreaterEqual(summary["train_seconds"], 0.5)
    self.assertEndsWith(summary["checkpoint"], f"-{summary['steps']}")
    # A resumed run starts with the spent budget: it does not train.
    stream = io.StringIO()
    again = Trainer(config, run_dir, stream=stream).train()
    self.assertIn("Resumed from", stream.getvalue())
    self.assertNotIn("predates", stream.getvalue())  # nothing is missing from new checkpoints
    self.assertEqual(again["stopped"], "time_budget")
    self.assertEqual(again["steps"], summary["steps"])
    self.assertEqual(again["best_checkpoint"], summary["best_checkpoint"])
    # The CPU clock is saved with the checkpoint and carries over too.
    saved = tf.train.load_checkpoint(summary["checkpoint"]).get_tensor(
        "cpu_seconds/.ATTRIBUTES/VARIABLE_VALUE")
    self.assertBetween(saved, 0.01, summary["cpu_seconds"])
    self.assertGreaterEqual(again["cpu_seconds"], saved)
    # A larger budget lets the same run go on to its step count.
    longer = config.replace(train=dataclasses.replace(config.train, max_minutes=0.0, steps=
                                                      summary["steps"] + 3))
    self.assertEqual(Trainer(longer, run_dir, stream=io.StringIO()).train()["stopped"],
                     "completed")


@pytest.mark.slow  # trains and validates
class BeamAlignmentImagesTest(tf.test.TestCase):

  def test_validation_draws_beam_search_attention_too(self):
    config = tiny_train_config(steps=5, eval_every=5, alignment_images=1)
    config = config.replace(decode=dataclasses.replace(config.decode, beam_size=2))
    run_dir = tempfile.mkdtemp()
    train(config, run_dir, stream=io.StringIO())
    tags = tensorboard_events(run_dir)
    self.assertLen(tags["valid/alignment/0"], 1)
    self.assertLen(tags["valid/alignment_beam/0"], 1)
    self.assertNotIn("valid/alignment_beam/1", tags)
    description = tags["valid/alignment_beam/0"][0][1].metadata.summary_description
    self.assertIn("valid sentence 0, beam 2", description)
    png = tf.make_ndarray(tags["valid/alignment_beam/0"][0][1].tensor)[2]
    self.assertEqual(tf.io.decode_png(png).shape[-1], 3)


class PiecesTest(tf.test.TestCase):

  def test_bf16_warning_on_cpus_without_bf16_instructions(self):
    zen3 = {"model_name": "AMD EPYC", "family": "25", "flags": {"avx2"}}
    zen5 = {"model_name": "AMD EPYC", "family": "26", "flags": {"avx512f", "avx512_bf16"}}
    for precision in ("float32_bf16_matmul", "mixed_bfloat16"):
      warning = bf16_warning(precision, zen3, gpus=[])
      self.assertIn(repr(precision), warning)
      self.assertIn("--config.train.precision=float32 on this machine, unless the run is to "
                    "be compared with runs trained in bfloat16 products.", warning)
      self.assertIsNone(bf16_warning(precision, zen5, gpus=[]))
      self.assertIsNone(bf16_warning(precision, {}, gpus=[]))  # unknown CPU
      self.assertIsNone(bf16_warning(precision, zen3, gpus=["GPU:0"]))
    for precision in ("float32", "mixed_float16"):
      self.assertIsNone(bf16_warning(precision, zen3, gpus=[]))

  def test_auto_precision_is_float32_on_a_cpu_that_emulates_bfloat16(self):
    stream = io.StringIO()
    with mock.patch.object(cpu, "cpu_info", return_value={"model_name": "AMD EPYC",
                                                          "flags": {"avx2"}}):
      trainer = Trainer(tiny_train_config(precision="auto"), tempfile.mkdtemp(), stream=stream)
    self.assertEqual(trainer.precision, "float32")
    self.assertIsNone(trainer.model.matmul_dtype)
    self.assertIn("Precision: float32 (auto: this CPU has no AVX512_BF16 or AMX-BF16).",
                  stream.getvalue())
    self.assertEqual(trainer.config.train.precision, "auto")  # config.json keeps auto

  def test_schedules(self):
    warm = WarmupSchedule(1.0, "inverse_sqrt", warmup_steps=4)
    self.assertAllClose([float(warm(s)) for s in (0, 3, 15)], [0.25, 1.0, 0.5])
    self.assertAllClose(float(WarmupSchedule(2.0, "constant")(100)), 2.0)
    expo = WarmupSchedule(1.0, "exponential", decay_rate=0.5, decay_steps=10)
    self.assertAllClose(float(expo(9)), 0.5)
    with self.assertRaisesRegex(ValueError, "Received schedule='cosine'"):
      WarmupSchedule(1.0, "cosine")

  def test_alignment_png(self):
    png = alignment_png(np.eye(3, 4), ["a", "b", "c", "</s>"], [b"x", b"y", b"</s>"], title="t")
    self.assertEqual(png[:8], b"\x89PNG\r\n\x1a\n")
    with self.assertRaisesRegex(ValueError, "expected \\[tgt_len, src_len\\]"):
      alignment_png(np.zeros([3]), ["a"], ["b"])
