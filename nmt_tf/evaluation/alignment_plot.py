"""Attention alignment heat maps (Bahdanau et al. 2015, fig. 3) as PNG bytes.

Source tokens along x, target tokens along y, darker = more attention. Rendered with
matplotlib's Agg canvas (a Figure without pyplot: no display, no global state); used for
TensorBoard images while training and by `nmt-tf evaluate`.
"""


import io

from matplotlib.figure import Figure
from matplotlib.font_manager import FontProperties
from matplotlib.textpath import text_to_path
import numpy as np

FONT_SIZE = 8  # of the tick labels


def _text(token):
  return token.decode("utf-8", "replace") if isinstance(token, bytes) else str(token)


def alignment_png(attention, source_tokens, target_tokens, title=None, dpi=80):
  """Draws one alignment matrix.

  The margins are sized from the longest tick labels, measured with the font, so the figure
  is drawn once (a layout engine or a tight bounding box would draw it two more times to
  measure the labels: twice as slow, and validation draws several maps at every evaluation).

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
  # Inches: cells of 0.35 x 0.3, the longest tick labels, the axis labels.
  left = _label_inches(target[:rows]) + 0.45
  bottom = _label_inches(source[:cols]) + 0.45
  top, right = (0.35 if title else 0.1), 0.15
  width = min(max(3.0, 0.35 * cols + left + right), 30.0)
  height = min(max(2.5, 0.3 * rows + bottom + top), 30.0)
  fig = Figure(figsize=(width, height), dpi=dpi)
  ax = fig.add_axes([left / width, bottom / height, max(1 - (left + right) / width, 0.05),
                     max(1 - (bottom + top) / height, 0.05)])
  ax.imshow(weights, cmap="Greys", vmin=0.0, vmax=1.0, aspect="auto", interpolation="nearest")
  ax.set_xticks(range(cols))
  ax.set_xticklabels(source[:cols], rotation=90, fontsize=FONT_SIZE)
  ax.set_yticks(range(rows))
  ax.set_yticklabels(target[:rows], fontsize=FONT_SIZE)
  ax.set_xlabel("source")
  ax.set_ylabel("target")
  if title:
    ax.set_title(title, fontsize=9)
  buffer = io.BytesIO()
  fig.savefig(buffer, format="png")
  return buffer.getvalue()


def _label_inches(labels):
  """The width of the longest of `labels` at FONT_SIZE, in inches (measured with the font,
  without drawing)."""
  font = FontProperties(size=FONT_SIZE)
  widths = [text_to_path.get_text_width_height_descent(label, font, ismath=False)[0]
            for label in set(labels)]
  return max(widths, default=0.0) / 72
