"""What a training worker runs in: its :class:`~raydp_synth.runtime.context.WorkerContext`
(the one door to the sensitive records), data-parallel helpers for the non-private
parts of a model, and connecting to and sizing for Ray.

Below :mod:`raydp_synth.methods`: methods import the runtime, never the reverse.
"""
