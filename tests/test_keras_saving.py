"""`model.save("m.keras")` and `keras.saving.load_model`: the model of every preset of every
recipe (the captioner included) and each public layer, saved and loaded, give the same
outputs bit for bit in float32; the whole suite loads them in a fresh process, as a user
would. A file of an earlier version is refused in one line that names it."""

import json
import os
import subprocess
import sys
import tempfile
import zipfile

import keras
import numpy as np
import pytest
import tensorflow as tf

from nmt_tf import configs
from nmt_tf.experiment import presets
from nmt_tf.layers import (BahdanauAttention, Bridge, ConditionalGRUCell, DeepOutput, GRUCell,
                           LSTMCell, LuongAttention, SelfAttentiveResidual, StateAttention,
                           StateMemory)
from nmt_tf.layers.embedding import ScaledEmbedding
from nmt_tf.layers.lexical import LexicalModel
from nmt_tf.models import ModelConfig, Seq2Seq
from nmt_tf.models.captioner import ImageCaptioner
from tests.model_fixtures import VARIANTS, batch, tiny_config
from tests.release_fixtures import MODEL_SIZES, UNIT_FIELDS
from tests.waits import SAFETY_NET

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TINY_VOCAB = dict(src_vocab_size=23, tgt_vocab_size=19)
# The variants the quick tier saves and loads: the plain state, and the state memory with every
# option's module; the whole suite saves every variant and every recipe's model.
SAVED_QUICK = ("cgru", "memory_rnn_deep_ln")
# The layers the quick tier saves and loads (one that sizes a weight from the query's shape,
# one inside keras.layers.RNN); the whole suite saves each public layer.
LAYERS_QUICK = ("luong_attention_general", "gru_cell_in_rnn")


def recipe_models():
  """{name: ModelConfig} of every recipe's default model and every model preset, at test
  sizes (tests/release_fixtures.py MODEL_SIZES) with tiny vocabularies."""
  names = configs.names() + [f"multi30k:{m}" for m in presets.MODELS if m != "cgru"]
  models = {}
  for name in names:
    model = dict(configs.load(name).model.to_dict(), **MODEL_SIZES, **TINY_VOCAB)
    for field in UNIT_FIELDS:
      if model.get(field) is not None:
        model[field] = MODEL_SIZES["decoder_units"]
    if model.get("tie_embeddings") == "all":
      model["src_vocab_size"] = model["tgt_vocab_size"]
    if model.get("image_size"):
      model["image_size"] = 16
    models[name] = ModelConfig.from_dict(model)
  return models


def layer_models(names=None):
  """{name: (functional keras.Model around one public layer, its inputs)}: each layer that
  takes a Keras call form (or those of `names`), called on symbolic inputs as in a user's
  own model."""
  rng = np.random.default_rng(0)
  normal = lambda *shape: rng.standard_normal(shape).astype(np.float32)
  cases = {  # name: (input shapes [dtype], layer call on the inputs, input arrays)
      "bahdanau_attention": ([(None, 6), (None, 5)], lambda q, v: BahdanauAttention(4)(q, v),
                             [normal(2, 3, 6), normal(2, 4, 5)]),
      "luong_attention_general": ([(None, 6), (None, 5)],
                                  lambda q, v: LuongAttention("general")(q, v),
                                  [normal(2, 3, 6), normal(2, 4, 5)]),
      "luong_attention_concat": ([(None, 6), (None, 5)],
                                 lambda q, v: LuongAttention("concat", 4)(q, v),
                                 [normal(2, 3, 6), normal(2, 4, 5)]),
      "gru_cell_in_rnn": ([(None, 6)],
                          lambda x: keras.layers.RNN(GRUCell(5), return_sequences=True)(x),
                          [normal(2, 3, 6)]),
      "lstm_cell_in_rnn": ([(None, 6)],
                           lambda x: keras.layers.RNN(LSTMCell(5), return_sequences=True)(x),
                           [normal(2, 3, 6)]),
      "conditional_gru_cell": ([(6,), (5,), (None, 7)],  # memory from outside, 3 transitions
                               lambda x, s, m: list(ConditionalGRUCell(5, transition_depth=3)(
                                   x, [s], m)[0]),
                               [normal(2, 6), normal(2, 5), normal(2, 4, 7)]),
      "self_attentive_residual_cavg": ([(None, 6)],
                                       lambda x: SelfAttentiveResidual("cavg", 5)(x),
                                       [normal(2, 4, 6)]),
      "state_attention": ([(None, 6)], lambda x: StateAttention(5)(x), [normal(2, 4, 6)]),
      "state_memory": ([(6,), (4, 6), (4, 5)],  # s_{t-1}, the buffers of states and keys
                       lambda s, states, keys: list(StateMemory(5)(
                           s, {"states": states, "keys": keys}, time=2)),
                       [normal(2, 6), normal(2, 4, 6), normal(2, 4, 5)]),
      "deep_output": ([(None, 6), (None, 3)],
                      lambda s, c: DeepOutput(["s", "c"], 4, 11)({"s": s, "c": c}),
                      [normal(2, 4, 6), normal(2, 4, 3)]),
      "bridge": ([(6,)], lambda x: Bridge(5)(x), [normal(2, 6)]),
      "lexical_model": ([(None, 4), (4, 6)], lambda a, e: LexicalModel(11)(a, e),
                        [normal(2, 3, 4), normal(2, 4, 6)]),
      "scaled_embedding": ([((None,), "int32")], lambda x: ScaledEmbedding(11, 6, scale=2.0)(x),
                           [np.array([[1, 2, 3], [4, 0, 0]], np.int32)]),
  }
  models = {}
  for name, (shapes, call, arrays) in cases.items():
    if names is not None and name not in names:
      continue
    keras.utils.set_random_seed(1)
    inputs = [keras.Input(shape[0], dtype=shape[1]) if isinstance(shape[0], tuple) else
              keras.Input(shape) for shape in shapes]
    models[name] = keras.Model(inputs, call(*inputs)), arrays
  return models


def as_list(outputs):
  """A functional model's outputs (an array, or a list or tuple of them) as a list of numpy
  arrays."""
  outputs = outputs if isinstance(outputs, (list, tuple)) else [outputs]
  return [np.asarray(output) for output in outputs]


def inputs_of(model):
  """A padded batch for `model` (images for the captioner), without target_out."""
  b = batch()
  if isinstance(model, ImageCaptioner):
    size = model.model_config.image_size
    images = np.random.default_rng(0).random((3, size, size, 3)).astype(np.float32)
    return {"source": tf.constant(images), "target_in": b["target_in"]}
  return {"source": b["source"], "target_in": b["target_in"]}


def saved(config, folder, name):
  """(path of the `.keras` file, inputs, outputs) of a seeded model of `config`."""
  keras.utils.set_random_seed(1)
  model = (ImageCaptioner if config.encoder == "image" else Seq2Seq)(config)
  x = inputs_of(model)
  outputs = {k: v.numpy() for k, v in model(x).items()}
  path = os.path.join(folder, name.replace(":", "_") + ".keras")
  model.save(path)
  return path, x, outputs


# Loads each `.keras` file of argv[1] (a JSON list of [path, inputs .npz, outputs .npz]) in a
# process of its own and says whether every output is equal.
LOADER = """
import json, sys
import numpy as np, keras
from nmt_tf.models import ImageCaptioner, Seq2Seq  # registers them with Keras
same = []
for path, x, y in json.loads(sys.argv[1]):
  model = keras.saving.load_model(path)
  x, y = dict(np.load(x)), dict(np.load(y))
  if "0" in x:  # a functional model around one layer: inputs and outputs are lists
    out = model([x[str(i)] for i in range(len(x))])
    out = out if isinstance(out, (list, tuple)) else [out]
    same.append(all(np.array_equal(np.asarray(o), y[str(i)]) for i, o in enumerate(out)))
    continue
  out = model(x)
  same.append(all(np.array_equal(out[k].numpy(), y[k]) for k in y))
print(json.dumps(same))
"""


class KerasFileTest(tf.test.TestCase):
  """SAVED_QUICK saved and loaded in this process; a file of an earlier version."""

  def test_round_trip(self):
    for name in SAVED_QUICK:
      path, x, expected = saved(tiny_config(**VARIANTS[name]), self.get_temp_dir(), name)
      loaded = keras.saving.load_model(path)
      self.assertIsInstance(loaded, Seq2Seq)
      self.assertEqual(loaded.model_config, tiny_config(**VARIANTS[name]))
      out = loaded(x)
      for key, value in expected.items():
        self.assertAllEqual(out[key], value, msg=f"{name}: {key}")

  def test_public_layers_in_a_functional_model(self):
    for name, (model, x) in layer_models(LAYERS_QUICK).items():
      expected = as_list(model(x))
      path = os.path.join(self.get_temp_dir(), name + ".keras")
      model.save(path)
      got = as_list(keras.saving.load_model(path)(x))
      self.assertLen(got, len(expected), name)
      for i, (a, b) in enumerate(zip(got, expected)):
        self.assertAllEqual(a, b, msg=f"{name}: output {i}")

  @pytest.mark.slow  # builds every public layer's model twice
  def test_public_layers_under_mixed_bfloat16(self):
    """The same models under Keras' mixed_bfloat16 policy (float32 weights, bfloat16
    products) run in the functional API and stay near their float32 outputs."""
    expected = {name: as_list(model(x)) for name, (model, x) in layer_models().items()}
    keras.config.set_dtype_policy("mixed_bfloat16")
    try:
      mixed = layer_models()  # the same seeds: the same weights
      for name, (model, x) in mixed.items():
        for got, want in zip(as_list(model(x)), expected[name]):
          self.assertAllClose(got.astype(np.float32), want, atol=0.1, rtol=0.05, msg=name)
    finally:
      keras.config.set_dtype_policy("float32")

  def test_a_file_of_an_earlier_version_is_refused_in_one_line(self):
    path, _, _ = saved(tiny_config(decoder="cgru"), self.get_temp_dir(), "new")
    old = os.path.join(self.get_temp_dir(), "old.keras")
    with zipfile.ZipFile(path) as source, zipfile.ZipFile(old, "w") as target:
      for item in source.namelist():
        data = source.read(item)
        if item == "config.json":  # as an earlier version wrote it
          config = json.loads(data)
          del config["config"]["saved_format"]
          data = json.dumps(config).encode()
        target.writestr(item, data)
    with self.assertRaises(ValueError) as raised:
      keras.saving.load_model(old)
    message = str(raised.exception)
    self.assertNotIn("\n", message)
    self.assertStartsWith(message, "This Seq2Seq was saved by nmt_tf before 0.1.0 (saved "
                          "format 0, this version reads 1)")


@pytest.mark.slow  # saves 43 models; loads them in a fresh process
class RecipeModelFileTest(tf.test.TestCase):
  """The model of every recipe and preset, the captioner's included, every other model
  variant, and each public layer in a functional model, saved here and loaded by
  `keras.saving.load_model` in a fresh process."""

  def test_fresh_process_gives_the_same_outputs(self):
    folder = tempfile.mkdtemp()
    models = {**recipe_models(),
              **{name: tiny_config(**kw) for name, kw in VARIANTS.items()
                 if name not in SAVED_QUICK}}
    self.assertIn("shapes", models)
    self.assertEqual(models["shapes"].encoder, "image")
    files = []
    for name, config in models.items():
      path, x, y = saved(config, folder, name)
      np.savez(path + ".x.npz", **{k: v.numpy() for k, v in x.items()})
      np.savez(path + ".y.npz", **y)
      files.append([path, path + ".x.npz", path + ".y.npz"])
    layers = layer_models()
    for name, (model, x) in layers.items():
      path = os.path.join(folder, name + ".keras")
      model.save(path)
      np.savez(path + ".x.npz", **{str(i): v for i, v in enumerate(x)})
      np.savez(path + ".y.npz", **{str(i): v for i, v in enumerate(as_list(model(x)))})
      files.append([path, path + ".x.npz", path + ".y.npz"])
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["TF_CPP_MIN_LOG_LEVEL"] = "3"
    out = subprocess.run([sys.executable, "-c", LOADER, json.dumps(files)], cwd=folder,
                         env=env, capture_output=True, text=True, timeout=SAFETY_NET,
                         check=False)
    self.assertEqual(out.returncode, 0, out.stderr[-3000:])
    same = json.loads(out.stdout.strip().splitlines()[-1])
    self.assertLen(same, len(files))
    self.assertEqual([name for name, ok in zip(list(models) + list(layers), same) if not ok],
                     [])


if __name__ == "__main__":
  tf.test.main()
