"""nmt_tf/cpu.py: the machine's name for results rows, and native bfloat16 products."""

import os
import tempfile

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
    self.assertEqual(cpu.machine_label(info, cores=2), "2 CPUs AMD EPYC (family 25, AVX2)")
    self.assertEqual(cpu.cpu_id(info), "family 25 model 1 stepping 1")
    self.assertFalse(cpu.native_bf16(info))

  def test_isa_is_the_widest_matrix_instructions(self):
    for flags, expected in (("avx2 avx512f avx512_bf16 amx_bf16", "AMX-BF16"),
                            ("avx2 avx512f avx512_bf16", "AVX512-BF16"),
                            ("avx2 avx512f", "AVX-512"), ("sse2 avx2", "AVX2"),
                            ("sse2", "no AVX2")):
      self.assertEqual(cpu.isa(info_of(flags)), expected, flags)
    self.assertEqual(cpu.machine_label(info_of("avx512f avx512_bf16"), cores=2),
                     "2 CPUs AMD EPYC (family 26, AVX512-BF16)")

  def test_native_bf16(self):
    self.assertTrue(cpu.native_bf16(info_of("avx512f avx512_bf16")))
    self.assertTrue(cpu.native_bf16(info_of("amx_bf16", family="6", name="Intel")))
    self.assertFalse(cpu.native_bf16(info_of("avx512f")))  # AVX-512 without BF16

  def test_unknown_cpu(self):
    missing = os.path.join(tempfile.mkdtemp(), "no_cpuinfo")
    self.assertEqual(cpu.cpu_info(missing), {})
    self.assertEqual(cpu.machine_label({}, cores=4), "4 CPUs")
    self.assertEqual(cpu.cpu_id({}), "")
    self.assertIsNone(cpu.native_bf16({}))

  def test_this_machine(self):
    label = cpu.machine_label()
    self.assertTrue(label.startswith(f"{os.cpu_count()} CPUs"), label)
    try:
      with open(cpu.CPUINFO, encoding="utf-8") as f:
        words = set(f.read().split())
    except OSError:
      self.assertIsNone(cpu.native_bf16())
      return
    # The raw text, independently of the parser: a BF16 flag anywhere means native products.
    self.assertEqual(cpu.native_bf16(), bool(words & set(cpu.BF16_FLAGS)), label)
    self.assertEqual(cpu.native_bf16(), label.endswith(("AVX512-BF16)", "AMX-BF16)")), label)


  def test_a_machine_is_its_label_and_cpu_id(self):
    """Two VMs of one label differed 1.7x in speed: a record is from here only with this
    label and this CPU id; one without a CPU id (written before CPU ids were recorded) names an
    unknown VM."""
    info = cpu.cpu_info(self.cpuinfo(ZEN3))
    label, here = cpu.machine_label(info), "family 25 model 1 stepping 1"
    self.assertTrue(cpu.recorded_here(label, here, info))
    for other_label, other_cpu in ((label, "family 25 model 17 stepping 0"), (label, None),
                                   (label, ""), ("2 CPUs Old Box (family 1, AVX2)", here)):
      self.assertFalse(cpu.recorded_here(other_label, other_cpu, info), (other_label, other_cpu))
    self.assertEqual(cpu.machine_name(label, here), f"{label} [{here}]")
    for unknown in (None, ""):
      self.assertEqual(cpu.machine_name(label, unknown), label)


if __name__ == "__main__":
  tf.test.main()
