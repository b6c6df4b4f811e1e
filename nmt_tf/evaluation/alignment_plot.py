"""Attention alignment heat maps (Bahdanau et al. 2015, fig. 3) as PNG bytes.

Source tokens along x, target tokens along y, darker = more attention. Rendered with
matplotlib's Agg backend (no display needed); used for TensorBoard images while training and by
`run.py evaluate`.
"""


import matplotlib

matplotlib.use("Agg")
from matplotlib import pyplot as plt  # pylint: disable=g-import-not-at-top,wrong-import-position
import numpy as np  # pylint: disable=g-import-not-at-top,wrong-import-position

from nmt_tf.evaluation.png import finish_png


def _text(token):
  return token.decode("utf-8", "replace") if isinstance(token, bytes) else str(token)


def alignment_png(attention, source_tokens, target_tokens, title=None, dpi=80):
  """Draws one alignment matrix.

  Args:
    attention: [tgt_len, src_len] weights (numpy or anything np.asarray accepts); rows or
      columns beyond the token lists are cut.
    source_tokens: src_len tokens (str or bytes), the x axis.
    target_tokens: tgt_len tokens, the y axis (top to bottom).
    title: optional figure title.
    dpi: resolution.

  Returns:
    The PNG image as bytes.
  """
  weights = np.asarray(attention, dtype=np.float32)
  if weights.ndim != 2:
    raise ValueError(f"Received attention of shape {weights.shape}; expected [tgt_len, "
                     "src_len].")
  source = [_text(t) for t in source_tokens]
  target = [_text(t) for t in target_tokens]
  weights = weights[:len(target), :len(source)]  # [tgt_len, src_len]
  rows, cols = weights.shape
  width = min(max(3.0, 0.35 * cols + 1.5), 30.0)
  height = min(max(2.5, 0.3 * rows + 1.2), 30.0)
  fig, ax = plt.subplots(figsize=(width, height), dpi=dpi)
  try:
    ax.imshow(weights, cmap="Greys", vmin=0.0, vmax=1.0,
              aspect="auto", interpolation="nearest")
    ax.set_xticks(range(cols))
    ax.set_xticklabels(source[:cols], rotation=90, fontsize=8)
    ax.set_yticks(range(rows))
    ax.set_yticklabels(target[:rows], fontsize=8)
    ax.set_xlabel("source")
    ax.set_ylabel("target")
    return finish_png(fig, ax, title)
  finally:
    plt.close(fig)
