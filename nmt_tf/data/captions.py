"""Image captioning data: a folder of images and `image<TAB>caption` files (docs/DATA.md).

The layout in which Flickr8k and Flickr30k are distributed: one line per caption, several
captions per image,

  1000268201_693b08cb0e.jpg#0<TAB>A child in a pink dress is climbing up a set of stairs .

image paths relative to the image folder (`data.data_dir`), a `#n` caption number after the
name ignored. Splits are separate files: `data.train_tgt`, `data.valid_tgt`, `data.test_tgt`
(default <data_dir>/train.tsv, valid.tsv, test.tsv). `data.name="shapes"` writes the built-in
set of data/shapes.py to data_dir first. Images (JPEG, PNG, GIF or BMP) are decoded and resized
to model.image_size in tf.data, values scaled to [0, 1].
"""

import dataclasses
import os
import re
from typing import Dict, List

import numpy as np
import tensorflow as tf

from nmt_tf import console
from nmt_tf.data import shapes
from nmt_tf.data.batching import encode_target
from nmt_tf.data.errors import DataError

_AUTOTUNE = tf.data.AUTOTUNE
_NUMBER = re.compile(r"#\d+$")


@dataclasses.dataclass
class CaptionSplit:
  """Parallel lists: images[i] (an image file's path) has the caption captions[i]; path: the
  captions file read ("" for a split made in memory)."""

  images: List[str]
  captions: List[str]
  path: str = ""

  def __len__(self):
    return len(self.captions)

  def references(self):
    """(images, references): each image once, in order of first appearance, with the list of
    all its captions (sacrebleu's multiple references)."""
    grouped: Dict[str, List[str]] = {}
    for image, caption in zip(self.images, self.captions):
      grouped.setdefault(image, []).append(caption)
    return list(grouped), list(grouped.values())


def read_captions(path, image_dir, check_images=True):
  """A CaptionSplit from an `image<TAB>caption` file; DataError naming the line or image at
  fault."""
  if not os.path.isfile(path):
    raise DataError(f"The captions file {path} does not exist; set data.train_tgt (and "
                    "valid_tgt, test_tgt) to files of `image<TAB>caption` lines.")
  images, captions = [], []
  with open(path, "rb") as f:
    for number, raw in enumerate(f, 1):
      try:
        line = raw.decode("utf-8").rstrip("\r\n")
      except UnicodeDecodeError:
        raise DataError(f"{path} line {number}: not valid UTF-8; re-encode the file as "
                        "UTF-8.") from None
      if not line.strip():
        continue
      name, tab, caption = line.partition("\t")
      if not tab or not caption.strip() or not name.strip():
        raise DataError(f"{path} line {number}: expected `image<TAB>caption`; received "
                        f"{line[:60]!r}.")
      images.append(os.path.join(image_dir, _NUMBER.sub("", name.strip())))
      captions.append(" ".join(caption.split()))
  if not captions:
    raise DataError(f"{path} holds no caption; give it `image<TAB>caption` lines.")
  if check_images:
    for image in dict.fromkeys(images):
      if not os.path.isfile(image):
        raise DataError(f"{path}: the image {image} does not exist; set data.data_dir to the "
                        "folder the captions file's image names are relative to.")
  return CaptionSplit(images, captions, path)


def load_captions(config, image_size, default_dir=None):
  """{split: CaptionSplit} for data.name "captions" or "shapes" (a CorpusConfig).

  image_size: the side of the shapes set's images (the model's image_size).
  default_dir: where the shapes set goes when data.data_dir is not set (the run directory's
  `shapes` folder)."""
  data_dir = config.data_dir
  if config.name == "shapes":
    data_dir = data_dir or default_dir
    if not data_dir:
      raise DataError("data.name='shapes' needs a directory for its images; set "
                      "data.data_dir.")
    shapes.write_shapes(data_dir, {"train": config.train_size, "valid": config.valid_size,
                                   "test": config.test_size}, image_size, config.seed)
  elif not data_dir:
    raise DataError("data.name='captions' needs the image folder; set data.data_dir.")
  splits = {}
  for split in ("train", "valid", "test"):
    given = getattr(config, f"{split}_tgt")
    path = os.path.join(data_dir, given or f"{getattr(config, f'{split}_prefix')}.tsv")
    if given or split == "train" or os.path.isfile(path):
      splits[split] = read_captions(path, data_dir)
  return splits


# The largest image decoded: TensorFlow's decoders hold height * width * 3 bytes in an int32.
MAX_PIXELS = (2**31 - 1) // 3
# An image over this many times the model's size per side is first thinned out in uint8
# (every k-th row and column), so that its float32 copy stays small.
_MAX_SCALE = 4


def decode_image(data, size):
  """Encoded image bytes (scalar tf.string) -> float32 [size, size, 3] in [0, 1].

  The image is reduced while it is uint8: an image more than 4 times `size` on its shorter
  side keeps every k-th row and column first (k = shorter side // (4 size)), then the
  antialiased resize runs on float32 of at most 16 times the output's pixels per k^2.
  """
  image = tf.io.decode_image(data, channels=3, expand_animations=False)  # [h, w, 3] uint8
  shape = tf.shape(image)
  stride = tf.maximum(tf.minimum(shape[0], shape[1]) // (_MAX_SCALE * size), 1)
  image = image[::stride, ::stride]  # [h / k, w / k, 3] uint8
  image.set_shape([None, None, 3])
  image = tf.image.resize(tf.cast(image, tf.float32), [size, size], antialias=True)
  return tf.clip_by_value(image / 255.0, 0.0, 1.0)


def image_dimensions(data):
  """(width, height) that an encoded image's header declares (PNG, JPEG, GIF, BMP), or None
  when the header is not one of them or is cut short. Reads the header only."""
  if data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) >= 24:
    return int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
  if data[:6] in (b"GIF87a", b"GIF89a") and len(data) >= 10:
    return int.from_bytes(data[6:8], "little"), int.from_bytes(data[8:10], "little")
  if data[:2] == b"BM" and len(data) >= 26:
    return (abs(int.from_bytes(data[18:22], "little", signed=True)),
            abs(int.from_bytes(data[22:26], "little", signed=True)))
  if data[:2] == b"\xff\xd8":
    i = 2
    while i + 9 <= len(data) and data[i] == 0xFF:
      marker, length = data[i + 1], int.from_bytes(data[i + 2:i + 4], "big")
      if 0xC0 <= marker <= 0xCF and marker not in (0xC4, 0xC8, 0xCC):  # a start of frame
        return int.from_bytes(data[i + 7:i + 9], "big"), int.from_bytes(data[i + 5:i + 7],
                                                                        "big")
      i += 2 + length
  return None


def check_image_size(data, name):
  """DataError when the image `data` (bytes) declares more pixels than can be decoded."""
  dimensions = image_dimensions(data)
  if dimensions and dimensions[0] * dimensions[1] > MAX_PIXELS:
    width, height = dimensions
    raise DataError(f"{name} is a {width} x {height} image, more than the {MAX_PIXELS:,} "
                    "pixels that can be decoded; scale it down (a few thousand pixels a side "
                    "is plenty) and caption that.")


def read_image(data, size, name):
  """Encoded image bytes -> float32 numpy [size, size, 3] in [0, 1], decoded in uint8 and
  reduced before it is cast (decode_image).

  Raises:
    DataError: naming `name`, for bytes that are no image (a truncated file, another format)
      and for an image too large to decode; what the decoder prints itself (libjpeg) is kept
      off the console.
  """
  if not isinstance(data, bytes):
    raise DataError(f"{name}: expected the bytes of an encoded image, received "
                    f"{type(data).__name__}.")
  check_image_size(data, name)
  try:
    with console.native_stderr_silenced():
      return decode_image(tf.constant(data), size).numpy()
  except tf.errors.ResourceExhaustedError:
    raise DataError(f"{name} is too large to decode in the memory available; scale it down "
                    "and caption that.") from None
  except (tf.errors.InvalidArgumentError, tf.errors.UnknownError, ValueError):
    raise DataError(f"{name} is not an image that can be read (JPEG, PNG, GIF or BMP; a "
                    "truncated or damaged file is not); convert it or leave it out.") from None


def load_image(path, size):
  """An image file (scalar tf.string path) -> float32 [size, size, 3] in [0, 1]."""
  return decode_image(tf.io.read_file(path), size)


def image_dataset(paths, size):
  """Images of the files `paths`, in order: a dataset of float32 [size, size, 3]."""
  return tf.data.Dataset.from_tensor_slices(tf.constant(list(paths), tf.string)).map(
      lambda p: load_image(p, size), num_parallel_calls=_AUTOTUNE, deterministic=True)


def caption_batches(split, tokenizer, image_size, batch_size, order=None,
                    max_target_len=0):
  """Batches of dicts: source float32 [batch, size, size, 3], target_in and target_out int32
  [batch, tgt_len] (BOS ids / ids EOS, padded with 0).

  Args:
    split: a CaptionSplit.
    tokenizer: the caption tokenizer.
    image_size: side of the resized images.
    batch_size: pairs per batch.
    order: indices of the pairs to use, in order (default: all, as read).
    max_target_len: pairs with longer captions (in tokens, EOS not counted) are skipped; 0
      keeps all.
  """
  order = np.arange(len(split)) if order is None else np.asarray(order)
  images = tf.constant([split.images[i] for i in order], tf.string)
  captions = tf.constant([split.captions[i] for i in order], tf.string)
  ds = tf.data.Dataset.from_tensor_slices((images, captions))

  def encode(path, caption):
    target_in, target_out = encode_target(tokenizer, caption[tf.newaxis])
    return {"source": load_image(path, image_size), "target_in": target_in[0],
            "target_out": target_out[0]}

  ds = ds.map(encode, num_parallel_calls=_AUTOTUNE, deterministic=True)
  if max_target_len:
    ds = ds.filter(lambda ex: tf.shape(ex["target_out"])[0] <= max_target_len + 1)
  return ds.padded_batch(batch_size).prefetch(_AUTOTUNE)
