"""Where a shapes captioner looks (evaluation/shape_attention.py): the words naming each
shape, the shapes' pixels and cells found by colour, and the argmax hits, against scenes drawn
by data/shapes.py."""

import numpy as np
import tensorflow as tf

from nmt_tf.data import shapes
from nmt_tf.evaluation import shape_attention


class ShapeAttentionTest(tf.test.TestCase):

  def test_words_of_each_object(self):
    self.assertEqual(shape_attention.object_words("a small red circle left of a large blue "
                                                  "square"), ([1, 2, 3], [7, 8, 9], "left of"))
    self.assertEqual(shape_attention.object_words("a large green triangle above a small red "
                                                  "square"), ([1, 2, 3], [6, 7, 8], "above"))
    with self.assertRaisesRegex(ValueError, "expected 'a SIZE COLOUR SHAPE RELATION"):
      shape_attention.object_words("a red circle")

  def test_masks_follow_the_caption_for_every_scene(self):
    """Over drawn scenes (one colour twice among them): each caption's first object is the
    one its relation puts first, from either caption of the image."""
    rng = np.random.default_rng(0)
    same_colour = 0
    for _ in range(60):
      image, captions = shapes.draw_example(rng, 48)
      first, second = shape_attention.object_masks(image, captions[0])
      self.assertTrue(first.any() and second.any())
      self.assertFalse((first & second).any())
      swapped = shape_attention.object_masks(image, captions[1])
      self.assertAllEqual(swapped[0], second)
      self.assertAllEqual(swapped[1], first)
      relation = shape_attention.object_words(captions[0])[2]
      axis = 1 if relation in ("left of", "right of") else 0
      order = np.nonzero(first)[axis].mean() < np.nonzero(second)[axis].mean()
      self.assertEqual(order, relation in ("left of", "above"), captions[0])
      words = captions[0].split()
      same_colour += words[2] == words[-2]
    self.assertGreater(same_colour, 0)

  def test_hits_count_the_argmax_on_the_named_shape(self):
    rng = np.random.default_rng(1)
    image, captions = shapes.draw_example(rng, 48)
    caption = captions[0]
    first, second = shape_attention.object_masks(image, caption)
    cells = [shape_attention.cells_of(m, 6) for m in (first, second)]
    only = [sorted(cells[0] - cells[1]), sorted(cells[1] - cells[0])]
    self.assertTrue(only[0] and only[1])
    positions = shape_attention.object_words(caption)[:2]
    attention = np.full([len(caption.split()) + 1, 36], 0.01)
    for k in (0, 1):  # each object's words look at it, except one that looks at the other
      attention[positions[k], only[k][0]] = 1.0
    attention[positions[1][0], only[1][0]] = 0.0
    attention[positions[1][0], only[0][0]] = 1.0
    self.assertEqual(shape_attention.hits(attention, image, caption, 6), [(3, 3), (2, 3)])
    # A cell holds a pixel of the mask: the pixel (9, 20) lies in row 1, column 2 of 8 x 8.
    mask = np.zeros([48, 48], bool)
    mask[9, 20] = True
    self.assertEqual(shape_attention.cells_of(mask, 6), {8})
