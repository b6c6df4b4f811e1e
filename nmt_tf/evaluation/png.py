"""Finishing a matplotlib figure as PNG bytes (shared by the evaluation plots)."""

import io


def finish_png(fig, ax, title=None):
  """Sets the optional title, lays the figure out and returns it as PNG bytes."""
  if title:
    ax.set_title(title, fontsize=9)
  fig.tight_layout(rect=(0, 0.04, 1, 1))  # room at the bottom for a note
  buffer = io.BytesIO()
  fig.savefig(buffer, format="png")
  return buffer.getvalue()
