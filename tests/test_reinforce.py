"""The REINFORCE estimate of hard attention (training/reinforce.py) against numpy: the rewards,
the learned baseline, the normalization, the expectation drawn per batch, the decision states
and the diagnostics of the train step."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from nmt_tf.experiment.config import ConfigError, ExperimentConfig, ReinforceConfig, TrainConfig
from nmt_tf.models import build_model, update
from nmt_tf.training import objectives, reinforce
from nmt_tf.training.train_step import TrainStep
from nmt_tf.training.trainer import seed_generator_states
from tests.model_fixtures import batch, tiny_config


def _log_softmax(x):
  return x - np.log(np.exp(x).sum(-1, keepdims=True))


class _Rows:
  """Model outputs with a closed form: row r has logits C[r], sampled log alpha u * D[r],
  attention softmax(E[r]) and decision states F[r]."""

  def __init__(self, seed=0, rows=4, length=5, vocab=6, cells=3, units=2):
    rng = np.random.default_rng(seed)
    self.c = rng.normal(size=[rows, length, vocab]).astype(np.float32)
    self.d = rng.normal(size=[rows, length]).astype(np.float32)
    self.e = rng.normal(size=[rows, length, cells]).astype(np.float32)
    self.f = rng.normal(size=[rows, length, units]).astype(np.float32)
    self.targets = np.array([[3, 4, 2, 5, 0], [1, 2, 0, 0, 0], [5, 5, 1, 2, 3], [2, 3, 4, 0, 0]],
                            np.int32)[:rows]
    self.mask = (self.targets != 0).astype(np.float64)
    self.u = tf.Variable(0.5)

  def outputs(self, sampled=None):
    out = {"logits": tf.constant(self.c), "attention_log_prob": self.u * self.d,
           "attention": tf.nn.softmax(tf.constant(self.e)), "decision_state": tf.constant(self.f)}
    if sampled is not None:
      out["attention_sampled"] = tf.constant(sampled, tf.float32)
    return out

  def log_p(self):
    """log p(y_t) [rows, length], 0 at padding."""
    picked = np.take_along_axis(_log_softmax(self.c.astype(np.float64)),
                                self.targets[..., None], -1)[..., 0]
    return picked * self.mask


class RewardTest(tf.test.TestCase):

  def test_each_reward_against_numpy(self):
    rows = _Rows()
    log_p = rows.log_p()
    sentence = log_p.sum(-1)
    words = rows.mask.sum(-1)
    expected = {
        "sentence": (sentence, sentence),
        "word_mean": (sentence / words, sentence / words),
        "to_go": (np.cumsum(log_p[:, ::-1], -1)[:, ::-1], sentence),
        "word": (log_p, sentence / words),
    }
    for kind, (reward, statistic) in expected.items():
      got_reward, got_statistic = reinforce.rewards(kind, tf.constant(rows.c),
                                                    tf.constant(rows.targets))
      self.assertAllClose(got_reward, reward, rtol=1e-5, msg=kind)
      self.assertAllClose(got_statistic, statistic, rtol=1e-5, msg=kind)


class TermsTest(tf.test.TestCase):

  def _terms(self, rows, sampled=None, scale=1.0, **train):
    config = ReinforceConfig(weight=0.7, **train)
    head = None
    if config.baseline_kind() == "learned":
      head = reinforce.LearnedBaseline()
      head(tf.zeros([1, 1, rows.f.shape[-1]]))
      head.dense.kernel.assign([[0.3], [-0.2]])
      head.dense.bias.assign([-1.5])
    with tf.GradientTape(persistent=True) as tape:
      parts, stats = reinforce.terms(config, rows.outputs(sampled), tf.constant(rows.targets),
                                     tf.constant(-4.0), tf.constant(scale), 1, head)
    return parts, stats, head, tape

  def test_learned_baseline_and_its_fit(self):
    """b_t = w^T s_{t-1} + b_0; A = R_t - b_t; the fit is the mean of (R_t - b_t)^2 over the
    sampled real steps and reaches only the head; the term reaches only the model."""
    rows = _Rows()
    sampled = [1.0, 0.0, 1.0, 1.0]
    parts, stats, head, tape = self._terms(rows, sampled, reward="to_go",
                                           baseline="learned")
    log_p = rows.log_p()
    reward = np.cumsum(log_p[:, ::-1], -1)[:, ::-1]  # R_t
    b = rows.f @ np.array([0.3, -0.2]) - 1.5  # [rows, length]
    advantage = reward - b
    expected = -0.7 * np.mean((advantage * 0.5 * rows.d * rows.mask).sum(-1))
    self.assertAllClose(parts["reinforce"], expected, rtol=1e-5)
    decisions = rows.mask * np.array(sampled)[:, None]
    fit = (decisions * (reward - b) ** 2).sum() / decisions.sum()
    self.assertAllClose(parts["baseline_fit"], fit, rtol=1e-5)
    self.assertAllClose(stats["decisions"], decisions.sum())
    self.assertAllClose(stats["advantage_sum"], (decisions * advantage).sum(), rtol=1e-5)
    self.assertAllClose(stats["raw_sq_sum"], (decisions * advantage ** 2).sum(), rtol=1e-5)
    head_vars = head.trainable_variables
    self.assertTrue(all(g is None for g in tape.gradient(parts["reinforce"], head_vars)))
    self.assertIsNone(tape.gradient(parts["baseline_fit"], rows.u))
    # d fit / d b_0 = -2 mean (R - b) over the decisions.
    self.assertAllClose(tape.gradient(parts["baseline_fit"], head.dense.bias),
                        [-2 * (decisions * (reward - b)).sum() / decisions.sum()], rtol=1e-4)

  def test_normalized_advantage_and_the_moving_average(self):
    """A = (R - b) / scale, b the moving average, with Xu et al.'s per-word reward."""
    rows = _Rows(seed=1)
    parts, stats, _, _ = self._terms(rows, scale=2.5, reward="word_mean",
                                     normalize=True)
    log_p = rows.log_p()
    reward = log_p.sum(-1) / rows.mask.sum(-1)
    advantage = (reward - (-4.0))[:, None] / 2.5
    expected = -0.7 * np.mean((advantage * 0.5 * rows.d * rows.mask).sum(-1))
    self.assertAllClose(parts["reinforce"], expected, rtol=1e-5)
    self.assertAllClose(stats["advantage_sq_sum"], (rows.mask * advantage ** 2).sum(), rtol=1e-5)
    self.assertAllClose(stats["raw_sq_sum"], (rows.mask * (advantage * 2.5) ** 2).sum(),
                        rtol=1e-5)
    self.assertAllClose(stats["reward_sum"], reward.sum(), rtol=1e-5)
    entropy = -(np.exp(_log_softmax(rows.e)) * _log_softmax(rows.e)).sum(-1)
    self.assertAllClose(stats["entropy_sum"], (entropy * rows.mask).sum(), rtol=1e-5)

  def test_config_checks(self):
    hard = {"model": {"attention_mode": "hard"}}
    ExperimentConfig.from_dict({**hard, "reinforce": {"baseline": "learned",
                                                      "normalize": True}})
    with self.assertRaisesRegex(ConfigError, "reinforce.baseline='leave_one_out' with "
                                "reinforce.samples=1"):
      ExperimentConfig.from_dict({**hard, "reinforce": {"baseline": "leave_one_out"}})
    with self.assertRaisesRegex(ConfigError, "reinforce.baseline='mean'; expected one of"):
      ExperimentConfig.from_dict({**hard, "reinforce": {"baseline": "mean"}})
    with self.assertRaisesRegex(ConfigError, "reinforce.normalize=True with model"):
      ExperimentConfig.from_dict({"reinforce": {"normalize": True}})
    with self.assertRaisesRegex(ConfigError, "hard_expectation_draw='step'; expected one of"):
      ExperimentConfig.from_dict({"model": {"attention_mode": "hard",
                                            "hard_expectation_draw": "step"}})
    self.assertEqual(ReinforceConfig(samples=3).baseline_kind(), "leave_one_out")
    self.assertEqual(ReinforceConfig().baseline_kind(), "moving_average")


class HardModelTest(tf.test.TestCase):

  def test_decision_states_precede_the_decisions(self):
    """s_{t-1} for the cgru and rnnsearch (s_0 first), h~_{t-1} for luong (0 first): the state
    at step t does not change when the decision at step t does."""
    data = batch()
    for decoder in ("cgru", "rnnsearch", "luong"):
      model = build_model(tiny_config(decoder=decoder, attention_mode="hard"))
      inputs = {"source": data["source"], "target_in": data["target_in"]}
      keras.utils.set_random_seed(1)
      first = model(inputs, training=True)
      context = model.encode(data["source"])
      initial = model.initial_state(context, 4)
      start = initial["h_tilde"] if decoder == "luong" else initial["s"]
      self.assertAllClose(first["decision_state"][:, 0], start, atol=1e-6, msg=decoder)
      self.assertEqual(first["attention_sampled"].shape, (3,))
      # Another seed draws other positions: the states before the first decision that differs
      # are equal, the decision's own step included.
      keras.utils.set_random_seed(2)
      second = model(inputs, training=True)
      changed = np.any(first["attention_log_prob"].numpy() != second["attention_log_prob"].numpy(),
                       axis=0)  # [tgt_len]
      step = int(np.argmax(changed))
      self.assertTrue(changed.any(), decoder)
      self.assertAllClose(first["decision_state"][:, :step + 1],
                          second["decision_state"][:, :step + 1], atol=1e-6, msg=decoder)
      self.assertNotIn("decision_state", model(inputs, training=False))

  def test_one_expectation_draw_per_batch(self):
    """hard_expectation_draw='batch' (Xu et al.'s code): every sentence of a batch takes the
    expected context, or every one samples."""
    data = batch()
    inputs = {"source": data["source"], "target_in": data["target_in"]}
    model = build_model(tiny_config(attention_mode="hard", hard_expectation_rate=0.5,
                                    hard_expectation_draw="batch"))
    keras.utils.set_random_seed(0)
    seen = set()
    for _ in range(12):
      sampled = model(inputs, training=True)["attention_sampled"].numpy()
      self.assertEqual(len(set(sampled.tolist())), 1)
      seen.add(float(sampled[0]))
    self.assertEqual(seen, {0.0, 1.0})


@pytest.mark.slow  # traces the train step twice
class DiagnosticsTest(tf.test.TestCase):

  def test_diagnosing_step_measures_each_term_and_updates_alike(self):
    """The gradient norm of each term on the attention's weights, against the tape's; the
    update equals that of a step without the diagnostics."""
    data = batch()
    config = ReinforceConfig(weight=0.5, entropy_weight=0.1, reward="word", baseline="learned")
    model = build_model(tiny_config(attention_mode="hard", hard_expectation_rate=0.5))
    model.build_with_dummy_batch()
    objective = objectives.Reinforce(config, state_units=model.model_config.decoder_units,
                                     learning_rate=0.01)
    objective.baseline.assign(-2.0)
    objective.baseline_steps.assign(1.0)
    optimizer = keras.optimizers.Adam(0.01)
    tokens = float(np.sum(data["target_out"].numpy() != 0))
    streams = seed_generator_states(model)  # the same draws for both
    start = [v.numpy() for v in streams]
    results = {}
    for diagnose in (False, True):
      for variable, value in zip(streams, start):
        variable.assign(value)
      results[diagnose] = update.compute_gradients(
          model, optimizer, objective, data, tokens, 3.0, objective.step_inputs(),
          term_variables=reinforce.attention_variables(model) if diagnose else None)
    for plain, diagnosed in zip(results[False][2] + results[False][3],
                                results[True][2] + results[True][3]):
      self.assertAllClose(plain, diagnosed, atol=1e-6)
    term_grads = results[True][4]
    self.assertEqual(set(term_grads), {"likelihood", "reinforce", "entropy"})
    attention = reinforce.attention_variables(model)
    self.assertTrue(attention)
    # The three gradients add up to the model's gradient on the attention's variables.
    index = {id(v): i for i, v in enumerate(model.trainable_variables)}
    for k, variable in enumerate(attention):
      total = sum(term_grads[key][k] for key in term_grads)
      self.assertAllClose(total, results[True][2][index[id(variable)]], atol=1e-5)
    self.assertGreater(float(tf.linalg.global_norm(term_grads["reinforce"])), 0.0)
    # Through the distributed step: the norms come out with the update's scalars.
    step = TrainStep(model, optimizer, tf.distribute.get_strategy(), TrainConfig(), objective)
    out = step(data, diagnose=True)
    for key in ("grad_norm_likelihood", "grad_norm_reinforce", "grad_norm_entropy",
                "decisions", "advantage_sum", "entropy_sum", "baseline"):
      self.assertIn(key, out)
    scalars = reinforce.summary(out)
    self.assertAllClose(scalars["attention_entropy"],
                        float(out["entropy_sum"]) / float(out["steps"]), rtol=1e-6)


@pytest.mark.slow  # four train steps
class ReinforceStartTest(tf.test.TestCase):

  def test_expected_context_until_the_first_sampling_step(self):
    """reinforce.start = 2: steps 0 and 1 take the expected context for every sentence
    (no decision, no REINFORCE term), then every sentence samples (hard_expectation_rate 0)."""
    data = batch()
    model = build_model(tiny_config(attention_mode="hard"))
    model.build_with_dummy_batch()
    objective = objectives.Reinforce(
        ReinforceConfig(start=2), expectation_rate=model.model_config.hard_expectation_rate)
    step = TrainStep(model, keras.optimizers.Adam(0.01), tf.distribute.get_strategy(),
                     TrainConfig(), objective)
    decisions = [float(step(data)["decisions"]) for _ in range(4)]
    real = float(np.sum(data["target_out"].numpy() != 0))
    self.assertEqual(decisions, [0.0, 0.0, real, real])
