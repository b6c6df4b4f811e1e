"""Whether a captioner looks at the shape it names: on the built-in shapes set
(data/shapes.py), the share of the words naming each shape ("small red circle") whose
attention argmax lies on a cell of that shape (Xu et al. 2015, fig. 2-3, counted).

For caption y of an image and the model's attention alpha [tgt_len, h * w] over the h x w
annotation grid (teacher-forced on y), word t of object k is a hit when cell argmax_i alpha_ti
holds a pixel of object k. The objects are found in the image by their colour (the caption
names it); two objects of one colour are told apart by the caption's relation.
"""

import numpy as np

from nmt_tf.data.shapes import COLOURS, CONVERSE

RELATIONS = tuple(CONVERSE)


def object_words(caption):
  """([positions], [positions]) of the words naming the first and the second object of a
  shapes caption "a SIZE COLOUR SHAPE RELATION a SIZE COLOUR SHAPE", and the relation."""
  words = caption.split()
  second = max(i for i, w in enumerate(words) if w == "a")
  relation = " ".join(words[4:second])
  if words[0] != "a" or second < 5 or relation not in RELATIONS or len(words) != second + 4:
    raise ValueError(f"Received caption={caption!r}; expected 'a SIZE COLOUR SHAPE RELATION a "
                     "SIZE COLOUR SHAPE'.")
  return [1, 2, 3], [second + 1, second + 2, second + 3], relation


def _components(mask):
  """Connected components (4-neighbours) of a boolean [h, w] mask: a list of boolean masks."""
  labels = np.zeros(mask.shape, int)
  found = []
  for start in zip(*np.nonzero(mask)):
    if labels[start]:
      continue
    label = len(found) + 1
    stack, pixels = [start], []
    labels[start] = label
    while stack:
      y, x = stack.pop()
      pixels.append((y, x))
      for ny, nx in ((y - 1, x), (y + 1, x), (y, x - 1), (y, x + 1)):
        if 0 <= ny < mask.shape[0] and 0 <= nx < mask.shape[1] and mask[ny, nx] \
            and not labels[ny, nx]:
          labels[ny, nx] = label
          stack.append((ny, nx))
    found.append(labels == label)
  return found


def object_masks(image, caption):
  """Boolean [side, side] pixel masks of the caption's first and second object.

  Args:
    image: uint8 [side, side, 3], a shapes image as written (exact colours).
    caption: one of its captions.
  """
  words = caption.split()
  first, second, relation = object_words(caption)
  colours = [words[first[1]], words[second[1]]]
  masks = [np.all(image[..., :3] == np.array(COLOURS[c], np.uint8), axis=-1) for c in colours]
  if colours[0] != colours[1]:
    return masks
  parts = sorted(_components(masks[0]), key=lambda m: -m.sum())[:2]
  if len(parts) < 2:
    raise ValueError(f"Received an image whose two {colours[0]} shapes touch; cannot tell them "
                     "apart.")
  axis = 1 if relation in ("left of", "right of") else 0  # x or y of the centroids
  centre = [np.nonzero(p)[axis].mean() for p in parts]
  before = relation in ("left of", "above")  # the first object has the smaller coordinate
  low, high = (parts[0], parts[1]) if centre[0] < centre[1] else (parts[1], parts[0])
  return [low, high] if before else [high, low]


def cells_of(mask, grid):
  """The grid cells (row-major indices of the grid x grid annotations) holding a pixel of
  `mask` [side, side]."""
  side = mask.shape[0]
  edges = np.linspace(0, side, grid + 1).round().astype(int)
  return {r * grid + c for r in range(grid) for c in range(grid)
          if mask[edges[r]:edges[r + 1], edges[c]:edges[c + 1]].any()}


def hits(attention, image, caption, grid):
  """(hits, words) for each object: how many of the words naming it have their attention
  argmax on one of its cells.

  Args:
    attention: [tgt_len, grid * grid] alpha of the caption's steps (step t emits word t).
    image: uint8 [side, side, 3].
    caption: the caption the attention was computed for.
    grid: the side of the annotation grid.
  """
  positions = object_words(caption)[:2]
  result = []
  for mask, words in zip(object_masks(image, caption), positions):
    cells = cells_of(mask, grid)
    argmax = np.argmax(np.asarray(attention)[words], axis=-1)
    result.append((int(sum(int(i) in cells for i in argmax)), len(words)))
  return result
