"""How many sentences one search call may take without running out of memory.

A search holds, for each of the `beam_size` rows of a sentence, its attention buffers (alive
and finished hypotheses, [max_length, source_length] each, decoding/beam.py) and the step's
scores over the target vocabulary, all float32 and held in a few copies while a step runs:

  bytes per sentence ~= COPIES * 4 * beam_size * (max_length * source_length + vocab_size)

An absurd beam (10^9) would otherwise allocate until the machine swaps. The callers take
batches that fit in half of the memory available now, and refuse a beam whose search of one
sentence does not fit.
"""

import os
from typing import Optional

COPIES = 4  # buffers and their reordered copies, scores, log-probabilities, top-k totals
MEMINFO = "/proc/meminfo"
SHARE = 0.5  # of the available memory, for one search call


def available_bytes(meminfo=MEMINFO) -> Optional[int]:
  """Memory available to a new allocation (MemAvailable of /proc/meminfo, else the physical
  memory), or None when the system does not tell."""
  try:
    with open(meminfo, encoding="ascii") as f:
      for line in f:
        if line.startswith("MemAvailable:"):
          return int(line.split()[1]) * 1024
  except (OSError, ValueError, IndexError):
    pass
  try:
    return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
  except (AttributeError, ValueError, OSError):
    return None


def bytes_per_sentence(beam_size, max_length, source_length, vocab_size):
  """The estimate of the module docstring."""
  return COPIES * 4 * beam_size * (max_length * source_length + vocab_size)


def batch_limit(beam_size, max_length, source_length, vocab_size, available=None):
  """The most sentences of `source_length` tokens (EOS included) one search call may take.

  Args:
    beam_size, max_length, vocab_size: of the search (max_length counts EOS).
    source_length: the longest source of the batch, EOS included.
    available: bytes available (default: `available_bytes()`; None = no limit known).

  Returns:
    A positive int, or None when the memory is unknown.

  Raises:
    ValueError: one sentence does not fit, naming the beam size and the fix.
  """
  available = available_bytes() if available is None else available
  if available is None:
    return None
  need = bytes_per_sentence(beam_size, max_length, source_length, vocab_size)
  limit = int(SHARE * available) // need
  if limit < 1:
    raise ValueError(
        f"Received beam_size={beam_size}: its search of one {source_length}-token sentence "
        f"would need about {need / 2**30:,.1f} GiB, more than half of the "
        f"{available / 2**30:.1f} GiB of memory available; use a smaller beam (4 to 12 is "
        "usual).")
  return limit
