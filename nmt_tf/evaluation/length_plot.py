"""BLEU against source-sentence length as a PNG (Bahdanau et al. 2015, Fig. 2)."""


import textwrap

import matplotlib

matplotlib.use("Agg")
from matplotlib import pyplot as plt  # pylint: disable=g-import-not-at-top,wrong-import-position

from nmt_tf.evaluation.png import finish_png

# Buckets of fewer sentences are not drawn: the BLEU of one or two sentences says nothing of
# the model at that length (Multi30k's test set has one sentence of 30 words or more).
MIN_SENTENCES = 10


def plotted(buckets, min_sentences=MIN_SENTENCES):
  """(buckets drawn, buckets left out): those of at least / fewer than min_sentences."""
  return ([b for b in buckets if b.count >= min_sentences],
          [b for b in buckets if b.count < min_sentences])


def length_bleu_png(buckets, title=None, dpi=80, min_sentences=MIN_SENTENCES):
  """Draws BLEU (y) per source-length bucket (x).

  The x axis has one position per bucket, labelled with its lengths and its number of
  sentences ("10-19 (559)"): every system is scored on the same sentences, so the counts are
  written once, not at every point. With several systems the legend stands to the right of the
  axes and the note on left-out buckets below them, so that neither hides a line.

  Args:
    buckets: list of analysis.LengthBucket (or (low, high, count, bleu) objects), or
      such lists as a dict {label: buckets} to compare systems (with a legend).
    title: optional title (wrapped to the figure's width).
    dpi: resolution.
    min_sentences: buckets of fewer sentences are left out (named in a note).

  Returns:
    PNG bytes.
  """
  series = buckets if isinstance(buckets, dict) else {"BLEU": buckets}
  legend = isinstance(buckets, dict)
  fig, ax = plt.subplots(figsize=(7.5 if legend else 5.0, 3.6), dpi=dpi)
  try:
    left_out, positions = set(), {}
    for values in series.values():
      drawn, dropped = plotted(values, min_sentences)
      left_out.update((b.low, b.high, b.count) for b in dropped)
      for b in drawn:
        positions.setdefault((b.low, b.high), b.count)
    keys = sorted(positions)
    index = {key: i for i, key in enumerate(keys)}
    for label, values in series.items():
      drawn, _ = plotted(values, min_sentences)
      ax.plot([index[(b.low, b.high)] for b in drawn], [b.bleu for b in drawn], marker="o",
              label=label)
    ax.set_xticks(range(len(keys)))
    ax.set_xticklabels([f"{low}-{high}\n({positions[(low, high)]})" for low, high in keys],
                       fontsize=8)
    ax.set_xlabel("source sentence length in words (sentences)")
    ax.set_ylabel("BLEU")
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    if legend:
      ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0)
    if left_out:
      ax.text(0.0, -0.32, f"not drawn (< {min_sentences} sentences): " + ", ".join(
          f"{low}-{high} words ({count})" for low, high, count in sorted(left_out)),
              transform=ax.transAxes, fontsize=7, va="top")
    # The legend stands outside the axes, which tight_layout cannot place: a fixed layout,
    # and the saved image is cropped to what is drawn.
    fig.subplots_adjust(left=0.1, right=0.66 if legend else 0.95, bottom=0.25, top=0.85)
    return finish_png(fig, ax, textwrap.fill(title, 60 if legend else 50) if title else None,
                      tight_layout=False)
  finally:
    plt.close(fig)
