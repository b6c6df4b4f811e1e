"""Custom Keras layers: recurrent cells, attention, conditional GRU, self-attention, outputs.

The layers state their equations with the vocabulary of layers/ops.py, and their `step` is
what trains, decodes and exports; how its products and a GRU step's gates run fast (the
compiled cell) is the subpackage `nmt_tf.layers.kernels`, which a model part meets through one
TrainingLoops, chosen where the model is built.
"""

from nmt_tf.layers import kernels
from nmt_tf.layers.attention import BahdanauAttention, LuongAttention, make_attention
from nmt_tf.layers.conditional_gru import ConditionalGRUCell
from nmt_tf.layers.deep_output import Bridge, DeepOutput
from nmt_tf.layers.gru import GRUCell
from nmt_tf.layers.lstm import LSTMCell
from nmt_tf.layers.self_attention import SelfAttentiveResidual, StateAttention, StateMemory

scan_time = kernels.scan_time

__all__ = [
    "BahdanauAttention", "LuongAttention", "make_attention", "ConditionalGRUCell", "Bridge",
    "DeepOutput", "GRUCell", "LSTMCell", "scan_time", "SelfAttentiveResidual", "StateAttention",
    "StateMemory",
]
