"""The CPU this process runs on, read from /proc/cpuinfo (Linux; elsewhere nothing is known).

`native_bf16` tells whether bfloat16 matrix products run natively (AVX512_BF16 or AMX-BF16);
without, TensorFlow converts the operands and the products are slower than float32
(docs/PERFORMANCE.md, "Figures by CPU"), so training warns about a bfloat16 precision there.
`resolve_precision` turns the precision "auto" (train.precision, decode.precision) into the
fastest exact-enough choice for this machine. `cores` counts the cores this process may run
on.
"""

import os

CPUINFO = "/proc/cpuinfo"
BF16_FLAGS = ("amx_bf16", "avx512_bf16")


def cpu_info(path=CPUINFO):
  """The first processor's entries: {"model_name", "family", "model", "stepping", "flags"}
  (flags a set); {} when `path` cannot be read."""
  fields = {}
  try:
    with open(path, encoding="utf-8") as f:
      for line in f:
        if not line.strip():
          if fields:
            break  # the end of the first processor's block
          continue
        key, _, value = line.partition(":")
        fields.setdefault(key.strip(), value.strip())
  except OSError:
    return {}
  return {"model_name": fields.get("model name", ""), "family": fields.get("cpu family", ""),
          "model": fields.get("model", ""), "stepping": fields.get("stepping", ""),
          "flags": set(fields.get("flags", "").split())}


def cores():
  """The cores this process may run on: its affinity (`taskset -c 0` gives 1), or every core
  where the system does not tell."""
  if hasattr(os, "sched_getaffinity"):
    return len(os.sched_getaffinity(0))
  return os.cpu_count()


def native_bf16(info=None):
  """True / False: whether bfloat16 matrix products run natively; None when unknown."""
  info = cpu_info() if info is None else info
  if not info.get("flags"):
    return None
  return any(flag in info["flags"] for flag in BF16_FLAGS)


def resolve_precision(precision, info=None, gpus=()):
  """(precision, reason): "auto" resolved for this machine, any other name as it is.

  auto is float32_bf16_matmul (float32 with bfloat16 matrix-product operands) on a CPU with
  AVX512_BF16 or AMX-BF16 and no GPU in use, else float32: on CPUs without those
  instructions the bfloat16 products are emulated, slower than float32 (docs/PERFORMANCE.md).
  `reason` is None for an explicit precision.
  """
  if precision != "auto":
    return precision, None
  if gpus:
    return "float32", "auto: a GPU is in use"
  native = native_bf16(info)
  if native:
    return "float32_bf16_matmul", "auto: this CPU has AVX512_BF16 or AMX-BF16"
  if native is None:
    return "float32", "auto: this CPU's instructions are unknown"
  return "float32", "auto: this CPU has no AVX512_BF16 or AMX-BF16"
