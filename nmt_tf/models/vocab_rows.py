"""The weights of a model indexed by a vocabulary, and their transfer to a new vocabulary.

A Seq2Seq has four kinds of weight with one row (or column) per token:

  embeddings   E_x [V_x, e], E_y [V_y, e]    the source and target tables (one when tied)
  W_o, b_o     [in, V_y], [V_y]              the output layer (W_o is E_y when tied)
  W_l, b_l     [e, V_y], [V_y]               the lexical model's output (model.lexical_model)

Every other weight is the same whatever the vocabularies. `transfer` copies a parent model
into a child built with other vocabularies (data/vocab_update.py): the rows of a token both
vocabularies hold are the parent's, a new token keeps the child's initial rows.
"""

import numpy as np

# Leaf name of a vocabulary-indexed weight: the axis of its tokens.
VOCABULARY_AXES = {"embeddings": 0, "W_o": 1, "b_o": 0, "W_l": 1, "b_l": 0}


def vocabulary_side(variable):
  """"source" for the source embedding table, "target" for the other vocabulary-indexed
  weights, None for a weight that no vocabulary indexes."""
  leaf = variable.path.rsplit("/", 1)[-1]
  if leaf not in VOCABULARY_AXES:
    return None
  return "source" if variable.path.startswith("src_embedding/") else "target"


def transfer(parent, child, rows):
  """Assigns `parent`'s weights to `child`, a model of the same config but its vocabularies.

  Args:
    parent: the built model to copy from (weights matched by path).
    child: the built model to copy into (its variables initialised: new rows keep that).
    rows: {"source": int [V_x'], "target": int [V_y']}: for each token of the child's
      vocabulary, the parent's id of the same token or -1 (`vocab_update.row_map`).

  Raises:
    ValueError: the two models differ in more than their vocabularies.
  """
  by_path = {variable.path: variable for variable in parent.variables}
  for new in child.variables:
    old = by_path.get(new.path)
    if old is None:  # a random stream the parent has not (dropout it did not use)
      if new.trainable:
        raise ValueError(f"The parent model has no weight {new.path}; a child differs from "
                         "its parent in its vocabularies only.")
      continue
    side = vocabulary_side(new)
    if side is None:
      if tuple(old.shape) != tuple(new.shape):
        raise ValueError(f"The parent's weight {old.path} {tuple(old.shape)} does not match "
                         f"the child's {tuple(new.shape)}.")
      new.assign(old)
      continue
    axis = VOCABULARY_AXES[new.path.rsplit("/", 1)[-1]]
    index = np.asarray(rows[side])
    if new.shape[axis] != len(index):
      raise ValueError(f"{new.path} has {new.shape[axis]} rows for a vocabulary of "
                       f"{len(index)} tokens.")
    value = np.moveaxis(new.numpy(), axis, 0)  # [V', ...]: the initial rows
    kept = index >= 0
    value[kept] = np.moveaxis(old.numpy(), axis, 0)[index[kept]]
    new.assign(np.moveaxis(value, 0, axis))
