"""The CPU this process runs on, read from /proc/cpuinfo (Linux; elsewhere only the core count
is known).

`machine_label` names the machine of a docs/RESULTS.md row: "<cores> CPUs <model name>
(family <f>, <isa>)". The family and the widest matrix instructions are part of the name
because VMs of one model name ("AMD EPYC") differ by CPU generation: rows trained within a
time budget are only comparable on the same one. `native_bf16` tells whether bfloat16
matrix products run natively (AVX512_BF16 or AMX-BF16); without, TensorFlow converts the
operands and the products are slower than float32 (docs/PERFORMANCE.md, "Figures by CPU").
"""

import os

CPUINFO = "/proc/cpuinfo"
# The widest matrix-product instructions, best first: (flag in /proc/cpuinfo, name).
ISA_LEVELS = (("amx_bf16", "AMX-BF16"), ("avx512_bf16", "AVX512-BF16"), ("avx512f", "AVX-512"),
              ("avx2", "AVX2"))
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


def isa(info):
  """The widest matrix instructions of `info` (cpu_info), e.g. "AVX512-BF16"; "" if unknown."""
  flags = info.get("flags") or set()
  return next((name for flag, name in ISA_LEVELS if flag in flags),
              "no AVX2" if flags else "")


def machine_label(info=None, cores=None):
  """"2 CPUs AMD EPYC (family 26, AVX512-BF16)": cores, model name, family and ISA."""
  info = cpu_info() if info is None else info
  cores = os.cpu_count() if cores is None else cores
  label = f"{cores} CPUs {info.get('model_name', '')}".strip()
  details = ", ".join(part for part in (f"family {info['family']}" if info.get("family") else "",
                                        isa(info)) if part)
  return f"{label} ({details})" if details else label


def cpu_id(info=None):
  """"family 6 model 143 stepping 8": the CPU generation within a model name, which the
  machine label leaves out (two Intel VMs of one label differed 1.7x in speed, docs/RESULTS.md,
  "Intel Xeon machine again"); recorded with each results row. "" if unknown."""
  info = cpu_info() if info is None else info
  return " ".join(f"{key} {info[key]}" for key in ("family", "model", "stepping")
                  if info.get(key))


def recorded_here(label, recorded_cpu, info=None):
  """Whether a machine record names this machine: the same label and the same cpu_id. A
  record without a CPU id (rows published before it was recorded) names an unknown VM of its
  label, which is not this one: two VMs of one label differed 1.7x in speed."""
  info = cpu_info() if info is None else info
  return label == machine_label(info) and (recorded_cpu or "") == cpu_id(info)


def machine_name(label, recorded_cpu):
  """"<label> [<cpu id>]": the machine of a record, one budget's machine in docs/RESULTS.md;
  the label alone when the record has no CPU id."""
  return f"{label} [{recorded_cpu}]" if recorded_cpu else label


def native_bf16(info=None):
  """True / False: whether bfloat16 matrix products run natively; None when unknown."""
  info = cpu_info() if info is None else info
  if not info.get("flags"):
    return None
  return any(flag in info["flags"] for flag in BF16_FLAGS)
