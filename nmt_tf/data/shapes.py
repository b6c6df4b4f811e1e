"""The built-in captioning set: images of two coloured shapes, captions that name them and
where one is from the other. The quick start of caption generation (docs/DATA.md).

Each image holds two shapes (circle, square or triangle; red, green, blue or yellow; small or
large) on a white ground, placed so that one is clearly left of, right of, above or below the
other. Its two captions say the same from either side:

  a small red circle left of a large blue square
  a large blue square right of a small red circle

so BLEU is taken against both references. The set is drawn from its seed alone, written once
as PNG files with one `image<TAB>caption` file per split (the layout of data/captions.py) and
reused while its settings stay the same.
"""

import json
import os

import numpy as np
import tensorflow as tf

from nmt_tf import write_path
from nmt_tf.data.errors import DataError

COLOURS = {"red": (220, 40, 40), "green": (40, 170, 60), "blue": (40, 80, 230),
           "yellow": (235, 200, 30)}
SHAPES = ("circle", "square", "triangle")
SIZES = {"small": 0.10, "large": 0.17}  # radius as a share of the image side
CONVERSE = {"left of": "right of", "right of": "left of", "above": "below", "below": "above"}
MANIFEST = "shapes.json"
SPLITS = ("train", "valid", "test")


def _mask(shape, cx, cy, radius, side):
  """Boolean [side, side] of the pixels of `shape` centred at (cx, cy)."""
  y, x = np.mgrid[0:side, 0:side] + 0.5
  dx, dy = x - cx, y - cy
  if shape == "circle":
    return dx * dx + dy * dy <= radius * radius
  if shape == "square":
    half = radius * 0.85
    return (np.abs(dx) <= half) & (np.abs(dy) <= half)
  # an upward triangle inside the circle of `radius`: apex on top, base below the centre
  top, base = -radius, radius * 0.6
  inside = (dy >= top) & (dy <= base)
  half_width = (dy - top) / (base - top) * radius
  return inside & (np.abs(dx) <= half_width)


def _phrase(obj):
  return f"a {obj['size']} {obj['colour']} {obj['shape']}"


def draw_example(rng, side):
  """(image uint8 [side, side, 3], [caption, converse caption]) of one random scene."""
  while True:
    objects = []
    kinds = rng.choice(len(SHAPES) * len(COLOURS), size=2, replace=False)
    for kind in kinds:
      size = str(rng.choice(list(SIZES)))
      radius = SIZES[size] * side
      objects.append({"shape": SHAPES[kind % len(SHAPES)],
                      "colour": list(COLOURS)[kind // len(SHAPES)], "size": size,
                      "radius": radius,
                      "cx": rng.uniform(radius + 1, side - radius - 1),
                      "cy": rng.uniform(radius + 1, side - radius - 1)})
    a, b = objects
    dx, dy = b["cx"] - a["cx"], b["cy"] - a["cy"]
    apart = np.hypot(dx, dy) > a["radius"] + b["radius"] + 2
    # One axis must clearly dominate, so that the relation named is the one seen.
    if apart and max(abs(dx), abs(dy)) > 2 * min(abs(dx), abs(dy)):
      break
  image = np.full((side, side, 3), 255, np.uint8)
  for obj in objects:
    image[_mask(obj["shape"], obj["cx"], obj["cy"], obj["radius"], side)] = \
        COLOURS[obj["colour"]]
  if abs(dx) >= abs(dy):
    relation = "left of" if dx > 0 else "right of"
  else:
    relation = "above" if dy > 0 else "below"
  return image, [f"{_phrase(a)} {relation} {_phrase(b)}",
                 f"{_phrase(b)} {CONVERSE[relation]} {_phrase(a)}"]


def write_shapes(directory, sizes, image_size=64, seed=0):
  """Writes the set to `directory` (images/<split>_<i>.png, <split>.tsv, shapes.json) unless
  it already holds the same set; returns `directory`.

  Args:
    directory: where the set goes; created, or reused when its shapes.json has the same
      settings. Any other existing content is refused (DataError), never overwritten.
    sizes: {split: number of images}.
    image_size: the side of the square images, in pixels.
    seed: the set follows from it alone.
  """
  settings = {"sizes": {k: int(v) for k, v in sizes.items()}, "image_size": int(image_size),
              "seed": int(seed), "version": 1}
  manifest = os.path.join(directory, MANIFEST)
  if os.path.isfile(manifest):
    with open(manifest, encoding="utf-8") as f:
      try:
        saved = json.load(f)
      except ValueError:
        saved = None
    if saved == settings:
      return directory
    raise DataError(f"{directory} holds a generated shapes set with other settings ({saved}); "
                    "set data.data_dir to another directory.")
  if os.path.isdir(directory) and os.listdir(directory):
    raise DataError(f"{directory} is not empty and holds no shapes set; set data.data_dir to "
                    "a new directory for the generated images.")
  if os.path.isdir(directory):
    os.rmdir(directory)  # empty, checked above
  with write_path.staged_folder(directory) as staging:  # the set appears whole or not at all
    write_path.make_folder(os.path.join(staging, "images"))
    for index, split in enumerate(SPLITS):
      rng = np.random.default_rng([seed, index])
      lines = []
      for i in range(sizes.get(split, 0)):
        image, captions = draw_example(rng, image_size)
        name = f"images/{split}_{i:05d}.png"
        write_path.write_bytes(os.path.join(staging, name), tf.io.encode_png(image).numpy())
        lines += [f"{name}\t{caption}\n" for caption in captions]
      if lines:
        write_path.write_text(os.path.join(staging, f"{split}.tsv"), "".join(lines))
    write_path.write_text(os.path.join(staging, MANIFEST), json.dumps(settings))
  return directory
