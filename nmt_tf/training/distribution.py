"""tf.distribute strategies of `train.strategy` and the worker's place in the cluster.

  default       tf.distribute.get_strategy(): one device, no all-reduce.
  mirrored      MirroredStrategy over every GPU, or over every logical CPU device when there is
                no GPU and several were configured (`use_logical_cpus`, used by the tests).
  multi_worker  MultiWorkerMirroredStrategy; the cluster comes from the TF_CONFIG environment
                variable, e.g. {"cluster": {"worker": ["127.0.0.1:2001", "127.0.0.1:2002"]},
                "task": {"type": "worker", "index": 0}}. Worker 0 is the chief: it alone writes
                the run directory (checkpoints, TensorBoard); the others save into scratch
                directories, as tf.distribute requires every worker to take part in a save.
"""

import dataclasses
import json
import os

import tensorflow as tf

from nmt_tf.training.errors import TrainingError


@dataclasses.dataclass(frozen=True)
class WorkerInfo:
  """This process in the cluster: num_workers, index (0 = chief) and is_chief."""

  num_workers: int = 1
  index: int = 0

  @property
  def is_chief(self):
    return self.index == 0


def use_logical_cpus(count):
  """Splits the CPU into `count` logical devices; call before TensorFlow touches a device."""
  cpu = tf.config.list_physical_devices("CPU")[0]
  tf.config.set_logical_device_configuration(
      cpu, [tf.config.LogicalDeviceConfiguration() for _ in range(count)])


def worker_info(strategy_name):
  """The WorkerInfo of this process (from TF_CONFIG for multi_worker)."""
  if strategy_name != "multi_worker":
    return WorkerInfo()
  raw = os.environ.get("TF_CONFIG")
  if not raw:
    raise TrainingError("train.strategy='multi_worker' needs the TF_CONFIG environment variable "
                        "(cluster.worker addresses and task.index); set it in every worker.")
  try:
    tf_config = json.loads(raw)
    workers = tf_config["cluster"]["worker"]
    index = int(tf_config["task"]["index"])
  except (ValueError, KeyError, TypeError) as error:
    raise TrainingError(f"Received TF_CONFIG={raw!r} ({error}); expected JSON with "
                        "cluster.worker (a list of host:port) and task.index.") from error
  if not 0 <= index < len(workers):
    raise TrainingError(f"Received TF_CONFIG task.index={index} for {len(workers)} workers; "
                        f"expected 0 <= index < {len(workers)}.")
  return WorkerInfo(num_workers=len(workers), index=index)


def make_strategy(strategy_name):
  """The tf.distribute.Strategy of `train.strategy` (see module docstring)."""
  if strategy_name == "default":
    return tf.distribute.get_strategy()
  if strategy_name == "mirrored":
    if tf.config.list_physical_devices("GPU"):
      return tf.distribute.MirroredStrategy()
    cpus = [d.name for d in tf.config.list_logical_devices("CPU")]
    return tf.distribute.MirroredStrategy(devices=cpus)
  if strategy_name == "multi_worker":
    worker_info(strategy_name)  # clear error when TF_CONFIG is missing
    return tf.distribute.MultiWorkerMirroredStrategy()
  raise TrainingError(f"Received train.strategy={strategy_name!r}; expected default, mirrored "
                      "or multi_worker.")


def barrier(strategy):
  """Blocks until every worker reached this point (an all-reduce of a dummy value)."""
  value = strategy.run(lambda: tf.constant(1.0))
  return float(strategy.reduce(tf.distribute.ReduceOp.SUM, value, axis=None))
