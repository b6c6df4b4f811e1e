"""Searches on real (tiny, random) models: exhaustive optimum, agreement with
teacher-forced scoring for every decoder family, XLA compilation without retracing."""

import functools
import itertools
from unittest import mock

import keras
import numpy as np
import pytest
import tensorflow as tf

from nmt_tf import cpu
from nmt_tf import decoding
from nmt_tf.experiment import DecodeConfig
from nmt_tf.inference import CompiledTranslator, ModelEnsemble, Translator, token_log_probs
from nmt_tf.models import Seq2Seq
from nmt_tf.special_tokens import BOS_ID, EOS_ID, PAD_ID
from tests.model_fixtures import tiny_config

SOURCES = tf.constant([[5, 6, 7, 8, EOS_ID], [9, 10, EOS_ID, 0, 0], [4, EOS_ID, 0, 0, 0]],
                      tf.int32)


def make_model(seed=0, **overrides):
  keras.utils.set_random_seed(seed)
  model = Seq2Seq(tiny_config(**overrides))
  model.build_with_dummy_batch()
  return model


def teacher_forced(model, source, sequences):
  """log P(y | x) of each sequence (EOS included) with one forward pass.

  Args:
    source: int32 [1, src_len] or [n, src_len].
    sequences: list of id lists, each ending with EOS.
  """
  length = max(len(s) for s in sequences)
  target_out = np.zeros([len(sequences), length], np.int32)
  target_in = np.zeros([len(sequences), length], np.int32)
  for r, seq in enumerate(sequences):
    target_out[r, :len(seq)] = seq
    target_in[r, :len(seq)] = [BOS_ID] + list(seq[:-1])
  if source.shape[0] == 1:
    source = tf.repeat(source, len(sequences), axis=0)
  return tf.reduce_sum(token_log_probs(model, source, tf.constant(target_in),
                                       tf.constant(target_out)), axis=1).numpy()


def translator_for(model, **decode):
  return Translator(model, None, None, DecodeConfig(**decode))


class GenerateTest(tf.test.TestCase):
  """`Seq2Seq.generate`, the Keras model's own search, gives what the Translator's search
  (`nmt-tf translate`, the exports) gives for the same options, eagerly and traced."""

  def check_as_the_translator(self, beam_size, nbest, traced=False):
    model = make_model(seed=4, decoder="cgru")
    options = dict(max_length=6, length_penalty=0.6, max_length_a=1.5, max_length_b=2.0)
    translator = translator_for(model, beam_size=beam_size, nbest=nbest, **options)
    generate = functools.partial(model.generate, beam_size=beam_size, nbest=nbest, **options)
    if traced:
      expected = tf.function(translator.translate_ids)(SOURCES)._asdict()
      got = tf.function(generate)(SOURCES)
    else:  # generate takes the ids as nested lists too
      expected = translator.translate_ids(SOURCES)._asdict()
      got = generate(SOURCES.numpy().tolist())
    self.assertEqual(set(got), set(expected))
    for key, value in expected.items():
      self.assertAllClose(got[key], value, atol=1e-6, msg=key)
    return got

  def test_greedy_and_beam_as_the_translator(self):
    greedy = self.check_as_the_translator(1, 1)
    self.assertAllEqual(greedy["scores"], greedy["log_probs"])  # greedy ranks nothing
    self.check_as_the_translator(3, 2)

  @pytest.mark.slow  # traces two beam searches; the quick tier compares them eagerly
  def test_traced_beam_as_the_translator(self):
    self.check_as_the_translator(3, 2, traced=True)

  def test_an_unbuilt_model_builds_its_decoding_weights(self):
    keras.utils.set_random_seed(4)
    model = Seq2Seq(tiny_config(decoder="rnnsearch"))
    result = model.generate(SOURCES, max_length=4)
    self.assertEqual(result["ids"].shape, (3, 1, 4))
    self.assertTrue(model.built)


class ExhaustiveOptimumTest(tf.test.TestCase):
  """A beam wider than the number of prefixes is an exact search: its n best hypotheses
  are the n most probable sequences among all sequences of at most max_length tokens."""

  def test_large_beam_finds_exhaustive_optimum(self):
    vocab, max_length, nbest = 6, 4, 5
    model = make_model(seed=3, tgt_vocab_size=vocab)
    translator = translator_for(model, beam_size=100, nbest=nbest, length_penalty=0.0,
                                max_length=max_length, max_length_a=10.0, max_length_b=0.0)
    result = translator.translate_ids(SOURCES)
    tokens = [t for t in range(vocab) if t not in (PAD_ID, BOS_ID, EOS_ID)]  # never emitted
    candidates = [list(prefix) + [EOS_ID] for n in range(max_length)
                  for prefix in itertools.product(tokens, repeat=n)]
    self.assertLen(candidates, 1 + 3 + 9 + 27)
    for b in range(SOURCES.shape[0]):
      exhaustive = teacher_forced(model, SOURCES[b:b + 1], candidates)
      best = np.argsort(-exhaustive)[:nbest]
      for k, index in enumerate(best):
        length = int(result.lengths[b, k])
        self.assertEqual(result.ids[b, k, :length].numpy().tolist(), candidates[index])
        self.assertAllClose(result.log_probs[b, k], exhaustive[index], atol=1e-4)


class BeamMatchesTeacherForcingTest(tf.test.TestCase):
  """The log-probability the search reports for each returned hypothesis equals the sum
  of the log-softmax of model(...) on it: incremental `step` and teacher-forced `call`
  agree, also for decoders that attend over their own past states."""

  def check(self, model, beam_size=3):
    translator = translator_for(model, beam_size=beam_size, nbest=beam_size,
                                length_penalty=0.6, max_length=8, max_length_a=10.0)
    result = translator.translate_ids(SOURCES)
    for b in range(SOURCES.shape[0]):
      hyps = [result.ids[b, k, :int(result.lengths[b, k])].numpy().tolist()
              for k in range(beam_size) if int(result.lengths[b, k]) > 0]
      self.assertNotEmpty(hyps)
      for hyp in hyps:
        self.assertEqual(hyp[-1], EOS_ID)
      # Score in a padded batch holding all sources, so padding is exercised too.
      source = tf.gather(SOURCES, [b] * len(hyps))
      self.assertAllClose(result.log_probs[b, :len(hyps)].numpy(),
                          teacher_forced(model, source, hyps), atol=1e-4)

  def test_self_attentive_residual_avg(self):
    self.check(make_model(decoder="self_attentive_residual", summary="avg"))

  @pytest.mark.slow  # the avg summary is the quick check of the residual decoder
  def test_self_attentive_residual_cavg(self):
    self.check(make_model(decoder="self_attentive_residual", summary="cavg"))

  def test_memory_rnn(self):
    self.check(make_model(decoder="memory_rnn"))

  def test_self_attentive_rnn(self):
    self.check(make_model(decoder="self_attentive_rnn"))

  @pytest.mark.slow  # both searches for four decoders; the quick tier checks cgru (test_cgru_and_greedy)
  def test_beam_of_one_is_greedy_for_the_self_attentive_decoders(self):
    # The beam search carries (and reorders) the summaries and the state buffer; with one
    # beam it must reproduce greedy search exactly.
    for overrides in (dict(decoder="self_attentive_residual", summary="avg"),
                      dict(decoder="self_attentive_residual", summary="cavg"),
                      dict(decoder="self_attentive_rnn"), dict(decoder="memory_rnn")):
      model = make_model(seed=4, **overrides)
      context = model.encode(SOURCES)
      batch = SOURCES.shape[0]
      greedy = decoding.greedy_search(model.step, model.initial_state(context, 8), context,
                                      batch, 8)
      beam = decoding.beam_search(model.step, model.initial_state(context, 8), context,
                                  batch, 1, 8)
      self.assertAllEqual(beam.ids, greedy.ids, msg=str(overrides))
      self.assertAllClose(beam.log_probs, greedy.log_probs, atol=1e-5, msg=str(overrides))

  def test_cgru_and_greedy(self):
    model = make_model(decoder="cgru")
    self.check(model)
    self.check(model, beam_size=1)

  @pytest.mark.slow  # two members; the quick tier decodes with an ensemble in test_inference_ensemble.py
  def test_ensemble(self):
    members = [make_model(seed=1), make_model(seed=2, decoder="rnnsearch")]
    ensemble = ModelEnsemble(members)
    self.check(ensemble)
    # The bfloat16 search prefetches the casts of these before its loop (Translator).
    self.assertEqual([id(v) for v in ensemble.trainable_variables],
                     [id(v) for m in members for v in m.trainable_variables])


class CompiledSearchTest(tf.test.TestCase):

  @pytest.mark.slow  # XLA-compiles the searches
  def test_jit_matches_eager_without_retracing(self):
    model = make_model(decoder="cgru")
    translator = translator_for(model, beam_size=3, nbest=2, max_length=8, max_length_a=10.0)
    compiled = CompiledTranslator(translator, jit_compile=True)
    plain = CompiledTranslator(translator, jit_compile=False)
    for source in (SOURCES, SOURCES[:2, :3]):
      eager = translator.translate_ids(source)._asdict()
      for fn in (compiled.search, plain.search):
        out = fn(source)
        self.assertAllEqual(out["ids"], eager["ids"])
        self.assertAllEqual(out["lengths"], eager["lengths"])
        self.assertAllClose(out["log_probs"], eager["log_probs"], atol=1e-4)
        self.assertAllClose(out["attention"], eager["attention"], atol=1e-4)
    self.assertEqual(compiled.search.experimental_get_tracing_count(), 1)
    self.assertEqual(plain.search.experimental_get_tracing_count(), 1)

  @pytest.mark.slow  # traces the search beside the eager one
  def test_eager_stages_match_the_traced(self):
    # translate decodes a few lines eagerly (EAGER_LINES): the same search, untraced.
    translator = translator_for(make_model(decoder="cgru"), beam_size=3, nbest=2,
                                max_length=8, max_length_a=10.0)
    eager = CompiledTranslator(translator, eager=True)
    traced = CompiledTranslator(translator)
    self.assertNotIsInstance(eager.search, tf.types.experimental.PolymorphicFunction)
    out, reference = eager.search(SOURCES), traced.search(SOURCES)
    self.assertAllEqual(out["ids"], reference["ids"])
    self.assertAllEqual(out["lengths"], reference["lengths"])
    self.assertAllClose(out["scores"], reference["scores"], atol=1e-5)
    self.assertAllClose(out["attention"], reference["attention"], atol=1e-5)

  @pytest.mark.slow  # traces a bfloat16 search and teacher-forces each hypothesis
  def test_bfloat16_products_score_their_own_hypotheses(self):
    model = make_model(decoder="cgru")
    translator = translator_for(model, beam_size=3, max_length=8, max_length_a=10.0,
                                precision="float32_bf16_matmul")
    out = CompiledTranslator(translator).search(SOURCES)
    reference = translator_for(model, beam_size=3, max_length=8,
                               max_length_a=10.0).translate_ids(SOURCES)
    # Close to the float32 search; the found hypotheses score alike under teacher forcing.
    self.assertAllClose(out["log_probs"], reference.log_probs, atol=0.1)
    for row in range(SOURCES.shape[0]):
      ids = list(out["ids"][row, 0, :out["lengths"][row, 0]].numpy())
      forced = teacher_forced(model, SOURCES[row:row + 1], [ids])[0]
      self.assertAllClose(out["log_probs"][row, 0], forced, atol=0.1)
    self.assertIsNone(model.matmul_dtype)  # the search's choice, not the model's

  def test_auto_precision_searches_as_the_cpu_it_picks(self):
    model = make_model(decoder="cgru")
    for flags, precision in (("avx512f avx512_bf16", "float32_bf16_matmul"),
                             ("avx2", "float32")):
      with mock.patch.object(cpu, "cpu_info", return_value={"flags": set(flags.split())}):
        auto = translator_for(model, beam_size=2, max_length=6, precision="auto")
      self.assertEqual(auto.precision, precision)
      self.assertIn("auto: this CPU has", auto.precision_reason)
      pinned = translator_for(model, beam_size=2, max_length=6, precision=precision)
      self.assertIsNone(pinned.precision_reason)
      self.assertAllEqual(auto.translate_ids(SOURCES).log_probs,
                          pinned.translate_ids(SOURCES).log_probs)


if __name__ == "__main__":
  tf.test.main()
