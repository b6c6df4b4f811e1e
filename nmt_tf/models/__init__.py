"""nmt_tf.models."""
