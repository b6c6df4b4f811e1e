"""Caption generation with attention (Xu et al. 2015): the image encoder, soft and hard
attention over its annotation vectors against numpy, REINFORCE's gradient, the shapes set, the
captions loader, multi-reference BLEU, and the shapes recipe trained to a stated BLEU."""

import collections
import contextlib
import io
import os
import re
import tempfile

import keras
import numpy as np
import pytest
import sacrebleu
import tensorflow as tf

import nmt_tf
from nmt_tf import configs
from nmt_tf.cli import caption as caption_cli
from nmt_tf.cli import evaluate as evaluate_cli
from nmt_tf.cli import export as export_cli
from nmt_tf.cli import translate as translate_cli
from nmt_tf.data import captions, shapes
from nmt_tf.data.errors import DataError
from nmt_tf.evaluation import scoring
from nmt_tf.evaluation.image_attention import image_attention_png
from nmt_tf.experiment import ExperimentConfig
from nmt_tf.models import build_model, ConfigError, ImageCaptioner, ModelConfig
from nmt_tf.models.image_encoder import coordinate_channels, ImageEncoder
from nmt_tf.models import losses
from nmt_tf.training.data_order import CaptionOrder
from tests import numpy_reference as ref
from tests.test_cli_decode import run_command

TINY_IMAGE = dict(src_vocab_size=30, tgt_vocab_size=30, embedding_dim=8, encoder="image",
                  encoder_units=8, encoder_layers=2, image_size=16, decoder_units=12,
                  attention_units=10)


def tiny_image_config(**overrides):
  return ModelConfig(**{**TINY_IMAGE, **overrides})


def images(batch=3, size=16, seed=0):
  return tf.constant(np.random.default_rng(seed).random((batch, size, size, 3)), tf.float32)


class ImageEncoderTest(tf.test.TestCase):

  def test_shapes_mask_and_mean_summary(self):
    encoder = ImageEncoder(8, num_layers=2, image_size=16)
    annotations, mask, summary = encoder(images())
    self.assertEqual(encoder.grid, (4, 4))
    self.assertEqual(annotations.shape, (3, 16, 8))  # L = 4 * 4 cells
    self.assertAllEqual(mask, np.ones((3, 16), bool))
    self.assertAllClose(summary, np.mean(annotations.numpy(), axis=1))

  def test_annotation_is_the_projected_cell_with_its_coordinates(self):
    encoder = ImageEncoder(8, num_layers=2, image_size=16)
    x = images()
    annotations, _, _ = encoder(x)
    features = encoder.feature_map(x).numpy()  # [3, 4, 4, 8]
    u, v = np.meshgrid(np.linspace(-1, 1, 4), np.linspace(-1, 1, 4))
    cells = np.concatenate([features, np.broadcast_to(np.stack([u, v], -1), (3, 4, 4, 2))],
                           axis=-1).reshape(3, 16, 10)  # row by row
    kernel, bias = [w.numpy() for w in encoder.projection.weights]
    self.assertAllClose(annotations, np.tanh(cells @ kernel + bias), atol=1e-5)
    self.assertAllClose(coordinate_channels(4, 4, 1)[0, 1, 3], [1.0, -1.0 / 3.0])

  def test_an_image_is_encoded_alone(self):
    """Group normalization takes its statistics from each image: its annotations do not
    depend on the other images of the batch, in training as in decoding."""
    encoder = ImageEncoder(8, num_layers=2, image_size=16)
    x = images(batch=3)
    for training in (False, True):
      together, _, _ = encoder(x, training=training)
      alone, _, _ = encoder(x[1:2], training=training)
      self.assertAllClose(together[1:2], alone, atol=1e-5)

  def test_config_round_trip(self):
    encoder = ImageEncoder(8, num_layers=2, image_size=16, coordinates=False, name="enc")
    config = encoder.get_config()
    self.assertEqual(ImageEncoder.from_config(config).get_config(), config)

  def test_bad_arguments(self):
    with self.assertRaisesRegex(ValueError, "multiple of 2\\^2"):
      ImageEncoder(8, num_layers=2, image_size=18)
    with self.assertRaisesRegex(ValueError, "without image_backbone"):
      ImageEncoder(8, backbone_weights="w.h5")
    with self.assertRaisesRegex(ValueError, "does not exist"):
      ImageEncoder(8, backbone="mobilenet_v2.MobileNetV2", backbone_weights="/no/such.h5")
    with self.assertRaisesRegex(ValueError, "resnet50.ResNet50"):
      ImageEncoder(8, backbone="NoSuchNet")
    with self.assertRaisesRegex(ValueError, "positive integer"):
      ImageEncoder(0)

  @pytest.mark.slow  # saves and loads a whole backbone
  def test_backbone_weights_are_loaded_from_a_file_and_frozen(self):
    backbone = keras.applications.mobilenet_v2.MobileNetV2(
        include_top=False, weights=None, input_shape=(32, 32, 3))
    path = os.path.join(tempfile.mkdtemp(), "mobilenet.weights.h5")
    backbone.save_weights(path)
    del backbone
    encoder = ImageEncoder(8, image_size=32, backbone="mobilenet_v2.MobileNetV2",
                           backbone_weights=path)
    self.assertFalse(encoder.backbone.trainable)
    saved = keras.applications.mobilenet_v2.MobileNetV2(include_top=False, weights=None,
                                                        input_shape=(32, 32, 3))
    saved.load_weights(path)
    for mine, theirs in zip(encoder.backbone.weights, saved.weights):
      self.assertAllEqual(mine, theirs)
    annotations, mask, _ = encoder(images(batch=2, size=32))
    self.assertEqual(annotations.shape, (2, 1, 8))  # a 1x1 grid at 32 pixels
    self.assertEqual(mask.shape, (2, 1))
    trainable = {id(v) for v in encoder.trainable_variables}
    self.assertTrue(all(id(v) not in trainable for v in encoder.backbone.weights))
    other = keras.applications.mobilenet_v2.MobileNetV2(
        include_top=False, weights=None, input_shape=(32, 32, 3), alpha=0.35)
    other.save_weights(path)
    with self.assertRaisesRegex(ValueError, "^The weights .* do not fit mobilenet_v2.MobileNetV2 "
                                "without its top .*include_top=False.$"):
      ImageEncoder(8, image_size=32, backbone="mobilenet_v2.MobileNetV2", backbone_weights=path)


class ImageModelConfigTest(tf.test.TestCase):

  def test_image_options_are_checked(self):
    with self.assertRaisesRegex(ConfigError, "multiple of 4"):
      tiny_image_config(image_size=18)
    with self.assertRaisesRegex(ConfigError, "no source words"):
      tiny_image_config(lexical_model=True)
    with self.assertRaisesRegex(ConfigError, "no source embeddings"):
      tiny_image_config(tie_embeddings="all")
    with self.assertRaisesRegex(ConfigError, "part of encoder='image'"):
      ModelConfig(image_backbone="resnet50.ResNet50")

  def test_images_need_the_image_encoder_and_batches_by_number(self):
    base = {"model": {"encoder": "image"}, "data": {"name": "shapes"},
            "pipeline": {"batch_size": 8}}
    ExperimentConfig.from_dict(base)
    with self.assertRaisesRegex(ConfigError, "image encoder"):
      ExperimentConfig.from_dict({**base, "model": {"encoder": "birnn"}})
    with self.assertRaisesRegex(ConfigError, "image encoder"):
      ExperimentConfig.from_dict({**base, "data": {"name": "generated"}})
    with self.assertRaisesRegex(ConfigError, "pipeline.batch_size"):
      ExperimentConfig.from_dict({**base, "pipeline": {"batch_size": 0}})
    with self.assertRaisesRegex(ConfigError, "reinforce.weight=-1.0; expected a weight >= 0"):
      ExperimentConfig.from_dict({**base, "reinforce": {"weight": -1.0}})


class CaptionAttentionTest(tf.test.TestCase):
  """Attention over the annotation vectors a_i of an image (seed 004): soft c_t = sum_i
  alpha_ti a_i, hard s_t ~ Categorical(alpha_t), c_t = a_{s_t}."""

  def _parts(self, mode, decoder="rnnsearch"):
    keras.utils.set_random_seed(3)
    model = build_model(tiny_image_config(decoder=decoder, attention_mode=mode))
    self.assertIsInstance(model, ImageCaptioner)
    context = model.encode(images(batch=2))
    state = model.initial_state(context, 5)
    return model, context, state

  def _alpha(self, model, context, s0):
    """alpha = softmax(v^T tanh(W_a s + U_a a_i + b)) in numpy."""
    attention = model.decoder.attention
    e = ref.additive_scores(s0, context["memory"].numpy(),
                            attention.query_dense.kernel.numpy(),
                            attention.key_dense.kernel.numpy(),
                            attention.key_dense.bias.numpy(), attention.v.numpy())
    return ref.softmax(e)

  def test_soft_attention_and_initial_state_follow_the_equations(self):
    model, context, state = self._parts("soft")
    a = context["memory"].numpy()  # [2, L, D]
    bridge = model.decoder.bridge.dense
    s0 = np.tanh(a.mean(axis=1) @ bridge.kernel.numpy() + bridge.bias.numpy())
    self.assertAllClose(state["s"], s0, atol=1e-5)  # from the mean annotation
    c, alpha, _ = model.decoder.attention(state["s"], context["memory"], context["keys"],
                                          context["mask"])
    self.assertAllClose(alpha, self._alpha(model, context, s0), atol=1e-5)
    self.assertAllClose(c, np.einsum("bl,bld->bd", alpha.numpy(), a), atol=1e-5)
    _, step_attention, _ = model.step(tf.constant([2, 2]), state, context, 0)
    self.assertAllClose(step_attention, alpha, atol=1e-5)  # the decoder's first step

  def test_hard_attention_samples_one_annotation_by_its_weight(self):
    model, context, state = self._parts("hard")
    attention = model.decoder.attention
    a = context["memory"].numpy()
    repeat = 2000
    memory = tf.repeat(context["memory"][:1], repeat, axis=0)
    c, alpha, log_prob = attention(tf.repeat(state["s"][:1], repeat, axis=0), memory,
                                   tf.repeat(context["keys"][:1], repeat, axis=0),
                                   tf.repeat(context["mask"][:1], repeat, axis=0),
                                   training=True)
    # c_t is one annotation vector a_{s_t}, and log_prob its log alpha.
    distance = np.abs(c.numpy()[:, None, :] - a[0][None]).max(-1)  # [repeat, L]
    picked = distance.argmin(-1)
    self.assertAllClose(distance.min(-1), np.zeros(repeat), atol=1e-6)
    self.assertAllClose(log_prob, np.log(alpha.numpy()[0][picked]), atol=1e-5)
    frequency = np.bincount(picked, minlength=a.shape[1]) / repeat
    self.assertAllClose(frequency, alpha[0], atol=0.04)

  def test_reinforce_moves_the_sampled_weight_with_the_advantage(self):
    """-(R - b) log alpha(s): a gradient step raises the sampled cell's weight when the reward
    beats the baseline, lowers it when it falls short, and leaves it when they are equal."""
    model, context, state = self._parts("hard")
    attention = model.decoder.attention
    # W_a and v: the keys U_a a_i + b were computed with the context, outside the tape.
    variables = [attention.query_dense.kernel, attention.v]
    start = [v.numpy() for v in variables]
    targets = tf.ones([2, 1], tf.int32)
    for reward, sign in ((1.0, 1), (-1.0, -1), (0.0, 0)):
      for variable, value in zip(variables, start):
        variable.assign(value)
      with tf.GradientTape() as tape:
        c, alpha, log_prob = attention(state["s"], context["memory"], context["keys"],
                                       context["mask"], training=True)
        loss = losses.reinforce_loss(log_prob[:, None], tf.constant([reward] * 2), 0.0,
                                     targets)
      grads = tape.gradient(loss, variables)
      picked = np.abs(c.numpy()[:, None] - context["memory"].numpy()).max(-1).argmin(-1)
      before = np.log(alpha.numpy()[np.arange(2), picked])
      if sign == 0:
        for g in grads:
          self.assertAllClose(g, tf.zeros_like(g))
        continue
      for variable, g in zip(variables, grads):
        variable.assign_sub(0.05 * g)
      _, after_alpha, _ = attention(state["s"], context["memory"], context["keys"],
                                    context["mask"])
      after = np.log(after_alpha.numpy()[np.arange(2), picked])
      self.assertGreater(float(sign * (after - before).sum()), 0.0)

  def test_the_expectation_replaces_the_sample_for_the_chosen_sentences(self):
    """Xu et al. 2015, sec. 4.1: some sentences take c_t = sum_i alpha_ti a_i and add no
    REINFORCE term (log_prob 0); the others sample."""
    model, context, state = self._parts("hard")
    attention = model.decoder.attention
    expect = tf.constant([True, False])
    c, alpha, log_prob = attention(state["s"], context["memory"], context["keys"],
                                   context["mask"], training=True, expect=expect)
    soft = np.einsum("bl,bld->bd", alpha.numpy(), context["memory"].numpy())
    self.assertAllClose(c[0], soft[0], atol=1e-5)
    self.assertEqual(float(log_prob[0]), 0.0)
    self.assertLess(float(log_prob[1]), 0.0)
    self.assertAllClose(np.abs(c.numpy()[1] - context["memory"].numpy()[1]).max(-1).min(), 0.0,
                        atol=1e-6)  # a sampled annotation vector
    target_in = tf.constant([[2, 5, 6, 7]] * 4)
    for decoder in ("cgru", "rnnsearch", "luong"):
      for rate, zero in ((0.999, True), (0.0, False)):
        model = build_model(tiny_image_config(decoder=decoder, attention_mode="hard",
                                              hard_expectation_rate=rate))
        out = model({"source": images(batch=4), "target_in": target_in}, training=True)
        self.assertEqual(bool(np.all(out["attention_log_prob"].numpy() == 0.0)), zero,
                         (decoder, rate))
    # With N copies of each sentence (reinforce.samples), the copies draw together.
    keras.utils.set_random_seed(0)
    model = build_model(tiny_image_config(attention_mode="hard", hard_expectation_rate=0.5))
    source = tf.repeat(images(batch=8), 3, axis=0)
    out = model({"source": source, "target_in": tf.repeat(target_in[:1], 24, axis=0)},
                training=True, samples=3)
    expected = np.all(out["attention_log_prob"].numpy() == 0.0, axis=1).reshape(8, 3)  # [b, N]
    self.assertAllEqual(expected.all(axis=1), expected.any(axis=1))
    self.assertTrue(expected.any() and not expected.all())  # both kinds, for this seed
    with self.assertRaisesRegex(ConfigError, "attention_mode='hard'"):
      tiny_image_config(hard_expectation_rate=0.5)

  def test_every_decoder_captions_with_soft_and_hard_attention(self):
    target_in = tf.constant([[2, 5, 6], [2, 7, 0]])
    for decoder in ("cgru", "rnnsearch", "luong", "self_attentive_residual", "encdec"):
      for mode in ("soft",) if decoder == "encdec" else ("soft", "hard"):
        model = build_model(tiny_image_config(decoder=decoder, attention_mode=mode))
        out = model({"source": images(batch=2), "target_in": target_in}, training=True)
        self.assertEqual(out["logits"].shape, (2, 3, 30), (decoder, mode))
        self.assertEqual(out["attention"].shape, (2, 3, 16), (decoder, mode))
        self.assertIsNone(model.src_embedding)


  def test_a_backbone_feeds_the_decoder(self):
    model = build_model(tiny_image_config(image_backbone="mobilenet_v2.MobileNetV2",
                                          image_size=64))
    self.assertEqual(model.encoder.grid, (2, 2))
    out = model({"source": images(batch=2, size=64), "target_in": tf.constant([[2, 5]] * 2)})
    self.assertEqual(out["attention"].shape, (2, 2, 4))
    self.assertAllClose(tf.reduce_sum(out["attention"], -1), tf.ones([2, 2]))


def png_header(width, height):
  """The first bytes of a PNG file (signature and IHDR) of an RGB image of that size."""
  ihdr = width.to_bytes(4, "big") + height.to_bytes(4, "big") + bytes([8, 2, 0, 0, 0])
  return b"\x89PNG\r\n\x1a\n" + (13).to_bytes(4, "big") + b"IHDR" + ihdr + b"\0" * 4


def huge_png(size):
  """The bytes of a black size x size RGB PNG, compressed as it is made (a few MB)."""
  import struct  # pylint: disable=import-outside-toplevel
  import zlib  # pylint: disable=import-outside-toplevel
  chunk = lambda kind, data: (struct.pack(">I", len(data)) + kind + data +  # pylint: disable=g-long-lambda
                              struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF))
  compressor, row, parts = zlib.compressobj(9), b"\0" * (1 + 3 * size), []
  for _ in range(size):
    parts.append(compressor.compress(row))
  parts.append(compressor.flush())
  return (png_header(size, size)[:8] + chunk(b"IHDR", png_header(size, size)[16:29]) +
          chunk(b"IDAT", b"".join(parts)) + chunk(b"IEND", b""))


@contextlib.contextmanager
def native_stderr():
  """Captures what is written to file descriptor 2 (by native code too) in the block."""
  captured = io.BytesIO()
  with tempfile.TemporaryFile() as f:
    saved = os.dup(2)
    os.dup2(f.fileno(), 2)
    try:
      yield captured
    finally:
      os.dup2(saved, 2)
      os.close(saved)
      f.seek(0)
      captured.write(f.read())


class ImageInputTest(tf.test.TestCase):
  """captions.read_image: what users give `caption` and the Python API."""

  def test_the_header_gives_the_size_and_a_too_large_image_is_named(self):
    pixels = np.zeros((20, 30, 3), np.uint8)
    self.assertEqual(captions.image_dimensions(tf.io.encode_png(pixels).numpy()), (30, 20))
    self.assertEqual(captions.image_dimensions(tf.io.encode_jpeg(pixels).numpy()), (30, 20))
    self.assertIsNone(captions.image_dimensions(b"garbage"))
    with self.assertRaisesRegex(DataError, "^big.png is a 30000 x 30000 image, more than the "
                                "715,827,882 pixels that can be decoded; scale it down"):
      captions.read_image(png_header(30000, 30000) + b"\0" * 100, 48, "big.png")

  def test_bytes_that_are_no_image_say_so_and_nothing_else(self):
    jpeg = tf.io.encode_jpeg(np.random.RandomState(0).randint(
        0, 255, (64, 64, 3)).astype(np.uint8)).numpy()
    for data in (jpeg[:len(jpeg) // 3], b"garbage", b""):
      with native_stderr() as err:
        with self.assertRaisesRegex(DataError, "^x.jpg is not an image that can be read"):
          captions.read_image(data, 48, "x.jpg")
      self.assertEqual(err.getvalue(), b"")
    self.assertEqual(captions.read_image(jpeg, 48, "x.jpg").shape, (48, 48, 3))

  @pytest.mark.slow  # decodes 1.2 GB
  def test_a_huge_image_is_reduced_before_its_float_copy(self):
    image = captions.read_image(huge_png(20000), 48, "huge.png")
    self.assertEqual(image.shape, (48, 48, 3))
    self.assertAllEqual(image, np.zeros_like(image))


class ShapesTest(tf.test.TestCase):

  def test_captions_name_the_shapes_and_where_they_are(self):
    rng = np.random.default_rng(7)
    checked = 0
    for _ in range(40):
      image, (caption, converse) = shapes.draw_example(rng, 48)
      words = caption.split()
      # "a SIZE COLOUR SHAPE RELATION... a SIZE COLOUR SHAPE"
      first, second = words[2], words[-2]
      self.assertNotEqual(words[1:4], words[-3:], caption)
      self.assertEqual(converse.split()[2], second)
      if first == second:
        continue  # the colours do not tell the shapes apart
      checked += 1
      relation = " ".join(words[4:-4])
      centres = []
      for colour in (first, second):
        ys, xs = np.nonzero(np.all(image == shapes.COLOURS[colour], axis=-1))
        centres.append((xs.mean(), ys.mean()))
      (x1, y1), (x2, y2) = centres
      expected = {"left of": x1 < x2, "right of": x1 > x2, "above": y1 < y2,
                  "below": y1 > y2}[relation]
      self.assertTrue(expected, caption)
    self.assertGreater(checked, 20)

  def test_the_set_is_written_once_and_never_over_other_files(self):
    root = tempfile.mkdtemp()
    directory = os.path.join(root, "shapes")
    shapes.write_shapes(directory, {"train": 3, "valid": 2}, image_size=16, seed=1)
    split = captions.read_captions(os.path.join(directory, "train.tsv"), directory)
    self.assertLen(split, 6)  # two captions per image
    first = open(split.images[0], "rb").read()
    shapes.write_shapes(directory, {"train": 3, "valid": 2}, image_size=16, seed=1)  # reused
    self.assertEqual(open(split.images[0], "rb").read(), first)
    with self.assertRaisesRegex(DataError, "other settings"):
      shapes.write_shapes(directory, {"train": 4}, image_size=16, seed=1)
    other = os.path.join(root, "mine")
    os.makedirs(other)
    open(os.path.join(other, "notes.txt"), "w").close()
    with self.assertRaisesRegex(DataError, "not empty"):
      shapes.write_shapes(other, {"train": 1}, image_size=16)
    self.assertEqual(os.listdir(other), ["notes.txt"])


class CaptionsLoaderTest(tf.test.TestCase):

  def setUp(self):
    super().setUp()
    self.dir = tempfile.mkdtemp()
    for name in ("a.png", "b.jpg"):
      image = tf.constant(np.full((5, 7, 3), 200, np.uint8))
      data = tf.io.encode_png(image) if name.endswith("png") else tf.io.encode_jpeg(image)
      with open(os.path.join(self.dir, name), "wb") as f:
        f.write(data.numpy())

  def write(self, text, name="captions.txt"):
    path = os.path.join(self.dir, name)
    with open(path, "wb") as f:
      f.write(text if isinstance(text, bytes) else text.encode("utf-8"))
    return path

  def test_flickr_layout_with_caption_numbers(self):
    path = self.write("a.png#0\tA dog  runs .\na.png#1\tA dog is running .\n\nb.jpg#0\tTwo "
                      "cats .\n")
    split = captions.read_captions(path, self.dir)
    self.assertEqual(split.captions, ["A dog runs .", "A dog is running .", "Two cats ."])
    image_list, references = split.references()
    self.assertEqual([os.path.basename(p) for p in image_list], ["a.png", "b.jpg"])
    self.assertEqual(references, [["A dog runs .", "A dog is running ."], ["Two cats ."]])
    loaded = captions.load_image(tf.constant(split.images[2]), 8)
    self.assertEqual(loaded.shape, (8, 8, 3))
    self.assertAllClose(loaded, np.full((8, 8, 3), 200 / 255.0), atol=0.02)

  def test_bad_files_name_the_line_and_the_fix(self):
    cases = [("a.png caption without a tab\n", "line 1: expected `image<TAB>caption`"),
             ("a.png\t\n", "line 1: expected"),
             (b"a.png\t\xff\xfe\n", "line 1: not valid UTF-8"),
             ("\n\n", "holds no caption"),
             ("c.png\tA caption .\n", "c.png does not exist; set data.data_dir")]
    for text, message in cases:
      with self.assertRaisesRegex(DataError, message):
        captions.read_captions(self.write(text), self.dir)
    with self.assertRaisesRegex(DataError, "does not exist; set data.train_tgt"):
      captions.read_captions(os.path.join(self.dir, "none.tsv"), self.dir)

  def test_batches_and_their_order(self):
    split = captions.read_captions(self.write("a.png\tone two three\nb.jpg\tfour\n"),
                                   self.dir)
    from nmt_tf.data import WordTokenizer  # pylint: disable=g-import-not-at-top
    tokenizer = WordTokenizer.build(split.captions)
    batch = next(iter(captions.caption_batches(split, tokenizer, 8, 2)))
    self.assertEqual(batch["source"].shape, (2, 8, 8, 3))
    self.assertAllEqual(batch["target_in"][:, 0], [2, 2])  # BOS
    self.assertAllEqual(batch["target_out"][1, :2], [tokenizer.encode("four")[0], 3])
    order = CaptionOrder(split, tokenizer, 8, 1, seed=5)
    first = [b["target_out"].numpy().tolist() for b in order.epoch(0)]
    again = [b["target_out"].numpy().tolist() for b in order.epoch(0)]
    self.assertEqual(first, again)
    self.assertEqual([b["target_out"].numpy().tolist() for b in order.epoch(0, skip=1)],
                     first[1:])


class MultiReferenceBleuTest(tf.test.TestCase):

  def test_all_references_of_an_image_count(self):
    hypotheses = ["a red circle left of a blue square", "a cat"]
    references = [["a blue square right of a red circle", "a red circle left of a blue square"],
                  ["a dog"]]
    self.assertEqual(scoring.reference_streams(references),
                     [[references[0][0], "a dog"], [references[0][1], None]])
    expected = sacrebleu.corpus_bleu(hypotheses, scoring.reference_streams(references)).score
    self.assertAlmostEqual(scoring.corpus_bleu(hypotheses, references).score, expected)
    one = scoring.corpus_bleu(hypotheses, [r[0] for r in references]).score
    self.assertGreater(scoring.corpus_bleu(hypotheses, references).score, one)


class ImageAttentionPlotTest(tf.test.TestCase):

  def test_one_panel_per_word(self):
    attention = np.eye(4)[[0, 3, 1]]  # three words over a 2x2 grid
    png = image_attention_png(np.zeros((16, 16, 3)), attention, (2, 2), [b"a", "red", "</s>"],
                              title="t")
    self.assertEqual(png[:8], b"\x89PNG\r\n\x1a\n")
    self.assertEqual(tf.io.decode_png(png).shape[-1], 4)


@pytest.mark.slow
class CaptionTrainingTest(tf.test.TestCase):
  """The shapes recipe as shipped (its model, vocabulary, batches and learning rate) trains
  STEPS steps on 1,000 images; then the commands' errors on captioning runs."""

  STEPS = 250
  BLEU = 40.0  # greedy, validation; the shipped recipe reaches about 55 at step 250

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    config = configs.load("shapes")
    config.data.update(train_size=1000, valid_size=60, test_size=4)
    config.train.update(steps=cls.STEPS, eval_every=cls.STEPS, checkpoint_every=cls.STEPS,
                        alignment_images=1)
    config.decode.beam_size = 2
    cls.run_dir = os.path.join(tempfile.mkdtemp(), "shapes")
    cls.log = io.StringIO()
    cls.summary = nmt_tf.train(config, cls.run_dir, stream=cls.log)

  def test_it_learns_to_caption_beyond_one_caption_for_all(self):
    bleu = self.summary["best_bleu"]
    self.assertGreaterEqual(bleu, self.BLEU, self.log.getvalue())
    split = captions.read_captions(os.path.join(self.run_dir, "shapes", "valid.tsv"),
                                   os.path.join(self.run_dir, "shapes"))
    train = captions.read_captions(os.path.join(self.run_dir, "shapes", "train.tsv"),
                                   os.path.join(self.run_dir, "shapes"))
    _, references = split.references()
    common = collections.Counter(train.captions).most_common(1)[0][0]
    constant = scoring.corpus_bleu([common] * len(references), references).score
    self.assertGreater(bleu, constant + 15.0, (bleu, constant))

  def test_python_api_captions_paths_bytes_and_arrays(self):
    captioner = nmt_tf.load_captioner(self.run_dir)
    path = os.path.join(self.run_dir, "shapes", "images", "test_00000.png")
    best = captioner.caption(path, beam_size=1)
    self.assertIsInstance(best, nmt_tf.Caption)
    self.assertEqual(best.words[-1], "</s>")
    self.assertEqual(best.attention.shape, (len(best.words), 6, 6))
    self.assertAllClose(best.attention.sum(axis=(1, 2)), np.ones(len(best.words)), atol=1e-4)
    with open(path, "rb") as f:
      data = f.read()
    pixels = tf.io.decode_png(data).numpy()  # uint8 [48, 48, 3]
    same = captioner.caption([data, pixels, pixels / 255.0], beam_size=1)
    self.assertEqual([c.text for c in same], [best.text] * 3)
    code, out, _ = run_command(caption_cli, run_dir=self.run_dir, input_file=path,
                               beam_size=1)
    self.assertEqual(out.split("\t")[1].strip(), best.text)
    with self.assertRaisesRegex(ValueError, "shape"):
      captioner.caption(np.zeros((4, 4)))

  def test_images_the_api_and_the_command_refuse(self):
    captioner = nmt_tf.load_captioner(self.run_dir)
    with self.assertRaisesRegex(ValueError, r"^Received a float image array with values in "
                                r"\[200, 200\]; expected floats in \[0, 1\]"):
      captioner.caption(np.full((48, 48, 3), 200.0))  # pixels in 0-255 as floats
    with self.assertRaisesRegex(ValueError, r"^Received an image array of shape \(48, 48\); "
                                r"expected \[height, width, 3\]"):
      captioner.caption(np.zeros((48, 48)))
    with self.assertRaisesRegex(DataError, "^the image bytes is not an image that can be read"):
      captioner.caption(b"garbage")
    with self.assertRaisesRegex(ValueError, "integer image array with values in"):
      captioner.caption(np.full((8, 8, 3), 300, np.int32))
    image = os.path.join(self.run_dir, "shapes", "images", "test_00000.png")
    listing = os.path.join(self.run_dir, "shapes", "train.tsv")  # a file
    for attention_dir, message in (
        (listing, f"--attention_dir={listing} is a file, not a folder; name a folder (it is "
                  "created if missing)."),
        (image, f"--attention_dir={image} is also an input of the command; choose another "
                "folder.")):
      code, out, err = run_command(caption_cli, run_dir=self.run_dir, input_file=image,
                                   attention_dir=attention_dir, beam_size=1)
      self.assertEqual((code, out, err), (2, "", f"error: {message}\n"))

  def test_commands_refuse_the_other_kind_of_run(self):
    translation = os.path.join(tempfile.mkdtemp(), "generated")
    config = configs.load("generated")
    config.data.update(train_size=50, valid_size=4, test_size=4)
    config.model.update(embedding_dim=8, encoder_units=8, decoder_units=8)
    config.train.update(steps=1, eval_every=1, checkpoint_every=1)
    nmt_tf.train(config, translation, stream=io.StringIO())
    image = os.path.join(self.run_dir, "shapes", "images", "test_00000.png")
    text = os.path.join(translation, "input.txt")
    with open(text, "w", encoding="utf-8") as f:
      f.write("the boy helps the king\n")
    cases = [
        (caption_cli, dict(run_dir=translation, input_file=image), "is a translation run"),
        (caption_cli, dict(run_dir=self.run_dir, input_file="/no/such.png"),
         "/no/such.png does not exist"),
        (caption_cli, dict(run_dir=self.run_dir,
                           input_file=os.path.join(self.run_dir, "config.json")),
         "is not an image that can be read"),
        (translate_cli, dict(run_dir=self.run_dir, input_file=text), "is a captioning run"),
        (evaluate_cli, dict(run_dir=self.run_dir, source_file=image, reference_file=image),
         "--eval_split"),
        (export_cli, dict(run_dir=self.run_dir, format="litert"), "LiteRT export is for "
         "translation runs"),
    ]
    cases.append((caption_cli, dict(run_dir=self.run_dir, input_file="-"),
                  "Standard input names no image"))  # an empty standard input
    for module, flag_values, message in cases:
      code, out, err = run_command(module, **flag_values)
      self.assertEqual(code, 2, (module.COMMAND, err))
      self.assertEqual(out, "")
      self.assertRegex(err, f"^error: .*{re.escape(message)}.*\n$")
    with self.assertRaisesRegex(ValueError, "is a captioning run"):
      nmt_tf.load(self.run_dir)
    with self.assertRaisesRegex(ValueError, "is a translation run"):
      nmt_tf.load_captioner(translation)

  def test_hard_attention_trains_and_resumes_exactly(self):
    config = configs.load("shapes")
    config.data.update(train_size=16, valid_size=4, test_size=4,
                       data_dir=os.path.join(self.run_dir, "shapes_small"))
    config.model.update(attention_mode="hard", encoder_units=8, decoder_units=16,
                        embedding_dim=8)
    config.pipeline.batch_size = 4
    config.train.update(steps=4, eval_every=4, checkpoint_every=2, alignment_images=0)
    straight = os.path.join(tempfile.mkdtemp(), "straight")
    nmt_tf.train(config, straight, stream=io.StringIO())
    resumed = os.path.join(tempfile.mkdtemp(), "resumed")
    config.train.steps = 2
    nmt_tf.train(config, resumed, stream=io.StringIO())
    config.train.steps = 4
    summary = nmt_tf.train(config, resumed, stream=io.StringIO())
    self.assertTrue(np.isfinite(summary["loss"]))
    a = tf.train.load_checkpoint(os.path.join(straight, "checkpoints", "ckpt-4"))
    b = tf.train.load_checkpoint(os.path.join(resumed, "checkpoints", "ckpt-4"))
    names = [n for n in a.get_variable_to_shape_map() if n.startswith("model/")]
    self.assertNotEmpty(names)
    for name in names:
      self.assertAllEqual(a.get_tensor(name), b.get_tensor(name), name)
