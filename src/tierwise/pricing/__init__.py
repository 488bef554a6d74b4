"""The pricing core: every kernel and every collective record priced once, for training and serving alike.

* :mod:`tierwise.pricing.kernels`: one roofline per kernel family (weight GEMMs, the attention core,
  elementwise kernels, the LM head), from a part's :class:`~tierwise.pricing.kernels.ComputeRates`;
  :func:`~tierwise.pricing.kernels.layer_forward` is the forward pass of one layer that a training
  micro-batch and a serving prefill share.
* :mod:`tierwise.pricing.comm`: traffic records priced on the tier their group spans, through
  :mod:`tierwise.collectives`.

Parameters arrive as arguments (a ``compute:`` mapping, :func:`~tierwise.pricing.kernels.compute_parameters`
gives the shipped one); nothing here reads a file or the environment itself.
"""
