"""nmt_tf/cpu.py: the first processor of /proc/cpuinfo, and native bfloat16 products."""

import os
import tempfile
from unittest import mock

import tensorflow as tf

from nmt_tf import cpu

ZEN3 = """processor\t: 0
vendor_id\t: AuthenticAMD
cpu family\t: 25
model\t\t: 1
model name\t: AMD EPYC
stepping\t: 1
flags\t\t: fpu sse2 avx avx2 fma

processor\t: 1
vendor_id\t: AuthenticAMD
cpu family\t: 99
model\t\t: 7
model name\t: Another Name
flags\t\t: fpu amx_bf16
"""


def info_of(flags, family="26", name="AMD EPYC"):
  return {"model_name": name, "family": family, "model": "2", "flags": set(flags.split())}


class CpuTest(tf.test.TestCase):

  def cpuinfo(self, text):
    path = os.path.join(tempfile.mkdtemp(), "cpuinfo")
    with open(path, "w", encoding="utf-8") as f:
      f.write(text)
    return path

  def test_reads_the_first_processor(self):
    info = cpu.cpu_info(self.cpuinfo(ZEN3))
    self.assertEqual(info, {"model_name": "AMD EPYC", "family": "25", "model": "1",
                            "stepping": "1", "flags": {"fpu", "sse2", "avx", "avx2", "fma"}})
    self.assertFalse(cpu.native_bf16(info))

  def test_native_bf16(self):
    self.assertTrue(cpu.native_bf16(info_of("avx512f avx512_bf16")))
    self.assertTrue(cpu.native_bf16(info_of("amx_bf16", family="6", name="Intel")))
    self.assertFalse(cpu.native_bf16(info_of("avx512f")))  # AVX-512 without BF16

  def test_unknown_cpu(self):
    missing = os.path.join(tempfile.mkdtemp(), "no_cpuinfo")
    self.assertEqual(cpu.cpu_info(missing), {})
    self.assertIsNone(cpu.native_bf16({}))

  def test_cores_this_process_may_run_on(self):
    with mock.patch.object(os, "sched_getaffinity", return_value={1}, create=True):
      self.assertEqual(cpu.cores(), 1)  # taskset -c 1
    with mock.patch.dict(os.__dict__), mock.patch.object(os, "cpu_count", return_value=8):
      os.__dict__.pop("sched_getaffinity", None)  # a system that does not tell: every core
      self.assertEqual(cpu.cores(), 8)

  def test_this_machine(self):
    try:
      with open(cpu.CPUINFO, encoding="utf-8") as f:
        words = set(f.read().split())
    except OSError:
      self.assertIsNone(cpu.native_bf16())
      return
    # The raw text, independently of the parser: a BF16 flag anywhere means native products.
    self.assertEqual(cpu.native_bf16(), bool(words & set(cpu.BF16_FLAGS)))


if __name__ == "__main__":
  tf.test.main()


class ResolvePrecisionTest(tf.test.TestCase):

  def test_auto_takes_bfloat16_products_only_where_they_are_native(self):
    self.assertEqual(cpu.resolve_precision("auto", info_of("avx512f avx512_bf16")),
                     ("float32_bf16_matmul", "auto: this CPU has AVX512_BF16 or AMX-BF16"))
    self.assertEqual(cpu.resolve_precision("auto", info_of("amx_bf16", family="6"))[0],
                     "float32_bf16_matmul")
    self.assertEqual(cpu.resolve_precision("auto", info_of("avx512f")),
                     ("float32", "auto: this CPU has no AVX512_BF16 or AMX-BF16"))
    self.assertEqual(cpu.resolve_precision("auto", {}),
                     ("float32", "auto: this CPU's instructions are unknown"))
    self.assertEqual(cpu.resolve_precision("auto", info_of("amx_bf16"), gpus=["GPU:0"]),
                     ("float32", "auto: a GPU is in use"))

  def test_explicit_precisions_stay(self):
    for precision in ("float32", "float32_bf16_matmul", "mixed_bfloat16", "mixed_float16"):
      self.assertEqual(cpu.resolve_precision(precision, info_of("avx2")), (precision, None))
