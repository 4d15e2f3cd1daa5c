"""Implementations of the estimators, one module per (model, algorithm family).

The public names are re-exported by ``bnpcore.lda``, ``bnpcore.hdp`` and
``bnpcore.mixture``; import from there.
"""
