"""The image encoder of caption generation with attention (Xu et al. 2015, sec. 3.1.1).

A convnet's feature map without its top pooling gives L = h * w spatially localised feature
vectors, the annotation vectors a_i, i = 1..L; the decoders attend over them exactly as over
a sentence's annotations (docs/EQUATIONS.md, "Image captioning"):

  F = convnet(x)                       [batch, h, w, channels]  (x: the image, values in [0, 1])
  F' = [F ; u ; v]                     with coordinates: the column u and row v of each cell,
                                       in [-1, 1] (Liu et al. 2018, "CoordConv")
  a_i = tanh(W_a F'_i + b_a)           [batch, L, units], i runs over the cells row by row
  summary = 1/L sum_i a_i              the mean annotation, from which the decoders' initial
                                       state is computed (Xu et al. 2015, sec. 3.1.2)

The convnet is either trained from scratch (num_layers blocks of a 3x3 convolution with ReLU
and a 2x2 max pooling, so h = w = image_size / 2^num_layers), or a `keras.applications`
backbone named "module.Class" (for example "resnet50.ResNet50"), built without its top and
fed the module's own preprocess_input; its weights are read from a local file when one is
given (and then frozen, as Xu et al. kept their VGG fixed), never downloaded.
"""

import os

import keras
import tensorflow as tf


def _check_positive(**values):
  for key, value in values.items():
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
      raise ValueError(f"Received {key}={value!r}; expected a positive integer.")


def _groups(channels, most=8):
  """The largest divisor of `channels` up to `most`: the group count of GroupNormalization."""
  return max(g for g in range(1, most + 1) if channels % g == 0)


def coordinate_channels(height, width, batch, dtype=tf.float32):
  """The column and row of every cell in [-1, 1]: [batch, height, width, 2]."""
  u = tf.linspace(-1.0, 1.0, width) if width > 1 else tf.zeros([1])   # [width]
  v = tf.linspace(-1.0, 1.0, height) if height > 1 else tf.zeros([1])  # [height]
  grid = tf.stack(tf.meshgrid(u, v), axis=-1)  # [height, width, 2]
  return tf.cast(tf.tile(grid[tf.newaxis], [batch, 1, 1, 1]), dtype)


def backbone_module(name):
  """(keras.applications module, class) of a backbone named "module.Class"; ValueError
  naming the fix for any other name."""
  module_name, _, class_name = (name or "").partition(".")
  module = getattr(keras.applications, module_name, None)
  cls = getattr(module, class_name, None) if module is not None else None
  if cls is None or not hasattr(module, "preprocess_input"):
    raise ValueError(f"Received image_backbone={name!r}; expected a keras.applications "
                     "model as 'module.Class', e.g. 'resnet50.ResNet50', "
                     "'mobilenet_v2.MobileNetV2' or 'vgg16.VGG16'.")
  return module, cls


@keras.saving.register_keras_serializable(package="nmt_tf")
class ImageEncoder(keras.layers.Layer):
  """Images [batch, size, size, 3] in [0, 1] -> annotation vectors, as in the module docstring.

  Args:
    units: D, the size of each annotation vector a_i (and the channels of the convolutions).
    num_layers: convolution blocks of the convnet trained from scratch.
    image_size: height and width of the input images.
    backbone: None, or a keras.applications model as "module.Class".
    backbone_weights: None, or the path of that model's weights without its top (.h5 or
      .weights.h5); loaded and frozen.
    coordinates: append each cell's column and row to its features before W_a.

  Attribute `output_dim` = units; `num_annotations` = L.
  """

  def __init__(self, units, num_layers=3, image_size=64, backbone=None, backbone_weights=None,
               coordinates=True, **kwargs):
    super().__init__(**kwargs)
    _check_positive(units=units, num_layers=num_layers, image_size=image_size)
    if backbone is None and image_size % (2 ** num_layers):
      raise ValueError(f"Received image_size={image_size} with num_layers={num_layers}; "
                       f"expected a multiple of 2^{num_layers} = {2 ** num_layers}, so that "
                       "every pooling halves the feature map exactly.")
    if backbone_weights is not None and backbone is None:
      raise ValueError("Received image_backbone_weights without image_backbone; name the "
                       "keras.applications model the weights belong to.")
    if backbone_weights is not None and not os.path.isfile(backbone_weights):
      raise ValueError(f"The backbone weights file {backbone_weights} does not exist; give "
                       "the path of a local weights file (no download), or none to train the "
                       "backbone from a random start.")
    self.units = units
    self.num_layers = num_layers
    self.image_size = image_size
    self.backbone_name = backbone
    self.backbone_weights = backbone_weights
    self.coordinates = bool(coordinates)
    self.output_dim = units
    if backbone is None:
      for l in range(num_layers):  # attributes, not a list (see encoders.RNNEncoder)
        setattr(self, f"conv{l}", keras.layers.Conv2D(units, 3, padding="same",
                                                      name=f"conv{l}"))
        setattr(self, f"norm{l}", keras.layers.GroupNormalization(
            groups=_groups(units), name=f"norm{l}"))
      side = image_size // 2 ** num_layers
      self.grid = (side, side)
    else:
      module, cls = backbone_module(backbone)
      self._preprocess = module.preprocess_input
      self.backbone = cls(include_top=False, weights=None,
                          input_shape=(image_size, image_size, 3))
      if backbone_weights is not None:
        try:
          self.backbone.load_weights(backbone_weights)
        except (ValueError, OSError) as error:
          reason = " ".join(str(error).split())[:120]
          raise ValueError(f"The weights {backbone_weights} do not fit {backbone} without its "
                           f"top ({type(error).__name__}: {reason}); give the weights file of "
                           "that model saved with include_top=False.") from None
        self.backbone.trainable = False
      self.grid = tuple(int(d) for d in self.backbone.output_shape[1:3])
    self.num_annotations = self.grid[0] * self.grid[1]
    self.projection = keras.layers.Dense(units, activation="tanh", name="W_a")

  @property
  def convs(self):
    return [getattr(self, f"conv{l}") for l in range(self.num_layers)]

  def build(self, *args, **kwargs):
    self.built = True  # the convolutions build on first use

  def feature_map(self, images, training=False):
    """images [batch, size, size, 3] -> F [batch, h, w, channels]."""
    if self.backbone_name is None:
      x = images * 2.0 - 1.0  # pixels in [-1, 1]
      for l, conv in enumerate(self.convs):
        x = tf.nn.relu(getattr(self, f"norm{l}")(conv(x)))  # [batch, size / 2^l, ..., units]
        x = tf.nn.max_pool2d(x, 2, 2, "VALID")  # [batch, size / 2^(l+1), ..., units]
      return x
    # keras.applications models take pixels in [0, 255] through their own preprocessing.
    return self.backbone(self._preprocess(images * 255.0), training=training)

  def call(self, images, training=False):
    """images [batch, size, size, 3] float in [0, 1] ->
    (annotations [batch, L, units], mask [batch, L] all True, summary [batch, units])."""
    images = tf.cast(images, self.compute_dtype)
    features = self.feature_map(images, training=training)  # [batch, h, w, channels]
    batch = tf.shape(features)[0]
    if self.coordinates:
      features = tf.concat([features, coordinate_channels(
          self.grid[0], self.grid[1], batch, features.dtype)], axis=-1)  # [..., channels + 2]
    flat = tf.reshape(features, [batch, self.num_annotations, features.shape[-1]])  # [b, L, c]
    annotations = self.projection(flat)  # [batch, L, units]
    mask = tf.ones([batch, self.num_annotations], tf.bool)  # every cell is real
    return annotations, mask, tf.reduce_mean(annotations, axis=1)  # summary [batch, units]

  def get_config(self):
    return {**super().get_config(), "units": self.units, "num_layers": self.num_layers,
            "image_size": self.image_size, "backbone": self.backbone_name,
            "backbone_weights": self.backbone_weights, "coordinates": self.coordinates}
